"""Compiling and loading croft's eBPF programs with BCC, on a kernel without BTF (step 2 of
`croft run --ebpf auto`; croft.adapters.host.core_loader is step 1).

BCC compiles the same bpf/*.c as the CO-RE objects, written in libbpf's dialect, after
`bcc_dialect` rewrites the forms BCC spells its own way. Every failure to load becomes one
`UserError` sentence naming the cause and the fix; what clang and the verifier printed (BCC writes
it straight to file descriptor 2) is shown only when `verbose`. `bcc` is imported inside functions:
importing this module loads nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from croft.adapters.host.bpf_maps import BpfMap
from croft.adapters.host.ebpf_programs import Features, MapSizes, ProgramSettings, program_dir
from croft.adapters.host.libbpf import Libbpf, LibbpfMissing
from croft.errors import UserError

SETUP_HINT = "run scripts/setup-bpf.sh bcc as root"

log = logging.getLogger("croft.bcc")


def program_text(directory: Path, names: Sequence[str]) -> str:
    """The programs `names` (file stems) of `directory`, each as BCC takes it (`bcc_dialect`),
    concatenated into one BCC module so they compile once."""
    parts = []
    for name in names:
        path = directory / f"{name}.c"
        try:
            text = path.read_text()
        except OSError as exc:
            raise UserError(f"cannot read the eBPF program {path}: {exc.strerror}; reinstall croft") from exc
        try:
            parts.append(f"// {path}\n{bcc_dialect(text)}")
        except ValueError as exc:
            raise UserError(f"the eBPF program {path} is not in croft's dialect: {exc}") from None
    return "\n".join(parts)


# What `bcc_dialect` rewrites: libbpf's spelling -> BCC's. Each pattern takes the form exactly as
# bpf/*.c writes it (bpf/croft.h says so); anything of libbpf's left over is refused.
_MAP = re.compile(
    r"struct \{\s*__uint\(type, BPF_MAP_TYPE_(?P<type>\w+)\);\s*"
    r"__uint\(max_entries, (?P<entries>\w+)\);\s*"
    r"__type\(key, (?P<key>[\w ]+)\);\s*"
    r"__type\(value, (?P<value>[\w ]+)\);\s*"
    r"\} (?P<name>\w+) SEC\(\"\.maps\"\);"
)
_RAW_TP = re.compile(r"SEC\(\"raw_tp/(\w+)\"\)\s*\nint \w+\(struct bpf_raw_tracepoint_args \*ctx\)")
_TP = re.compile(r"SEC\(\"tp/(\w+)/(\w+)\"\)\s*\nint \w+\(struct trace_event_raw_\w+ \*args\)")
_ARG = r"([^,()]+(?:\([^()]*\))?)"  # an argument: no comma, at most one call
_CALLS = (
    (re.compile(r"bpf_map_lookup_elem\(&(\w+), "), r"\1.lookup("),
    (re.compile(r"bpf_map_delete_elem\(&(\w+), "), r"\1.delete("),
    (re.compile(rf"bpf_map_update_elem\(&(\w+), {_ARG}, {_ARG}, BPF_ANY\)"), r"\1.update(\2, \3)"),
    (re.compile(rf"bpf_map_update_elem\(&(\w+), {_ARG}, {_ARG}, BPF_NOEXIST\)"), r"\1.insert(\2, \3)"),
    (re.compile(r"croft_lookup_or_try_init\(&(\w+), "), r"\1.lookup_or_try_init("),
)
_LEFT_OVER = re.compile(r"bpf_map_\w+\(|croft_lookup_or_try_init\(&|\bSEC\(")


def bcc_dialect(text: str) -> str:
    """`text` (bpf/*.c, libbpf's dialect) as BCC takes it: BTF map definitions become BPF_TABLE(),
    helper calls on `&map` BCC's map methods, and SEC("raw_tp/...") and SEC("tp/.../...") programs
    BCC's RAW_TRACEPOINT_PROBE and TRACEPOINT_PROBE (whose args BCC reads from tracefs). A form it
    does not know raises ValueError, naming it."""
    text = _MAP.sub(
        lambda m: f'BPF_TABLE("{m["type"].lower()}", {m["key"]}, {m["value"]}, {m["name"]}, {m["entries"]});',
        text,
    )
    text = _RAW_TP.sub(r"RAW_TRACEPOINT_PROBE(\1)", text)
    text = _TP.sub(r"TRACEPOINT_PROBE(\1, \2)", text)
    for pattern, replacement in _CALLS:
        text = pattern.sub(replacement, text)
    left = _LEFT_OVER.search(text)
    if left is not None:
        line = text[: left.start()].count("\n") + 1
        end = text.find("\n", left.start())
        raise ValueError(f"line {line}: BCC cannot take {text[left.start() : end].strip()!r}")
    return text


def check_can_load(release: str, modules_root: Path) -> None:
    """Raise the `UserError` for what is missing before BCC is even tried: the module, root, headers."""
    try:
        import bcc  # noqa: F401
    except ImportError as exc:
        raise UserError(
            f"the bcc Python module is not importable from {sys.executable}: {SETUP_HINT} "
            "(it installs python3-bpfcc and links it into the virtualenv)"
        ) from exc
    if os.geteuid() != 0:
        raise UserError("loading eBPF programs needs root: run croft run as root (e.g. with sudo)")
    build = modules_root / release / "build"
    if not (build / "include").is_dir() and not Path("/sys/kernel/kheaders.tar.xz").exists():
        raise UserError(
            f"no kernel headers for Linux {release} at {build}: install linux-headers-{release}, "
            f"or {SETUP_HINT} to link Debian's linux-headers-amd64"
        )


@contextlib.contextmanager
def _stderr_captured() -> Iterator[tempfile._TemporaryFileWrapper[bytes]]:
    """Point file descriptor 2 at a temporary file for the duration (clang and libbpf write there)."""
    sys.stderr.flush()
    with tempfile.NamedTemporaryFile(prefix="croft-bcc-") as capture:
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            yield capture
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def load(text: str, cflags: Sequence[str], *, source: Path, release: str, verbose: bool) -> Any:
    """Compile `text`, load it and attach its RAW_TRACEPOINT_PROBEs; returns the `bcc.BPF`."""
    from bcc import BPF

    with _stderr_captured() as capture:
        try:
            return BPF(text=text.encode(), cflags=list(cflags))
        except Exception as exc:
            failure: Exception | None = exc
        capture.seek(0)
        output = capture.read().decode(errors="replace")
    if verbose and output:
        sys.stderr.write(output)
    raise _load_error(str(failure), output, source=source, release=release, verbose=verbose) from failure


def _load_error(message: str, output: str, *, source: Path, release: str, verbose: bool) -> UserError:
    def see(what: str) -> str:
        return f"{what} is above" if verbose else f"rerun with --verbose to see {what}"

    if "Operation not permitted" in message or "Operation not permitted" in output:
        return UserError(
            "the kernel refused to load croft's eBPF programs (Operation not permitted): run croft run as "
            "root, or in a container with CAP_BPF and CAP_PERFMON"
        )
    if "Failed to compile" in message:
        if "kernel headers" in output:
            return UserError(f"BCC found no kernel headers for Linux {release}: {SETUP_HINT}")
        return UserError(
            f"the eBPF programs in {source} do not compile against the headers in "
            f"/lib/modules/{release}/build: {see('what clang said')}"
        )
    if "Failed to load" in message:
        program = message.split("program", 1)[-1].split(":", 1)[0].strip(" b'")
        return UserError(
            f"the kernel's verifier rejected croft's eBPF program {program}: {see('its log')}, "
            f"and report it with the kernel version {release}"
        )
    if "attach" in message:
        return UserError(
            f"cannot attach croft's eBPF programs to the kernel's tracepoints ({message}): "
            f"{SETUP_HINT}, or {see('what BCC said')}"
        )
    return UserError(f"loading croft's eBPF programs failed ({message}): {see('what BCC said')}")


class BccPrograms:
    """bpf/*.c compiled by BCC against the running kernel's headers and attached (a `LoadedPrograms`):
    BCC's own RAW_TRACEPOINT_PROBE and TRACEPOINT_PROBE attach on load, so only the files whose
    tracepoints the kernel has are compiled, and the parts a file serves others are switched by
    defines (CROFT_ONCPU, CROFT_MOVES). Its maps are read through libbpf's map calls, by fd."""

    def __init__(
        self,
        settings: ProgramSettings,
        sizes: MapSizes | None = None,
        *,
        directory: Path | None = None,
        modules_root: Path = Path("/lib/modules"),
        verbose: bool = False,
    ) -> None:
        release = os.uname().release
        check_can_load(release, modules_root)
        try:
            self._lib = Libbpf.open()
        except LibbpfMissing as exc:
            raise UserError(f"{exc.strerror}: croft reads BCC's maps through it too") from None
        self.features: Features = settings.features
        directory = directory if directory is not None else program_dir()
        self.description = f"BCC, {directory} compiled against /lib/modules/{release}/build"
        features = settings.features
        stems: tuple[str, ...] = ("syscalls",)
        if features.net:
            stems = (*stems, "net")
        if features.ingress:
            stems = (*stems, "ingress")
        if features.oncpu:
            stems = ("oncpu", *stems)  # syscalls.c's task_newtask probe marks `started` (CROFT_ONCPU)
        text = program_text(directory, stems)
        cflags = [
            "-DCROFT_BCC",
            f"-I{directory}",
            *(sizes or MapSizes()).cflags(),
            *(f"-DCROFT_SETTING_{name}={value}" for name, value in settings.values().items()),
            *(("-DCROFT_ONCPU",) if features.oncpu else ()),
            *(("-DCROFT_MOVES",) if features.moves else ()),
        ]
        self._bpf: Any = load(text, cflags, source=directory, release=release, verbose=verbose)
        self._maps: dict[str, BpfMap] = {}

    def map(self, name: str) -> BpfMap:
        found = self._maps.get(name)
        if found is None:
            table = self._bpf[name.encode()]
            found = self._maps[name] = BpfMap(
                name=name,
                fd=int(table.map_fd),
                key_size=ctypes.sizeof(table.Key),
                # a per-CPU table's Leaf is BCC's array over CPUs, sLeaf one CPU's value
                value_size=ctypes.sizeof(getattr(table, "sLeaf", table.Leaf)),
                max_entries=int(table.max_entries),
                lib=self._lib,
            )
        return found

    def close(self) -> None:
        self._bpf.cleanup()
