"""The wheel is built once per session, from a copy of the checkout, and installed once into a
clean virtualenv; the development install's answers on the fixtures are what every install must
answer (tests.helpers.packaging)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import packaging


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = packaging.source_copy(tmp_path_factory.mktemp("source"))
    return packaging.build_wheel(source, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> packaging.Installed:
    venv = tmp_path_factory.mktemp("venv") / "venv"
    croft = packaging.make_venv(venv, wheel)
    failures = packaging.import_failures(venv, cwd=venv.parent)
    packaging.add_to_venv(venv, f"{wheel}[export]")
    return packaging.Installed(croft, failures)


@pytest.fixture(scope="session")
def wheel_croft(installed: packaging.Installed) -> Path:
    """`croft` of a clean venv holding the wheel (with the export extra) and its dependencies."""
    return installed.croft


@pytest.fixture(scope="session")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packaging.work_dir(tmp_path_factory.mktemp("work"))


@pytest.fixture(scope="session")
def dev_answers(work: Path) -> tuple[list[packaging.Answer], dict[str, bytes]]:
    """The development install's answers (this interpreter's croft) and the files its exports wrote."""
    env = packaging.answer_env(work, "dev", str(Path(sys.executable).parent) + ":/usr/bin:/bin")
    found = packaging.answers([sys.executable, "-m", "croft"], work, env)
    return found, packaging.tree_bytes(work / "out")
