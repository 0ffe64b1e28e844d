#!/usr/bin/env bash
# Host set-up for croft's eBPF programs, as root; idempotent, so `make run` and `make test` call it
# every time. Usage: scripts/setup-bpf.sh [--bcc] [VENV]   (VENV defaults to .venv)
#
# For the CO-RE programs (croft run's default wherever the kernel has BTF): no compiler, no headers.
#  1. Debian's libbpf1 (libbpf.so.1), which loads the precompiled objects; apt-get update runs only
#     when something has to be installed.
#  2. tracefs mounted at /sys/kernel/tracing (libbpf finds the classic tracepoints' ids there).
# With --bcc, for BCC (croft run --ebpf bcc: a kernel without BTF; the tests run both loaders):
#  3. Debian's BCC (python3-bpfcc, bpfcc-tools) and kernel headers (linux-headers-<arch>).
#  4. A running kernel without headers of its own (no /lib/modules/$(uname -r)/build) gets `build`
#     and `source` links to the newest installed /usr/src/linux-headers-*-<arch> and -common trees.
#     croft only attaches tracepoints, whose argument layout BCC reads from tracefs at load time, so
#     headers of another kernel version compile them correctly.
#  5. Debian's bcc module importable from VENV's Python, without the rest of the system's
#     site-packages: VENV/bcc-site/bcc -> /usr/lib/python3/dist-packages/bcc, named by a .pth file.
set -euo pipefail

bcc=''
if [ "${1:-}" = --bcc ]; then
    bcc=1
    shift
fi
venv=${1:-.venv}
say() { echo "setup-bpf: $*"; }

if [ "$(id -u)" -ne 0 ]; then
    say "not root: skipping (croft run and the root/bpf tests need root)"
    exit 0
fi

arch=$(dpkg --print-architecture)
packages=(libbpf1)
[ -n "$bcc" ] && packages+=(python3-bpfcc bpfcc-tools "linux-headers-$arch")
missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    # Other set-up scripts may hold the dpkg lock: wait for it rather than fail.
    apt=(apt-get -o DPkg::Lock::Timeout=600 -qq)
    "${apt[@]}" update
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! mountpoint -q /sys/kernel/tracing; then
    mount -t tracefs tracefs /sys/kernel/tracing
fi

[ -n "$bcc" ] || exit 0

modules="/lib/modules/$(uname -r)"
if [ -e "$modules/build/include" ] && [ ! -L "$modules/build" ]; then
    : # the running kernel has headers of its own: leave them alone
else
    arch_tree=$(find /usr/src -maxdepth 1 -name "linux-headers-*-$arch" -type d | sort -V | tail -n 1)
    common_tree=${arch_tree%-"$arch"}-common
    if [ -z "$arch_tree" ] || [ ! -d "$common_tree" ]; then
        say "no /usr/src/linux-headers-*-$arch and -common trees found; install linux-headers-$arch"
        exit 1
    fi
    mkdir -p "$modules"
    [ "$(readlink "$modules/build" || true)" = "$arch_tree" ] || ln -sfn "$arch_tree" "$modules/build"
    [ "$(readlink "$modules/source" || true)" = "$common_tree" ] || ln -sfn "$common_tree" "$modules/source"
fi

if [ -x "$venv/bin/python" ]; then
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    bcc_site=$(cd "$venv" && pwd)/bcc-site
    mkdir -p "$bcc_site"
    ln -sfn /usr/lib/python3/dist-packages/bcc "$bcc_site/bcc"
    echo "$bcc_site" >"$site/croft-bcc.pth"
    if ! "$venv/bin/python" -c 'import bcc' 2>/dev/null; then
        say "$venv/bin/python cannot import bcc through $site/croft-bcc.pth"
        exit 1
    fi
fi
