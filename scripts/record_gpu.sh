#!/usr/bin/env bash
# Record croft on a real NVIDIA GPU, beside nvidia-smi, in one run of a few minutes.
#
#   scripts/record_gpu.sh prepare   here, before: the Python 3.12 wheels croft needs that the GPU
#                                   machine lacks, into .whl/ (ignored by git); run it in the checkout
#                                   the device tool sends
#   scripts/record_gpu.sh record    on the GPU machine, as root, with OUT set (the device tool's run):
#                                   everything it made comes back under $OUT
#   scripts/record_gpu.sh dry-run   here, without a GPU: the same steps with a stand-in nvidia-smi and
#                                   a CPU workload, into $OUT (a new temporary directory when unset)
#
# The device tool's command (carry .whl; about 2-3 minutes, under 8 with the machine's start):
#   bash scripts/record_gpu.sh record
#
# What `record` does, failing loudly at the first step that cannot work:
#   1. checks: root, nvidia-smi lists a GPU, torch or CuPy sees it; installs .whl/ into a scratch
#      site and imports croft from src/;
#   2. starts croft's collector with --record: `croft run` when its eBPF programs load (ioctl counts
#      and onset times from the kernel), else scripts/record_gpu.py collect (croft run without eBPF:
#      NVML, procfs, /dev/nvidia files), and waits for its first poll;
#   3. logs `nvidia-smi pmon -s um -o DT -d 1` and `nvidia-smi --query-compute-apps` every second
#      (TZ=UTC), runs scripts/gpu_workload.py (hold, busy, half busy, idle: about 64 s) and, during
#      it, scripts/record_nvml.py for 12 polls (raw NVML answers, the fake's format);
#   4. stops everything, replays the trace (croft run --replay) and checks the replay gives the live
#      rows byte for byte, then scripts/record_gpu.py compare: memory within 5 %, SM utilisation
#      within 10 points per phase, gpu-onset at the CUDA context;
#   5. packs it all into $OUT/record_gpu.tar.gz, beside $OUT/summary.json and $OUT/record_gpu.log.
#   (during the workload it also runs the gpu-marked tests of tests/kernel/test_nvml.py on the real NVML.)
# The exit status is compare's: 0 when croft agrees with nvidia-smi, 1 when a check failed.
#
# To commit a recording (then tests/integration/test_gpu_recording.py checks it, and
# test_replay_golden replays it byte for byte):
#   tar -xzf record_gpu.tar.gz -C /tmp/rec
#   mkdir fixtures/traces/gpu-h100 && cp /tmp/rec/trace/*.jsonl.zst /tmp/rec/{phases.json,pmon.txt,apps.csv,gpus.txt,summary.json} fixtures/traces/gpu-h100/
#   cp /tmp/rec/nvml.json fixtures/nvml/h100_recorded.json   # and name it in fixtures/nvml/README.md
#   .venv/bin/pytest tests/integration/test_replay_golden.py --regen-golden   # writes fixtures/golden/gpu-h100.jsonl
set -euo pipefail

MODE=${1:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WHEELS=(
    attrs==26.1.0 cattrs==26.2.1 cyclopts==5.5.2 docstring_parser==0.18.0 markdown-it-py==4.3.0
    mdurl==0.1.2 msgspec==0.23.0 nvidia-ml-py==13.615.71 Pygments==2.21.0 rich==15.0.0 rich-rst==2.2.0
    typing_extensions==4.16.0 zstandard==0.25.0
)
SCALE=${RECORD_GPU_SCALE:-1.0}  # the workload's phase lengths (scripts/gpu_workload.py)

die() {
    echo "record_gpu: $*" >&2
    exit 1
}

prepare() {
    local exclude
    exclude=$(git -C "$REPO" rev-parse --git-path info/exclude)
    case $exclude in /*) ;; *) exclude=$REPO/$exclude ;; esac
    grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
    mkdir -p "$REPO/.whl"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$REPO/.whl" "${WHEELS[@]}"
    echo "record_gpu: $(ls "$REPO/.whl" | wc -l) wheels in $REPO/.whl ($(du -sh "$REPO/.whl" | cut -f1)); carry .whl"
}

# Wait for the first poll of the collector `pid` in the trace directory: 1 when it exits or
# `seconds` pass first.
first_poll() {
    local trace=$1 pid=$2 seconds=$3
    for _ in $(seq $((seconds * 10))); do
        [[ -n $(compgen -G "$trace/*.jsonl.zst") ]] && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Stop a background process by its pid (SIGTERM, then SIGKILL after `grace` seconds).
stop() {
    local pid=$1 grace=${2:-15}
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq $((grace * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

record() {
    local dry=$1
    : "${OUT:?OUT must name the directory whatever comes back goes to}"
    mkdir -p "$OUT"
    local py workload_args=()
    work=$(mktemp -d /tmp/record_gpu.XXXXXX)  # global: the EXIT trap packs it
    exec > >(tee -a "$OUT/record_gpu.log") 2>&1
    echo "record_gpu: $(date -u +%FT%TZ) mode $MODE, work in $work, commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    # Whatever happens, what was made comes back.
    trap 'tar -czf "$OUT/record_gpu.tar.gz" -C "$work" --exclude site . 2>/dev/null || true' EXIT

    if [[ $dry == 1 ]]; then
        py=${PYTHON:-$REPO/.venv/bin/python}
        [[ -x $py ]] || die "no $py: run make install first"
        mkdir -p "$work/bin"
        cp "$REPO/scripts/fake_nvidia_smi.py" "$work/bin/nvidia-smi"
        chmod +x "$work/bin/nvidia-smi"
        sed -i "1s|.*|#!$py|" "$work/bin/nvidia-smi"
        export PATH=$work/bin:$PATH
        workload_args=(--cpu)
        export PYTHONPATH=$REPO/src
    else
        py=${PYTHON:-python3}
        [[ $(id -u) == 0 ]] || die "needs root (croft reads every process's /proc files)"
        command -v nvidia-smi >/dev/null || die "no nvidia-smi: this is no NVIDIA GPU machine"
        compgen -G "$REPO/.whl/*.whl" >/dev/null \
            || die "no wheels in $REPO/.whl: run 'scripts/record_gpu.sh prepare' before, and carry .whl"
        "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$work/site" "$REPO"/.whl/*.whl || die "the wheels of .whl/ did not install"
        export PYTHONPATH=$REPO/src:$work/site
        "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null \
            || "$py" -c 'import cupy; cupy.cuda.runtime.getDeviceCount()' \
            || die "neither torch nor CuPy sees a CUDA device"
    fi
    nvidia-smi -L | tee "$work/gpus.txt"
    grep -q '^GPU ' "$work/gpus.txt" || die "nvidia-smi lists no GPU"
    "$py" -c 'import croft.app.bootstrap, croft.adapters.host.nvml, msgspec, zstandard, pynvml' \
        || die "croft does not import with $py"
    cd "$REPO"

    # 2. The collector, its first poll awaited: croft run when its eBPF programs load, else without.
    # It watches this script's own cgroup too, so the workload has rows before it holds a GPU.
    local collector="" trace=$work/trace dataset=$work/dataset/croft-dataset.jsonl ebpf=0 watch
    watch=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
    [[ -n $watch && $watch != / ]] || watch=/
    mkdir -p "$work/dataset"
    if [[ $dry == 0 ]] && "$py" -c 'import bcc' 2>/dev/null; then
        "$py" -m croft run --record "$trace" --dataset "$dataset" --node gpu-recording --watch "$watch" &
        collector=$!
        if first_poll "$trace" "$collector" 90; then
            ebpf=1
        else
            echo "record_gpu: croft run made no first poll (its eBPF programs did not load?): recording without eBPF"
            stop "$collector"
            rm -rf "$trace" "$work/dataset"
            mkdir -p "$work/dataset"
        fi
    fi
    if [[ $ebpf == 0 ]]; then
        "$py" scripts/record_gpu.py collect "$dataset" "$trace" --node gpu-recording --watch "$watch" &
        collector=$!
        first_poll "$trace" "$collector" 30 || die "the collector made no first poll in 30 s"
    fi
    echo "record_gpu: collector $collector polling (eBPF: $ebpf, watching $watch)"
    echo "{\"ebpf\": $ebpf, \"dry_run\": $dry}" >"$work/mode.json"

    # 3. nvidia-smi beside it, the workload, the raw NVML answers.
    TZ=UTC nvidia-smi pmon -s um -o DT -d 1 >"$work/pmon.txt" 2>&1 &
    local pmon=$!
    TZ=UTC nvidia-smi --query-compute-apps=timestamp,pid,used_memory,gpu_uuid \
        --format=csv,noheader,nounits -l 1 >"$work/apps.csv" 2>&1 &
    local apps=$!
    timeout 300 "$py" scripts/gpu_workload.py "$work/phases.json" --scale "$SCALE" "${workload_args[@]}" &
    local workload=$!
    sleep "$(awk "BEGIN {print 10 * $SCALE}")"
    timeout 120 "$py" scripts/record_nvml.py "$work/nvml.json" --polls 12 --interval "$(awk "BEGIN {print 2 * $SCALE}")" \
        || echo "record_gpu: record_nvml.py failed (see above); going on"
    if [[ $dry == 0 ]]; then  # croft's real-NVML contract tests, while the workload holds the GPU
        timeout 60 "$py" -m pytest -q -p no:cacheprovider -m gpu tests/kernel/test_nvml.py \
            --junitxml "$work/pytest-gpu.xml" || echo "record_gpu: the gpu-marked NVML tests failed (see above)"
    fi
    wait "$workload" || die "the workload failed (exit $?)"
    sleep 6  # the polls after it exited
    stop "$collector"
    stop "$pmon" 2
    stop "$apps" 2

    # 4. Replay, compare.
    "$py" -m croft run --replay "$trace" --dataset "$work/replayed/croft-dataset.jsonl" \
        || die "the replay of the trace failed"
    if cmp -s "$dataset" "$work/replayed/croft-dataset.jsonl"; then replayed=true; else replayed=false; fi
    echo "record_gpu: the replay gives the live rows byte for byte: $replayed"
    local code=0
    "$py" scripts/record_gpu.py compare "$dataset" "$work/phases.json" "$work/pmon.txt" "$work/apps.csv" \
        "$work/summary.json" || code=$?
    "$py" - "$work/summary.json" "$work/mode.json" "$replayed" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
summary.update(json.load(open(sys.argv[2])), replay_equal=sys.argv[3] == "true")
json.dump(summary, open(sys.argv[1], "w"), indent=2)
PY
    [[ $replayed == true ]] || code=1
    cp "$work/summary.json" "$OUT/summary.json"
    if [[ $dry == 1 ]]; then  # no GPU: the checks cannot pass, every step ran
        [[ $replayed == true && -s $OUT/summary.json ]] || die "a step of the dry run failed"
        code=0
    fi
    echo "record_gpu: done, exit $code; $OUT/record_gpu.tar.gz holds the trace, both datasets and nvidia-smi's logs"
    return "$code"
}

case $MODE in
    prepare) prepare ;;
    record) record 0 ;;
    dry-run)
        export OUT=${OUT:-$(mktemp -d /tmp/record_gpu_out.XXXXXX)}
        export RECORD_GPU_SCALE=${RECORD_GPU_SCALE:-0.15}
        SCALE=$RECORD_GPU_SCALE
        record 1
        ;;
    *) die "give prepare, record or dry-run (see the head of $0)" ;;
esac
