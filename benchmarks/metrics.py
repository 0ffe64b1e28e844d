"""croft run's /metrics for 200 containers x 20 syscalls: what a poll pays to publish, what a scrape
costs, and how many series it serves, beside prometheus_client's usual labelled Gauges, in one run.

    .venv/bin/python benchmarks/metrics.py [--containers 200] [--syscalls 20] [--repeat 30]

croft: the pure `series(poll, rows, ...)` on the poll loop, then a scrape renders the published tuple
with the one renderer (`render_exposition`, byte-equal to prometheus_client's `generate_latest` of the
same families) followed by `generate_latest` of croft's own registry (empty here), and the same scrape
over HTTP through the collector's server (httpx on loopback, a new connection each).
Labelled Gauges: the usual instrumentation, every poll `clear()` then `.labels(...).set(...)` for
every series (clearing is how stale containers would vanish), scraped with `generate_latest`.
Rows: 2 processes per container (the syscalls split between them), figures: median of `--repeat`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import httpx
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from croft.adapters.http.metrics import CONTENT_TYPE, SnapshotCollector, exposition_body, metrics_page
from croft.adapters.http.server import HttpServer, Response
from croft.domain.collector.snapshot import CgroupMembership, Instant, Poll, ProcessSample
from croft.domain.dataset.row import CgroupUsage, Process, Row, SyscallRate, Usage
from croft.domain.metrics import names as names
from croft.domain.metrics.exposition import Sample, parse_exposition
from croft.domain.metrics.series import Health, MetricsMemory, series

SYSCALLS = [
    "read", "write", "sendto", "recvfrom", "epoll_wait", "futex", "openat", "close", "mmap", "munmap",
    "fstat", "lseek", "ioctl", "clock_gettime", "nanosleep", "getpid", "poll", "brk", "accept4", "writev",
    "readv", "sendmsg", "recvmsg", "select", "madvise", "rt_sigaction", "rt_sigprocmask", "getrandom",
]  # fmt: skip


ZERO_RATES = (
    "ctx_voluntary_s", "ctx_involuntary_s", "read_bytes_s", "write_bytes_s",
    "network_rx_bytes_s", "network_tx_bytes_s", "runqueue_s",
)  # fmt: skip


def workload(containers: int, syscalls: int) -> tuple[Poll, tuple[Row, ...]]:
    """A poll of `containers` pods with 2 processes each, and their rows."""
    processes, rows = [], []
    for c in range(containers):
        cid = f"{c:064x}"
        pod = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{c:08x}.slice"
        path = f"{pod}/cri-containerd-{cid}.scope"
        membership = CgroupMembership(unified=path)
        usage = CgroupUsage(
            cpu_cores=0.5 + c % 7,
            cpu_throttled_fraction=0.01,
            memory_bytes=(c + 1) << 24,
            oom_kills=0,
            cpu_pressure_avg10=1.5,
            memory_pressure_avg10=0.0,
            io_pressure_avg10=0.25,
        )
        for p in range(2):
            tgid = 1000 + 2 * c + p
            processes.append(ProcessSample(tgid, "web", "/srv/web", "/", ("web",), membership, *[1] * 10))
            calls = tuple(
                SyscallRate(name=SYSCALLS[s], rate_per_sec=float(10 * (syscalls - s) + p))
                for s in range(p, syscalls, 2)
            )
            process = Process(comm="web", exe="/srv/web", cgroup=path, container_id=cid, cwd="/")
            row = Row(
                unix_ms=1_700_000_000_000,
                tgid=tgid,
                process=process,
                workload="no-gpu",
                usage=Usage(cpu_cores=0.5, rss_bytes=1 << 20, threads=4, **dict.fromkeys(ZERO_RATES, 0.0)),
                cgroup_usage=usage,
                syscalls=calls,
            )
            rows.append(row)
    poll = Poll(Instant(1_700_000_000_000, 0), 100, tuple(processes), ())
    return poll, tuple(rows)


def median_ms(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def gauges_arm(samples: tuple[Sample, ...]) -> tuple[Callable[[], None], Callable[[], bytes]]:
    """The labelled-Gauge way: (update every series for a poll, scrape)."""
    registry = CollectorRegistry()
    gauges: dict[str, Gauge] = {}
    for sample in samples:
        if sample.name not in gauges and not sample.name.endswith("_total"):
            gauges[sample.name] = Gauge(
                sample.name, names.HELP[sample.name], [k for k, _ in sample.labels], registry=registry
            )
    plain = [s for s in samples if not s.name.endswith("_total")]

    def update() -> None:
        for gauge in gauges.values():
            gauge.clear()
        for sample in plain:
            gauge = gauges[sample.name]
            (gauge.labels(*[v for _, v in sample.labels]) if sample.labels else gauge).set(sample.value)

    update()
    return update, lambda: generate_latest(registry)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--containers", type=int, default=200)
    parser.add_argument("--syscalls", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    poll, rows = workload(args.containers, args.syscalls)
    health = Health(0.01, 10_000, 0, 0, 0)

    samples, _ = series(poll, rows, health, MetricsMemory())
    collector = SnapshotCollector()
    collector.publish(samples)
    page = metrics_page(collector)
    body = exposition_body(page)
    assert len(parse_exposition(body.decode())) == len(samples)
    publish_ms = median_ms(
        lambda: collector.publish(series(poll, rows, health, MetricsMemory())[0]), args.repeat
    )
    scrape_ms = median_ms(lambda: exposition_body(page), args.repeat)

    server = HttpServer.bind("127.0.0.1:0")
    server.route("/metrics", lambda _: Response(200, CONTENT_TYPE, exposition_body(page)))
    server.start()
    host, port = server.address
    try:
        http_ms = median_ms(lambda: httpx.get(f"http://{host}:{port}/metrics").content, args.repeat)
    finally:
        server.close()

    update, scrape = gauges_arm(samples)
    gauge_update_ms = median_ms(update, args.repeat)
    gauge_scrape_ms = median_ms(scrape, args.repeat)
    per_container = len([s for s in samples if s.label(names.LABEL_CONTAINER_ID) == f"{0:064x}"])

    health_series = len(samples) - per_container * args.containers
    print(f"/metrics, {args.containers} containers x {args.syscalls} syscalls, median of {args.repeat}")
    print(f"series: {len(samples)} ({per_container} per container + {health_series} health)")
    print(f"body: {len(body) / 1024:.0f} KiB")
    print(f"{'':34}{'croft':>10}{'labelled Gauges':>18}{'ratio':>8}")
    for what, ours, theirs in (
        ("per poll (build + publish), ms", publish_ms, gauge_update_ms),
        ("per scrape (render + generate_latest), ms", scrape_ms, gauge_scrape_ms),
    ):
        print(f"{what:34}{ours:>10.2f}{theirs:>18.2f}{theirs / ours:>7.2f}x")
    print(f"{'per scrape over HTTP, ms':34}{http_ms:>10.2f}")


if __name__ == "__main__":
    main()
