"""The JSON keys of `croft stats --json` and `croft profile`, in their order: users' scripts read them,
so a change here is a change of the interface."""

STATS_KEYS = [
    "files",
    "bytes",
    "rows",
    "skipped_lines",
    "first_ms",
    "first_time",  # RFC 3339 beside each unix-ms time
    "last_ms",
    "last_time",
    "polls",
    "nodes",
    "containers",
    "processes",
    "workloads",
    "frameworks",
    "busiest_syscalls",  # added after the spec's keys: [{name, mean_per_s}], busiest first
]

PROFILE_KEYS = [
    "container_id",
    "from_ms",
    "from_time",
    "to_ms",
    "to_time",
    "nodes",
    "polls",
    "processes",
    "gpu_poll_share",
    "cpu_cores",
    "memory_bytes",
    "cpu_throttled_fraction",
    "cpu_pressure_avg10",
    "not_measured",  # added after the spec's keys: the figures above that are null (never measured)
]
