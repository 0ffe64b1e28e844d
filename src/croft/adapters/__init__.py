"""Adapters: the only code that touches files, the kernel, NVML, the terminal and the network; a room
per subsystem (host, dataset, http, kube)."""
