"""Hostile option values, as a user types them: every float option of every command refuses NaN,
infinities, zero where it means nothing, and absurd magnitudes; Kubernetes names follow DNS-1123;
croft run's --record and --frameworks say what is wrong with the path. One sentence each, exit 1,
never a traceback, never a wait."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.helpers.cli import croft

ROOT = Path(__file__).resolve().parents[2]
TRACE = str(ROOT / "fixtures" / "traces" / "live")


def one_sentence(out: object, starts: str) -> None:
    assert getattr(out, "returncode", None) == 1, out
    stderr = str(getattr(out, "stderr", ""))
    assert stderr.startswith(f"croft: {starts}"), stderr
    assert stderr.count("\n") == 1 and "Traceback" not in stderr


SCALE = (
    "scale",
    "--namespace",
    "ns",
    "--deployment",
    "web",
    "--calls-per-request",
    "2",
    "--cpu-per-request-ms",
    "50",
)


def scale_argv(option: str, value: str) -> list[str]:
    """croft scale's arguments with `option` set to `value` (replacing its usual value)."""
    args = dict(zip(SCALE[1::2], SCALE[2::2], strict=True))
    args[option] = value
    return ["scale", *(x for pair in args.items() for x in pair), "--polls", "1"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "1e-300", "1e300"])
@pytest.mark.parametrize(
    "option",
    [
        "--interval",
        "--stabilization-secs",
        "--calls-per-request",
        "--cpu-per-request-ms",
        "--target",
        "--drain-secs",
        "--bytes-per-request",
    ],
)
def test_scale_refuses_non_finite_zero_and_absurd_numbers(option: str, value: str) -> None:
    if option == "--stabilization-secs" and value in ("0", "1e-300"):
        pytest.skip("no scale-down window is a valid choice")
    if option == "--bytes-per-request" and value in ("0", "1e-300"):
        pytest.skip("0 (unread bytes not counted) and tiny sizes are valid")
    one_sentence(croft(*scale_argv(option, value)), f"{option} must be a finite number in [")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e300"])
def test_run_linger_refuses_non_finite_and_absurd(value: str, tmp_path: Path) -> None:
    out = croft("run", "--replay", TRACE, "--dataset", str(tmp_path / "d.jsonl"), "--linger", value,
                "--metrics-addr", "127.0.0.1:0")  # fmt: skip
    one_sentence(out, "--linger must be a number of seconds in [0, ")


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-5", "1e300"])
def test_deploy_timeout_refuses_non_finite_and_absurd(value: str) -> None:
    one_sentence(
        croft("deploy", "kubernetes", "--timeout", value), "--timeout must be a number of seconds in (0, "
    )


@pytest.mark.parametrize("value", ["nan", "inf", "0", "1e-9", "1e300"])
def test_top_interval_refuses_non_finite_and_absurd(value: str, tmp_path: Path) -> None:
    one_sentence(croft("top", "--dataset", str(tmp_path), "--interval", value), "--interval must be")


BAD_NAMES = ["a\n---\nkind: ConfigMap", "", "has space", "Upper", "../x", "a" * 300, "-x", "x-", "a_b"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_deploy_namespace_follows_dns_1123(name: str) -> None:
    out = croft("deploy", "kubernetes", "--dry-run", f"--namespace={name}")
    one_sentence(out, "--namespace ")
    assert "DNS-1123 label" in out.stderr and out.stdout == ""


@pytest.mark.parametrize("name", BAD_NAMES)
def test_collect_namespace_follows_dns_1123(name: str, tmp_path: Path) -> None:
    out = croft("collect", f"--namespace={name}", "--out", str(tmp_path))
    one_sentence(out, "--namespace ")


@pytest.mark.parametrize("option", ["--namespace", "--deployment", "--collector-namespace"])
@pytest.mark.parametrize("name", ["a\nb", "Upper", "../x", "a" * 300, "x y"])
def test_scale_names_follow_dns_1123(option: str, name: str) -> None:
    out = croft(*scale_argv(option, name))
    one_sentence(out, f"{option} ")
    assert "DNS-1123" in out.stderr


def test_deploy_dry_run_with_a_dotted_deployment_like_namespace_is_refused_but_a_good_one_renders() -> None:
    assert croft("deploy", "kubernetes", "--dry-run", "--namespace", "a.b").returncode == 1
    good = croft("deploy", "kubernetes", "--dry-run", "--namespace", "croft-2")
    assert good.returncode == 0 and "namespace: croft-2" in good.stdout


def test_run_record_at_an_impossible_path(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    out = croft("run", "--replay", TRACE, "--dataset", str(tmp_path / "d.jsonl"),
                "--record", str(tmp_path / "file" / "rec"))  # fmt: skip
    one_sentence(out, f"cannot create the --record directory {tmp_path / 'file' / 'rec'}: Not a directory")


def test_run_frameworks_not_utf8(tmp_path: Path) -> None:
    catalog = tmp_path / "frameworks.toml"
    catalog.write_bytes(b'[frameworks.x]\nmodules = ["\xff\xfe"]\n')
    out = croft(
        "run", "--replay", TRACE, "--dataset", str(tmp_path / "d.jsonl"), "--frameworks", str(catalog)
    )
    one_sentence(out, f"--frameworks {catalog} is not UTF-8 text (byte ")


def test_run_frameworks_fifo_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "frameworks.toml"
    os.mkfifo(fifo)
    out = croft("run", "--replay", TRACE, "--dataset", str(tmp_path / "d.jsonl"), "--frameworks", str(fifo),
                timeout=60)  # fmt: skip
    one_sentence(out, f"--frameworks {fifo} is not a regular file")


def test_scale_log_format_is_logfmt_or_json() -> None:
    one_sentence(croft(*scale_argv("--log-format", "xml")), "--log-format must be logfmt or json, got 'xml'")


@pytest.mark.parametrize("value", ["0x10", "1_000", "٣", "+5", " 7", "1.0", "-5", "0", "9" * 30, "1e3", ""])
@pytest.mark.parametrize(
    ("option", "env"),
    [
        ("--rotate-secs", "CROFT_ROTATE_SECS"),
        ("--rotate-bytes", "CROFT_ROTATE_BYTES"),
        ("--retain-days", "CROFT_RETAIN_DAYS"),
        ("--retain-bytes", "CROFT_RETAIN_BYTES"),
    ],
)
def test_run_limits_take_decimal_digits_in_range_and_nothing_else(
    option: str, env: str, value: str, tmp_path: Path
) -> None:
    """What the help says (a number of seconds, bytes, days), from the option or its variable;
    never hexadecimal, underscores, other scripts' digits or a number beyond any use."""
    argv = ["run", "--replay", TRACE, "--dataset", str(tmp_path / "d.jsonl")]
    one_sentence(croft(*argv, option, value), f"{option} must be a whole number of ")
    one_sentence(croft(*argv, env={env: value}), f"{env} must be a whole number of ")
    assert not (tmp_path / "d.jsonl").exists()


def test_run_limits_in_decimal_digits_are_taken(tmp_path: Path) -> None:
    out = croft("run", "--replay", TRACE, "--dataset", str(tmp_path / "d.jsonl"),
                env={"CROFT_ROTATE_SECS": "0600", "CROFT_RETAIN_BYTES": "9223372036854775807"})  # fmt: skip
    assert out.returncode == 0, out.stderr


def _run_into(dataset: Path) -> object:
    return croft("run", "--replay", TRACE, "--dataset", str(dataset), timeout=30)


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_run_refuses_a_device_as_its_dataset_and_leaves_it_alone(tmp_path: Path) -> None:
    """A private /dev/null: accepted, it would be renamed into a segment at the first rotation."""
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    one_sentence(_run_into(null), f"--dataset {null} is a device, not a regular file; give the live file's")
    assert stat.S_ISCHR(null.lstat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["null"]


def test_run_refuses_a_fifo_as_its_dataset_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "croft-dataset.jsonl"
    os.mkfifo(fifo)
    one_sentence(_run_into(fifo), f"--dataset {fifo} is a FIFO (named pipe), not a regular file")


def test_run_names_the_symlink_loop_its_dataset_directory_is_in(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to("loop")
    for dataset in (tmp_path / "loop" / "d.jsonl", tmp_path / "loop" / "a" / "d.jsonl"):
        one_sentence(
            _run_into(dataset),
            f"cannot create the dataset directory {dataset.parent}: {tmp_path / 'loop'} is a symlink loop; ",
        )
    dangling = tmp_path / "dangling"
    dangling.symlink_to("nowhere")
    one_sentence(
        _run_into(dangling / "d.jsonl"),
        f"cannot create the dataset directory {dangling}: {dangling} is a dangling symlink; ",
    )
