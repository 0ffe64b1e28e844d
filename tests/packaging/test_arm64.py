"""The same wheel on arm64: installed with its dependencies (arm64 wheels, through this machine's
pip configuration) into a Debian arm64 root file system run through qemu-user-static
(scripts/arm64.sh), its croft answers the fixtures byte for byte as the checkout answers them on
x86-64: `croft stats`, `croft profile` and `croft export`, whose Parquet files and state file are
compared byte for byte too (pyarrow writes the same bytes on both), and as pyarrow reads them back.
Needs root; the first run makes the root file system (a few minutes, cached in
/var/cache/croft-arm64 by `make arm64-setup`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import packaging

pytestmark = [pytest.mark.arm64, pytest.mark.slow, pytest.mark.timeout(1800)]

SCRIPT = str(packaging.REPO / "scripts" / "arm64.sh")
EM_AARCH64 = 183  # ELF e_machine


def arm64(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", SCRIPT, *args], capture_output=True, text=True, timeout=1500, check=False, env=env
    )


@pytest.fixture(scope="module")
def rootfs() -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root: mmdebstrap, binfmt_misc and chroot (scripts/arm64.sh)")
    done = arm64("setup")
    if done.returncode == 77:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, f"scripts/arm64.sh setup failed:\n{done.stderr[-3000:]}"
    return Path(done.stdout.strip())


def elf_machine(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[18:20], "little")


def test_the_wheel_on_arm64_answers_byte_for_byte_as_on_x86_64(
    rootfs: Path,
    wheel: Path,
    wheel_croft: Path,
    work: Path,
    dev_answers: tuple[list[packaging.Answer], dict[str, bytes]],
) -> None:
    expected, expected_files = dev_answers
    # the dependencies at the versions the x86-64 install resolved: the same code on both
    freeze = subprocess.run(
        [str(wheel_croft.parent / "python"), "-m", "pip", "freeze", "--exclude", "croft"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (work / "constraints.txt").write_text(freeze)
    shutil.copy(wheel, work / wheel.name)
    installed = arm64("install", str(work), f"{wheel.name}[export]", "constraints.txt")
    assert installed.returncode == 0, f"the arm64 install failed:\n{installed.stderr[-3000:]}"

    machine = arm64(
        "run", str(work), "venv-arm64/bin/python", "-c", "import platform; print(platform.machine())"
    )
    assert machine.stdout.strip() == "aarch64", machine
    native = sorted((work / "venv-arm64").rglob("*.so"))
    assert native and {elf_machine(so) for so in native} == {EM_AARCH64}

    env = {
        **packaging.answer_env(Path("/w"), "arm64", os.environ["PATH"]),
        **{k: v for k, v in os.environ.items() if k.startswith("PIP_")},
    }
    got = packaging.answers(["bash", SCRIPT, "run", str(work), "venv-arm64/bin/croft"], work, env)
    assert packaging.differences(expected, got) == []
    files = packaging.tree_bytes(work / "out")
    assert sorted(files) == sorted(expected_files)
    # read back: the same tables (a difference in bytes alone would show below as well)
    assert packaging.parquet_tables(files) == packaging.parquet_tables(expected_files)
    assert {n for n in files if files[n] != expected_files[n]} == set()
