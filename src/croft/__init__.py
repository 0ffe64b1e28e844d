"""croft: per-process kernel, container and GPU telemetry as a rotating JSONL dataset."""

__version__ = "0.1.0"
