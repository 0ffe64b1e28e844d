# Two commands do all the set-up on a fresh Debian machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench install clean bpf-setup k8s-setup node-setup system-deps

# The install builds croft's C modules (croft stats' fast path, croft scale's line scanner;
# setup.py): the compiler and Python's headers come first (scripts/system-deps.sh build, root
# only), and the install fails here, loudly, when a module did not build.
$(STAMP): pyproject.toml setup.py src/croft/domain/metrics/_linescan.c
	bash scripts/system-deps.sh build
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -c 'import croft.domain.metrics._linescan' \
		|| { echo "install: croft's C modules did not build (needs gcc and python3-dev)" >&2; exit 1; }
	touch $(STAMP)

install: $(STAMP)

# Root only (a no-op otherwise): BCC, kernel headers, tracefs, bcc in the venv. See README, eBPF.
bpf-setup: $(STAMP)
	bash scripts/setup-bpf.sh $(VENV)

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

# The collector on this host, as root. Without a GPU only watched cgroups give rows: e.g.
# `WATCH_CGROUPS=system.slice,user.slice make run`. Every option reads its env variable (README).
run: $(STAMP) bpf-setup
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

test: lint bpf-setup k8s-setup node-setup system-deps
	$(BIN)/pytest

bench: $(STAMP) bpf-setup
	$(BIN)/python benchmarks/readers.py
	$(BIN)/python benchmarks/summaries.py
	$(BIN)/python benchmarks/ebpf_overhead.py
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
