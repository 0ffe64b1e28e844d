"""croft collect: pull each node's dataset from the DaemonSet.

Its options' help comes from the docstring. On a terminal each node's copy shows a bar.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from croft.adapters.threads import InOrder
from croft.app.options import check_number
from croft.app.progress import Progress
from croft.domain.deploy.labels import COLLECTOR_SELECTOR, METRICS_PORT
from croft.errors import UserError

if TYPE_CHECKING:
    from croft.adapters.dataset.fetch import Deadline, HttpDatasetSource
    from croft.adapters.dataset.node_copy import NodeResult


# (node, a context manager yielding that node's source), in node order
Targets = list[tuple[str, Callable[[], AbstractContextManager["HttpDatasetSource"]]]]


def collect(
    *,
    namespace: str = "croft",
    out: Path = Path("research/data/nodes"),
    kubeconfig: Path | None = None,
    selector: str = COLLECTOR_SELECTOR,
    port: int = METRICS_PORT,
    url: tuple[str, ...] = (),
    timeout: float = 30.0,
    deadline: float = 3600.0,
) -> int:
    """Copy each collector pod's closed segments and live file into <out>/<node>/.

    Parameters
    ----------
    namespace
        the collector's namespace
    out
        where per-node directories go
    kubeconfig
        the kubeconfig; default: $KUBECONFIG, ~/.kube/config or in-cluster
    selector
        label selector of the collector pods
    port
        the collectors' --metrics-addr port
    url
        NODE=URL of a collector reached directly (e.g. one started by croft deploy docker), instead of
        the cluster; repeatable
    timeout
        seconds a collector may stay silent before it counts as gone
    deadline
        seconds the whole collect may take; what landed by then is kept and continued next time
    """
    from croft.adapters.dataset.fetch import Deadline

    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a directory for the per-node datasets")
    check_number("--timeout", timeout, 0, 86400, "seconds", low_open=True)
    check_number("--deadline", deadline, 0, 7 * 86400, "seconds", low_open=True)
    if not url:
        from croft.domain.deploy.k8s_names import label_problem

        if problem := label_problem("--namespace", namespace):
            raise UserError(problem)
    budget = Deadline(deadline)
    with _targets(namespace, kubeconfig, selector, port, url, timeout, budget) as targets:
        if not targets:
            raise UserError(
                f"no running collector pods in namespace {namespace} (selector {selector}); "
                "deploy them with croft deploy kubernetes"
            )
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            from croft.adapters.dataset.node_copy import local_write_sentence

            raise UserError(f"{local_write_sentence(exc, out)}; give another --out") from None
        return copy_all(targets, out, budget)


def url_targets(urls: tuple[str, ...]) -> list[tuple[str, str]]:
    """(node, base URL) of each `--url NODE=URL`, in node order; raises `UserError` for a malformed
    entry, a node name that is not a plain safe name, or a node given twice."""
    from croft.domain.dataset.http import is_safe_name

    found: dict[str, str] = {}
    for item in urls:
        node, sep, base = item.partition("=")
        if not sep or not base.startswith(("http://", "https://")) or not base.isprintable():
            raise UserError(
                f"--url {item!r:.200} is not NODE=http://host:port; give e.g. gpu-a=http://10.0.0.5:9464"
            )
        if not is_safe_name(node):
            raise UserError(
                f"--url node name {node!r:.100} is not a plain safe name (letters, digits, . _ -, "
                "one line, not starting with . or -)"
            )
        if node in found:
            raise UserError(
                f"--url names node {node} twice ({found[node]} and {base}); give each node one name"
            )
        found[node] = base
    return sorted(found.items())


@contextmanager
def _targets(
    namespace: str,
    kubeconfig: Path | None,
    selector: str,
    port: int,
    urls: tuple[str, ...],
    timeout_s: float,
    deadline: Deadline,
) -> Iterator[Targets]:
    from croft.adapters.dataset.fetch import HttpDatasetSource
    from croft.adapters.dataset.transports import HttpxTransport, SocketTransport

    if urls:
        targets: Targets = []
        for node, base in url_targets(urls):

            @contextmanager
            def direct(base: str = base) -> Iterator[HttpDatasetSource]:
                transport = SocketTransport(base, timeout_s)
                try:
                    yield HttpDatasetSource(transport, "", f"the collector at {base}", deadline)
                finally:
                    transport.close()

            targets.append((node, direct))
        yield targets
        return

    from croft.adapters.kube.cluster import Kube, load_configuration
    from croft.adapters.kube.port import Denied, KubeError
    from croft.domain.deploy.cluster import collector_targets

    kube = Kube(load_configuration(kubeconfig))
    try:
        try:
            pods = kube.pods(namespace, selector)
        except KubeError as exc:
            hint = (
                "bind the Role croft-collect to your user" if isinstance(exc, Denied) else "check the cluster"
            )
            raise UserError(f"cannot list the collector pods in {namespace}: {exc}; {hint}") from exc
        found = collector_targets(pods)
        for pod, reason in found.skipped:
            print(f"skipped pod {namespace}/{pod}: {reason}", file=sys.stderr)
        with kube.http(timeout_s) as http:

            def proxied(pod: str) -> Callable[[], AbstractContextManager[HttpDatasetSource]]:
                base = f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy"
                what = f"pod {namespace}/{pod}"
                return lambda: nullcontext(HttpDatasetSource(HttpxTransport(http), base, what, deadline))

            yield [(node, proxied(pod)) for node, pod in found.nodes]
    finally:
        kube.close()


PARALLEL_NODES = 4  # nodes copied at once: one node's fsync and server overlap another's reads


@attrs.frozen
class _Outcome:
    result: NodeResult | None
    moved_bytes: int
    written_bytes: int
    error: str = ""


def copy_all(targets: Targets, out: Path, deadline: Deadline | None = None) -> int:
    """Copy every node's dataset into `out/<node>/` (up to `PARALLEL_NODES` at once), a line per node
    in node order; 1 when any node failed. Interrupted, the copies stop at their next read (`deadline`
    is stopped) and what landed is kept."""
    from croft.adapters.dataset.fetch import Deadline

    stop = deadline if deadline is not None else Deadline(None)
    failed = 0
    moved = written = 0
    with Progress() as bar:
        tasks = [bar.add(node) for node, _ in targets]
        calls = [
            (
                _copy_node,
                open_source,
                out / node,
                partial(_advance, bar, task),
                partial(_plan, bar, task),
            )
            for (node, open_source), task in zip(targets, tasks, strict=True)
        ]
        workers = InOrder(calls, max(min(PARALLEL_NODES, len(targets)), 1), name="croft-collect")
        try:
            for at, ((node, _), task) in enumerate(zip(targets, tasks, strict=True)):
                outcome = workers.result(at)
                bar.remove(task)
                moved += outcome.moved_bytes
                written += outcome.written_bytes
                failed += outcome.result is None
                _report(node, outcome)
        except BaseException:
            stop.stop()
            raise
        finally:
            workers.join()
    print(
        f"{len(targets) - failed} of {len(targets)} nodes collected into {out}: "
        f"{_mb(written)} written, {_mb(moved)} moved"
    )
    return 1 if failed else 0


def _report(node: str, outcome: _Outcome) -> None:
    result = outcome.result
    if result is None:
        print(f"{node}: not collected: {outcome.error}; {_KEPT}")
        return
    print(
        f"{node}: {result.files} files, {_mb(result.bytes_written)} copied, {result.unchanged} unchanged"
        + (f", {len(result.refused)} refused" if result.refused else "")
    )
    for name, reason in result.refused:
        print(f"  refused {name!r:.100}: {reason}")
    for note in result.notes:
        print(f"  {note}")


_KEPT = "what landed is kept, the next collect continues"


def _copy_node(
    open_source: Callable[[], AbstractContextManager[HttpDatasetSource]],
    directory: Path,
    on_bytes: Callable[[int], None],
    on_plan: Callable[[int], None],
) -> _Outcome:
    """One node's copy, on a worker thread; a failure the user should read is in `error`."""
    from croft.adapters.dataset.fetch import FetchError
    from croft.adapters.dataset.node_copy import LocalWriteError, NodeCopy, RefusedNode

    copy = None
    moved = 0
    try:
        with open_source() as source:
            copy = NodeCopy(source, directory, on_bytes=on_bytes, on_plan=on_plan)
            try:
                result = copy.run()
            finally:
                moved = source.moved_bytes
    except (FetchError, RefusedNode, LocalWriteError) as exc:
        written = copy.result.bytes_written if copy is not None else 0
        return _Outcome(None, moved, written, str(exc))
    return _Outcome(result, moved, result.bytes_written)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n} bytes"


def _advance(bar: Progress, task: int, n: int) -> None:
    bar.update(task, advance=n)


def _plan(bar: Progress, task: int, n: int) -> None:
    bar.update(task, total=n)
