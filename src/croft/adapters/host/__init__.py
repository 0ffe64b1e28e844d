"""The host: procfs, cgroupfs, the cgroup namespace, eBPF through BCC, NVML, the poller, traces and the
clock."""
