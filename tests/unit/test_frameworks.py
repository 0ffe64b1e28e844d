"""The framework catalog: the built-in file parses, matches what it promises, and a bad file names
its line."""

from __future__ import annotations

from importlib import resources

import pytest

from croft.domain.collector.frameworks import Catalog, CatalogError, Matcher, parse_catalog

BUILTIN = parse_catalog(resources.files("croft.domain.collector").joinpath("frameworks.toml").read_text())
REQUIRED = {
    "pytorch", "tensorflow", "jax", "vllm", "sglang", "tensorrt-llm", "triton-server", "ollama",
    "llama.cpp", "tgi", "ray",
}  # fmt: skip


def test_builtin_catalog_covers_the_required_frameworks() -> None:
    assert {fw.name for fw in BUILTIN.frameworks} >= REQUIRED


@pytest.mark.parametrize(
    ("exe", "cmdline", "libraries", "expected"),
    [
        ("/usr/bin/python3.11", ("python", "train.py"), ("libc.so.6", "libtorch_cuda.so"), "pytorch"),
        (
            "/usr/bin/python3",
            ("python3", "-m", "vllm.entrypoints.openai.api_server"),
            ("libtorch_cpu.so",),
            "vllm",
        ),
        ("/usr/bin/python3", ("python3", "-m", "sglang.launch_server"), ("libtorch_cpu.so",), "sglang"),
        ("/usr/bin/python3", ("python3", "x.py"), ("libtensorflow_framework.so.2",), "tensorflow"),
        ("/usr/bin/python3", ("python3", "x.py"), ("xla_extension.so",), "jax"),
        ("/opt/tritonserver/bin/tritonserver", ("tritonserver",), (), "triton-server"),
        ("/usr/local/bin/ollama", ("ollama", "serve"), (), "ollama"),
        ("/app/llama-server", ("llama-server", "-m", "m.gguf"), ("libggml.so",), "llama.cpp"),
        ("/usr/local/bin/text-generation-launcher", ("text-generation-launcher",), (), "tgi"),
        ("/usr/bin/python3", ("ray::IDLE",), (), "ray"),
        ("/usr/bin/python3", ("trtllm-serve", "model"), (), "tensorrt-llm"),
        ("/usr/bin/bash", ("bash",), ("libc.so.6",), None),
    ],
)
def test_builtin_catalog_matches(
    exe: str, cmdline: tuple[str, ...], libraries: tuple[str, ...], expected: str | None
) -> None:
    assert Matcher(BUILTIN).match(exe, cmdline, libraries) == expected


def test_user_catalog_extends_before_the_builtin_or_replaces_it() -> None:
    user = parse_catalog('[[framework]]\nname = "mine"\nlibraries = ["libtorch_cuda"]\n')
    assert Matcher(BUILTIN.extended_by(user)).match("/x", (), ("libtorch_cuda.so",)) == "mine"
    replaced = BUILTIN.extended_by(parse_catalog('replace = true\n[[framework]]\nname = "a"\nexe = ["a"]\n'))
    assert [fw.name for fw in replaced.frameworks] == ["a"]
    assert Matcher(replaced).match("/x", (), ("libtorch_cuda.so",)) is None


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('[[framework]]\nname = "a"\nexe = ["a"\n', "line 3", "TOML"),
        ('[[framework]]\nname = "a"\nexe = ["a"]\n = 3\n', "line 4", "TOML"),
        ('[[framework]]\nname = "a"\nexe = ["a"]\n\n[[framework]]\nexe = ["b"]\n', "line 5", "no name"),
        (
            '[[framework]]\nname = "a"\nexe = ["a"]\n[[framework]]\nname = "b"\nlibs = ["x"]\n',
            "line 4",
            "libs",
        ),
        ('[[framework]]\nname = "a"\nexe = "a"\n', "line 1", "list"),
        ('[[framework]]\nname = "a"\n', "line 1", "no exe"),
        ('replace = "yes"\n', "line 1", "true or false"),
        ("colour = 1\n", "line 1", "colour"),
    ],
)
def test_bad_catalog_names_the_line(text: str, line: str, words: str) -> None:
    with pytest.raises(CatalogError) as caught:
        parse_catalog(text)
    assert str(caught.value).startswith(line + ":")
    assert words in str(caught.value)


def test_empty_user_catalog_extends_nothing() -> None:
    assert BUILTIN.extended_by(parse_catalog("")) == Catalog(frameworks=BUILTIN.frameworks)
