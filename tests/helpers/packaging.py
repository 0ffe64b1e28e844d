"""croft as a user installs it: the wheel `pip wheel .` builds from a copy of the checkout, a clean
virtualenv with no compiler on PATH, and the answers of `croft stats`, `croft profile` and `croft
export` on the repository's fixtures, run from a work directory so that every path they print is
the same relative one wherever they run (here, in a wheel's venv, in the arm64 root file system)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Sequence
from pathlib import Path

import attrs

REPO = Path(__file__).resolve().parents[2]
FIXTURES = ("sample", "nodes", "damaged")

# Every name a build would reach for a C compiler by: distutils' CC first (Python's own build
# configuration; "gcc -pthread" here), then the usual spellings.
COMPILERS = tuple(
    dict.fromkeys(
        [
            (sysconfig.get_config_var("CC") or "cc").split()[0],
            "cc",
            "gcc",
            "c++",
            "g++",
            "clang",
            "x86_64-linux-gnu-gcc",
            "aarch64-linux-gnu-gcc",
        ]
    )
)

# (argv after `croft`): what the commands answer on the fixtures, errors included. The exports run in
# order: the second finds every file unchanged.
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("stats", "fixtures/datasets/sample"),
    ("stats", "fixtures/datasets/nodes", "--json"),
    ("stats", "fixtures/datasets/nodes", "--containers"),
    ("stats", "fixtures/datasets/damaged"),
    ("profile", "1e2feb89", "--dataset", "fixtures/datasets/sample",
     "--from-ms", "1792506000000", "--to-ms", "1792506100000"),
    ("profile", "2c006497", "--dataset", "fixtures/datasets/nodes"),
    ("profile", "33813f5d", "--dataset", "fixtures/datasets/nodes"),
    ("export", "fixtures/datasets/nodes", "--to", "out/nodes"),
    ("export", "fixtures/datasets/nodes", "--to", "out/nodes"),
    ("export", "fixtures/datasets/sample", "--to", "out/sample"),
    ("export", "fixtures/datasets/damaged", "--to", "out/damaged"),
)  # fmt: skip


@attrs.frozen
class Answer:
    """One command's whole answer: exit code and both streams, as bytes."""

    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes


@attrs.frozen
class Installed:
    """The wheel in a clean venv: its `croft` (with the export extra, added last), and the croft
    modules it could not import before the extra was added (the runtime dependencies alone)."""

    croft: Path
    runtime_import_failures: dict[str, str]


def source_copy(dest: Path) -> Path:
    """The checkout as a fresh clone would have it (tracked and untracked files git does not
    ignore, none of the venv or build outputs), copied to `dest`: the wheel is built from there, so
    nothing left in the working tree (build/, *.egg-info, a .so) can reach it."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet committed
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        else:
            shutil.copy2(source, target)
    return dest


def bare_path(*dirs: Path) -> str:
    """A PATH of only `dirs`, checked to reach none of COMPILERS."""
    path = os.pathsep.join(str(d) for d in dirs)
    found = {name: shutil.which(name, path=path) for name in COMPILERS}
    assert not any(found.values()), f"a compiler is on the bare PATH: {found}"
    return path


def run(argv: Sequence[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    """Runs `argv`, returns its stdout; a failure raises naming the command and its stderr's end."""
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def build_wheel(source: Path, out: Path) -> Path:
    """`pip wheel --no-deps` of `source` into `out` (with build isolation, as `pip install croft`
    builds an sdist), with no compiler on PATH; the one wheel it wrote."""
    env = {
        **os.environ,
        "PATH": bare_path(Path(sys.executable).parent),
        "CC": "no-compiler-here",
    }
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), str(source)],
        cwd=source, env=env)  # fmt: skip
    (wheel,) = out.glob("croft-*.whl")
    return wheel


def wheel_tags(wheel: Path) -> tuple[str, list[str]]:
    """The wheel's `Root-Is-Purelib` value and its `Tag:` lines, from its .dist-info/WHEEL."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/WHEEL"))
        lines = archive.read(name).decode().splitlines()
    purelib = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("Root-Is-Purelib:"))
    return purelib, [line.split(":", 1)[1].strip() for line in lines if line.startswith("Tag:")]


def make_venv(venv: Path, wheel: Path, extras: str = "") -> Path:
    """A clean virtualenv at `venv` with `wheel` (and `extras`, e.g. "[export]") and its dependencies
    installed by pip, through this machine's pip configuration and cache, with nothing but the venv
    on PATH (no compiler: a dependency pip would have to build fails). Returns the venv's `croft`."""
    run([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent, env=dict(os.environ))
    add_to_venv(venv, f"{wheel}{extras}")
    return venv / "bin" / "croft"


def add_to_venv(venv: Path, requirement: str) -> None:
    """`pip install requirement` into `venv`, with nothing but the venv on PATH."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "PATH": bare_path(venv / "bin"),
        "CC": "no-compiler-here",
    }
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", requirement],
        cwd=venv.parent, env=env)  # fmt: skip


# Run by a venv's python: every module of croft imported, and the ones that failed, with why.
IMPORT_ALL = """
import importlib, json, pkgutil, croft
failed = {}
for module in pkgutil.walk_packages(croft.__path__, "croft."):
    if module.name.endswith(".__main__"):
        continue  # `python -m croft`: runs the CLI
    try:
        importlib.import_module(module.name)
    except Exception as error:
        failed[module.name] = f"{type(error).__name__}: {error}"
print(json.dumps(failed, sort_keys=True))
"""


def import_failures(venv: Path, cwd: Path) -> dict[str, str]:
    """The croft modules `venv`'s python cannot import, by name, with the error."""
    out = run(
        [str(venv / "bin" / "python"), "-c", IMPORT_ALL], cwd=cwd, env={"PATH": bare_path(venv / "bin")}
    )
    failed: dict[str, str] = json.loads(out.splitlines()[-1])
    return failed


def work_dir(where: Path) -> Path:
    """A directory holding a copy of the dataset fixtures (mtimes kept: croft export's state file
    records them) at fixtures/datasets/<name>, where the COMMANDS run."""
    for name in FIXTURES:
        shutil.copytree(REPO / "fixtures" / "datasets" / name, where / "fixtures" / "datasets" / name)
    return where


def answer_env(work: Path, label: str, path: str) -> dict[str, str]:
    """The same environment wherever the commands run, but the PATH and a cache of their own."""
    return {
        "PATH": path,
        "HOME": f"{work}/home-{label}",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "COLUMNS": "120",
        "NO_COLOR": "1",
        "CROFT_CACHE_DIR": f"{work}/cache-{label}",
    }


def answers(croft: Sequence[str], work: Path, env: dict[str, str]) -> list[Answer]:
    """COMMANDS, in order, by `croft` (an argv prefix) in `work`, with out/ emptied first."""
    shutil.rmtree(work / "out", ignore_errors=True)
    found = []
    for argv in COMMANDS:
        done = subprocess.run(
            [*croft, *argv], cwd=work, env=env, capture_output=True, timeout=300, check=False
        )
        found.append(Answer(argv, done.returncode, done.stdout, done.stderr))
    return found


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under `root` by its relative path, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def parquet_tables(files: dict[str, bytes]) -> dict[str, list[dict[str, object]]]:
    """The Parquet files among `files` (tree_bytes), as pyarrow reads them back: rows as Python values."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return {
        name: pq.read_table(pa.BufferReader(data)).to_pylist()
        for name, data in files.items()
        if name.endswith(".parquet")
    }


def differences(expected: list[Answer], got: list[Answer]) -> list[str]:
    """One line per command whose answer differs, naming the part that does."""
    wrong = []
    for want, have in zip(expected, got, strict=True):
        parts = [
            f"{name}: {getattr(want, name)!r:.300} != {getattr(have, name)!r:.300}"
            for name in ("returncode", "stdout", "stderr")
            if getattr(want, name) != getattr(have, name)
        ]
        if parts:
            wrong.append(f"croft {' '.join(want.argv)}: " + "; ".join(parts))
    return wrong
