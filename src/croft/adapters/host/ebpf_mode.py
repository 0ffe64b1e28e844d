"""Which eBPF loader `croft run` uses (`--ebpf auto|core|bcc|off`), and the collector without eBPF.

`auto` takes, in order:
1. CO-RE (the precompiled object through libbpf) wherever the kernel has BTF;
2. BCC only where it has none and kernel headers and BCC are there (older kernels);
3. otherwise, or when the loader chosen fails (the eBPF privileges refused, say), no eBPF: rows
   from procfs and cgroupfs alone, without syscalls, ioctls or ingress arrivals.
Each step down is said once in the log; /metrics says the mode in use (`croft_ebpf_mode`). A mode
asked for by name is that mode or a `UserError`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Literal

import attrs

from croft.adapters.host.core_loader import VMLINUX_BTF, has_btf
from croft.adapters.host.ebpf_source import EbpfKernelSource, load_kernel_source
from croft.domain.collector.kernel import KernelSample, KernelSelection
from croft.errors import UserError

log = logging.getLogger("croft.ebpf")

Mode = Literal["auto", "core", "bcc", "off"]
MODES: tuple[Mode, ...] = ("auto", "core", "bcc", "off")
WITHOUT = "rows carry no syscalls, ioctls or ingress arrivals"


class NoKernel:
    """The `KernelSource` of `--ebpf off`: nothing counted, nothing known (a sample that says it
    counts no endpoints, so ingress arrivals are absent rather than 0)."""

    def read(self) -> KernelSample:
        return KernelSample()

    def select(self, selection: KernelSelection) -> None:
        del selection

    def close(self) -> None:
        pass


@attrs.frozen
class Host:
    """What decides `auto`: the kernel's BTF, and BCC with the kernel's headers."""

    btf: bool
    bcc: bool

    @classmethod
    def probe(cls, modules_root: Path = Path("/lib/modules")) -> Host:
        build = modules_root / os.uname().release / "build"
        headers = (build / "include").is_dir() or Path("/sys/kernel/kheaders.tar.xz").exists()
        return cls(btf=has_btf(), bcc=headers and importlib.util.find_spec("bcc") is not None)


def planned(requested: Mode, host: Host) -> Literal["core", "bcc", "off"]:
    """The loader `requested` names, or for `auto` the one this host calls for."""
    if requested != "auto":
        return requested
    if host.btf:
        return "core"
    return "bcc" if host.bcc else "off"


@attrs.frozen
class Chosen:
    """The loader in use (`mode`: core, bcc or off) and its source (None when off)."""

    mode: Literal["core", "bcc", "off"]
    source: EbpfKernelSource | None

    @property
    def kernel(self) -> EbpfKernelSource | NoKernel:
        return self.source if self.source is not None else NoKernel()


def open_kernel(requested: Mode, *, verbose: bool = False, host: Host | None = None) -> Chosen:
    """croft's programs loaded as `requested` says (see the module's docstring)."""
    host = host if host is not None else Host.probe()
    mode = planned(requested, host)
    if requested == "auto" and mode == "bcc":
        log.warning(
            "Linux %s has no BTF (%s): eBPF through BCC and the kernel's headers", _release(), VMLINUX_BTF
        )
    if mode == "off":
        if requested == "auto":
            log.warning(
                "Linux %s has no BTF (%s) and no BCC with kernel headers: eBPF off, %s",
                _release(),
                VMLINUX_BTF,
                WITHOUT,
            )
        else:
            log.info("eBPF off (--ebpf off): %s", WITHOUT)
        return Chosen("off", None)
    try:
        source = load_kernel_source(mode, verbose=verbose)
    except UserError as exc:
        if requested != "auto":
            raise
        log.warning("%s; eBPF off, %s", exc, WITHOUT)
        return Chosen("off", None)
    log.info("eBPF: %s", source.description)
    return Chosen(mode, source)


def _release() -> str:
    return os.uname().release
