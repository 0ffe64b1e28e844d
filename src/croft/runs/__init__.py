"""Runs of the web experiment, real or simulated: the open-loop send schedule, per-second statistics,
and the run-directory format that `run.py compare` scores. Shared by `croft.sim` and the lab harness."""
