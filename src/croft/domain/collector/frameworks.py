"""The framework catalog: a pure parser for catalog text (TOML, shape in frameworks.toml beside this
module) and the matcher that names the ML framework of a process.

A framework matches a process when any substring of any of its rules is found: `exe` in the exe's
basename, `cmdline` in the arguments joined by spaces, `libraries` in a mapped shared object's
basename. The first matching framework wins.
"""

from __future__ import annotations

import re
import tomllib

import attrs

RULE_KEYS = ("exe", "cmdline", "libraries")


class CatalogError(ValueError):
    """A catalog text that is not a valid catalog; the message starts with `line N:`."""


@attrs.frozen
class Framework:
    name: str
    exe: tuple[str, ...] = ()
    cmdline: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()


@attrs.frozen
class Catalog:
    """Frameworks in match order. `replace` is True when a user catalog asked to drop the built-in
    one instead of extending it."""

    frameworks: tuple[Framework, ...]
    replace: bool = False

    def extended_by(self, user: Catalog) -> Catalog:
        """The catalog in force with `user` given: `user` alone if it says `replace = true`, else
        the user's frameworks first, then this one's."""
        if user.replace:
            return Catalog(frameworks=user.frameworks)
        return Catalog(frameworks=user.frameworks + self.frameworks)


def _header_lines(text: str) -> list[int]:
    return [
        n for n, line in enumerate(text.splitlines(), start=1) if line.strip().startswith("[[framework]]")
    ]


def parse_catalog(text: str) -> Catalog:
    """Parse catalog text; raises `CatalogError` naming the line of the first mistake."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        line = found.group(1) if found else str(max(len(text.splitlines()), 1))  # "at end of document"
        raise CatalogError(f"line {line}: not valid TOML ({exc})") from exc
    headers = _header_lines(text)
    unknown = set(doc) - {"framework", "replace"}
    if unknown:
        key = sorted(unknown)[0]
        raise CatalogError(f"line {_line_of_key(text, key)}: unknown top-level key {key!r}")
    replace = doc.get("replace", False)
    if not isinstance(replace, bool):
        raise CatalogError(f"line {_line_of_key(text, 'replace')}: replace must be true or false")
    tables = doc.get("framework", [])
    if not isinstance(tables, list):
        raise CatalogError(f"line {_line_of_key(text, 'framework')}: use [[framework]] tables")
    frameworks = []
    for index, table in enumerate(tables):
        line = headers[index] if index < len(headers) else 1
        frameworks.append(_framework(table, line))
    return Catalog(frameworks=tuple(frameworks), replace=replace)


def _line_of_key(text: str, key: str) -> int:
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith(key):
            return n
    return 1


def _framework(table: object, line: int) -> Framework:
    if not isinstance(table, dict):
        raise CatalogError(f"line {line}: a framework must be a table")
    name = table.get("name")
    if not isinstance(name, str) or not name:
        raise CatalogError(f'line {line}: this framework has no name = "..."')
    extra = set(table) - {"name", *RULE_KEYS}
    if extra:
        raise CatalogError(
            f"line {line}: framework {name!r} has unknown key {sorted(extra)[0]!r} "
            f"(known: name, {', '.join(RULE_KEYS)})"
        )
    rules: dict[str, tuple[str, ...]] = {}
    for key in RULE_KEYS:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
            raise CatalogError(f"line {line}: {name}.{key} must be a list of non-empty strings")
        rules[key] = tuple(value)
    if not any(rules.values()):
        raise CatalogError(f"line {line}: framework {name!r} has no exe, cmdline or libraries rule")
    return Framework(name=name, **rules)


class Matcher:
    """Names the framework of a process from its exe, cmdline and libraries. Build once per
    catalog; matching is pure."""

    def __init__(self, catalog: Catalog) -> None:
        self._rules = [
            (fw.name, _any_of(fw.exe), _any_of(fw.cmdline), _any_of(fw.libraries))
            for fw in catalog.frameworks
        ]

    def match(self, exe: str, cmdline: tuple[str, ...], libraries: tuple[str, ...]) -> str | None:
        """The first framework whose rules match, or None."""
        exe_base = exe.rsplit("/", 1)[-1]
        joined = " ".join(cmdline)
        libs = "\n".join(libraries)
        for name, exe_rule, cmd_rule, lib_rule in self._rules:
            if (
                (exe_rule is not None and exe_rule.search(exe_base))
                or (cmd_rule is not None and cmd_rule.search(joined))
                or (lib_rule is not None and lib_rule.search(libs))
            ):
                return name
        return None


def _any_of(substrings: tuple[str, ...]) -> re.Pattern[str] | None:
    if not substrings:
        return None
    return re.compile("|".join(re.escape(s) for s in substrings))
