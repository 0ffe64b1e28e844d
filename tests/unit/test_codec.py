"""The dataset's JSON shape: docs/dataset.md's example, key order, omitted fields, strictness."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given

from croft.domain.dataset import codec
from croft.domain.dataset.row import (
    CgroupUsage,
    GpuEngine,
    GpuUse,
    Ingress,
    Pod,
    Process,
    Row,
    ShortLived,
    SyscallRate,
    Usage,
)
from tests.helpers import strategies as s

# The example row of docs/dataset.md, with the elided ids written out.
SPEC_EXAMPLE = """{
  "unix_ms": 1792505950473,
  "tgid": 234758,
  "node": "gpu-a",
  "process": {
    "comm": "python",
    "exe": "/usr/local/bin/python3.12",
    "cmdline": "python train.py --epochs 10",
    "cgroup": "/system.slice/docker-33813f5d0c8e4a1bb0f2e5d7a9c3b1e4f6a8d0c2e4b6a8f0d2c4e6a8b0d2f4e6.scope",
    "container_id": "33813f5d0c8e4a1bb0f2e5d7a9c3b1e4f6a8d0c2e4b6a8f0d2c4e6a8b0d2f4e6",
    "cwd": "/workspace",
    "framework": "pytorch"
  },
  "workload": "gpu-held",
  "ioctl_count": 0,
  "since_last_gpu_ioctl_ms": 38794129,
  "usage": {
    "cpu_cores": 0.0, "rss_bytes": 1145397248, "threads": 104,
    "ctx_voluntary_s": 0.0, "ctx_involuntary_s": 0.0,
    "read_bytes_s": 0.0, "write_bytes_s": 0.0,
    "network_rx_bytes_s": 237.2, "network_tx_bytes_s": 514.4,
    "runqueue_s": 0.0
  },
  "cgroup_usage": {
    "cpu_cores": 0.004, "cpu_throttled_fraction": 0.0, "memory_bytes": 1511735296,
    "oom_kills": 0, "cpu_pressure_avg10": 0.0, "memory_pressure_avg10": 0.0, "io_pressure_avg10": 0.0
  },
  "syscalls": [{ "name": "futex", "rate_per_sec": 282.0 }]
}"""


def test_spec_example_round_trips_to_the_same_object_and_bytes() -> None:
    row = codec.decode_row(SPEC_EXAMPLE)
    assert row.process.framework == "pytorch"
    assert row.syscalls == (SyscallRate(name="futex", rate_per_sec=282.0),)
    assert codec.decode_row(codec.encode_row(row)) == row
    compact = json.dumps(json.loads(SPEC_EXAMPLE), separators=(",", ":")).encode() + b"\n"
    assert codec.encode_row(row) == compact


def test_the_row_classes_list_their_fields_in_the_on_disk_key_order() -> None:
    """row.py's field order is the order of the keys on disk (msgspec writes the fields in order)."""
    full = codec.decode_row(SPEC_EXAMPLE)
    full = msgspec.structs.replace(
        full,
        short_lived=ShortLived(processes=1, syscalls=full.syscalls),
        ingress=INGRESS,
        gpus=(NVML_USE,),
        label="a",
        pod=POD,
    )
    written = msgspec.json.decode(codec.encode_row(full))
    on_disk = ["unix_ms", "tgid", "node", "process", "pod", "workload", "ioctl_count",
               "since_last_gpu_ioctl_ms", "usage", "cgroup_usage", "syscalls", "short_lived", "ingress",
               "gpus", "label"]  # fmt: skip
    assert [key for key in on_disk if key in json.loads(SPEC_EXAMPLE)] == list(json.loads(SPEC_EXAMPLE))
    assert list(written) == on_disk == list(Row.__struct_fields__)
    for key, cls in (("process", Process), ("usage", Usage), ("cgroup_usage", CgroupUsage), ("pod", Pod)):
        assert list(written[key]) == list(cls.__struct_fields__)
    assert list(written["short_lived"]) == list(ShortLived.__struct_fields__)
    assert list(written["ingress"]) == list(Ingress.__struct_fields__)
    assert list(written["gpus"][0]) == list(GpuUse.__struct_fields__)


POD = Pod(namespace="ml", name="trainer-7d9f", container="trainer")


def test_pod_follows_process_and_is_left_out_without_names() -> None:
    """A container of a pod of the node carries its names; a host process, a collector without
    API access and older collectors write no `pod` key; the sandbox's process has no container."""
    assert "pod" not in msgspec.json.decode(codec.encode_row(_host_row()))
    keys = list(msgspec.json.decode(codec.encode_row(_host_row(pod=POD))))
    assert keys[2:4] == ["process", "pod"]
    sandbox = Pod(namespace="ml", name="trainer-7d9f")
    assert msgspec.json.decode(codec.encode_row(_host_row(pod=sandbox)))["pod"] == {
        "namespace": "ml",
        "name": "trainer-7d9f",
    }
    assert codec.decode_row(codec.encode_row(_host_row(pod=POD))).pod == POD
    with pytest.raises(codec.NotARow):
        codec.row_from_dict(msgspec.json.decode(codec.encode_row(_host_row())) | {"pod": {"name": "x"}})


def test_cmdline_follows_exe_and_is_left_out_without_arguments() -> None:
    row = _host_row()
    assert "cmdline" not in msgspec.json.decode(codec.encode_row(row))["process"]
    with_arguments = msgspec.structs.replace(
        row, process=msgspec.structs.replace(row.process, cmdline="bash -c 'sleep 1'")
    )
    process = msgspec.json.decode(codec.encode_row(with_arguments))["process"]
    assert list(process)[:3] == ["comm", "exe", "cmdline"] and process["cmdline"] == "bash -c 'sleep 1'"


INGRESS = Ingress(
    tcp_passive_opens_s=0.5,
    tcp_in_segs_s=36.0,
    rx_packets_s=36.0,
    rx_bytes_s=4100.0,
    listen_drops_s=0.0,
    listen_backlog=3,
    unread_bytes=1024,
    tcp_data_segments_s=12.0,
    tcp_connections_s=0.5,
)


def test_ingress_is_left_out_when_none_and_its_ebpf_fields_when_not_measured() -> None:
    assert "ingress" not in msgspec.json.decode(codec.encode_row(_host_row()))
    keys = list(msgspec.json.decode(codec.encode_row(_host_row(ingress=INGRESS, label="x"))))
    assert keys[-2:] == ["ingress", "label"]
    procfs_only = msgspec.structs.replace(INGRESS, tcp_data_segments_s=None, tcp_connections_s=None)
    line = codec.encode_row(_host_row(ingress=procfs_only))
    assert list(msgspec.json.decode(line)["ingress"]) == [
        "tcp_passive_opens_s", "tcp_in_segs_s", "rx_packets_s", "rx_bytes_s", "listen_drops_s",
        "listen_backlog", "unread_bytes",
    ]  # fmt: skip
    assert codec.decode_row(line).ingress == procfs_only
    assert codec.decode_row(codec.encode_row(_host_row(ingress=INGRESS))).ingress == INGRESS
    with pytest.raises(codec.NotARow):
        codec.row_from_dict(msgspec.json.decode(line) | {"ingress": {"listen_backlog": 1}})
    with pytest.raises(codec.NotARow):
        bad = msgspec.json.decode(line)
        bad["ingress"]["listen_backlog"] = 1.5
        codec.row_from_dict(bad)


# Every field set, as no one GPU gives them (NVML's MIG ids beside DRM's engines): the key order.
NVML_USE = GpuUse(
    index=0,
    uuid="GPU-4b1e6f0a-9c6e-3f4d-8a2b-6d1c2e9f7a10",
    gpu_instance_id=1,
    compute_instance_id=0,
    driver="nvidia",
    pci="0000:17:00.0",
    memory_bytes=1145397248,
    sm_percent=35.5,
    memory_bandwidth_percent=12.0,
    encoder_percent=0.0,
    decoder_percent=0.0,
    engines=(GpuEngine(name="gfx", busy_percent=3.25),),
)


def test_gpus_go_before_label_and_leave_out_what_the_source_did_not_say() -> None:
    assert "gpus" not in msgspec.json.decode(codec.encode_row(_host_row()))
    keys = list(msgspec.json.decode(codec.encode_row(_host_row(gpus=(NVML_USE,), label="x"))))
    assert keys[-2:] == ["gpus", "label"]
    amd = GpuUse(index=0, driver="amdgpu", pci="0000:03:00.0", memory_bytes=2 << 30)
    line = codec.encode_row(_host_row(gpus=(amd,)))
    assert msgspec.json.decode(line)["gpus"] == [
        {"index": 0, "driver": "amdgpu", "pci": "0000:03:00.0", "memory_bytes": 2 << 30}
    ]
    assert codec.decode_row(line).gpus == (amd,)
    with pytest.raises(codec.NotARow):  # a percentage is a number, an engine has a name
        codec.row_from_dict(msgspec.json.decode(line) | {"gpus": [{"index": 0, "sm_percent": "35"}]})
    with pytest.raises(codec.NotARow):
        codec.row_from_dict(
            msgspec.json.decode(line) | {"gpus": [{"index": 0, "engines": [{"busy_percent": 1.0}]}]}
        )
    with pytest.raises(codec.NotARow):  # a GPU names its index
        codec.row_from_dict(msgspec.json.decode(line) | {"gpus": [{"memory_bytes": 1}]})


@given(s.gpu_uses)
def test_gpu_use_round_trips(value: GpuUse) -> None:
    assert msgspec.json.decode(msgspec.json.encode(value), type=GpuUse) == value


def _host_row(**changes: object) -> Row:
    base = Row(
        unix_ms=1,
        tgid=2,
        process=Process(
            comm="bash", exe="/bin/bash", cgroup="/user.slice", container_id=None, cwd="/srv/app"
        ),
        workload="no-gpu",
        usage=Usage(
            cpu_cores=0.5,
            rss_bytes=10,
            threads=1,
            ctx_voluntary_s=0.0,
            ctx_involuntary_s=0.0,
            read_bytes_s=0.0,
            write_bytes_s=0.0,
            network_rx_bytes_s=0.0,
            network_tx_bytes_s=0.0,
            runqueue_s=0.0,
        ),
        cgroup_usage=CgroupUsage(
            cpu_cores=0.5,
            cpu_throttled_fraction=0.0,
            memory_bytes=10,
            oom_kills=0,
            cpu_pressure_avg10=0.0,
            memory_pressure_avg10=0.0,
            io_pressure_avg10=0.0,
        ),
        syscalls=(),
    )

    return msgspec.structs.replace(base, **changes)  # type: ignore[misc]


def test_empty_optional_fields_are_left_out_and_keys_keep_their_order() -> None:
    out = msgspec.json.decode(codec.encode_row(_host_row()))
    assert list(out) == ["unix_ms", "tgid", "process", "workload", "usage", "cgroup_usage", "syscalls"]
    assert "framework" not in out["process"]
    assert out["process"]["container_id"] is None


def test_node_follows_tgid_and_is_left_out_when_unknown() -> None:
    keys = list(msgspec.json.decode(codec.encode_row(_host_row(node="gpu-a"))))
    assert keys[:4] == ["unix_ms", "tgid", "node", "process"]
    assert "node" not in msgspec.json.decode(codec.encode_row(_host_row()))
    assert codec.decode_row(codec.encode_row(_host_row(node="gpu-a"))).node == "gpu-a"
    with pytest.raises(codec.NotARow):
        codec.row_from_dict(msgspec.json.decode(codec.encode_row(_host_row())) | {"node": 7})


def test_label_goes_last_and_gpu_fields_follow_workload() -> None:
    row = _host_row(workload="gpu-onset", ioctl_count=3, since_last_gpu_ioctl_ms=0, label="burst-1")
    keys = list(msgspec.json.decode(codec.encode_row(row)))
    assert keys[3:6] == ["workload", "ioctl_count", "since_last_gpu_ioctl_ms"]
    assert keys[-1] == "label"


@given(s.rows())
def test_every_row_round_trips(row: Row) -> None:
    assert codec.decode_row(codec.encode_row(row)) == row


@given(s.processes)
def test_process_round_trips(value: Process) -> None:
    assert msgspec.json.decode(msgspec.json.encode(value), type=Process) == value


@given(s.usages)
def test_usage_round_trips(value: Usage) -> None:
    assert msgspec.json.decode(msgspec.json.encode(value), type=Usage) == value


@given(s.cgroup_usages)
def test_cgroup_usage_round_trips(value: CgroupUsage) -> None:
    assert msgspec.json.decode(msgspec.json.encode(value), type=CgroupUsage) == value


@given(s.pods)
def test_pod_round_trips(value: Pod) -> None:
    assert msgspec.json.decode(msgspec.json.encode(value), type=Pod) == value


@given(s.syscall_rates)
def test_syscall_rate_round_trips(value: SyscallRate) -> None:
    assert msgspec.json.decode(msgspec.json.encode(value), type=SyscallRate) == value


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(tgid="234758"), "Expected `int`, got `str` - at `\\$.tgid`"),
        (lambda d: d.update(workload="gpu"), "workload"),
        (lambda d: d.pop("usage"), "usage"),
        (lambda d: d.update(extra=1), "extra"),
        (lambda d: d["usage"].update(cpu_cores=True), "Expected `float`, got `bool`"),
        (lambda d: d.update(syscalls={"futex": 1}), "Expected `array`, got `object`"),
    ],
)
def test_a_line_that_only_looks_like_a_row_is_not_a_row(mutate, message) -> None:  # type: ignore[no-untyped-def]
    value = json.loads(SPEC_EXAMPLE)
    mutate(value)
    with pytest.raises(codec.NotARow, match=message):
        codec.row_from_dict(value)


def test_not_json_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        codec.decode_row(b'{"unix_ms": 17925')
    with pytest.raises(codec.NotARow):
        codec.decode_row(b"[1, 2]")
