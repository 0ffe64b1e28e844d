"""Loading croft's precompiled CO-RE object (bpf/croft.<arch>.bpf.o, built by `make bpf`) through
libbpf: libbpf relocates it against the running kernel's BTF (/sys/kernel/btf/vmlinux), so the host
needs neither a compiler nor kernel headers (step 1 of `croft run --ebpf auto`).

The object is opened, its programs whose tracepoints the kernel lacks are left out, the maps are
sized and the settings written (bpf/croft.h), then it is loaded and each program attached. A
failure is one `UserError` sentence naming the program and the cause; libbpf's own log (its print
callback, the verifier's output included) goes to stderr only when `verbose`.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import sys
from pathlib import Path

from croft.adapters.host.bpf_maps import BpfMap
from croft.adapters.host.ebpf_programs import Features, MapSizes, ProgramSettings, program_dir
from croft.adapters.host.libbpf import LIBBPF_WARN, Libbpf, LibbpfMissing, LinkPtr, ObjectPtr
from croft.errors import UserError

log = logging.getLogger("croft.ebpf")

VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
# The object for each machine (os.uname().machine): the __TARGET_ARCH it was compiled for.
OBJECT_ARCH = {"x86_64": "x86", "aarch64": "arm64"}
SETTINGS = struct.Struct("=IIII")  # struct croft_settings (bpf/croft.h)
_PROGRAM = re.compile(r"prog '(\w+)'")
LIBBPF_LOG = "libbpf's log"


def object_path(machine: str | None = None, directory: Path | None = None) -> Path | None:
    """The CO-RE object for `machine` (this one by default), None for a machine croft has none for."""
    arch = OBJECT_ARCH.get(machine or os.uname().machine)
    if arch is None:
        return None
    return (directory or program_dir()) / f"croft.{arch}.bpf.o"


def has_btf() -> bool:
    """Whether the running kernel describes itself in BTF, which CO-RE relocates against."""
    return VMLINUX_BTF.is_file()


class CorePrograms:
    """The object loaded and its programs attached (a `LoadedPrograms`)."""

    def __init__(
        self,
        settings: ProgramSettings,
        sizes: MapSizes | None = None,
        *,
        path: Path | None = None,
        verbose: bool = False,
    ) -> None:
        self.features: Features = settings.features
        release = os.uname().release
        found = path if path is not None else object_path()
        if found is None:
            raise UserError(
                f"croft has no CO-RE eBPF object for {os.uname().machine} (x86_64 and aarch64 only): "
                "run with --ebpf bcc or --ebpf off"
            )
        self.description = f"CO-RE object {found}"
        if not has_btf():
            raise UserError(
                f"Linux {release} has no BTF ({VMLINUX_BTF}), which croft's CO-RE eBPF programs are "
                "relocated against: run with --ebpf bcc (kernel headers and BCC) or --ebpf off"
            )
        try:
            self._lib = Libbpf.open()
        except LibbpfMissing as exc:
            raise UserError(f"{exc.strerror}, or run with --ebpf bcc or --ebpf off") from None
        self._log: list[str] = []
        self._verbose = verbose
        self._obj: ObjectPtr | None = None
        self._links: list[LinkPtr] = []
        self._maps: dict[str, BpfMap] = {}
        keep = self._lib.set_print(self._printed)
        try:
            self._load(found, settings, sizes or MapSizes(), release)
        except BaseException:
            self.close()
            raise
        finally:
            self._lib.set_print(None)
            del keep
        self._log = []  # a verifier's log runs to megabytes: kept only to word a failure

    def _printed(self, level: int, text: str) -> None:
        if self._verbose:
            sys.stderr.write(text)
        if level == LIBBPF_WARN:
            self._log.append(text)

    def _load(self, path: Path, settings: ProgramSettings, sizes: MapSizes, release: str) -> None:
        lib = self._lib
        try:
            obj = self._obj = lib.object_open_file(str(path))
        except OSError as exc:
            raise UserError(
                f"cannot open croft's eBPF object {path} ({exc.strerror}): reinstall croft"
            ) from None
        wanted = settings.features.programs()
        missing = set(wanted) - {lib.program_name(p) for p in lib.programs(obj)}
        try:
            for program in lib.programs(obj):
                lib.program_set_autoload(program, wanted.get(lib.program_name(program), False))
            for name, entries in sizes.by_map().items():
                lib.map_set_max_entries(lib.find_map(obj, name), entries)
            values = settings.values()
            lib.map_set_initial_value(
                lib.find_map(obj, ".rodata"),
                SETTINGS.pack(values["ioctl_nr"], values["oncpu"], values["moves"], 0),
            )
        except OSError as exc:
            missing.add(str(exc).split(": ")[0])
        if missing:
            raise UserError(
                f"croft's eBPF object {path} is not the one this croft was built with (no "
                f"{', '.join(sorted(missing))}): reinstall croft"
            )
        try:
            lib.object_load(obj)
        except OSError as exc:
            raise self._load_error(exc, release) from None
        for program in lib.programs(obj):
            name = lib.program_name(program)
            if not wanted.get(name, False):
                continue
            try:
                self._links.append(lib.program_attach(program))
            except OSError as exc:
                raise UserError(
                    f"cannot attach croft's eBPF program {name} to its tracepoint "
                    f"({os.strerror(exc.errno) if exc.errno else exc}): mount tracefs at "
                    f"/sys/kernel/tracing, or {self._see(LIBBPF_LOG)}"
                ) from None

    def _see(self, what: str) -> str:
        return f"{what} is above" if self._verbose else f"rerun with --verbose to see {what}"

    def _load_error(self, exc: OSError, release: str) -> UserError:
        said = "".join(self._log)
        names = _PROGRAM.findall(said)
        # the program libbpf named last; before any (a map, the kernel's first probe), all of them
        what = f"croft's eBPF program {names[-1]}" if names else "croft's eBPF programs"
        cause = os.strerror(exc.errno) if exc.errno else str(exc)
        if exc.errno == 1:  # EPERM: no CAP_BPF/CAP_PERFMON (or CAP_SYS_ADMIN before 5.8)
            return UserError(
                f"the kernel refused to load {what} ({cause}): run croft run as root, or in a container "
                "with CAP_BPF and CAP_PERFMON"
            )
        if "BEGIN PROG LOAD LOG" in said:
            return UserError(
                f"the kernel's verifier rejected {what} ({cause}): {self._see('its log')}, and report it "
                f"with the kernel version {release}"
            )
        if "CO-RE" in said or "relo #" in said:
            return UserError(
                f"{what} does not fit Linux {release}'s BTF ({cause}): {self._see(LIBBPF_LOG)}, and "
                "report it with the kernel version"
            )
        return UserError(f"loading {what} failed ({cause}): {self._see(LIBBPF_LOG)}")

    def map(self, name: str) -> BpfMap:
        found = self._maps.get(name)
        if found is None:
            assert self._obj is not None
            lib = self._lib
            handle = lib.find_map(self._obj, name)
            found = self._maps[name] = BpfMap(
                name=name,
                fd=lib.map_fd(handle),
                key_size=lib.map_key_size(handle),
                value_size=lib.map_value_size(handle),
                max_entries=lib.map_max_entries(handle),
                lib=lib,
            )
        return found

    def close(self) -> None:
        for link in self._links:
            self._lib.link_destroy(link)
        self._links = []
        if self._obj is not None:
            self._lib.object_close(self._obj)
            self._obj = None
