"""The pure core: value types and decisions. No I/O, no clock, no adapters."""
