#!/usr/bin/env bash
# Compiles croft's eBPF programs into the CO-RE objects the wheel and the image ship, one per
# architecture, and writes croft's syscall tables; `make bpf` runs it, and what it writes is
# committed (as cilium/ebpf's bpf2go does): a user never needs clang. Objects and tables are
# byte-for-byte reproducible with the same clang and libbpf headers (Debian 12: clang 14, libbpf-dev
# 1.1), which tests/kernel/test_bpf_objects.py checks, along with src/croft/bpf/objects.sha256: the
# hashes of what they were built from, so a source changed without `make bpf` fails the tests.
#
#   scripts/build-bpf.sh            writes src/croft/bpf/croft.{x86,arm64}.bpf.o, objects.sha256 and
#                                   src/croft/adapters/host/syscalls/{x86_64,aarch64}.tbl
#   scripts/build-bpf.sh DIR        writes all of them into DIR instead (the tests' rebuild)
#
# Needs clang, llvm (llvm-strip) and libbpf-dev (bpf_helpers.h and friends): scripts/system-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

bpf=src/croft/bpf
tables=src/croft/adapters/host/syscalls
out=${1:-}
objects_out=${out:-$bpf}
tables_out=${out:-$tables}
mkdir -p "$objects_out" "$tables_out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for tool in clang llvm-strip; do
    command -v "$tool" >/dev/null || { echo "build-bpf: no $tool: run scripts/system-deps.sh as root" >&2; exit 1; }
done
[ -f /usr/include/bpf/bpf_helpers.h ] || { echo "build-bpf: no libbpf-dev headers: run scripts/system-deps.sh" >&2; exit 1; }

# -g makes the BTF that CO-RE relocates by; llvm-strip -g then drops the DWARF, keeping .BTF and
# .BTF.ext, whose file names -fdebug-prefix-map makes relative: the objects are the same wherever
# the repository lies.
for arch in x86 arm64; do
    clang -O2 -g -Wall -Werror -target bpfel -D__TARGET_ARCH_$arch -I"$bpf" -fdebug-prefix-map="$PWD"=. \
        -c "$bpf/croft.bpf.c" -o "$work/croft.$arch.bpf.o"
    llvm-strip -g "$work/croft.$arch.bpf.o" -o "$objects_out/croft.$arch.bpf.o"
done
python3 scripts/syscall_tables.py "$tables_out"

{
    echo "# What src/croft/bpf/croft.*.bpf.o and the syscall tables were built from, and what they are"
    echo "# (scripts/build-bpf.sh; $(clang --version | head -n 1 | sed 's/ *(.*//'), libbpf-dev $(dpkg-query -W -f='${Version}' libbpf-dev 2>/dev/null || echo unknown))."
    sha256sum "$bpf"/*.c "$bpf"/*.h scripts/build-bpf.sh scripts/syscall_tables.py
    for arch in x86 arm64; do
        echo "$(sha256sum <"$objects_out/croft.$arch.bpf.o" | cut -d' ' -f1)  $bpf/croft.$arch.bpf.o"
    done
    for machine in x86_64 aarch64; do
        echo "$(sha256sum <"$tables_out/$machine.tbl" | cut -d' ' -f1)  $tables/$machine.tbl"
    done
} >"$objects_out/objects.sha256"
