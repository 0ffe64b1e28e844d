#!/usr/bin/env bash
# Host set-up for croft's eBPF programs, as root; idempotent, so `make test` and `make run` call it
# every time. Usage: scripts/setup-bpf.sh [VENV]   (VENV defaults to .venv)
#
#  1. Debian's BCC (python3-bpfcc, bpfcc-tools) and kernel headers (linux-headers-amd64); apt-get
#     update runs only when something has to be installed.
#  2. A running kernel without headers of its own (no /lib/modules/$(uname -r)/build) gets `build`
#     and `source` links to the newest installed /usr/src/linux-headers-*-amd64 and -common trees.
#     croft only attaches tracepoints, whose argument layout BCC reads from tracefs at load time, so
#     headers of another kernel version compile them correctly.
#  3. tracefs mounted at /sys/kernel/tracing (BCC finds tracepoint ids there).
#  4. Debian's bcc module importable from VENV's Python, without the rest of the system's
#     site-packages: VENV/bcc-site/bcc -> /usr/lib/python3/dist-packages/bcc, named by a .pth file.
set -euo pipefail

venv=${1:-.venv}
say() { echo "setup-bpf: $*"; }

if [ "$(id -u)" -ne 0 ]; then
    say "not root: skipping (croft run and the root/bpf tests need root)"
    exit 0
fi

packages=(python3-bpfcc bpfcc-tools linux-headers-amd64)
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

modules="/lib/modules/$(uname -r)"
if [ -e "$modules/build/include" ] && [ ! -L "$modules/build" ]; then
    : # the running kernel has headers of its own: leave them alone
else
    arch_tree=$(find /usr/src -maxdepth 1 -name 'linux-headers-*-amd64' -type d | sort -V | tail -n 1)
    common_tree=${arch_tree%-amd64}-common
    if [ -z "$arch_tree" ] || [ ! -d "$common_tree" ]; then
        say "no /usr/src/linux-headers-*-amd64 and -common trees found; install linux-headers-amd64"
        exit 1
    fi
    mkdir -p "$modules"
    [ "$(readlink "$modules/build" || true)" = "$arch_tree" ] || ln -sfn "$arch_tree" "$modules/build"
    [ "$(readlink "$modules/source" || true)" = "$common_tree" ] || ln -sfn "$common_tree" "$modules/source"
fi

if ! mountpoint -q /sys/kernel/tracing; then
    mount -t tracefs tracefs /sys/kernel/tracing
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
