"""The shell: one module per command (declared in `cli.py`, each imported only when it runs), plus the
collector's wiring (`bootstrap.py`, `collector.py`) and the options several commands share. Commands
build adapters, call the core and render results; bad input raises `croft.errors.UserError`."""
