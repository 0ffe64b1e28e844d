"""Hypothesis strategies for the dataset's value types, shared by every test module."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from croft.domain.dataset.row import (
    UNIX_MS_MAX,
    WORKLOADS,
    CgroupUsage,
    GpuEngine,
    GpuUse,
    Ingress,
    Pod,
    Process,
    Row,
    SyscallRate,
    Usage,
)

rates = st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)
fractions = st.floats(min_value=0, max_value=1, allow_nan=False)
percent = st.floats(min_value=0, max_value=100, allow_nan=False)
counts = st.integers(min_value=0, max_value=2**63 - 1)
text = st.text(max_size=40)
hex_ids = st.text(alphabet="0123456789abcdef", min_size=12, max_size=64)

processes = st.builds(
    Process,
    comm=text,
    exe=text,
    cmdline=st.none() | st.text(max_size=256),
    cgroup=text,
    container_id=st.none() | hex_ids,
    cwd=text,
    framework=st.none() | st.sampled_from(["pytorch", "jax", "vllm", "ollama"]),
)
usages = st.builds(
    Usage,
    cpu_cores=rates,
    rss_bytes=counts,
    threads=st.integers(min_value=1, max_value=100_000),
    ctx_voluntary_s=rates,
    ctx_involuntary_s=rates,
    read_bytes_s=st.none() | rates,  # None: croft could not read it (left out of the line)
    write_bytes_s=st.none() | rates,
    network_rx_bytes_s=st.none() | rates,
    network_tx_bytes_s=st.none() | rates,
    runqueue_s=st.none() | rates,
)
cgroup_usages = st.builds(
    CgroupUsage,
    cpu_cores=st.none() | rates,  # None: the row's cgroup does not offer it (left out of the line)
    cpu_throttled_fraction=st.none() | fractions,
    memory_bytes=st.none() | counts,
    oom_kills=st.none() | counts,
    cpu_pressure_avg10=st.none() | percent,
    memory_pressure_avg10=st.none() | percent,
    io_pressure_avg10=st.none() | percent,
)
ingresses = st.builds(
    Ingress,
    tcp_passive_opens_s=rates,
    tcp_in_segs_s=rates,
    rx_packets_s=rates,
    rx_bytes_s=rates,
    listen_drops_s=rates,
    listen_backlog=counts,
    unread_bytes=counts,
    tcp_data_segments_s=st.none() | rates,
    tcp_connections_s=st.none() | rates,
)
gpu_engines = st.builds(GpuEngine, name=st.text(min_size=1, max_size=16), busy_percent=percent)
gpu_uses = st.builds(
    GpuUse,
    index=st.integers(min_value=0, max_value=63),
    uuid=st.none() | text,
    gpu_instance_id=st.none() | st.integers(min_value=0, max_value=14),
    compute_instance_id=st.none() | st.integers(min_value=0, max_value=7),
    driver=st.none() | st.sampled_from(["amdgpu", "i915", "xe", "msm"]),
    pci=st.none() | st.just("0000:03:00.0"),
    memory_bytes=st.none() | counts,
    sm_percent=st.none() | percent,
    memory_bandwidth_percent=st.none() | percent,
    encoder_percent=st.none() | percent,
    decoder_percent=st.none() | percent,
    engines=st.none() | st.lists(gpu_engines, min_size=1, max_size=4).map(tuple),
)
pods = st.builds(Pod, namespace=text, name=text, container=st.none() | text)
syscall_rates = st.builds(SyscallRate, name=st.text(min_size=1, max_size=24), rate_per_sec=rates)


@st.composite
def rows(draw: st.DrawFn) -> Row:
    gpu = draw(st.booleans())
    return Row(
        unix_ms=draw(st.integers(min_value=0, max_value=UNIX_MS_MAX)),
        tgid=draw(st.integers(min_value=1, max_value=2**22)),
        process=draw(processes),
        workload=draw(st.sampled_from(WORKLOADS)) if gpu else "no-gpu",
        usage=draw(usages),
        cgroup_usage=draw(cgroup_usages),
        syscalls=tuple(draw(st.lists(syscall_rates, max_size=6))),
        ioctl_count=draw(counts) if gpu else None,
        since_last_gpu_ioctl_ms=draw(counts) if gpu else None,
        label=draw(st.none() | text),
        ingress=draw(st.none() | ingresses),
        gpus=draw(st.lists(gpu_uses, min_size=1, max_size=3).map(tuple))
        if gpu and draw(st.booleans())
        else None,
        node=draw(st.none() | text),
        pod=draw(st.none() | pods),
    )


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into the nested dicts and lists of `value`."""
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += paths(inner, (*prefix, index))
    return found
