"""The harness's croft scale: the caller's options replace the app's defaults, and a scaler that
refuses its options stops the run as it starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import apps
import kube


def test_extra_options_replace_the_defaults_they_name() -> None:
    argv = ["scale", "--syscall", "sendto", "--calls-per-request", "2.0", "--target", "0.7"]
    extra = ["--signal", "tcp_data_segments", "--calls-per-request", "1"]
    assert kube.overridden(argv, extra) == [
        "scale", "--syscall", "sendto", "--target", "0.7", "--signal", "tcp_data_segments",
        "--calls-per-request", "1",
    ]  # fmt: skip
    assert kube.overridden(argv, []) == argv


def test_a_scaler_that_exits_as_it_starts_stops_the_run(tmp_path: Path) -> None:
    app = apps.load("webapp", apps.APPS_JSON)
    refusing = tmp_path / "croft"
    refusing.write_text(
        f"#!{sys.executable}\nimport sys\nprint('Parameter --x specified twice.')\nsys.exit(2)\n"
    )
    refusing.chmod(0o755)
    scaler = kube.CroftScaler(str(refusing), app, "http://127.0.0.1:1", tmp_path / "scaler.log", ("--x", "1"))
    with pytest.raises(kube.KubeError, match=r"exited with 2 as it started: Parameter --x specified twice"):
        scaler.start()


def test_a_running_scaler_is_left_running(tmp_path: Path) -> None:
    app = apps.load("webapp", apps.APPS_JSON)
    waiting = tmp_path / "croft"
    waiting.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    waiting.chmod(0o755)
    scaler = kube.CroftScaler(str(waiting), app, "http://127.0.0.1:1", tmp_path / "scaler.log")
    scaler.start(check_s=0.5)
    assert scaler.stop() is not None
