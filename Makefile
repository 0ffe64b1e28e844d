# Two commands do all the set-up on a fresh Debian machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two tiers in one venv: `make run` installs croft and what the collector needs (the project's
# dependencies); `make test`, `make check`, `make lint` and `make bench` add the `dev` extras.
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
# `make run` links the venv's croft here (root only), so `croft top` works in another terminal.
CROFT_LINK ?= /usr/local/bin/croft

.PHONY: run test check lint bench install install-runtime clean bpf bpf-setup bpf-setup-bcc k8s-setup \
	node-setup system-deps arm64-setup croft-link

# croft is pure Python (one py3-none-any wheel, tests/packaging): no compiler, no headers.
$(RUNTIME): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install-runtime: $(RUNTIME)

install: $(STAMP)

# The CO-RE objects (src/croft/bpf/croft.{x86,arm64}.bpf.o) and syscall tables, rebuilt from
# bpf/*.c and *.h and committed (the tests fail while they are older than their sources). Needs
# clang, llvm and libbpf-dev (installed here, root only); nobody else ever needs them.
bpf:
	bash scripts/system-deps.sh bpf
	bash scripts/build-bpf.sh

# Root only (a no-op otherwise): libbpf1 and tracefs, what the CO-RE programs need. With
# CROFT_EBPF=bcc, BCC's set-up too. bpf-setup-bcc: BCC, kernel headers and bcc in the venv as well
# (the tests and benchmarks run both loaders). See README, eBPF.
bpf-setup: $(RUNTIME)
	bash scripts/setup-bpf.sh $(if $(filter bcc,$(CROFT_EBPF)),--bcc) $(VENV)

bpf-setup-bcc: $(STAMP)
	bash scripts/setup-bpf.sh --bcc $(VENV)

# Builds (once, cached in /var/cache/croft-k8s) the kube-apiserver the k8s tests start, and in the same
# Go build the node binaries node-setup takes. A machine that cannot build it still runs every other
# test; the k8s tests then skip saying why.
k8s-setup:
	bash scripts/kube-apiserver.sh build >/dev/null || echo "k8s-setup: no kube-apiserver; the k8s tests will skip"

# Builds (once, cached in /var/cache/croft-k8s) the real node the `node` tests start: kubelet,
# kube-scheduler, kube-proxy (k8s-setup built them), the pause image and a Debian base root file
# system (mmdebstrap).
# A machine that cannot build it still runs every other test; the node tests then skip saying why.
node-setup: k8s-setup
	bash scripts/kube-node.sh build >/dev/null && bash scripts/kube-node.sh images >/dev/null \
		|| echo "node-setup: no test node; the node tests will skip"

# The venv's croft on root's PATH (and every user's: /usr/local/bin), so the README's next step,
# `croft top` in another terminal, works as written. A croft there that is not a link is left alone.
croft-link: $(RUNTIME)
	@if [ "$$(id -u)" -ne 0 ]; then echo "croft-link: not root; the commands are in $(BIN)/croft"; \
	elif [ -e $(CROFT_LINK) ] && [ ! -L $(CROFT_LINK) ]; then \
		echo "croft-link: $(CROFT_LINK) is not a link, left alone; the commands are in $(BIN)/croft"; \
	else ln -sfn $(abspath $(BIN))/croft $(CROFT_LINK) && echo "croft-link: $(CROFT_LINK) -> $(abspath $(BIN))/croft"; fi

# Builds (once, cached in /var/cache/croft-arm64) the arm64 Debian root file system, run through
# qemu-user-static, in which the `arm64` test installs the wheel (scripts/arm64.sh). Root only; the
# test skips, saying why, where this machine cannot run arm64 programs, and fails on anything else.
arm64-setup:
	bash scripts/arm64.sh setup >/dev/null || echo "arm64-setup: no arm64 root file system; the arm64 test will say why"

# The collector on this host, as root. Without a GPU only watched cgroups give rows: e.g.
# `WATCH_CGROUPS=system.slice,user.slice make run`. Every option reads its env variable (README);
# CROFT_EBPF picks the eBPF loader (auto: the CO-RE programs, no compiler or kernel headers).
run: $(RUNTIME) bpf-setup croft-link
	@echo "croft run: dataset $${DATASET_PATH:-/var/lib/croft/croft-dataset.jsonl}, GPU holders and the cgroups in WATCH_CGROUPS ($${WATCH_CGROUPS:-none}); Ctrl-C stops it"
	$(BIN)/croft run

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks labs
	$(BIN)/ruff format --check src tests benchmarks labs
	$(BIN)/mypy
	$(BIN)/lint-imports

# Debian packages the tests need (pidstat, ...), root only.
system-deps:
	bash scripts/system-deps.sh

# The quick tier, for every change: lint, and the tests that need no root, kernel, cluster, Spark or
# arm64 root file system, on every core (pytest-xdist; a test module stays on one worker, so its
# fixtures are made once). `make test` runs everything, one test at a time, as CI does.
CHECK_MARKERS := not (root or bpf or k8s or node or gpu or spark or arm64)
check: lint
	$(BIN)/pytest -m "$(CHECK_MARKERS)" -n auto --dist loadfile --durations=10

test: lint bpf-setup-bcc k8s-setup node-setup arm64-setup system-deps
	$(BIN)/pytest

bench: $(STAMP) bpf-setup-bcc
	$(BIN)/python benchmarks/readers.py
	$(BIN)/python benchmarks/summaries.py
	$(BIN)/python benchmarks/ebpf_overhead.py
	# croft run with the CO-RE programs against BCC: start, first row, RSS, CPU at 1,000 and 10,000 processes.
	$(BIN)/python benchmarks/collector_run.py
	$(BIN)/python benchmarks/rotation.py
	$(BIN)/python benchmarks/cmdline_cost.py
	$(BIN)/python benchmarks/collector.py
	$(BIN)/python benchmarks/scale.py
	# The simulated answer: HPA vs croft scale on the bursts, N seeds, table + PNG (labs/research/experiment).
	$(BIN)/python labs/research/experiment/run.py answer
	$(BIN)/python benchmarks/metrics.py
	$(BIN)/python benchmarks/counters_vs_gauges.py
	$(BIN)/python benchmarks/collect.py
	$(BIN)/python benchmarks/collect.py --segment-mb 64 --live-mb 160
	$(BIN)/python benchmarks/export.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
