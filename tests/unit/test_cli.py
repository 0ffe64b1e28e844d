"""The `croft` command: seven commands, options as in docs/commands.md, and an instant --help."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import croft

COMMANDS = ["run", "top", "stats", "profile", "index", "export", "deploy", "collect", "scale"]


def test_help_lists_the_seven_commands() -> None:
    out = croft("--help")
    assert out.returncode == 0
    for name in COMMANDS:
        assert name in out.stdout


def test_help_imports_no_heavy_module() -> None:
    code = (
        "import sys; from croft.app.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('bcc', 'pynvml', 'kubernetes', 'zstandard', 'httpx') if m in sys.modules]\n"
        "print('heavy=' + ','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "heavy="


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            ["run"],
            [
                "DATASET_PATH",
                "WATCH_CGROUPS",
                "CROFT_FRAMEWORKS",
                "CROFT_METRICS_ADDR",
                "CROFT_ROTATE_SECS",
                "3600",
                "CROFT_ROTATE_BYTES",
                "1073741824",
                "CROFT_RETAIN_DAYS",
                "30",
                "CROFT_RETAIN_BYTES",
                "10737418240",
            ],
        ),
        (["top"], ["--once", "--interval", "2"]),
        (["stats"], ["DATASET_PATH", "--json"]),
        (["profile"], ["--dataset", "--from-ms", "--to-ms"]),
        (["export"], ["--to", "--compression", "zstd", "--row-group-mb", "128"]),
        (["deploy", "docker"], ["--image", "croft-collector", "--watch", "--dry-run"]),
        (["deploy", "kubernetes"], ["--image", "kubepods", "--dry-run"]),
        (["collect"], ["--namespace", "croft", "research/data/nodes"]),
        (
            ["scale"],
            [
                "--syscall",
                "sendto",
                "--target",
                "0.7",
                "--max-replicas",
                "10",
                "--confirm-polls",
                "--drain-secs",
                "60.0",
                "--interval",
                "http://127.0.0.1:8001",
                "--dry-run",
            ],
        ),
    ],
)
def test_command_help_shows_options_env_variables_and_defaults(
    command: list[str], expected: list[str]
) -> None:
    out = croft(*command, "--help")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    for word in expected:
        assert word in text, f"{word} missing from croft {' '.join(command)} --help"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_shows_bytes_of_the_total_then_erases_itself() -> None:
    from croft.app.progress import Progress

    stream = Terminal()
    with Progress(stream=stream) as progress:
        task = progress.add("croft: reading")
        progress.update(task, completed=5 << 20, total=10 << 20)
    text = stream.getvalue()
    assert "croft: reading" in text and "5.0/10.0 MiB" in text
    assert text.endswith("\x1b[2K") or "\x1b[2K" in text[-40:]  # the line erased at the end
    quiet = Terminal()
    with Progress(stream=quiet, after_s=3600.0) as progress:  # a short read shows nothing
        progress.update(progress.add("croft: reading"), completed=1, total=2)
    assert quiet.getvalue() == ""


def test_progress_elsewhere_is_silent_or_a_line_per_new_description() -> None:
    from croft.app.progress import Progress

    piped = io.StringIO()
    with Progress(stream=piped) as progress:
        progress.update(progress.add("croft: reading"), completed=1, total=2)
    assert piped.getvalue() == ""
    log = io.StringIO()
    with Progress(stream=log, transfer=False, log=True) as progress:
        line = progress.add("rollout: 0 of 1")
        progress.update(line, description="rollout: 0 of 1")
        progress.update(line, description="rollout: 1 of 1")
    assert log.getvalue() == "rollout: 0 of 1\nrollout: 1 of 1\n"


def test_bash_completion_completes_commands_and_options(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    script = tmp_path / "croft.bash"
    out = croft("completion", "bash")
    assert out.returncode == 0, out.stderr
    script.write_text(out.stdout)

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in words)
        probe = (
            f"source {script}; COMP_WORDS=(croft {line}); COMP_CWORD={len(words)}; "
            'COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; _croft; printf "%s\\n" "${COMPREPLY[@]}"'
        )
        done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30, check=False)
        return done.stdout.split()

    assert "stats" in complete("st") and "top" in complete("to")
    assert "--containers" in complete("stats", "--con")
    assert "--cgroup" in complete("profile", "--cg")


def _table_rows(text: str) -> dict[str, str]:
    """The command tables' rows of a markdown page: command name -> what it does."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"\| `croft (\w+)[^`]*` \| (.+) \|$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_each_commands_help_line_is_what_readme_and_the_commands_page_say() -> None:
    """`croft --help`'s line for each command opens its row in README's and docs/commands.md's
    tables (which may say more), so the three never say different things."""
    from croft.app.cli import build_app

    app = build_app()
    helps = {name: app[name].help for name in app if not name.startswith("-")}
    repo = Path(__file__).resolve().parents[2]
    for page in (repo / "README.md", repo / "docs/commands.md"):
        rows = _table_rows(page.read_text())
        assert set(rows) == set(helps), page.name
        for name, line in helps.items():
            assert rows[name].startswith(line), (page.name, name, rows[name], line)
