"""Writes croft's syscall tables, `<machine>.tbl` (one `<number> <name>` a line), from the kernel's
UAPI headers of the machine that runs it (Debian's linux-libc-dev, /usr/include): the syscall numbers
of the sys_enter tracepoint, by name, for every machine croft's eBPF objects are built for.

    python3 scripts/syscall_tables.py OUT_DIR     (scripts/build-bpf.sh runs it; clang -E)

- x86_64: asm/unistd_64.h of the x86-64 headers.
- aarch64: arm64 has no table of its own: its asm/unistd.h asks asm-generic/unistd.h for the
  syscalls below (linux-libc-dev:arm64 6.1's, the same header) and includes it, on a 64-bit `long`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ARM64_WANTS = (
    "__ARCH_WANT_RENAMEAT",
    "__ARCH_WANT_NEW_STAT",
    "__ARCH_WANT_SET_GET_RLIMIT",
    "__ARCH_WANT_TIME32_SYSCALLS",
    "__ARCH_WANT_SYS_CLONE3",
    "__ARCH_WANT_MEMFD_SECRET",
)
SOURCES = {
    "x86_64": "#include <asm/unistd.h>\n",
    "aarch64": "".join(f"#define {want}\n" for want in ARM64_WANTS) + "#include <asm-generic/unistd.h>\n",
}
DEFINE = re.compile(r"^#define (\w+) (.+)$", re.MULTILINE)
NOT_SYSCALLS = {"syscalls"}  # __NR_syscalls: the table's length


def numbers(source: str) -> dict[str, int]:
    """{name: number} of the __NR_ macros `source` defines, references between them resolved."""
    done = subprocess.run(
        ["clang", "-E", "-dM", "-x", "c", "-"], input=source, capture_output=True, text=True, check=True
    )
    macros = dict(DEFINE.findall(done.stdout))

    def value(name: str, depth: int = 0) -> int | None:
        text = macros.get(name, "").strip().strip("()")
        if text.isdigit():
            return int(text)
        if depth < 8 and re.fullmatch(r"\w+", text):
            return value(text, depth + 1)
        match = re.fullmatch(r"(\w+)\s*\+\s*(\d+)", text)  # __NR_arch_specific_syscall + n and the like
        if match and depth < 8:
            base = value(match.group(1), depth + 1)
            return None if base is None else base + int(match.group(2))
        return None

    table = {}
    for macro in macros:
        if macro.startswith("__NR_") and macro[5:] not in NOT_SYSCALLS:
            nr = value(macro)
            if nr is not None:
                table[macro[5:]] = nr
    return table


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for machine, source in SOURCES.items():
        table = numbers(source)
        lines = [f"{nr} {name}" for name, nr in sorted(table.items(), key=lambda item: (item[1], item[0]))]
        header = f"# {machine} syscall numbers, from the kernel's UAPI headers (scripts/syscall_tables.py)\n"
        (out / f"{machine}.tbl").write_text(header + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
