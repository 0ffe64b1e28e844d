"""The dataset row: one process in one poll, exactly as docs/dataset.md describes it.

This is the one definition of a row. Its classes are msgspec Structs, and msgspec both writes and
reads them (`croft.domain.dataset.codec`): the field order here is the key order on disk (every
class is keyword-only, so fields with defaults stand between required ones), and a field equal to
its default (None) is left out of the line. Reading is strict: every key declared, no other key,
integers within signed 64 bits, numbers finite, `unix_ms` within the calendar; a wrong type is an
error, never coerced, so a reader can tell a row from a line that only looks like one.

msgspec was chosen by measurement over attrs classes with a cattrs converter and orjson (the rows of
fixtures/golden and fixtures/datasets/sample, on this 2-core VM): it decodes a row in 6 us against
24 us and encodes it in 1.9 us against 4.7 us, to the same bytes. Readers that need only some
fields may decode `projection`s of these classes, derived from them (`croft.domain.dataset.codec`).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from croft.domain.dataset.workloads import GPU_WORKLOADS as GPU_WORKLOADS
from croft.domain.dataset.workloads import WORKLOADS as WORKLOADS
from croft.domain.dataset.workloads import Workload as Workload

# A row's integers are signed 64-bit, as every JSON tool reads them; `unix_ms` lies in the calendar
# (1970-01-01 to 9999-12-31 UTC), so every reader can print it as a UTC time.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
UNIX_MS_MIN, UNIX_MS_MAX = 0, 253_402_300_799_999

Int = Annotated[int, msgspec.Meta(ge=INT_MIN, le=INT_MAX)]
UnixMs = Annotated[int, msgspec.Meta(ge=UNIX_MS_MIN, le=UNIX_MS_MAX)]
CMDLINE_CHARS = 256
"""The most characters of a command line a row keeps: enough to tell three `python3` processes
apart by their script and first arguments, bounded so that a Java classpath does not double a
row (docs/dataset.md gives the measured cost)."""
# No bounds on floats: msgspec's JSON decoder never yields one that is not finite (a number beyond a
# double, 1e400, is "out of range"; NaN and Infinity are not JSON).


class Value(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """What every class of the row is: immutable, a field equal to its default (None) left out of
    the line, no unknown key read, no cycle for the garbage collector to track; each class is also
    keyword-only, so that fields with defaults may stand between required ones."""


class Process(Value, kw_only=True, frozen=True):
    """Who the row is about. `container_id` is None for a host process (its `cwd` names the project);
    `framework` is None when the catalog matched nothing (the key is then left out). `cmdline` is
    the command line as `ps -o args` shows it, its arguments joined by spaces and cut to
    `CMDLINE_CHARS` characters (ending in an ellipsis when cut); None (left out) for a process
    without arguments (a kernel thread, a zombie) and in rows of older collectors."""

    comm: str
    exe: str
    cmdline: str | None = None
    cgroup: str
    container_id: str | None
    cwd: str
    framework: str | None = None


class Pod(Value, kw_only=True, frozen=True):
    """The Kubernetes names of the row's container, as the API server gives them for the pods of
    the collector's node: `namespace` and `name` of the pod, and `container` the name of the
    container in the pod's spec; None (left out) for the pod's sandbox (pause) process and for a
    container the pod's status does not list yet."""

    namespace: str
    name: str
    container: str | None = None


class Usage(Value, kw_only=True, frozen=True):
    """What the process did over the poll interval; every `_s` field is per second. A figure croft
    could not read is None (left out), never 0: `read_bytes_s`/`write_bytes_s` where /proc/<pid>/io
    is unreadable, `runqueue_s` without schedstats, the network figures without the kernel's socket
    tracepoints (Linux < 6.3)."""

    cpu_cores: float
    rss_bytes: Int
    threads: Int
    ctx_voluntary_s: float
    ctx_involuntary_s: float
    read_bytes_s: float | None = None
    write_bytes_s: float | None = None
    network_rx_bytes_s: float | None = None
    network_tx_bytes_s: float | None = None
    runqueue_s: float | None = None


class CgroupUsage(Value, kw_only=True, frozen=True):
    """What the process's cgroup felt over the poll interval; `*_pressure_avg10` are PSI percentages.
    A figure the named cgroup does not offer is None (left out), never 0: PSI on cgroup v1; memory,
    OOM kills and throttling of a v2 cgroup on a hybrid host (memory and cpu bound to v1);
    throttling without CFS bandwidth counters; every figure when the cgroup could not be read."""

    cpu_cores: float | None = None
    cpu_throttled_fraction: float | None = None
    memory_bytes: Int | None = None
    oom_kills: Int | None = None
    cpu_pressure_avg10: float | None = None
    memory_pressure_avg10: float | None = None
    io_pressure_avg10: float | None = None


class SyscallRate(Value, kw_only=True, frozen=True):
    name: str
    rate_per_sec: float


class ShortLived(Value, kw_only=True, frozen=True):
    """The syscalls of a container's processes that have no row of their own in this poll, folded
    into one row of the container: processes that started and exited between two polls, processes
    seen for the first time (no rates yet), and counts the kernel kept per cgroup when its
    per-process map was full. `processes` counts the distinct processes (the last kind adds none);
    rates are over the row's poll interval, like `syscalls`."""

    processes: Int
    syscalls: tuple[SyscallRate, ...]


class Ingress(Value, kw_only=True, frozen=True):
    """Load offered to the container's network namespace over the poll interval, counted where the
    kernel receives it rather than where the application answers it, so it keeps rising once the
    application saturates. The containers of one pod share a namespace and carry the same numbers
    (sum per pod, not per container); host-network processes get none. `*_s` fields are per second:
    `tcp_passive_opens_s` handshakes the kernel completed (snmp PassiveOpens), `tcp_in_segs_s` TCP
    segments received (InSegs), `rx_packets_s`/`rx_bytes_s` received on every interface but lo,
    `listen_drops_s` connections the accept queue dropped (ListenDrops). `listen_backlog` is the
    connections waiting to be accepted now and `unread_bytes` the bytes received and not yet read
    now (what `ss` shows as Recv-Q). From eBPF, per listening port of the namespace:
    `tcp_data_segments_s` TCP segments that carried data (one per small request) and
    `tcp_connections_s` handshakes begun; None (left out) without the tracepoints."""

    tcp_passive_opens_s: float
    tcp_in_segs_s: float
    rx_packets_s: float
    rx_bytes_s: float
    listen_drops_s: float
    listen_backlog: Int
    unread_bytes: Int
    tcp_data_segments_s: float | None = None
    tcp_connections_s: float | None = None


class GpuEngine(Value, kw_only=True, frozen=True):
    """One engine of a DRM GPU (`name` as the driver names it: `gfx`, `render`, `rcs`, ...) and the
    share of the poll interval it was busy for the process, in percent of the engine's capacity
    (`drm-engine-capacity-<name>` engines of that class), 0..100."""

    name: str
    busy_percent: float


class GpuUse(Value, kw_only=True, frozen=True):
    """One GPU the process used in the poll, from NVML (NVIDIA) or the kernel's DRM counters (any
    DRM driver: amdgpu, i915, xe, ...). `index` is NVML's device index, or for DRM the number of
    the device file (`cardN` -> N, `renderD<128+N>` -> N). NVML names the GPU by `uuid`, and a
    MIG instance by `gpu_instance_id` and `compute_instance_id` besides (left out outside MIG);
    DRM by `driver` (`drm-driver`) and `pci` (`drm-pdev`, when the device is on PCI).
    `memory_bytes` is the GPU memory the process holds now (NVML's used memory; DRM: resident
    bytes summed over the driver's memory regions, system memory the GPU maps included); None
    when the driver does not say. The `*_percent` fields are NVML's utilisation over the poll,
    0..100: the mean of the samples the driver took since the previous poll (a period in which
    the process used the engine not at all has no sample and counts 0): `sm_percent` the
    streaming multiprocessors (compute and graphics), `memory_bandwidth_percent` the memory
    controller, `encoder_percent` and `decoder_percent` the video engines; None where the
    device cannot say (MIG, older GPUs). `engines` are DRM's, per engine; None until the
    process's counters were read in two polls."""

    index: Int
    uuid: str | None = None
    gpu_instance_id: Int | None = None
    compute_instance_id: Int | None = None
    driver: str | None = None
    pci: str | None = None
    memory_bytes: Int | None = None
    sm_percent: float | None = None
    memory_bandwidth_percent: float | None = None
    encoder_percent: float | None = None
    decoder_percent: float | None = None
    engines: tuple[GpuEngine, ...] | None = None


class Row(Value, kw_only=True, frozen=True):
    """One JSON line of the dataset. `ioctl_count` and `since_last_gpu_ioctl_ms` are both None for a
    process that never touched a GPU; `label` is None outside labelled experiments. `node` is the
    node the collector ran on (`croft run --node`); None in rows of older collectors, whose readers
    take the node from the per-node directory's name instead. `short_lived` is on at most one row
    per container and poll (see `ShortLived`); None elsewhere and in rows of older collectors.
    `ingress` is on the same row (see `Ingress`), when the container's network namespace was
    measured this poll and the one before; None elsewhere and in rows of older collectors. `pod`
    names the container's pod where the collector reads the Kubernetes API (see `Pod`); None for
    host processes, containers of no pod of the node, without API access and in rows of older
    collectors. `gpus` holds one `GpuUse` per GPU (or MIG instance) the process used, when NVML
    or the kernel's DRM counters listed it this poll; None otherwise and in rows of older
    collectors."""

    unix_ms: UnixMs
    tgid: Int
    node: str | None = None
    process: Process
    pod: Pod | None = None
    workload: Workload
    ioctl_count: Int | None = None
    since_last_gpu_ioctl_ms: Int | None = None
    usage: Usage
    cgroup_usage: CgroupUsage
    syscalls: tuple[SyscallRate, ...]
    short_lived: ShortLived | None = None
    ingress: Ingress | None = None
    gpus: tuple[GpuUse, ...] | None = None
    label: str | None = None
