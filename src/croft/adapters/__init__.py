"""Adapters: the only code that touches files, the kernel, NVML and the network."""
