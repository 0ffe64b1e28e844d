#!/usr/bin/env bash
# A real single-node Kubernetes for croft's `node` tests: etcd, kube-apiserver, controller-manager,
# scheduler, kubelet, kube-proxy, containerd + runc and CNI's bridge plugin, from Debian packages and
# Debian's `kubernetes` source package only. Pods run for real: the collector DaemonSet, the webapp,
# the scaler with its kubectl-proxy sidecar.
#
#   scripts/kube-node.sh build      apt packages; kubelet, kube-scheduler, kube-proxy (cached)
#   scripts/kube-node.sh images     pause and a Debian base root file system with python3 (cached),
#                                   as docker-archive tars that `up` imports into containerd
#   scripts/kube-node.sh up         build + images if needed, start everything, wait for the node
#                                   to be Ready; prints KEY=value lines (as `env` does)
#   scripts/kube-node.sh down       stop everything and undo every change to the host
#   scripts/kube-node.sh env        KEY=value lines for the running node
#   scripts/kube-node.sh image-build TAG CONTEXT DOCKERFILE [--no-import] [buildah bud options]
#                                   buildah bud (chroot isolation, layer cache under the cache
#                                   directory) FROM the local base (--build-arg BASE=...); prints
#                                   the docker-archive it wrote and imports it into the running
#                                   node's containerd unless --no-import
#
# Cache ($CROFT_K8S_CACHE, default /var/cache/croft-k8s, shared with scripts/kube-apiserver.sh):
#   <version>/bin        kube-apiserver, kube-controller-manager, kubectl (kube-apiserver.sh build)
#   <version>/node-bin   kubelet, kube-scheduler, kube-proxy
#   images/              pause.tar, debian-base.tar (mmdebstrap from this machine's own apt mirror)
#   buildah/             buildah's storage: images and cached layers of image-build
#
# What this machine taught (each line was needed once):
#   - Root here lacks CAP_SYS_RESOURCE: runc fails ("can't get final child's PID from pipe") unless
#     containerd's CRI config has restrict_oom_score_adj = true.
#   - Pods reach the API server through the `kubernetes` Service, a DNAT to the advertise address;
#     a DNAT to 127.0.0.1 from a pod's network namespace is dropped. So the API server and kubelet
#     bind to the address of a bridge this script creates (croftnode0, 10.244.31.1), which the CNI
#     bridge plugin reuses with ipMasq false: pods reach only that bridge, nothing outside.
#   - The kubelet rewrites vm.overcommit_memory, kernel.panic and kernel.panic_on_oops; the bridge
#     plugin and kube-proxy set ip_forward and route_localnet: `up` saves them, `down` restores them
#     (the kernel tunables are restored as soon as the node is Ready too).
#   - `kube-proxy --cleanup` leaves KUBE-* chains behind: `down` deletes every KUBE-*/CNI-* rule and
#     chain.
#   - The kubelet and CRI hard-code /var/log/pods, /var/lib/cni, /run/containerd and /run/netns, so
#     one node per machine: `up` takes $cache/.node.lock (flock) and keeps it while the node runs;
#     a second `up` fails saying so. `down` removes those directories where `up` created them.
#   - There is no CoreDNS package: pods use ClusterIPs or the *_SERVICE_HOST variables.
#
# Every listener binds to 127.0.0.1 or to the bridge address: etcd and the controller-manager,
# scheduler, kubelet healthz and kube-proxy metrics on loopback; the API server, kubelet and the
# metrics.k8s.io stand-in on the bridge; NodePorts only on the bridge address. No route and no
# masquerade to the outside are added.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${CROFT_K8S_CACHE:-/var/cache/croft-k8s}
run=${CROFT_NODE_RUN:-/tmp/croft-node}
lock=${CROFT_NODE_LOCK:-$cache/.node.lock}
node=${CROFT_NODE_NAME:-croft-node}
bridge=croftnode0
bridge_mac=02:63:72:6f:66:74
node_ip=10.244.31.1
pod_cidr=10.244.31.0/24
svc_cidr=10.97.0.0/16
api_ip=10.97.0.1
etcd_port=22379 etcd_peer=22380 api_port=26443 kubelet_port=20250 metrics_api_port=26444
pause_image=localhost/croft-pause:3.4.1
base_image=localhost/croft-debian-base:bookworm

say() { echo "kube-node.sh: $*" >&2; }
die() {
    say "$*"
    exit 1
}

packages=(containerd runc containernetworking-plugins iptables nftables conntrack buildah mmdebstrap gcc libc6-dev
    openssl curl python3 etcd-server dpkg-dev rsync golang-go
    golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev)

install_packages() {
    local missing=() package
    for package in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || die "needs root to install ${missing[*]}; run it once as root or install them"
    say "installing ${missing[*]}"
    local apt=(apt-get -o DPkg::Lock::Timeout=900 -qq)
    # containerd's package would start its own service where init can: policy-rc.d already says no
    # on this kind of machine; the node's containerd is started by `up` with its own config.
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
        { "${apt[@]}" update && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null; }
}

# The Debian mirror this machine's apt already uses, for the deb-src of kubernetes and for
# mmdebstrap (scripts/apt-mirror.sh): no host name is written in this script.
codename() { . /etc/os-release && echo "${VERSION_CODENAME:-bookworm}"; }
mirror() { bash "$here/apt-mirror.sh" "$(codename)"; }

private_apt() {
    local tool=$1 dir=$cache/node-apt
    shift
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/sources.list.d"
    if [ ! -f "$dir/sources.list" ]; then
        local m
        m=$(mirror) || die "no Debian $(codename) main entry in /etc/apt/sources*: cannot fetch the kubernetes source"
        echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $m $(codename) main" >"$dir/sources.list"
    fi
    "$tool" -qq -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts="$dir/sources.list.d" \
        -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o APT::Sandbox::User=root "$@"
}

# ------------------------------------------------------------------------------------------- build

api_bin() { bash "$here/kube-apiserver.sh" build; }

node_bin_dir() { echo "$(dirname "$(api_bin)")/node-bin"; }

build() {
    install_packages
    local apibin version nodebin
    apibin=$(api_bin) || die "kube-apiserver cannot be built here (scripts/kube-apiserver.sh build failed)"
    version=$(basename "$(dirname "$apibin")")
    nodebin=$(dirname "$apibin")/node-bin
    if [ -x "$nodebin/kubelet" ] && [ -x "$nodebin/kube-scheduler" ] && [ -x "$nodebin/kube-proxy" ]; then
        echo "$nodebin"
        return 0
    fi
    # kube-apiserver.sh build makes these with its own binaries; this builds them for a cache it made
    # before it did. Its own lock: kube-apiserver.sh build (which every `make test` runs) must not wait.
    exec 9>"$cache/.node-build.lock"
    flock 9
    if [ -x "$nodebin/kubelet" ] && [ -x "$nodebin/kube-scheduler" ] && [ -x "$nodebin/kube-proxy" ]; then
        echo "$nodebin"
        return 0
    fi
    local work=$cache/$version/build started   # kube-apiserver.sh's directory: see GOCACHE below
    started=$(date +%s)
    say "building kubelet, kube-scheduler, kube-proxy $version in $work (several minutes)"
    rm -rf "$work"   # an interrupted build keeps the shared Go cache
    mkdir -p "$work"
    ls "$cache/node-apt/lists/"*_Sources* >/dev/null 2>&1 || private_apt apt-get update >&2
    (cd "$work" && private_apt apt-get source --download-only "kubernetes=$version" >/dev/null)
    (cd "$work" && dpkg-source --no-check -x ./*.dsc tree >/dev/null)
    local tree=$work/tree module
    for module in github.com/modern-go/reflect2 github.com/json-iterator/go; do   # vendored reflect2 crashes on Go >= 1.18
        rm -rf "${tree:?}/vendor/$module"
        rsync -a --exclude '*_test.go' "/usr/share/gocode/src/$module/" "$tree/vendor/$module/"
    done
    mkdir -p "$tree/.go/src/k8s.io"
    ln -sfn "$tree" "$tree/.go/src/k8s.io/kubernetes"
    local upstream=${version%%-*}
    upstream=${upstream##*really}
    upstream=${upstream%%+*}
    # One Go cache for both builds (kube-apiserver.sh, kube-node.sh), each in the same tree directory
    # (package directories are part of the cache keys), so the node build reuses every package the
    # first one compiled. hack/lib/golang.sh sets GOCACHE=_output/local/go/cache whatever the
    # environment says: that path is a link to the shared cache.
    mkdir -p "$tree/_output/local/go" "$cache/$version/gocache"
    ln -sfn "$cache/$version/gocache" "$tree/_output/local/go/cache"
    (
        cd "$tree/.go/src/k8s.io/kubernetes"
        export GOPATH=$tree/.go CGO_ENABLED=0 GOPROXY=off GOFLAGS=
        export KUBE_GIT_VERSION="v$upstream" KUBE_GIT_TREE_STATE=clean KUBE_GIT_COMMIT=debian-$version
        export KUBE_GIT_MAJOR=${upstream%%.*} KUBE_GIT_MINOR=$(echo "$upstream" | cut -d. -f2)
        make WHAT="cmd/kubelet cmd/kube-scheduler cmd/kube-proxy"
    ) >&2
    mkdir -p "$nodebin.partial" "$cache/$version/src"
    local name
    for name in kubelet kube-scheduler kube-proxy; do
        cp "$tree/_output/local/go/bin/$name" "$nodebin.partial/$name"
    done
    # pause.c is all `images` needs of the tree
    cp "$tree/build/pause/linux/pause.c" "$cache/$version/src/pause.c"
    rm -rf "$nodebin"
    mv "$nodebin.partial" "$nodebin"
    rm -rf "$work" "$cache/$version/gocache"   # both builds are done
    say "built the node binaries in $(($(date +%s) - started)) s: $nodebin"
    exec 9>&-
    echo "$nodebin"
}

# ------------------------------------------------------------------------------------------ images

# buildah with its storage in the cache (layers survive between runs). containers/storage leaves its
# overlay directory bind-mounted and creates /var/lib/containers and /etc/cni/net.d/cni.lock: undone
# after every call.
ba() {
    local had_vlc='' had_lock='' had_cni='' rc=0
    [ -e /var/lib/containers ] && had_vlc=1
    [ -e /etc/cni/net.d/cni.lock ] && had_lock=1
    [ -e /etc/cni ] && had_cni=1
    buildah --root "$cache/buildah/root" --runroot "$cache/buildah/run" --storage-driver overlay "$@" || rc=$?
    grep -qs " $cache/buildah/" /proc/mounts &&
        awk -v r="$cache/buildah/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | xargs -r umount -l
    [ -n "$had_vlc" ] || rm -rf /var/lib/containers
    [ -n "$had_lock" ] || rm -f /etc/cni/net.d/cni.lock
    [ -n "$had_cni" ] || rm -rf /etc/cni
    return $rc
}

# The Debian base image, in buildah's storage (what image-build needs) and as a tar in the cache.
base() {
    local dir=$cache/images
    mkdir -p "$dir"
    exec 7>"$cache/.base.lock"
    flock 7
    if [ ! -f "$dir/debian-base.tar" ]; then
        # The base the Dockerfiles build FROM (--build-arg BASE=...): Debian with apt and python3
        # (and `python`, which python:3.12-slim has) from this machine's own mirror, plus this
        # machine's own extra CA certificates (a TLS-inspecting egress needs them for pip), as a
        # site's base image would carry them. In buildah's storage; the tar keeps it.
        local ctx=$dir/base-ctx m started
        m=$(mirror) || die "no Debian $(codename) main entry in /etc/apt/sources*: cannot make a root file system"
        started=$(date +%s)
        mkdir -p "$ctx/ca"
        if [ ! -f "$dir/debian-rootfs.tar" ]; then
            say "mmdebstrap $(codename) with python3 from $m (a few minutes)"
            mmdebstrap --quiet --format=tar --variant=apt --include=python3,python-is-python3,ca-certificates \
                --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
                --dpkgopt='path-exclude=/usr/share/locale/*' \
                "$(codename)" "$dir/debian-rootfs.partial.tar" \
                "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $m $(codename) main" >&2
            mv "$dir/debian-rootfs.partial.tar" "$dir/debian-rootfs.tar"
        fi
        ln -f "$dir/debian-rootfs.tar" "$ctx/rootfs.tar"
        find /usr/local/share/ca-certificates -maxdepth 1 -name '*.crt' -exec cp {} "$ctx/ca/" \; 2>/dev/null || true
        cat >"$ctx/Containerfile" <<'CF'
FROM scratch
ADD rootfs.tar /
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
CMD ["python3"]
CF
        ba bud --isolation chroot -q -t "$base_image" "$ctx" >/dev/null
        ba push -q "$base_image" "docker-archive:$dir/debian-base.tar.partial:$base_image"
        mv "$dir/debian-base.tar.partial" "$dir/debian-base.tar"
        rm -rf "$ctx"
        say "base image in $(($(date +%s) - started)) s"
    elif ! ba inspect "$base_image" >/dev/null 2>&1; then
        ba pull -q "docker-archive:$dir/debian-base.tar" >/dev/null
    fi
    exec 7>&-
}

images() {
    install_packages
    base
    local version dir=$cache/images
    version=$(basename "$(dirname "$(api_bin)")")
    exec 8>"$cache/.images.lock"
    flock 8
    if [ ! -f "$dir/pause.tar" ]; then
        [ -f "$cache/$version/src/pause.c" ] || build >/dev/null
        local ctx=$dir/pause-ctx
        rm -rf "$ctx" && mkdir -p "$ctx"
        gcc -Os -static -DVERSION=3.4.1 -o "$ctx/pause" "$cache/$version/src/pause.c"
        printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
        ba bud --isolation chroot -q -t "$pause_image" "$ctx" >/dev/null
        ba push -q "$pause_image" "docker-archive:$dir/pause.tar.partial:$pause_image"
        mv "$dir/pause.tar.partial" "$dir/pause.tar"
        rm -rf "$ctx"
    fi
    exec 8>&-
    echo "$dir"
}

# image-build TAG CONTEXT DOCKERFILE [buildah bud options]: BASE is the local Debian base; the image
# is written to $run/images/<tag>.tar and, when the node runs, imported into its containerd.
image_build() {
    [ $# -ge 3 ] || die "usage: image-build TAG CONTEXT DOCKERFILE [buildah bud options]"
    local tag=$1 context=$2 dockerfile=$3 tar import=1 options=() option
    shift 3
    for option in "$@"; do
        if [ "$option" = --no-import ]; then import=''; else options+=("$option"); fi
    done
    install_packages
    base
    local ignore=()
    [ -f "$dockerfile.dockerignore" ] && ignore=(--ignorefile "$dockerfile.dockerignore")
    ba bud --isolation chroot --layers -q -f "$dockerfile" "${ignore[@]}" --build-arg "BASE=$base_image" \
        -t "$tag" "${options[@]}" "$context" >/dev/null
    mkdir -p "$run/images"
    tar=$run/images/$(echo "$tag" | tr '/:' '__').tar
    rm -f "$tar"
    ba push -q "$tag" "docker-archive:$tar:$tag"
    if [ -n "$import" ] && alive containerd; then
        ctr_ images import "$tar" >/dev/null
    fi
    echo "$tar"
}

# ----------------------------------------------------------------------------------------- cluster

spawn() {
    local name=$1
    shift
    setsid "$@" >>"$run/logs/$name.log" 2>&1 </dev/null &
    echo $! >"$run/$name.pid"
}
alive() { [ -f "$run/$1.pid" ] && kill -0 "$(cat "$run/$1.pid")" 2>/dev/null; }
ctr_() { ctr --address "$run/containerd/containerd.sock" -n k8s.io "$@"; }
kc() { "$(cat "$run/api-bin")/kubectl" --kubeconfig "$run/admin.kubeconfig" --cache-dir "$run/kube-cache" "$@"; }

certs() {
    local p=$run/pki
    [ -f "$p/tokens.csv" ] && return 0
    mkdir -p "$p"
    (
        cd "$p"
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=croft-node-ca -keyout ca.key -out ca.crt 2>/dev/null
        sign() { # name CN O SAN [CA]
            local subj="/CN=$2"
            [ -n "$3" ] && subj="/O=$3$subj"
            openssl req -newkey rsa:2048 -nodes -subj "$subj" -keyout "$1.key" -out "$1.csr" 2>/dev/null
            { echo "extendedKeyUsage=serverAuth,clientAuth"; [ -n "$4" ] && echo "subjectAltName=$4"; } >"$1.ext"
            openssl x509 -req -in "$1.csr" -CA "${5:-ca}.crt" -CAkey "${5:-ca}.key" -CAcreateserial -days 3650 \
                -extfile "$1.ext" -out "$1.crt" 2>/dev/null
        }
        sign apiserver kube-apiserver "" "IP:127.0.0.1,IP:$node_ip,IP:$api_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
        sign apiserver-kubelet-client kube-apiserver-kubelet-client system:masters ""
        # the aggregation layer's front proxy (the metrics.k8s.io stand-in is an aggregated API)
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=croft-node-front-proxy-ca \
            -keyout fp-ca.key -out fp-ca.crt 2>/dev/null
        sign front-proxy-client front-proxy-client "" "" fp-ca
        openssl genrsa -out sa.key 2048 2>/dev/null
        openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    )
    tok() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
    local admin kubelet proxy
    admin=$(tok) kubelet=$(tok) proxy=$(tok)
    echo "$admin" >"$run/admin.token"
    {
        echo "$admin,admin,admin,system:masters"
        echo "$kubelet,system:node:$node,kubelet,system:nodes"
        echo "$proxy,system:kube-proxy,kube-proxy"
    } >"$p/tokens.csv.partial"
    local who token
    for who in admin:$admin kubelet:$kubelet kube-proxy:$proxy; do
        token=${who#*:}
        cat >"$run/${who%%:*}.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: croft-node, cluster: {server: "https://$node_ip:$api_port", certificate-authority: $p/ca.crt}}]
users: [{name: u, user: {token: $token}}]
contexts: [{name: croft-node, context: {cluster: croft-node, user: u}}]
current-context: croft-node
KC
    done
    mv "$p/tokens.csv.partial" "$p/tokens.csv"
}

tunables="vm/overcommit_memory kernel/panic kernel/panic_on_oops"  # the kubelet's container manager sets them
netsysctls="net/ipv4/ip_forward net/ipv4/conf/all/route_localnet net/bridge/bridge-nf-call-iptables"
# /var/lib/croft-node: the collector's dataset on this node (the node tests and real.py give it to
# croft deploy kubernetes --dataset-dir), never the host's own /var/lib/croft
hostdirs="/var/log/pods /var/log/containers /var/lib/cni /run/containerd /run/netns /etc/cni /var/lib/croft-node /var/lib/kubelet"
save_host() {
    [ -f "$run/host.saved" ] && return 0
    local d k
    for d in $hostdirs; do [ -e "$d" ] || echo "$d"; done >"$run/hostdirs.created"
    for k in $tunables $netsysctls; do [ -e "/proc/sys/$k" ] && echo "$k $(cat "/proc/sys/$k")"; done >"$run/sysctl.saved"
    grep -qs '^br_netfilter ' /proc/modules && echo had >"$run/br_netfilter.had"
    nft list tables >"$run/nft-tables.saved" 2>/dev/null || true
    touch "$run/host.saved"
}
restore_sysctls() { # keys
    local k v
    [ -f "$run/sysctl.saved" ] || return 0
    while read -r k v; do
        case " $* " in *" $k "*) [ "$(cat "/proc/sys/$k" 2>/dev/null)" = "$v" ] || echo "$v" >"/proc/sys/$k" ;; esac
    done <"$run/sysctl.saved"
}

host_net() {
    ip link show "$bridge" >/dev/null 2>&1 || {
        ip link add "$bridge" type bridge
        ip addr add "$node_ip/24" dev "$bridge"
        ip link set "$bridge" up
    }
    # A bridge whose address was never set takes the lowest of its ports' and changes it when that
    # port goes (a pod deleted): the other pods' ARP caches keep the old one for the node for up to
    # a minute, and their replies to the node are lost. A set address stays (the kernel marks it
    # NET_ADDR_SET and no longer follows the ports). Locally administered: 02 + "croft".
    ip link set "$bridge" address "$bridge_mac"
    # Pods reach the node (API server, kubelet) and each other on the bridge; nothing is forwarded
    # from the bridge to any other interface, whatever ip_forward says.
    iptables -N CROFT-NODE-FORWARD 2>/dev/null || iptables -F CROFT-NODE-FORWARD
    iptables -A CROFT-NODE-FORWARD -i "$bridge" ! -o "$bridge" -j DROP
    iptables -A CROFT-NODE-FORWARD -o "$bridge" ! -i "$bridge" -j DROP
    iptables -C FORWARD -j CROFT-NODE-FORWARD 2>/dev/null || iptables -I FORWARD 1 -j CROFT-NODE-FORWARD
    mkdir -p "$run/cni/net.d"
    cat >"$run/cni/net.d/10-croft-node.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "croft-node", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr", "gateway": "$node_ip"}]],
            "dataDir": "$run/cni/ipam", "routes": [{"dst": "$pod_cidr"}, {"dst": "$svc_cidr"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
CNI
    printf '# the croft test node has no DNS: pods use ClusterIPs and *_SERVICE_HOST\n' >"$run/resolv.conf"
}

containerd_up() {
    alive containerd && return 0
    mkdir -p "$run/containerd" "$cache/containerd-root"
    cat >"$run/containerd/config.toml" <<TOML
version = 2
root = "$cache/containerd-root"
state = "$run/containerd/state"
[grpc]
  address = "$run/containerd/containerd.sock"
[ttrpc]
  address = "$run/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  # root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj (-998 for sandboxes) is EACCES
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$run/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$run/cni/net.d"
[plugins."io.containerd.internal.v1.opt"]
  path = "$run/containerd/opt"
TOML
    spawn containerd containerd --config "$run/containerd/config.toml"
    until ctr_ version >/dev/null 2>&1; do
        alive containerd || die "containerd exited; see $run/logs/containerd.log"
        sleep 0.2
    done
    # containerd's content store is in the cache: pause and the base are imported once
    local have
    have=$(ctr_ images ls -q)
    grep -qFx "$pause_image" <<<"$have" || ctr_ images import "$cache/images/pause.tar" >/dev/null
    grep -qFx "$base_image" <<<"$have" || ctr_ images import "$cache/images/debian-base.tar" >/dev/null
    local t
    for t in "$run"/images/*.tar; do
        [ -f "$t" ] || continue
        ctr_ images import "$t" >/dev/null
    done
}

take_lock() {
    mkdir -p "$(dirname "$lock")"
    if alive lock-holder; then return 0; fi
    # One process holds the lock while the node runs (`down` ends it): `sleep` itself, with the lock
    # on its fd 3 and no other descriptor of ours (a caller's `flock` descriptor, inherited, would
    # otherwise outlive the node).
    setsid bash -c 'for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -gt 3 ] && eval "exec $fd>&-"; done
        flock -n 3 || exit 1; exec sleep infinity' 3>>"$lock" </dev/null >/dev/null 2>&1 &
    local pid=$!
    sleep 0.3
    kill -0 "$pid" 2>/dev/null ||
        die "another croft node runs on this machine (lock $lock is held); stop it with scripts/kube-node.sh down"
    echo "$pid" >"$run/lock-holder.pid"
}

up() {
    local started apibin nodebin
    started=$(date +%s.%N)
    apibin=$(api_bin) || die "kube-apiserver cannot be built here (scripts/kube-apiserver.sh build failed)"
    nodebin=$(build) || die "the node binaries cannot be built here"
    images >/dev/null || die "the node's images cannot be made here"
    mkdir -p "$run/logs"
    take_lock
    echo "$apibin" >"$run/api-bin"
    echo "$nodebin" >"$run/node-bin"
    save_host
    certs
    host_net
    containerd_up
    local p=$run/pki
    alive etcd || spawn etcd etcd --name croft-node --data-dir "$run/etcd" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
        --initial-cluster "croft-node=http://127.0.0.1:$etcd_peer" --listen-metrics-urls "" --log-level warn
    alive apiserver || spawn apiserver "$apibin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address "$node_ip" --advertise-address "$node_ip" --secure-port "$api_port" --insecure-port 0 \
        --token-auth-file "$p/tokens.csv" --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
        --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" --client-ca-file "$p/ca.crt" \
        --kubelet-client-certificate "$p/apiserver-kubelet-client.crt" --kubelet-client-key "$p/apiserver-kubelet-client.key" \
        --kubelet-preferred-address-types InternalIP \
        --requestheader-client-ca-file "$p/fp-ca.crt" --requestheader-allowed-names front-proxy-client \
        --requestheader-extra-headers-prefix X-Remote-Extra- --requestheader-group-headers X-Remote-Group \
        --requestheader-username-headers X-Remote-User \
        --proxy-client-cert-file "$p/front-proxy-client.crt" --proxy-client-key-file "$p/front-proxy-client.key" \
        --enable-aggregator-routing=true \
        --service-cluster-ip-range "$svc_cidr" --service-node-port-range 30000-32767 \
        --service-account-issuer https://kubernetes.default.svc \
        --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
        --allow-privileged=true --enable-priority-and-fairness=false --profiling=false --v 1
    local deadline=$(($(date +%s) + ${CROFT_NODE_START_TIMEOUT:-180}))
    until curl -fsS --max-time 2 --cacert "$p/ca.crt" -H "Authorization: Bearer $(cat "$run/admin.token")" \
        "https://$node_ip:$api_port/readyz" >/dev/null 2>&1; do
        alive apiserver || die "kube-apiserver exited; see $run/logs/apiserver.log"
        [ "$(date +%s)" -lt "$deadline" ] || die "kube-apiserver not ready in time; see $run/logs/apiserver.log"
        sleep 0.3
    done
    alive controller-manager || spawn controller-manager "$apibin/kube-controller-manager" \
        --kubeconfig "$run/admin.kubeconfig" --bind-address 127.0.0.1 --secure-port 0 --port 0 --leader-elect=false \
        --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" --use-service-account-credentials=true \
        --controllers '*,-nodeipam' --horizontal-pod-autoscaler-sync-period 5s \
        --horizontal-pod-autoscaler-downscale-stabilization 30s --profiling=false --v 1
    alive scheduler || spawn scheduler "$nodebin/kube-scheduler" --kubeconfig "$run/admin.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port 0 --port 0 --leader-elect=false --profiling=false --v 1
    mkdir -p "$run/kubelet" /var/log/pods /var/log/containers
    cat >"$run/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 20248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $p/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failSwapOn: false
clusterDomain: cluster.local
resolvConf: $run/resolv.conf
podCIDR: $pod_cidr
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
YAML
    alive kubelet || spawn kubelet "$nodebin/kubelet" --config "$run/kubelet.yaml" --kubeconfig "$run/kubelet.kubeconfig" \
        --root-dir "$run/kubelet" --cert-dir "$run/kubelet/pki" --hostname-override "$node" --node-ip "$node_ip" \
        --container-runtime remote --container-runtime-endpoint "unix://$run/containerd/containerd.sock" \
        --runtime-request-timeout 5m --pod-infra-container-image "$pause_image" \
        --containerd "$run/containerd/containerd.sock" --v 1   # cAdvisor's: labels containers by pod
    alive kube-proxy || spawn kube-proxy "$nodebin/kube-proxy" --kubeconfig "$run/kube-proxy.kubeconfig" \
        --hostname-override "$node" --bind-address "$node_ip" --cluster-cidr "$pod_cidr" --proxy-mode iptables \
        --healthz-bind-address 127.0.0.1:20256 --metrics-bind-address 127.0.0.1:20249 \
        --nodeport-addresses "$node_ip/32" --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 \
        --conntrack-tcp-timeout-close-wait 0 --v 1
    until kc get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True; do
        alive kubelet || die "the kubelet exited; see $run/logs/kubelet.log"
        [ "$(date +%s)" -lt "$deadline" ] || die "the node was not Ready in time; see $run/logs/kubelet.log"
        sleep 0.5
    done
    restore_sysctls $tunables
    until kc -n default get serviceaccount default -o jsonpath='{.secrets[0].name}' 2>/dev/null | grep -q .; do
        [ "$(date +%s)" -lt "$deadline" ] || die "no default ServiceAccount token in time; see $run/logs/controller-manager.log"
        sleep 0.3
    done
    metrics_api_up
    say "node Ready in $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$started" "$(date +%s.%N)") s"
    print_env
}

# The metrics.k8s.io stand-in (scripts/metrics-api.py: the kubelet's own /stats/summary numbers),
# registered as an aggregated API; the HPA reads it.
metrics_api_up() {
    local p=$run/pki
    alive metrics-api || spawn metrics-api python3 "$here/metrics-api.py" "$node_ip" "$metrics_api_port" \
        "https://$node_ip:$kubelet_port" "$p/apiserver.crt" "$p/apiserver.key" \
        "$p/apiserver-kubelet-client.crt" "$p/apiserver-kubelet-client.key"
    kc apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: croft-node-metrics-api, namespace: kube-system}
spec: {ports: [{port: 443, targetPort: $metrics_api_port}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: croft-node-metrics-api, namespace: kube-system}
subsets: [{addresses: [{ip: $node_ip}], ports: [{port: $metrics_api_port}]}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  service: {name: croft-node-metrics-api, namespace: kube-system, port: 443}
  group: metrics.k8s.io
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
YAML
    local deadline=$(($(date +%s) + 60))
    until kc get apiservice v1beta1.metrics.k8s.io -o jsonpath='{.status.conditions[0].status}' 2>/dev/null | grep -q True; do
        alive metrics-api || die "the metrics.k8s.io stand-in exited; see $run/logs/metrics-api.log"
        [ "$(date +%s)" -lt "$deadline" ] || die "metrics.k8s.io not available in time; see $run/logs/metrics-api.log"
        sleep 0.5
    done
}

print_env() {
    echo "KUBECONFIG=$run/admin.kubeconfig"
    echo "CROFT_K8S_SERVER=https://$node_ip:$api_port"
    echo "CROFT_K8S_CA=$run/pki/ca.crt"
    echo "CROFT_K8S_TOKEN=$(cat "$run/admin.token")"
    echo "CROFT_K8S_BIN=$(cat "$run/api-bin")"
    echo "CROFT_K8S_RUN=$run"
    echo "CROFT_NODE_BIN=$(cat "$run/node-bin")"
    echo "CROFT_NODE_NAME=$node"
    echo "CROFT_NODE_IP=$node_ip"
    echo "CROFT_NODE_BRIDGE=$bridge"
    echo "CROFT_NODE_KUBELET=https://$node_ip:$kubelet_port"
    echo "CROFT_NODE_METRICS_API_PORT=$metrics_api_port"
    echo "CROFT_NODE_KUBELET_CLIENT_CERT=$run/pki/apiserver-kubelet-client.crt"
    echo "CROFT_NODE_KUBELET_CLIENT_KEY=$run/pki/apiserver-kubelet-client.key"
    echo "CROFT_NODE_SERVING_CERT=$run/pki/apiserver.crt"
    echo "CROFT_NODE_SERVING_KEY=$run/pki/apiserver.key"
    echo "CONTAINERD_ADDRESS=$run/containerd/containerd.sock"
}

iptables_cleanup() { # every KUBE-*, CNI-* and CROFT-NODE-* rule and chain
    local ipt t c
    for ipt in iptables ip6tables; do
        for t in filter nat mangle; do
            { $ipt-save -t $t 2>/dev/null | grep -E '^-A [A-Z]+ .*-j (KUBE|CNI|CROFT-NODE)-' || true; } | sed 's/^-A /-D /' |
                while read -r rule; do eval "$ipt -t $t $rule" || true; done
            for c in $($ipt-save -t $t 2>/dev/null | awk '/^:(KUBE|CNI|CROFT-NODE)-/ {print substr($1, 2)}'); do $ipt -t $t -F "$c" || true; done
            for c in $($ipt-save -t $t 2>/dev/null | awk '/^:(KUBE|CNI|CROFT-NODE)-/ {print substr($1, 2)}'); do $ipt -t $t -X "$c" || true; done
        done
    done
}

stop_pid() {
    local name=$1 pid
    [ -f "$run/$name.pid" ] || return 0
    pid=$(cat "$run/$name.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait_gone "$pid"
    rm -f "$run/$name.pid"
}

wait_gone() { # until every pid given has exited (10 s at most): down must not return before they have
    local pid
    for _ in $(seq 100); do
        for pid in "$@"; do kill -0 "$pid" 2>/dev/null && break; pid=; done
        [ -z "${pid:-}" ] && return 0
        sleep 0.1
    done
}

remove_kubepods() { # the kubelet's cgroups, deepest first; a task still in one is killed first
    local hierarchy
    for _ in $(seq 50); do
        local left=
        for hierarchy in /sys/fs/cgroup /sys/fs/cgroup/*; do
            [ -d "$hierarchy/kubepods" ] || continue
            left=1
            find "$hierarchy/kubepods" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
            find "$hierarchy/kubepods" -depth -type d -exec rmdir {} + 2>/dev/null || true
        done
        [ -z "$left" ] && return 0
        sleep 0.2
    done
}

unmount_under() { # every mount at or below $1, deepest first
    awk -v r="$1" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
}

down() {
    [ -d "$run" ] || return 0
    local n c
    for n in metrics-api kube-proxy kubelet scheduler controller-manager apiserver etcd; do stop_pid "$n"; done
    # every pod's containers: killed, then deleted; their network namespaces remembered first
    if alive containerd; then
        for c in $(ctr_ containers ls -q 2>/dev/null); do
            ctr_ containers info "$c" 2>/dev/null | python3 -c 'import json, sys
for n in json.load(sys.stdin)["Spec"]["linux"]["namespaces"]:
    if n["type"] == "network" and n.get("path"):
        print(n["path"])' >>"$run/netns.leftover" 2>/dev/null || true
        done
        for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s KILL "$c" 2>/dev/null || true; done
        for _ in $(seq 50); do # until no task runs (a loaded machine can take seconds)
            ctr_ tasks ls 2>/dev/null | awk 'NR > 1 && $3 == "RUNNING"' | grep -q . || break
            sleep 0.2
        done
        for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$c" >/dev/null 2>&1 || true; done
        for c in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$c" >/dev/null 2>&1 || true; done
        for c in $(ctr_ snapshots ls 2>/dev/null | awk 'NR > 1 && $3 == "Active" {print $1}'); do
            ctr_ snapshots rm "$c" >/dev/null 2>&1 || true
        done
    fi
    stop_pid containerd
    # shims outlive containerd: any left for this node's containerd
    local pid
    local shims
    shims=$(pgrep -f "containerd-shim-runc-v2 -namespace k8s.io .*-address $run/containerd/containerd.sock" || true)
    for pid in $shims; do kill -9 "$pid" 2>/dev/null || true; done
    # shellcheck disable=SC2086 # one pid per word
    wait_gone $shims
    if [ -f "$run/netns.leftover" ]; then
        sort -u "$run/netns.leftover" | while read -r n; do
            case $n in /var/run/netns/cni-* | /run/netns/cni-*) ip netns del "$(basename "$n")" 2>/dev/null || true ;; esac
        done
    fi
    [ -x "$(cat "$run/node-bin" 2>/dev/null)/kube-proxy" ] && "$(cat "$run/node-bin")/kube-proxy" --cleanup >/dev/null 2>&1 || true
    iptables_cleanup
    # iptables-nft leaves the (now empty) tables it made: drop those that were not there before
    if [ -f "$run/nft-tables.saved" ]; then
        nft list tables 2>/dev/null | while read -r _ family name; do
            grep -qx "table $family $name" "$run/nft-tables.saved" || nft delete table "$family" "$name" 2>/dev/null || true
        done
    fi
    ip link del "$bridge" 2>/dev/null || true
    restore_sysctls $tunables $netsysctls
    # the kubelet's cgroups (cgroupfs driver): /kubepods in every hierarchy, deepest first, once empty
    remove_kubepods
    unmount_under "$run/"
    unmount_under "$cache/containerd-root/"
    unmount_under /run/containerd/
    if [ -f "$run/hostdirs.created" ]; then
        while read -r d; do
            case $d in
            /run/netns) unmount_under /run/netns/ && { umount /run/netns 2>/dev/null || true; } && rmdir /run/netns 2>/dev/null || true ;;
            *) rm -rf "$d" ;;
            esac
        done <"$run/hostdirs.created"
    fi
    [ -f "$run/br_netfilter.had" ] || { grep -qs '^br_netfilter ' /proc/modules && rmmod br_netfilter 2>/dev/null || true; }
    stop_pid lock-holder
    # anything still running from the run directory (a component's child): killed and waited for
    local strays
    strays=$(pgrep -f "$run/" || true)
    for pid in $strays; do kill -9 "$pid" 2>/dev/null || true; done
    # shellcheck disable=SC2086 # one pid per word
    wait_gone $strays
    rm -rf "$run"
}

case ${1:-} in
build) build ;;
images) images ;;
image-build)
    shift
    image_build "$@"
    ;;
up) up ;;
down) down ;;
env) print_env ;;
*)
    echo "usage: $0 build|images|up|down|env|image-build TAG CONTEXT DOCKERFILE" >&2
    exit 2
    ;;
esac
