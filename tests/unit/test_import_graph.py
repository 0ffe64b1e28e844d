"""croft's modules import one another without cycles, lazy imports inside functions included: a
cycle is two modules that each need the other to be understood, which is how the twin paths of
earlier versions grew (`live_memory` and `summaries`, `answers` and `progress`)."""

from __future__ import annotations

import grimp


def imports(graph: grimp.ImportGraph, module: str) -> list[str]:
    """What `module` imports, but a package it belongs to or a module of its own (a package's
    `__init__` re-exporting its modules, they importing it, is not a cycle)."""
    return sorted(
        target
        for target in graph.find_modules_directly_imported_by(module)
        if not (target.startswith(module + ".") or module.startswith(target + "."))
    )


def strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """The groups of modules that reach each other through `imports`, larger than one (Tarjan's
    algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(imports(graph, start)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(imports(graph, target))))
                    break
                if target in on_stack:
                    low[module] = min(low[module], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == module:
                            break
                    if len(group) > 1:
                        groups.append(group)

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return groups


def test_no_module_of_croft_is_in_an_import_cycle() -> None:
    graph = grimp.build_graph("croft")
    assert [sorted(group) for group in strongly_connected(graph)] == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.b", "a.c", "d"):
        graph.add_module(module)
    graph.add_import(importer="a.b", imported="a.c")
    graph.add_import(importer="a.c", imported="a.b")
    graph.add_import(importer="a", imported="a.b")
    graph.add_import(importer="a.b", imported="a")
    assert sorted(map(sorted, strongly_connected(graph))) == [["a.b", "a.c"]]
