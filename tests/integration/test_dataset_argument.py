"""Every reader takes the dataset the same way: `croft CMD PATH`, `croft CMD --dataset
PATH` and `DATASET_PATH=PATH croft CMD` read the same dataset and print the same; an empty path,
from the environment or the command line, is one sentence and exit 1, never "." read as the
dataset. The list of readers is checked against the commands `croft` declares, so a new reader
cannot take the dataset another way."""

from __future__ import annotations

import inspect
import shutil
import typing
from pathlib import Path

import pytest
from tests.helpers.cli import croft

from croft.app.cli import build_app
from croft.app.options import DatasetOpt

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
CONTAINER = "1e2feb89"  # a container of fixtures/datasets/sample
# each reader with the arguments that go with the dataset; export and index write, so each run
# gets a copy of the dataset (index) or a fresh export directory (export)
READERS: dict[str, tuple[list[str], list[str]]] = {  # arguments before and after the dataset
    "stats": ([], ["--json"]),
    "profile": ([CONTAINER], []),
    "top": ([], ["--json"]),
    "index": ([], []),
    "export": ([], ["--to"]),  # the export directory is added per run
}
WRITER = "run"  # writes the dataset: --dataset only (it has no positional argument at all)


def test_the_readers_are_every_command_with_a_dataset_and_take_it_both_ways() -> None:
    app = build_app()
    with_dataset = {}
    for name in app:
        command = app[name].default_command
        if name.startswith("-") or command is None:  # --help, --version; deploy's subcommands
            continue
        hints = typing.get_type_hints(command, include_extras=True)
        parameters = inspect.signature(command).parameters
        dataset = [p for p in parameters.values() if hints.get(p.name) == DatasetOpt]
        if dataset:
            with_dataset[name] = dataset[0].kind
    assert set(with_dataset) == {*READERS, WRITER}
    for name in READERS:
        assert with_dataset[name] is inspect.Parameter.POSITIONAL_OR_KEYWORD, name
    assert with_dataset[WRITER] is inspect.Parameter.KEYWORD_ONLY


def _run(command: str, how: str, dataset: Path, tmp_path: Path, env: dict[str, str] | None = None) -> str:
    """`croft COMMAND` with `dataset` given `how` ("positional", "option" or "env"); its stdout."""
    before, after = READERS[command]
    if command == "export":
        after = [*after, str(tmp_path / f"export-{how}")]
    if command == "index":
        copy = tmp_path / f"copy-{how}"
        shutil.copytree(dataset, copy)
        dataset = copy
    if how == "positional":
        argv = [command, *before, str(dataset), *after]
    elif how == "option":
        argv = [command, *before, *after, "--dataset", str(dataset)]
    else:
        argv, env = [command, *before, *after], {"DATASET_PATH": str(dataset)}
    done = croft(*argv, env=env)
    assert done.returncode == 0, (argv, done.stderr)
    return done.stdout.replace(str(dataset), "DATASET").replace(f"{tmp_path}/export-{how}", "EXPORT")


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_positional_path_the_option_and_the_environment_read_the_same(command: str, tmp_path: Path) -> None:
    sample = FIXTURES / "sample"
    if command == "export":
        pytest.importorskip("pyarrow")
    answers = {how: _run(command, how, sample, tmp_path) for how in ("positional", "option", "env")}
    assert answers["positional"] == answers["option"] == answers["env"], answers
    if command in ("stats", "top", "profile"):
        assert "1e2feb89" in answers["positional"] or command == "stats"


@pytest.mark.parametrize("command", sorted({*READERS, WRITER}))
def test_an_empty_dataset_path_is_one_sentence(command: str, tmp_path: Path) -> None:
    before, after = READERS.get(command, ([], []))
    extra = [*before, *after] + ([str(tmp_path / "export")] if command == "export" else [])
    from_env = croft(command, *extra, env={"DATASET_PATH": ""})
    assert (from_env.returncode, from_env.stdout) == (1, ""), from_env
    assert from_env.stderr == (
        "croft: DATASET_PATH is set but empty; give a dataset (a file, a dataset directory or a "
        "directory of per-node directories) or unset it\n"
    )
    given = croft(command, *extra, "--dataset", "")
    assert (given.returncode, given.stdout) == (1, ""), given
    assert given.stderr.startswith("croft: --dataset is empty; give a dataset")


def test_profile_takes_the_dataset_positionally_when_an_option_names_the_subject() -> None:
    """`croft profile [ID] [PATH]`: with --cgroup or --pid naming the subject, the one positional
    argument is the dataset; given twice, it is refused."""
    sample = str(FIXTURES / "sample")
    by_option = croft("profile", "--pid", "1", "--dataset", sample)
    positional = croft("profile", "--pid", "1", sample)
    assert by_option.stdout == positional.stdout and by_option.returncode == positional.returncode
    twice = croft("profile", "--pid", "1", sample, "--dataset", str(FIXTURES / "nodes"))
    assert twice.returncode == 1 and twice.stderr.startswith("croft: give the dataset once:"), twice
