"""`pip wheel .` gives one py3-none-any wheel, which installs into a clean virtualenv with no
compiler on PATH, and whose croft answers on the fixtures exactly what the checkout's answers:
`croft stats`, `croft profile` (an error included) and `croft export` (its report, and the Parquet
files byte for byte)."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.helpers import packaging

pytestmark = pytest.mark.slow


def test_the_wheel_is_pure_python_and_ships_every_file_croft_reads(wheel: Path) -> None:
    """One py3-none-any wheel, no native module in it, and every file git tracks under src/croft
    in it (modules, data, the eBPF programs: src/croft/bpf whole) but C sources elsewhere, which
    no install builds any more."""
    assert wheel.name == "croft-0.1.0-py3-none-any.whl"
    assert packaging.wheel_tags(wheel) == ("true", ["py3-none-any"])
    names = set(zipfile.ZipFile(wheel).namelist())
    assert sorted(n for n in names if n.endswith((".so", ".pyd", ".dylib"))) == []
    tracked = subprocess.run(
        ["git", "ls-files", "src/croft"], cwd=packaging.REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    shipped = {
        name.removeprefix("src/")
        for name in tracked
        if name.startswith("src/croft/bpf/") or not name.endswith((".c", ".h", ".pyi"))
    }
    assert "croft/bpf/syscalls.c" in shipped and "croft/app/cli.py" in shipped
    assert shipped - names == set()
    assert {n for n in names if n.endswith((".c", ".h"))} <= shipped
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "croft = croft.app.cli:entrypoint" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_wheel_answers_what_the_checkout_answers(
    wheel_croft: Path, work: Path, dev_answers: tuple[list[packaging.Answer], dict[str, bytes]]
) -> None:
    expected, expected_files = dev_answers
    by_command = {a.argv: a for a in expected}
    # the answers compared are real ones: rows read, one clear error, Parquet written
    assert all(a.returncode == 0 for a in expected if a.argv[1] != "33813f5d"), expected
    missing = by_command[("profile", "33813f5d", "--dataset", "fixtures/datasets/nodes")]
    assert missing.returncode == 1 and b"no container id starting with 33813f5d" in missing.stderr
    assert b"rows" in by_command[("stats", "fixtures/datasets/sample")].stdout
    assert sum(name.endswith(".parquet") for name in expected_files) >= 6

    venv = wheel_croft.parent.parent
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import croft; print(croft.__file__)"],
        capture_output=True, text=True, check=True, cwd=work,
    ).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(venv), f"the venv imports croft from {where}, not its own copy"

    env = packaging.answer_env(work, "wheel", packaging.bare_path(venv / "bin"))
    got = packaging.answers([str(wheel_croft)], work, env)
    assert packaging.differences(expected, got) == []
    assert packaging.tree_bytes(work / "out") == expected_files


def test_the_runtime_dependencies_alone_import_every_module_but_the_parquet_writer(
    installed: packaging.Installed,
) -> None:
    """What `make run` and `pip install croft` install (no extras) imports all of croft: the
    collector, its readers, croft top; only croft export's Parquet writer needs its extra, and
    croft export says so in one sentence (tests/integration/test_export_parquet.py)."""
    assert installed.runtime_import_failures == {
        "croft.adapters.dataset.parquet": "ModuleNotFoundError: No module named 'pyarrow'"
    }
