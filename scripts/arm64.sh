#!/usr/bin/env bash
# An arm64 Debian for croft's `arm64` test (tests/packaging/test_arm64.py): a root file system made
# by mmdebstrap from this machine's own apt mirror (scripts/apt-mirror.sh), whose programs run
# through qemu-user-static and binfmt_misc. Root only.
#
#   scripts/arm64.sh setup              Debian packages, binfmt_misc, the root file system (cached);
#                                       prints the root file system's path
#   scripts/arm64.sh install DIR WHEEL[EXTRAS] [CONSTRAINTS]
#                                       a venv DIR/venv-arm64 holding the wheel and its dependencies
#                                       (paths relative to DIR), by Debian's arm64 pip: from the
#                                       cached wheels when they suffice, else downloaded first
#   scripts/arm64.sh run DIR CMD...     CMD in the root file system (chroot, in a mount namespace of
#                                       its own: every bind below goes when CMD ends), with DIR bound
#                                       read-write at /w, CMD's working directory
#
# pip inside reads what this machine's pip reads: its configuration files (/etc/pip.conf,
# /etc/xdg/pip/pip.conf, ~/.config/pip/pip.conf, ~/.pip/pip.conf), its PIP_* variables, and every
# local path they name (find-links directories, file:// indexes, constraint files, the CA bundle),
# all bound read-only at the same paths; the host's CA bundle and resolv.conf too, so a
# TLS-inspecting egress works as it does here. pip's cache is the cache directory's pip/.
#
# Cache ($CROFT_ARM64_CACHE, default /var/cache/croft-arm64):
#   rootfs/      Debian <codename> arm64 with python3-venv (a few minutes, once)
#   pip/         pip's cache inside the root file system (/root/.cache/pip); pip/arm64-wheels/ the
#                wheels `install` downloaded (pip keeps no HTTP cache here: the downloads are not
#                cacheable as served), a find-links directory for the next install
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${CROFT_ARM64_CACHE:-/var/cache/croft-arm64}
rootfs=$cache/rootfs

say() { echo "arm64.sh: $*" >&2; }
die() {
    say "$*"
    exit 1
}
# Exit 77: this machine cannot run arm64 programs at all (the arm64 test skips, saying why); any
# other failure is one to fix.
cannot() {
    say "$*"
    exit 77
}

codename() { . /etc/os-release && echo "${VERSION_CODENAME:-bookworm}"; }

# arch-test is only a Recommends of mmdebstrap, which an install without recommends leaves out, yet
# mmdebstrap refuses a foreign architecture without it ("install arch-test for foreign architecture
# support"): a fresh machine's first run failed so.
packages=(mmdebstrap arch-test qemu-user-static binfmt-support)

install_packages() {
    local missing=() package
    for package in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing ${missing[*]}"
    local apt=(apt-get -o DPkg::Lock::Timeout=900 -qq)
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
        { "${apt[@]}" update && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null; }
}

# binfmt_misc runs an arm64 ELF through qemu-aarch64-static. Without systemd (this machine) nothing
# mounts it or registers the interpreter that qemu-user-static's package declares; the F flag
# opens the interpreter now, so it runs inside the chroot too.
binfmt() {
    local dir=/proc/sys/fs/binfmt_misc
    mountpoint -q "$dir" || mount -t binfmt_misc binfmt_misc "$dir" ||
        cannot "cannot mount binfmt_misc at $dir: this kernel cannot run arm64 programs through qemu"
    [ -e "$dir/qemu-aarch64" ] || update-binfmts --enable qemu-aarch64 >/dev/null ||
        cannot "update-binfmts could not register qemu-aarch64 (binfmt_misc is not writable here)"
    grep -qx enabled "$dir/qemu-aarch64" || die "$dir/qemu-aarch64 is registered but disabled"
}

# What the root file system is made of; a cached one made otherwise is made again. The apt variant
# is Debian as a container image has it: apt brings libstdc++6, which manylinux wheels (pyarrow)
# take from the system.
variant=apt
include=python3-venv
made_with() { echo "$(codename) arm64 variant=$variant include=$include"; }

build_rootfs() {
    [ "$(cat "$rootfs/.croft-arm64" 2>/dev/null)" = "$(made_with)" ] && return 0
    exec 8>"$cache/.rootfs.lock"
    flock 8
    if [ "$(cat "$rootfs/.croft-arm64" 2>/dev/null)" != "$(made_with)" ]; then
        local m started
        m=$(bash "$here/apt-mirror.sh" "$(codename)") ||
            die "no Debian $(codename) main entry in /etc/apt/sources*: cannot make a root file system"
        started=$(date +%s)
        say "mmdebstrap $(made_with) from $m (a few minutes, once)"
        rm -rf "$rootfs.partial"
        mmdebstrap --quiet --architectures=arm64 --variant="$variant" --include="$include" \
            --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            "$(codename)" "$rootfs.partial" \
            "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $m $(codename) main" >&2
        made_with >"$rootfs.partial/.croft-arm64"
        rm -rf "$rootfs"
        mv "$rootfs.partial" "$rootfs"
        say "root file system in $(($(date +%s) - started)) s: $rootfs"
    fi
    exec 8>&-
}

setup() {
    [ "$(id -u)" -eq 0 ] || cannot "needs root (mmdebstrap, binfmt_misc, chroot)"
    mkdir -p "$cache/pip"
    install_packages
    binfmt
    build_rootfs
    echo "$rootfs"
}

# The local paths this machine's pip configuration and PIP_* variables name, one a line: the files
# themselves and every existing path in their values (a file:// URL's path; for an index, the
# directory above `simple/` too, where its links point).
pip_paths() {
    python3 - <<'EOF'
import configparser, os, urllib.parse
from pathlib import Path

files = ["/etc/pip.conf", "/etc/xdg/pip/pip.conf", "/root/.config/pip/pip.conf", "/root/.pip/pip.conf"]
values = [v for k, v in os.environ.items() if k.startswith("PIP_")]
for name in files:
    if Path(name).is_file():
        print(name)
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(name)
        values += [v for section in parser.sections() for v in parser[section].values()]
seen = set()
for token in (t for value in values for t in value.split()):
    path = urllib.parse.urlparse(token).path if token.startswith("file:") else token
    if not path.startswith("/"):
        continue
    path = os.path.normpath(path)
    for found in (path, os.path.dirname(path)) if Path(path).name == "simple" else (path,):
        if os.path.exists(found) and found not in seen:
            seen.add(found)
            print(found)
EOF
}

run() {
    [ $# -ge 2 ] || die "usage: arm64.sh run DIR CMD..."
    local dir
    dir=$(cd "$1" && pwd)
    shift
    setup >/dev/null
    local binds=() path
    while IFS= read -r path; do binds+=("$path"); done < <(pip_paths)
    local env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 TERM=dumb)
    local name
    while IFS= read -r name; do
        case $name in PIP_* | CROFT_* | COLUMNS | NO_COLOR | TZ) env+=("$name=${!name}") ;; esac
    done < <(compgen -e)
    unshare --mount --propagation private -- bash ${CROFT_ARM64_TRACE:+-x} -euo pipefail -c '
        root=$1 dir=$2 cache=$3 count=$4
        shift 4
        binds=("${@:1:count}")
        shift "$count"
        ro() {   # ro SOURCE: bound read-only at the same path inside (once)
            mountpoint -q "$root$1" && return 0
            if [ -d "$1" ]; then mkdir -p "$root$1"; else mkdir -p "$(dirname "$root$1")"; touch "$root$1"; fi
            mount --bind "$1" "$root$1"
            mount -o remount,bind,ro "$root$1"
        }
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        mkdir -p "$root/w" "$root/root/.cache/pip"
        mount --bind "$dir" "$root/w"
        mount --bind "$cache/pip" "$root/root/.cache/pip"
        for path in /etc/resolv.conf /etc/hosts /etc/ssl/certs/ca-certificates.crt "${binds[@]}"; do
            if [ -e "$path" ]; then ro "$path"; fi
        done
        exec chroot "$root" /usr/bin/env -i "$@"
    ' arm64 "$rootfs" "$dir" "$cache" "${#binds[@]}" "${binds[@]}" "${env[@]}" sh -c 'cd /w && exec "$@"' sh "$@"
}

# Debian's own pip (python3-pip-whl's wheel, run as a zip) installs into a venv made without one:
# ensurepip would spend half a minute under qemu compiling a pip nobody runs.
install() {
    [ $# -ge 2 ] || die "usage: arm64.sh install DIR WHEEL[EXTRAS] [CONSTRAINTS]"
    local dir=$1 wheel=$2 constraints=${3:-}
    rm -rf "$dir/venv-arm64"
    # shellcheck disable=SC2016  # expanded inside the root file system
    run "$dir" sh -euc '
        wheels=/root/.cache/pip/arm64-wheels
        pip() { python3 "$(ls /usr/share/python-wheels/pip-*.whl)/pip" --python venv-arm64/bin/python "$@"; }
        python3 -m venv --without-pip venv-arm64
        set -- "$1" ${2:+--constraint "$2"}
        offline() { pip install --quiet --no-compile --no-index --find-links "$wheels" "$@"; }
        if ! offline "$@" 2>/dev/null; then
            mkdir -p "$wheels"
            pip download --quiet --dest "$wheels" "$@"
            rm -f "$wheels"/croft-*.whl
            offline "$@"
        fi
    ' sh "$wheel" "$constraints"
}

case ${1:-} in
    setup) setup ;;
    install)
        shift
        install "$@"
        ;;
    run)
        shift
        run "$@"
        ;;
    *) die "usage: arm64.sh setup | install DIR WHEEL[EXTRAS] [CONSTRAINTS] | run DIR CMD..." ;;
esac
