"""The loaders every real-kernel test runs on: the CO-RE object through libbpf, and the same
sources compiled by BCC (tests/kernel/conftest.py's `loader` fixture runs a test once per loader);
a loader this host cannot have skips, saying why."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from croft.adapters.host.core_loader import has_btf
from croft.adapters.host.ebpf_source import EbpfKernelSource, Loader, load_kernel_source

LOADERS = ("core", "bcc")


def skip_unless_loadable(loader: str) -> None:
    """Skip where `loader` cannot run here: not root, no BTF (CO-RE), no BCC or headers (BCC)."""
    if os.geteuid() != 0:
        pytest.skip("loading eBPF programs needs root")
    if loader == "core" and not has_btf():
        pytest.skip("this kernel has no BTF (/sys/kernel/btf/vmlinux): no CO-RE")
    if loader == "bcc":
        if importlib.util.find_spec("bcc") is None:
            pytest.skip("no bcc module in this venv: make bpf-setup")
        if not (Path("/lib/modules") / os.uname().release / "build" / "include").is_dir():
            pytest.skip("no kernel headers for BCC: make bpf-setup")


def open_source(loader: str, **options: Any) -> EbpfKernelSource:
    """croft's programs loaded by `loader` (the options of `load_kernel_source`)."""
    skip_unless_loadable(loader)
    kind: Loader = "core" if loader == "core" else "bcc"
    return load_kernel_source(kind, **options)
