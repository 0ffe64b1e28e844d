"""The shell: commands that build adapters, call the core and render results."""
