"""The names of the Prometheus series `croft run --metrics-addr` serves; `croft scale` reads them.

One place for both sides: the collector exports exactly these names and labels, the scaler and the
tests look them up here. Every value is a gauge of the newest poll unless its name ends in `_total`
(a counter since the collector started). Rates are per second over the last poll interval.

Per container (label `container_id`: the 64-hex id of docs/dataset.md, the same string a pod's
`status.containerStatuses[].containerID` carries after its `containerd://` or `docker://` scheme;
empty for a watched host cgroup) and label `cgroup` (the container's cgroup path as rows write it):

| name | labels | unit |
| --- | --- | --- |
| `croft_container_syscall_rate` | container_id, syscall | syscalls/s, summed over the container's processes |
| `croft_container_cpu_cores` | container_id | CPU seconds per second (cgroup) |
| `croft_container_memory_usage_bytes` | container_id | bytes (memory.current; page cache included) |
| `croft_container_cpu_throttled_fraction` | container_id | share of the poll's CPU periods throttled, 0..1 |
| `croft_container_pressure_ratio` | container_id, resource (cpu, memory, io) | PSI `some avg10`, 0..1 |
| `croft_container_pressure_waiting_seconds_total` | container_id, resource | counter: PSI `some total`, s |
| `croft_container_ingress_rate` | container_id, signal (`INGRESS_SIGNALS`) | per second (dataset `ingress`) |
| `croft_container_listen_backlog` | container_id | connections waiting to be accepted |
| `croft_container_unread_bytes` | container_id | bytes received, not yet read |
| `croft_container_gpu_memory_bytes` | container_id, gpu | bytes its processes hold on the GPU (`gpus`) |
| `croft_container_syscalls_total` | container_id, syscall | counter: whole syscalls, by the gauge's names |
| `croft_container_oom_events_total` | container_id | counter: OOM kills in the cgroup (the kernel's count) |
| `croft_container_cpu_seconds_total` | container_id | counter: CPU seconds (cgroup cpu.stat) |
| `croft_container_cpu_periods_total` | container_id | counter: CFS periods (nr_periods), when read |
| `croft_container_cpu_throttled_periods_total` | container_id | counter: throttled periods (nr_throttled) |
| `croft_container_network_{receive,transmit}_bytes_total` | container_id | counter: bytes |
| `croft_container_fs_{read,write}_bytes_total` | container_id | counter: bytes |
| `croft_container_gpu_engine_seconds_total` | container_id, gpu, engine | counter: engine busy seconds |
| `croft_container_info` | container_id, pod_uid | 1 (pod UID from the cgroup path) |

Every per-container series of a container whose rows name their pod (docs/dataset.md, `pod`: the
collector reads the API's pods of its node) also carries `namespace`, `pod` and `container` (the
container's name in the pod; none for the pod's sandbox), as cAdvisor's kubelet series do.

The counters (see `croft.domain.metrics.counters`) let a Prometheus that scrapes every 15-30 s take
`rate()` over every poll; the gauges are one poll's.

A container that was not seen in the newest poll disappears from the exposition (bounded cardinality).
Syscall series: by default a container's gauge names the `SYSCALLS_PER_CONTAINER` syscalls it made
most of since it was first served (the counter's totals, so the cut does not move with one poll's
noise) and sums the rest under `syscall="other"`, and the counter names every syscall it made;
with `croft run --metrics-syscalls NAMES` both name only those syscalls and sum the rest under
`other` (see `croft.domain.metrics.series`).

The collector's own health:

| name | unit |
| --- | --- |
| `croft_poll_duration_seconds` | seconds the newest poll took |
| `croft_last_poll_timestamp_seconds` | unix time of the newest poll, seconds |
| `croft_rows_written_total` | rows written to the dataset |
| `croft_rows_dropped_total` | rows dropped (sink backlog, encode errors) |
| `croft_map_drops_total` | eBPF events lost (ring buffer or map full) |
| `croft_compression_backlog_segments` | closed segments waiting to be compressed |
| `croft_compression_failures_total` | segment compressions that failed (retried later) |
| `croft_live_files_lost_total` | times the live file was renamed or deleted under the collector |
| `croft_ebpf_mode` | 1, label `mode`: the eBPF loader (`core`, `bcc`, or `off`: none); live only |
| `croft_poll_seconds` | histogram of poll durations since the collector started |
| `croft_build_info` | 1, label `version` |

and prometheus_client's `process_*` metrics of the collector process itself.

`croft scale` needs `croft_container_syscall_rate` (or, with `--signal`, `croft_container_ingress_rate`)
and `croft_last_poll_timestamp_seconds`: the latter tells it how old the collector's numbers are. It
asks the collector for only those (`/metrics?name[]=...`, croft.domain.metrics.query).
The ingress series are the namespace's, shared by the containers of a pod: a reader takes them once
per pod. A container without a measured namespace this poll (host network, no rate yet, idle) has none.

The GPU series are sums over the container's processes, by GPU (`gpu`: NVML's device index, as
dcgm-exporter's `gpu` label, `index/gpu_instance/compute_instance` inside MIG; a DRM device's PCI
address, else `card<N>`), with no pid label: a pid per series would grow without bound. `engine` is
`sm`, `memory_bandwidth`, `encoder` or `decoder` for NVML, the driver's engine name for DRM (`gfx`,
`render`, ...); `rate()` of the counter is the share of an engine the container kept busy (per
engine of its class). A container whose rows name no GPU this poll has no memory series.
"""

from __future__ import annotations

CONTAINER_SYSCALL_RATE = "croft_container_syscall_rate"
CONTAINER_CPU_CORES = "croft_container_cpu_cores"
CONTAINER_MEMORY_USAGE_BYTES = "croft_container_memory_usage_bytes"
CONTAINER_CPU_THROTTLED_FRACTION = "croft_container_cpu_throttled_fraction"
CONTAINER_PRESSURE_RATIO = "croft_container_pressure_ratio"
CONTAINER_PRESSURE_WAITING_SECONDS_TOTAL = "croft_container_pressure_waiting_seconds_total"
CONTAINER_SYSCALLS_TOTAL = "croft_container_syscalls_total"
CONTAINER_CPU_SECONDS_TOTAL = "croft_container_cpu_seconds_total"
CONTAINER_CPU_PERIODS_TOTAL = "croft_container_cpu_periods_total"
CONTAINER_CPU_THROTTLED_PERIODS_TOTAL = "croft_container_cpu_throttled_periods_total"
CONTAINER_NETWORK_RECEIVE_BYTES_TOTAL = "croft_container_network_receive_bytes_total"
CONTAINER_NETWORK_TRANSMIT_BYTES_TOTAL = "croft_container_network_transmit_bytes_total"
CONTAINER_FS_READ_BYTES_TOTAL = "croft_container_fs_read_bytes_total"
CONTAINER_FS_WRITE_BYTES_TOTAL = "croft_container_fs_write_bytes_total"
CONTAINER_INFO = "croft_container_info"
CONTAINER_OOM_EVENTS_TOTAL = "croft_container_oom_events_total"
CONTAINER_INGRESS_RATE = "croft_container_ingress_rate"
CONTAINER_LISTEN_BACKLOG = "croft_container_listen_backlog"
CONTAINER_UNREAD_BYTES = "croft_container_unread_bytes"
CONTAINER_GPU_MEMORY_BYTES = "croft_container_gpu_memory_bytes"
CONTAINER_GPU_ENGINE_SECONDS_TOTAL = "croft_container_gpu_engine_seconds_total"

POLL_DURATION_SECONDS = "croft_poll_duration_seconds"
LAST_POLL_TIMESTAMP_SECONDS = "croft_last_poll_timestamp_seconds"
ROWS_WRITTEN_TOTAL = "croft_rows_written_total"
ROWS_DROPPED_TOTAL = "croft_rows_dropped_total"
MAP_DROPS_TOTAL = "croft_map_drops_total"
COMPRESSION_BACKLOG_SEGMENTS = "croft_compression_backlog_segments"
COMPRESSION_FAILURES_TOTAL = "croft_compression_failures_total"
LIVE_FILES_LOST_TOTAL = "croft_live_files_lost_total"
POLL_SECONDS = "croft_poll_seconds"
EBPF_MODE = "croft_ebpf_mode"
BUILD = "croft_build"  # prometheus_client's Info writes it as croft_build_info

LABEL_CONTAINER_ID = "container_id"
LABEL_SYSCALL = "syscall"
LABEL_RESOURCE = "resource"
LABEL_CGROUP = "cgroup"
LABEL_POD_UID = "pod_uid"
LABEL_POD = "pod"
LABEL_NAMESPACE = "namespace"
LABEL_CONTAINER = "container"  # the container's name in its pod (cAdvisor's `container`)
LABEL_SIGNAL = "signal"
LABEL_MODE = "mode"
LABEL_GPU = "gpu"
LABEL_ENGINE = "engine"
OTHER_SYSCALLS = "other"
SYSCALLS_PER_CONTAINER = 24
PRESSURE_RESOURCES: tuple[str, ...] = ("cpu", "memory", "io")
INGRESS_SIGNALS: tuple[str, ...] = (
    "tcp_data_segments",
    "tcp_connections",
    "tcp_passive_opens",
    "tcp_in_segs",
    "rx_packets",
    "rx_bytes",
    "listen_drops",
)
"""The `signal` label values of `croft_container_ingress_rate`: the row's `ingress` fields without
their `_s` (the first two come from eBPF and are left out without the tracepoints)."""

HELP: dict[str, str] = {
    CONTAINER_SYSCALL_RATE: "Syscalls per second of the container's processes in the last poll, by syscall.",
    CONTAINER_CPU_CORES: "CPU seconds per second the container's cgroup used over the last poll.",
    CONTAINER_MEMORY_USAGE_BYTES: "Memory the container's cgroup holds, page cache included, bytes.",
    CONTAINER_CPU_THROTTLED_FRACTION: "Share of the last poll's CPU periods the cgroup was throttled in.",
    CONTAINER_PRESSURE_RATIO: "PSI some avg10 of the container's cgroup, 0..1, by resource.",
    CONTAINER_PRESSURE_WAITING_SECONDS_TOTAL: (
        "Seconds in which some task of the container's cgroup waited for the resource (PSI some total)."
    ),
    CONTAINER_SYSCALLS_TOTAL: "Syscalls of the container's processes, by syscall.",
    CONTAINER_CPU_SECONDS_TOTAL: "CPU seconds the container's cgroup used (cpu.stat usage).",
    CONTAINER_CPU_PERIODS_TOTAL: "CFS bandwidth periods of the container's cgroup (cpu.stat nr_periods).",
    CONTAINER_CPU_THROTTLED_PERIODS_TOTAL: "CFS periods the container's cgroup was throttled in.",
    CONTAINER_NETWORK_RECEIVE_BYTES_TOTAL: "Bytes the container's processes received.",
    CONTAINER_NETWORK_TRANSMIT_BYTES_TOTAL: "Bytes the container's processes sent.",
    CONTAINER_FS_READ_BYTES_TOTAL: "Bytes the container's processes read from storage.",
    CONTAINER_FS_WRITE_BYTES_TOTAL: "Bytes the container's processes wrote to storage.",
    CONTAINER_INGRESS_RATE: "Load offered to the container's network namespace per second, by signal.",
    CONTAINER_LISTEN_BACKLOG: "Connections waiting to be accepted in the container's network namespace.",
    CONTAINER_UNREAD_BYTES: "Bytes received and not yet read in the container's network namespace.",
    CONTAINER_GPU_MEMORY_BYTES: "GPU memory the container's processes hold, bytes, by GPU.",
    CONTAINER_GPU_ENGINE_SECONDS_TOTAL: (
        "Seconds a GPU engine was busy for the container's processes, by GPU and engine."
    ),
    CONTAINER_OOM_EVENTS_TOTAL: "OOM kills in the container's cgroup (memory.events oom_kill).",
    CONTAINER_INFO: "1 per container: the pod UID its cgroup names, pod name and namespace where readable.",
    POLL_DURATION_SECONDS: "Seconds the newest poll took.",
    LAST_POLL_TIMESTAMP_SECONDS: "Unix time of the newest poll, seconds.",
    ROWS_WRITTEN_TOTAL: "Rows written to the dataset since the collector started.",
    ROWS_DROPPED_TOTAL: "Rows dropped since the collector started.",
    MAP_DROPS_TOTAL: "eBPF events lost since the collector started.",
    COMPRESSION_BACKLOG_SEGMENTS: "Closed dataset segments waiting to be compressed.",
    COMPRESSION_FAILURES_TOTAL: "Segment compressions that failed since the collector started.",
    LIVE_FILES_LOST_TOTAL: (
        "Times the collector found its live file renamed or deleted under it and started a new one."
    ),
    POLL_SECONDS: "Seconds each poll took, from reading the sources to writing its rows.",
    EBPF_MODE: "1, labelled with the eBPF loader counting syscalls: core, bcc, or off (no eBPF).",
}

COLLECTOR_POLL_S = 2.0
"""How often `croft run` polls: the staleness rule of `croft scale` allows two of these."""
