"""The repository's citations resolve inside it: every docs/*.md that code or docs cite exists, the
specification is not cited by a bare name from outside the repository, and nothing cites a ticket."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("src", "tests", "labs", "benchmarks", "scripts", "fixtures", "deploy", "bpf", "docs")
SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".c", ".sh", ".txt"}
CITED_DOC = re.compile(r"docs/([\w-]+\.md)")
BARE_SPEC = re.compile(r"(?<![\w/.-])(dataset|commands|experiments)\.md")
TICKET = re.compile(r"\b(issue|ticket)s? #?\d+", re.IGNORECASE)
THIS_FILE = Path(__file__).resolve()


def texts() -> list[tuple[Path, str]]:
    files = [REPO / "README.md", REPO / "Makefile", REPO / "pyproject.toml"]
    for root in ROOTS:
        if (REPO / root).is_dir():
            files += [p for p in (REPO / root).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return [(p, p.read_text(errors="replace")) for p in sorted(files) if p.resolve() != THIS_FILE]


def test_every_cited_doc_is_in_the_repository() -> None:
    missing = {
        f"{path.relative_to(REPO)}: docs/{name}"
        for path, text in texts()
        for name in CITED_DOC.findall(text)
        if not (REPO / "docs" / name).is_file()
    }
    assert missing == set()


def test_the_specification_is_cited_where_it_is() -> None:
    """Outside docs/ (where pages link each other by name), a page is cited as docs/<page>.md."""
    bare = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path, text in texts()
        if not path.is_relative_to(REPO / "docs")
        for match in BARE_SPEC.finditer(text)
    ]
    assert bare == []


def test_no_ticket_numbers() -> None:
    cited = [
        f"{path.relative_to(REPO)}: {m.group(0)}" for path, text in texts() for m in TICKET.finditer(text)
    ]
    assert cited == []
