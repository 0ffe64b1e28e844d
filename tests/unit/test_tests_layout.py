"""The tests tree's one rule: shared test code lives in tests/helpers/ (or a conftest's fixtures),
so no test module imports another, and nothing under tests/ imports from tests/ but tests.helpers."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module `path` imports, absolute, with its line; a relative import is `.`-prefixed."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found += [(node.lineno, f"{base}.{alias.name}" if base else alias.name) for alias in node.names]
    return found


def offences(path: Path) -> list[str]:
    where = path.relative_to(TESTS.parent) if path.is_relative_to(TESTS) else path.name
    wrong = []
    for line, module in imported_modules(path):
        parts = module.split(".")
        if module.startswith("."):
            wrong.append(f"{where}:{line} imports {module} relatively; import tests.helpers.<module>")
        elif any(part.startswith("test_") or part == "conftest" for part in parts):
            wrong.append(
                f"{where}:{line} imports the test module {module}; move what it shares to tests/helpers/"
            )
        elif parts[0] == "tests" and parts[1:2] != ["helpers"]:
            wrong.append(f"{where}:{line} imports {module}; shared test code lives in tests/helpers/")
    return wrong


def test_no_test_module_imports_another_and_shared_code_is_in_helpers() -> None:
    wrong = [o for path in sorted(TESTS.rglob("*.py")) for o in offences(path)]
    assert wrong == []


def test_the_check_sees_each_kind_of_offence(tmp_path: Path) -> None:
    bad = tmp_path / "test_probe.py"
    source = (
        "from tests.unit.test_cli import croft\n"
        "from tests import dataset_files\n"
        "from . import helpers\n"
        "import tests.kernel.test_programs\n"
        "from tests.helpers.rows import make_row\n"
        "import os\n"
    )
    bad.write_text(source)
    got = offences(bad)
    assert [o.split(" ", 1)[0].rsplit(":", 1)[1] for o in got] == ["1", "2", "3", "4"]
    assert "test module tests.unit.test_cli.croft" in got[0]
    assert "tests.dataset_files" in got[1]
    assert "relatively" in got[2]
    assert "test module tests.kernel.test_programs" in got[3]
