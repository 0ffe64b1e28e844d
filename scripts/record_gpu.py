#!/usr/bin/env python3
"""The Python half of scripts/record_gpu.sh: croft's collector without eBPF, and the check of a
recording against nvidia-smi.

    python3 scripts/record_gpu.py collect DATASET TRACE_DIR [--node NAME] [--watch PREFIXES]
    python3 scripts/record_gpu.py compare DATASET PHASES.json PMON.txt APPS.csv SUMMARY.json

`collect` is croft run (`croft.app.bootstrap.build_live`: procfs, cgroupfs, network namespaces,
NVML, DRM, the core, the dataset writer, the trace recorder) with an empty kernel source in place of
the eBPF programs, for a host where they cannot load (no BCC or kernel headers, as on the lent GPU
machines): the rows have no ioctl counts and no syscalls, and GPU holders are found by NVML and
open /dev/nvidia* files alone. It stops on SIGTERM or SIGINT, as croft run does.

`compare` checks croft's rows of the workload (scripts/gpu_workload.py) against nvidia-smi's answers
taken in the same run (`nvidia-smi pmon -s um -o DT` and `nvidia-smi --query-compute-apps`, both with
TZ=UTC): GPU memory within 5 %, SM utilisation within 10 points in each phase, and the GPU states
(no-gpu before the CUDA context, gpu-onset at it, gpu-held after). It writes SUMMARY.json and exits
1 when any check fails (2 when there is nothing to compare).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

MEMORY_TOLERANCE = 0.05  # relative
UTILISATION_TOLERANCE = 10.0  # percentage points
POLL_MS = 2000
MARGIN_MS = 1000  # a poll whose interval starts this soon after a phase began is left out
NEAREST_MS = 2500  # an nvidia-smi sample this close to a row's time is its pair


def collect(dataset: Path, trace: Path, node: str, watch: str) -> int:
    import logging

    from croft.app import bootstrap, collector

    logging.basicConfig(level=logging.INFO, format="croft: %(message)s", force=True)
    settings = bootstrap.Settings(dataset=dataset, record=trace, node=node, watch=watch, ebpf="off")
    logging.getLogger("croft.run").warning(
        "no eBPF: rows carry no ioctl counts and no syscalls (scripts/record_gpu.py collect)"
    )
    pipeline, source, clock = bootstrap.build_live(settings)
    return collector.run_live(pipeline, source, clock)


def _utc_ms(text: str, formats: Sequence[str]) -> int:
    for fmt in formats:
        try:
            moment = dt.datetime.strptime(text, fmt).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
        return int(moment.timestamp() * 1000)
    raise ValueError(f"not a time nvidia-smi writes: {text!r}")


def _number(text: str) -> float | None:
    return None if text in ("-", "N/A", "[N/A]", "") else float(text)


def parse_pmon(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi pmon -s um -o DT` lines (TZ=UTC): each sample with its unix_ms, gpu, pid, sm,
    mem, enc, dec (percent) and fb (MiB), None where pmon writes `-`. The columns are read from its
    header, which names them; its header repeats."""
    columns: list[str] = []
    out = []
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0].startswith("#"):  # `# gpu pid ...` or `#Date Time gpu pid ...`
            names = " ".join(fields)[1:].split()
            if "pid" in names:
                columns = [name.lower() for name in names]
            continue
        if "date" not in columns or "time" not in columns or len(fields) < len(columns) - 1:
            continue  # no header yet, or one without -o DT's times: nothing to align with croft's polls
        value = dict(zip(columns, fields, strict=False))
        if value.get("pid", "-") == "-":
            continue  # a GPU with no process this second
        out.append(
            {
                "unix_ms": _utc_ms(f"{value['date']} {value['time']}", ("%Y%m%d %H:%M:%S",)),
                "gpu": int(value["gpu"]),
                "pid": int(value["pid"]),
                **{key: _number(value.get(key, "-")) for key in ("sm", "mem", "enc", "dec", "fb")},
            }
        )
    return out


def parse_compute_apps(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi --query-compute-apps=timestamp,pid,used_memory,gpu_uuid --format=csv,noheader,
    nounits -l 1` lines (TZ=UTC): unix_ms, pid, used MiB (None: `[N/A]`), gpu_uuid."""
    out = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4 or not fields[1].isdigit():
            continue
        out.append(
            {
                "unix_ms": _utc_ms(fields[0], ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")),
                "pid": int(fields[1]),
                "used_mib": _number(fields[2]),
                "gpu_uuid": fields[3],
            }
        )
    return out


def _phase(phases: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((p for p in phases["phases"] if p["name"] == name), None)


def _inside(unix_ms: int, phase: dict[str, Any]) -> bool:
    """Whether a poll ending at `unix_ms` measured only `phase` (its interval starts after the
    phase began, with a margin, and ends before it ended)."""
    return phase["start_ms"] + MARGIN_MS <= unix_ms - POLL_MS and unix_ms <= phase["end_ms"]


def compare(
    rows: Iterable[dict[str, Any]],
    phases: dict[str, Any],
    pmon: list[dict[str, Any]],
    apps: list[dict[str, Any]],
) -> dict[str, Any]:
    """Every check of a recording, and `agree`: whether all passed."""
    pid = phases["pid"]
    mine = sorted((r for r in rows if r["tgid"] == pid), key=lambda r: r["unix_ms"])
    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool, **detail: Any) -> None:
        checks.append({"name": name, "ok": ok, **detail})

    gpu_rows = [r for r in mine if r.get("gpus")]
    check("rows with gpus", bool(gpu_rows), rows=len(mine), with_gpus=len(gpu_rows))
    hold = _phase(phases, "hold")
    states = [(r["unix_ms"], r["workload"], r.get("ioctl_count")) for r in mine]
    held = [s for s in states if s[1] != "no-gpu"]
    onset_ok = bool(held) and held[0][1] == "gpu-onset" and all(s[1] == "gpu-held" for s in held[1:])
    if held and hold is not None:
        onset_ok = onset_ok and hold["start_ms"] - POLL_MS <= held[0][0] <= hold["start_ms"] + 2 * POLL_MS
    check(
        "gpu states",
        onset_ok,
        onset_ms=held[0][0] if held else None,
        context_ms=hold["start_ms"] if hold else None,
        states=[s[1] for s in states],
        ioctl_counts=[s[2] for s in states],
    )

    pairs = []
    for row in gpu_rows:
        memory = sum(u["memory_bytes"] for u in row["gpus"] if u.get("memory_bytes") is not None)
        near = [a for a in apps if a["pid"] == pid and a["used_mib"] is not None]
        near = [a for a in near if abs(a["unix_ms"] - row["unix_ms"]) <= NEAREST_MS]
        if near and memory:
            smi = min(near, key=lambda a: abs(a["unix_ms"] - row["unix_ms"]))["used_mib"] * (1 << 20)
            pairs.append((row["unix_ms"], memory, smi, abs(memory - smi) / smi))
    worst = max((p[3] for p in pairs), default=None)
    check(
        "memory within 5 %",
        bool(pairs) and worst is not None and worst <= MEMORY_TOLERANCE,
        pairs=len(pairs),
        worst_relative=worst,
        croft_bytes=[p[1] for p in pairs],
        nvidia_smi_bytes=[p[2] for p in pairs],
    )

    for name in ("hold", "busy", "half", "idle"):
        phase = _phase(phases, name)
        if phase is None:
            check(f"sm {name}", False, reason="the workload did not reach this phase")
            continue
        polls = [r for r in gpu_rows if _inside(r["unix_ms"], phase)]
        croft_sm = [sum(u["sm_percent"] for u in r["gpus"] if u.get("sm_percent") is not None) for r in polls]
        start, end = phase["start_ms"] + MARGIN_MS, phase["end_ms"]
        smi_sm = [
            s["sm"] if s["sm"] is not None else 0.0
            for s in pmon
            if s["pid"] == pid and start <= s["unix_ms"] <= end
        ]
        if not croft_sm or not smi_sm:
            check(f"sm {name}", False, croft_polls=len(croft_sm), pmon_samples=len(smi_sm))
            continue
        mine_mean, theirs_mean = statistics.fmean(croft_sm), statistics.fmean(smi_sm)
        check(
            f"sm {name}",
            abs(mine_mean - theirs_mean) <= UTILISATION_TOLERANCE,
            croft_mean=round(mine_mean, 2),
            pmon_mean=round(theirs_mean, 2),
            croft=croft_sm,
            pmon=smi_sm,
        )
    return {"pid": pid, "agree": all(c["ok"] for c in checks), "checks": checks}


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    collecting = commands.add_parser("collect")
    collecting.add_argument("dataset", type=Path)
    collecting.add_argument("trace", type=Path)
    collecting.add_argument("--node", default="gpu-recording")
    collecting.add_argument("--watch", default="")
    comparing = commands.add_parser("compare")
    for name in ("dataset", "phases", "pmon", "apps", "summary"):
        comparing.add_argument(name, type=Path)
    args = parser.parse_args(argv)
    if args.command == "collect":
        return collect(args.dataset, args.trace, args.node, args.watch)
    rows = [json.loads(line) for line in args.dataset.read_bytes().splitlines() if line.strip()]
    summary = compare(
        rows,
        json.loads(args.phases.read_text()),
        parse_pmon(args.pmon.read_text()),
        parse_compute_apps(args.apps.read_text()),
    )
    args.summary.write_text(json.dumps(summary, indent=2) + "\n")
    for item in summary["checks"]:
        shown = {k: v for k, v in item.items() if k not in ("name", "ok") and not isinstance(v, list)}
        print(f"{'ok  ' if item['ok'] else 'FAIL'} {item['name']}: {shown}")
    if not rows:
        return 2
    return 0 if summary["agree"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
