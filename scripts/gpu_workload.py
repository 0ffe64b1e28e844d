#!/usr/bin/env python3
"""A small CUDA workload in phases whose GPU figures are known, for scripts/record_gpu.sh: croft's
rows and nvidia-smi's answers are compared phase by phase.

    python3 scripts/gpu_workload.py PHASES.json [--scale 1.0] [--cpu]

Phases, each `--scale` times its length in seconds:
  start  8 s   import torch (or CuPy), no CUDA context yet: not a GPU holder;
  hold   8 s   a CUDA context and `HELD_BYTES` allocated, nothing running (SM 0 %);
  busy  20 s   back-to-back 4096x4096 fp32 matrix products (SM near 100 %);
  half  20 s   the same products, each followed by as long a sleep (SM near 50 %);
  idle   8 s   the allocation held, nothing running.
Then it frees everything and exits. PHASES.json gets the pid, the library, the device, and each
phase's start and end (unix ms), written at each phase's end so a killed run leaves what it did.
`--cpu` does the same on the CPU with NumPy (no GPU: the dry run of record_gpu.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HELD_BYTES = 2 << 30
SIZE = 4096
PHASES = (("start", 8.0), ("hold", 8.0), ("busy", 20.0), ("half", 20.0), ("idle", 8.0))


class Device:
    """Matrix products on the GPU through torch, else CuPy; on the CPU with NumPy for --cpu."""

    def __init__(self, cpu: bool) -> None:
        self.cpu = cpu
        self.library = "numpy"
        if cpu:
            import numpy

            self._np = numpy
            return
        try:
            import torch

            if not torch.cuda.is_available():
                raise RuntimeError("torch sees no CUDA device")
            self._torch = torch
            self.library = f"torch {torch.__version__}"
        except ImportError:
            import cupy

            self._cupy = cupy
            self.library = f"cupy {cupy.__version__}"

    def name(self) -> str:
        if self.cpu:
            return "cpu"
        if self.library.startswith("torch"):
            return str(self._torch.cuda.get_device_name(0))
        return str(self._cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())

    def hold(self) -> tuple[Any, Any]:
        """The context, `HELD_BYTES` of device memory, and two operands."""
        if self.cpu:  # a token of the memory: the dry run's machine is small
            return self._np.ones(1 << 20, "float32"), self._np.ones((SIZE // 8, SIZE // 8), "float32")
        if self.library.startswith("torch"):
            held = self._torch.empty(HELD_BYTES // 4, dtype=self._torch.float32, device="cuda")
            operand = self._torch.randn(SIZE, SIZE, device="cuda")
            self._torch.cuda.synchronize()
            return held, operand
        held = self._cupy.empty(HELD_BYTES // 4, dtype=self._cupy.float32)
        operand = self._cupy.random.standard_normal((SIZE, SIZE), dtype=self._cupy.float32)
        self._cupy.cuda.Device(0).synchronize()
        return held, operand

    def product(self, operand: Any) -> None:
        """One matrix product, waited for."""
        if self.cpu:
            operand @ operand
        elif self.library.startswith("torch"):
            operand @ operand
            self._torch.cuda.synchronize()
        else:
            operand @ operand
            self._cupy.cuda.Device(0).synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("phases", type=Path)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    record: dict[str, Any] = {"pid": os.getpid(), "phases": []}

    def mark(name: str, start_ms: int) -> None:
        record["phases"].append({"name": name, "start_ms": start_ms, "end_ms": int(time.time() * 1000)})
        args.phases.write_text(json.dumps(record, indent=2) + "\n")

    lengths = {name: seconds * args.scale for name, seconds in PHASES}
    start_ms = int(time.time() * 1000)
    device = Device(args.cpu)  # the import and its libraries, no context yet
    record["library"] = device.library
    time.sleep(max(0.0, lengths["start"] - (time.time() * 1000 - start_ms) / 1000))
    mark("start", start_ms)

    start_ms = int(time.time() * 1000)
    held, operand = device.hold()
    record["device"] = device.name()
    record["held_bytes"] = HELD_BYTES
    time.sleep(lengths["hold"])
    mark("hold", start_ms)

    for name in ("busy", "half"):
        start_ms = int(time.time() * 1000)
        end = time.monotonic() + lengths[name]
        products = 0
        while time.monotonic() < end:
            began = time.monotonic()
            device.product(operand)
            products += 1
            if name == "half":
                time.sleep(time.monotonic() - began)
        record[f"{name}_products"] = products
        mark(name, start_ms)

    start_ms = int(time.time() * 1000)
    time.sleep(lengths["idle"])
    mark("idle", start_ms)
    del held, operand
    return 0


if __name__ == "__main__":
    sys.exit(main())
