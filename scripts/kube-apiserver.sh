#!/usr/bin/env bash
# A real, local Kubernetes control plane for croft's `k8s` tests: etcd + kube-apiserver (token auth,
# RBAC, self-signed certificates) + kube-controller-manager on loopback ports. No kubelet: pods stay
# Pending unless a test patches their status.
#
#   scripts/kube-apiserver.sh build          build (or reuse) the binaries; prints their directory
#   scripts/kube-apiserver.sh start          build if needed, start everything, wait for /readyz
#   scripts/kube-apiserver.sh stop           stop everything `start` started
#   scripts/kube-apiserver.sh stop-apiserver / start-apiserver   restart only the API server
#   scripts/kube-apiserver.sh env            print KEY=value lines for a running control plane
#
# Build: no registry ships kube-apiserver, but Debian bookworm's `kubernetes` source package (1.20.2)
# is the full vendored tree. It is built with Debian's golang-go, after replacing the vendored
# modern-go/reflect2 and json-iterator/go with Debian's copies (/usr/share/gocode/src): the vendored
# reflect2 crashes under Go >= 1.18. The apt packages are installed idempotently (apt-get update only
# when one is missing); the deb-src entry lives in a private apt configuration under the cache, so the
# system's sources and package lists are untouched.
#
# The binaries are cached outside the checkout, keyed by the source version:
#   $CROFT_K8S_CACHE (default /var/cache/croft-k8s)/<version>/bin/{kube-apiserver,kube-controller-manager,kubectl}
# and, for scripts/kube-node.sh, <version>/node-bin/{kubelet,kube-scheduler,kube-proxy} and src/pause.c.
# A fresh machine builds them once (one `make`, 1.4 GB peak); later runs reuse them.
# The running control plane keeps its state in $CROFT_K8S_RUN (default /tmp/croft-k8s): certificates,
# tokens, kubeconfig, etcd data, logs and pid files.
set -euo pipefail

cache=${CROFT_K8S_CACHE:-/var/cache/croft-k8s}
run=${CROFT_K8S_RUN:-/tmp/croft-k8s}
etcd_port=${CROFT_K8S_ETCD_PORT:-23790}
etcd_peer_port=${CROFT_K8S_ETCD_PEER_PORT:-23800}
api_port=${CROFT_K8S_API_PORT:-16443}

say() { echo "kube-apiserver.sh: $*" >&2; }
die() {
    say "$*"
    exit 1
}

packages=(golang-go etcd-server etcd-client rsync dpkg-dev openssl curl
    golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev)

install_packages() {
    local missing=() package
    for package in "${packages[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$package")
        fi
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || die "needs root to install ${missing[*]}; run it once as root or install them"
    say "installing ${missing[*]}"
    local apt=(apt-get -o DPkg::Lock::Timeout=600 -qq)
    "${apt[@]}" update
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
}

# apt-get with a private configuration that only knows Debian's deb-src entry: its own source list,
# package lists and cache under $cache/apt, nothing of /etc/apt's sources touched.
private_apt() {
    local tool=$1 dir=$cache/apt
    shift
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/sources.list.d"
    # The machine's own Debian mirror, read from its apt sources (deb822 or one-line format).
    local mirror
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    [ -n "$mirror" ] || { echo "kube-apiserver.sh: no Debian mirror in the apt sources" >&2; return 1; }
    [ -f "$dir/sources.list" ] ||
        echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main" \
            >"$dir/sources.list"
    "$tool" -qq -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts="$dir/sources.list.d" \
        -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o APT::Sandbox::User=root "$@"
}

source_version() {
    if ! ls "$cache/apt/lists/"*_Sources* >/dev/null 2>&1; then
        private_apt apt-get update >&2
    fi
    private_apt apt-cache showsrc kubernetes 2>/dev/null | awk '/^Version:/ { print $2; exit }'
}

bin_dir_for() { echo "$cache/$1/bin"; }

built_bin_dir() {
    local dir
    for dir in "$cache"/*/bin; do
        if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/kube-controller-manager" ] && [ -x "$dir/kubectl" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

do_build() {
    install_packages
    local version bin work started
    version=$(source_version)
    [ -n "$version" ] || die "Debian has no kubernetes source package in bookworm; cannot build kube-apiserver"
    bin=$(bin_dir_for "$version")
    if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/kubectl" ]; then
        echo "$bin"
        return 0
    fi
    work=$cache/$version/build
    say "building kubernetes $version in $work (several minutes; log below)"
    started=$(date +%s)
    rm -rf "$work"
    mkdir -p "$work"
    (cd "$work" && private_apt apt-get source --download-only kubernetes >/dev/null)
    (cd "$work" && dpkg-source --no-check -x ./*.dsc tree >/dev/null)
    local tree=$work/tree
    for module in github.com/modern-go/reflect2 github.com/json-iterator/go; do
        [ -d "/usr/share/gocode/src/$module" ] || die "/usr/share/gocode/src/$module is missing"
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
        # The test node's binaries too (kube-node.sh build finds them there): one unpacked tree and
        # one run of the code generators instead of two. They cost little more than linking.
        make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kubectl cmd/kubelet cmd/kube-scheduler cmd/kube-proxy"
    ) >&2
    local nodebin=$cache/$version/node-bin
    mkdir -p "$bin.partial" "$nodebin.partial" "$cache/$version/src"
    for name in kube-apiserver kube-controller-manager kubectl; do
        cp "$tree/_output/local/go/bin/$name" "$bin.partial/$name"
    done
    for name in kubelet kube-scheduler kube-proxy; do
        cp "$tree/_output/local/go/bin/$name" "$nodebin.partial/$name"
    done
    cp "$tree/build/pause/linux/pause.c" "$cache/$version/src/pause.c"   # all kube-node.sh images needs of the tree
    rm -rf "$bin" "$nodebin"
    mv "$nodebin.partial" "$nodebin"
    mv "$bin.partial" "$bin"
    rm -rf "$work" "$cache/$version/gocache"
    say "built kubernetes $version in $(($(date +%s) - started)) s: $bin"
    echo "$bin"
}

build() {
    mkdir -p "$cache"
    # One build at a time on this machine (CI and tests may ask together); the second waits and reuses.
    exec 9>"$cache/.build.lock"
    flock 9
    if [ -z "${CROFT_K8S_REBUILD:-}" ] && built_bin_dir >/dev/null; then
        install_packages
        built_bin_dir
    else
        do_build
    fi
    exec 9>&-
}

make_certs() {
    local pki=$run/pki
    [ -f "$pki/apiserver.crt" ] && return 0
    mkdir -p "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=croft-test-ca" \
        -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
        -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' >"$pki/san.ext"
    openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 3650 -extfile "$pki/san.ext" -out "$pki/apiserver.crt" 2>/dev/null
    openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
    openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
    local token
    token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
    echo "$token" >"$run/admin.token"
    echo "$token,admin,admin,system:masters" >"$pki/tokens.csv"
    cat >"$run/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: croft-test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: croft-test
  context: {cluster: croft-test, user: admin}
current-context: croft-test
EOF
}

# Starts "$@" in the background as component $1, its output in $run/$1.log, its pid in $run/$1.pid.
spawn() {
    local name=$1
    shift
    setsid "$@" >>"$run/$name.log" 2>&1 </dev/null &
    echo $! >"$run/$name.pid"
}

alive() { [ -f "$run/$1.pid" ] && kill -0 "$(cat "$run/$1.pid")" 2>/dev/null; }

wait_ready() {
    local token deadline
    token=$(cat "$run/admin.token")
    deadline=$(($(date +%s) + ${CROFT_K8S_START_TIMEOUT:-90}))
    until curl -fsS --max-time 2 --cacert "$run/pki/ca.crt" -H "Authorization: Bearer $token" \
        "https://127.0.0.1:$api_port/readyz" >/dev/null 2>&1; do
        alive apiserver || die "kube-apiserver exited; see $run/apiserver.log"
        [ "$(date +%s)" -lt "$deadline" ] || die "kube-apiserver not ready in time; see $run/apiserver.log"
        sleep 0.2
    done
}

start_etcd() {
    alive etcd && return 0
    spawn etcd etcd --name croft-test --data-dir "$run/etcd" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
        --initial-cluster "croft-test=http://127.0.0.1:$etcd_peer_port" \
        --listen-metrics-urls "" --log-level warn
    local deadline=$(($(date +%s) + 30))
    until ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$etcd_port" endpoint health >/dev/null 2>&1; do
        alive etcd || die "etcd exited; see $run/etcd.log"
        [ "$(date +%s)" -lt "$deadline" ] || die "etcd not healthy in time; see $run/etcd.log"
        sleep 0.2
    done
}

start_apiserver() {
    local bin=$1
    if ! alive apiserver; then
        local pki=$run/pki
        spawn apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
            --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
            --insecure-port 0 --token-auth-file "$pki/tokens.csv" --authorization-mode RBAC \
            --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
            --client-ca-file "$pki/ca.crt" --service-cluster-ip-range 10.96.0.0/16 \
            --service-account-issuer https://kubernetes.default.svc \
            --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
            --enable-priority-and-fairness=false --profiling=false --v 1
    fi
    wait_ready
}

start_controller_manager() {
    local bin=$1
    alive controller-manager && return 0
    spawn controller-manager "$bin/kube-controller-manager" --kubeconfig "$run/kubeconfig" \
        --bind-address 127.0.0.1 --secure-port 0 --port 0 --leader-elect=false \
        --service-account-private-key-file "$run/pki/sa.key" --root-ca-file "$run/pki/ca.crt" \
        --use-service-account-credentials=false --profiling=false --v 1
}

print_env() {
    local bin
    bin=$(cat "$run/bin-dir")
    echo "KUBECONFIG=$run/kubeconfig"
    echo "CROFT_K8S_SERVER=https://127.0.0.1:$api_port"
    echo "CROFT_K8S_CA=$run/pki/ca.crt"
    echo "CROFT_K8S_TOKEN=$(cat "$run/admin.token")"
    echo "CROFT_K8S_BIN=$bin"
    echo "CROFT_K8S_RUN=$run"
}

start() {
    local bin
    bin=$(build)
    mkdir -p "$run"
    echo "$bin" >"$run/bin-dir"
    make_certs
    start_etcd
    start_apiserver "$bin"
    start_controller_manager "$bin"
    print_env
}

stop_one() {
    local name=$1 pid
    [ -f "$run/$name.pid" ] || return 0
    pid=$(cat "$run/$name.pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$run/$name.pid"
}

stop() {
    stop_one controller-manager
    stop_one apiserver
    stop_one etcd
    rm -rf "$run"
}

case ${1:-} in
build) build ;;
start) start ;;
stop) stop ;;
stop-apiserver) stop_one apiserver ;;
start-apiserver) start_apiserver "$(cat "$run/bin-dir")" ;;
env) print_env ;;
*)
    echo "usage: $0 build|start|stop|stop-apiserver|start-apiserver|env" >&2
    exit 2
    ;;
esac
