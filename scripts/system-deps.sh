#!/usr/bin/env bash
# Debian packages the tests use, installed once (idempotent; a no-op for what is already there, and
# for non-root users, who then see the tests that need them skip). One package per line below:
# append yours. croft itself needs none of them to install: it is pure Python. `system-deps.sh bpf`
# installs only what `make bpf` needs to build the eBPF objects (which are committed: users never
# need these).
set -euo pipefail
BPF_PACKAGES=(
    clang       # compiles bpf/*.c into the CO-RE objects (make bpf; the objects' rebuild test)
    llvm        # llvm-strip: the objects keep their BTF, not the DWARF
    libbpf-dev  # bpf_helpers.h, bpf_core_read.h, bpf_tracing.h
)
PACKAGES=(
    sysstat  # pidstat: the truth test of croft run's CPU, RSS, I/O and context switches
    tmux     # croft top's terminal test drives the live table in a real tmux pane
    prometheus  # a real Prometheus scrapes croft run's /metrics in the tests
    openjdk-17-jre-headless  # Spark (pyspark, local mode) reads croft export's Parquet in the tests
    "${BPF_PACKAGES[@]}"
)
if [ "${1:-}" = bpf ]; then
    PACKAGES=("${BPF_PACKAGES[@]}")
fi
missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "system-deps: not root, not installing ${missing[*]}; the tests that need them will skip" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# Another apt (a second checkout's make test, unattended upgrades) may hold the lock: wait for it.
apt=(apt-get -o DPkg::Lock::Timeout=900)
"${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || { "${apt[@]}" update >/dev/null && "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null; }
