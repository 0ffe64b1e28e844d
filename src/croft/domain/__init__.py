"""The pure core: value types and decisions, a room per subsystem (collector, dataset, metrics,
scaling, deploy) plus croft top's table, the poll schedule and UTC spellings. No I/O, no clock, no
adapters: import-linter contracts in pyproject.toml check it."""
