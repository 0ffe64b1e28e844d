"""The candidate burst signals of recorded web runs, for research/burst_signals.ipynb and
research/lead_time.ipynb.

A run is a run directory of `run.py web` (workload.csv, timeline.json, prometheus.csv, scaler.log;
croft.runs.rundir) and its line of runs.jsonl, joined to croft's dataset by container id
(docs/experiments.md): the rows of the containers that runs.jsonl lists for the run, inside the
run's window widened by `MARGIN_MS` on each side. Time in every `Series` is seconds from the
burst's onset (the window's start for a run without a burst), so runs line up on one axis.

How rows become series (one value per poll; a process absent from a poll was idle, counted 0):
- syscall rates and process usage are summed over every process of the run's containers;
- cgroup CPU cores are summed over containers; throttled fraction and PSI are the worst
  (largest) container's, since one saturated pod degrades p95;
- a numeric row field the spec does not list (an offered-load signal added to the rows: today
  `ingress`, the load the kernel received in the pod's network namespace) is taken once per
  container per poll (the largest of its processes' values: `ingress` is on one row of each) and
  summed over containers; a poll where no container carried it has no sample.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from attrs import AttrsInstance

from croft import dataset
from croft.domain.dataset.codec import row_to_dict
from croft.errors import UserError
from croft.runs.load import SecondStats
from croft.runs.rundir import RunRecord, Timeline, read_records, read_timeline, read_workload

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "research-run"
"""The committed recording (a real two-arm burst on the test node, its README says how it was made):
what the notebooks open on a fresh clone, where the user has no runs of their own."""
POLL_MARGIN_MS = 2_000
AFTER_MS = 10_000
# The row fields of docs/dataset.md (and `node`); any other numeric leaf is an offered-load field
# (the `ingress` object of docs/dataset.md, and whatever later signal the rows gain).
SPEC_FIELDS = frozenset(
    {"unix_ms", "tgid", "node", "process", "workload", "ioctl_count", "since_last_gpu_ioctl_ms", "label"}
    | {"usage", "cgroup_usage", "syscalls", "short_lived"}
)
# Series groups, in the order the figures stack them.
GROUPS = ("load", "replicas", "syscalls", "offered", "process", "cgroup", "pressure", "prometheus", "scaler")
CGROUP_SUMMED = ("cpu_cores",)
CGROUP_WORST = ("cpu_throttled_fraction",)
PRESSURE = ("cpu_pressure_avg10", "memory_pressure_avg10", "io_pressure_avg10")
PROCESS_FIELDS = {"cpu_cores": "cores", "network_rx_bytes_s": "B/s", "network_tx_bytes_s": "B/s"}
PROMETHEUS_UNITS = {
    "cpu_cores": "cores",
    "cpu_throttled_fraction": "fraction",
    "memory_bytes": "bytes",
    "network_rx_bytes_s": "B/s",
    "network_tx_bytes_s": "B/s",
    "restarts": "count",
    "replicas": "replicas",
}
PROMETHEUS_WORST = frozenset({"cpu_throttled_fraction"})
_SCALER_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


@attrs.frozen
class Series:
    """One signal of one run: `values[i]` at `t_s[i]` seconds from the burst's onset, ascending t."""

    name: str
    group: str
    unit: str
    t_s: tuple[float, ...]
    values: tuple[float, ...]

    @property
    def label(self) -> str:
        return f"{self.name} ({self.unit})"


@attrs.frozen
class PromPoint:
    unix_s: float
    series: str
    pod: str
    value: float


@attrs.frozen
class ScalerPoll:
    """One line of scaler.log: croft scale's estimate (requests/s), the backlog it measured in the
    pods (requests; 0 when the line has none: only ingress signals measure one) and its decision at
    `unix_ms`."""

    unix_ms: int
    estimate_rps: float | None
    desired: int | None
    decision: str
    backlog_requests: float = 0.0


@attrs.frozen
class Run:
    """A recorded run and the dataset rows (as the dataset's JSON objects) of its containers."""

    record: RunRecord
    directory: Path
    workload: tuple[SecondStats, ...]
    timeline: Timeline | None
    prometheus: tuple[PromPoint, ...]
    scaler: tuple[ScalerPoll, ...]
    rows: tuple[Mapping[str, Any], ...]

    @property
    def name(self) -> str:
        return self.record.run

    @property
    def onset_ms(self) -> int:
        """The burst's onset (unix ms); the window's start for a run without a burst."""
        onset = self.record.burst_onset_ms
        return self.record.window_start_ms if onset is None else onset

    def seconds(self, unix_ms: float) -> float:
        """`unix_ms` as seconds from the onset."""
        return (unix_ms - self.onset_ms) / 1000

    @property
    def start_s(self) -> float:
        """The load's start (the window's), in seconds from the onset (<= 0)."""
        return self.seconds(self.record.window_start_ms)

    @property
    def burst_s(self) -> tuple[float, float] | None:
        """The burst's (onset, end) in seconds from the onset; None without a burst."""
        end = self.record.burst_end_ms
        return None if self.record.burst_onset_ms is None or end is None else (0.0, self.seconds(end))


def read_prometheus(path: Path) -> tuple[PromPoint, ...]:
    """prometheus.csv's rows; () when the run has none (it was recorded without --prometheus)."""
    if not path.exists():
        return ()
    with path.open(newline="", encoding="utf-8") as src:
        return tuple(
            PromPoint(float(r["unix_s"]), r["series"], r["pod"], float(r["value"]))
            for r in csv.DictReader(src)
        )


def parse_scaler_line(line: str) -> ScalerPoll | None:
    """One scaler.log line, logfmt (`ts=... estimate_rps=23.81+ desired=2 ... decision=up ...`) or
    JSON (`croft scale --log-format json`); None for a line without a time stamp. A `+` after the
    estimate (a lower bound: data incomplete) is dropped."""
    text = line.strip()
    fields: dict[str, str]
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError:
            return None
        fields = (
            {str(k): "" if v is None else str(v) for k, v in obj.items()} if isinstance(obj, dict) else {}
        )
    else:
        fields = {k: v.strip('"') for k, v in _SCALER_FIELD.findall(text)}
    ts = fields.get("ts")
    if ts is None:
        return None
    try:
        at = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    estimate = fields.get("estimate_rps", "").rstrip("+")
    desired = fields.get("desired", "")
    backlog = fields.get("backlog_requests", "")
    return ScalerPoll(
        unix_ms=round(at.timestamp() * 1000),
        estimate_rps=float(estimate) if _number(estimate) else None,
        desired=int(desired) if desired.isdigit() else None,
        decision=fields.get("decision", ""),
        backlog_requests=float(backlog) if _number(backlog) else 0.0,
    )


def _number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def read_scaler_log(path: Path) -> tuple[ScalerPoll, ...]:
    if not path.exists():
        return ()
    polls = (parse_scaler_line(line) for line in path.read_text(encoding="utf-8").splitlines())
    return tuple(p for p in polls if p is not None)


@attrs.frozen
class Inputs:
    """What a notebook reads (run directories, croft's dataset, the runs' name prefix), where it
    writes, and a sentence saying which, for its first output."""

    runs: Path
    dataset: Path
    out: Path
    prefix: str
    note: str


def notebook_inputs(environ: Mapping[str, str], here: Path = Path()) -> Inputs:
    """The inputs of labs/research's notebooks, run from `here` (labs/research): CROFT_RESEARCH_RUNS
    (default experiment/data/web, where run.py web writes), CROFT_RESEARCH_DATASET (default
    data/nodes, where collect.yml lands croft's dataset), CROFT_RESEARCH_OUT (default
    experiment/data/figures) and CROFT_RESEARCH_PREFIX. Where CROFT_RESEARCH_RUNS is not set and the
    default holds no runs.jsonl (a fresh clone), the committed recording `FIXTURE` and its dataset
    instead, and the note says so."""
    named = environ.get("CROFT_RESEARCH_RUNS")
    runs = Path(named) if named else here / "experiment" / "data" / "web"
    dataset = Path(environ.get("CROFT_RESEARCH_DATASET") or here / "data" / "nodes")
    out = Path(environ.get("CROFT_RESEARCH_OUT") or here / "experiment" / "data" / "figures")
    prefix = environ.get("CROFT_RESEARCH_PREFIX", "")
    if not named and not (runs / "runs.jsonl").exists():
        note = (
            f"No runs of your own under {runs} (run.py web writes them there): opening the committed "
            f"recording {FIXTURE} (a real two-arm burst on the test node; its README says how it was "
            "recorded). Set CROFT_RESEARCH_RUNS and CROFT_RESEARCH_DATASET to read others."
        )
        dataset = Path(environ.get("CROFT_RESEARCH_DATASET") or FIXTURE / "nodes")
        return Inputs(FIXTURE / "web", dataset, out, prefix, note)
    note = f"Reading the runs under {runs} and croft's dataset at {dataset}; figures and tables go to {out}."
    return Inputs(runs, dataset, out, prefix, note)


def dataset_rows(
    path: Path, container_ids: Iterable[str], from_ms: int, to_ms: int
) -> tuple[Mapping[str, Any], ...]:
    """The rows at `path` (a croft dataset: file, directory or directory of nodes) of the given
    containers within [from_ms, to_ms], as JSON objects, in time order. () when `path` holds no
    dataset."""
    found: list[Mapping[str, Any]] = []
    try:
        for cid in sorted(set(container_ids)):
            found += (
                row_to_dict(r) for r in dataset.rows(path, container_id=cid, from_ms=from_ms, to_ms=to_ms)
            )
    except UserError:
        return ()
    return tuple(sorted(found, key=lambda r: (r["unix_ms"], r["tgid"])))


def load_runs(runs_dir: Path, dataset_path: Path, prefix: str = "") -> list[Run]:
    """The open-loop runs of `<runs_dir>/runs.jsonl` whose name starts with `prefix` and whose
    directory holds a workload.csv, each joined to the dataset at `dataset_path` by container id."""
    runs = []
    for record in read_records(runs_dir):
        directory = runs_dir / record.run
        if not record.run.startswith(prefix) or not (directory / "workload.csv").exists():
            continue
        timeline_path = directory / "timeline.json"
        runs.append(
            Run(
                record=record,
                directory=directory,
                workload=tuple(read_workload(directory / "workload.csv")),
                timeline=read_timeline(timeline_path) if timeline_path.exists() else None,
                prometheus=read_prometheus(directory / "prometheus.csv"),
                scaler=read_scaler_log(directory / "scaler.log"),
                rows=dataset_rows(
                    dataset_path,
                    (cid for _, cid in record.containers),
                    record.window_start_ms - POLL_MARGIN_MS,
                    record.window_end_ms + AFTER_MS,
                ),
            )
        )
    return runs


def _series(run: Run, name: str, group: str, unit: str, points: Iterable[tuple[float, float]]) -> Series:
    ordered = sorted(points)
    return Series(name, group, unit, tuple(run.seconds(t) for t, _ in ordered), tuple(v for _, v in ordered))


def load_series(run: Run) -> list[Series]:
    """The client's view, per second: offered and achieved RPS, p95 latency, failures."""
    rows = run.workload

    def at(r: SecondStats) -> float:
        return r.unix_s * 1000

    return [
        _series(run, "offered (client)", "load", "req/s", ((at(r), r.target_rps) for r in rows)),
        _series(run, "achieved (client)", "load", "req/s", ((at(r), r.achieved_rps) for r in rows)),
        _series(run, "p95 latency", "load", "ms", ((at(r), r.p95_ms) for r in rows if r.p95_ms is not None)),
        _series(run, "failed + timed out", "load", "req/s", ((at(r), r.failures + r.timeouts) for r in rows)),
    ]


def replica_series(run: Run) -> list[Series]:
    """spec.replicas (a step at each rescale) and the pods Ready, from timeline.json."""
    timeline = run.timeline
    if timeline is None:
        return []
    start, end = timeline.start_ms, timeline.end_ms
    spec = [(start, float(timeline.initial_replicas))]
    for rescale in sorted(timeline.rescales, key=lambda r: r.at_ms):
        spec += [(rescale.at_ms, float(rescale.from_replicas)), (rescale.at_ms, float(rescale.to_replicas))]
    spec.append((end, spec[-1][1]))
    changes: list[tuple[int, int]] = []
    for pod in timeline.pods:
        if pod.ready_ms is not None:
            changes.append((pod.ready_ms, 1))
            if pod.deleted_ms is not None:
                changes.append((max(pod.deleted_ms, pod.ready_ms), -1))
    count = sum(delta for at, delta in changes if at <= start)
    ready = [(start, float(count))]
    for at, delta in sorted(changes):
        if start < at <= end:
            ready += [(at, float(count)), (at, float(count + delta))]
            count += delta
    ready.append((end, float(count)))
    return [
        Series("spec.replicas", "replicas", "replicas", *_steps(run, spec)),
        Series("pods Ready", "replicas", "pods", *_steps(run, ready)),
    ]


def _steps(run: Run, points: Sequence[tuple[float, float]]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return tuple(run.seconds(t) for t, _ in points), tuple(v for _, v in points)


def polls(rows: Iterable[Mapping[str, Any]]) -> Iterator[tuple[int, list[Mapping[str, Any]]]]:
    """The rows grouped by poll (their unix_ms), in time order."""
    by_poll: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_poll[int(row["unix_ms"])].append(row)
    yield from sorted(by_poll.items())


def per_container(rows: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """One row per container (the first of its processes): cgroup values are the container's. A
    host process's row (no container id) is no container's."""
    first: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        cid = row["process"].get("container_id")
        if cid is not None:
            first.setdefault(str(cid), row)
    return first


def offered_fields(row: Mapping[str, Any]) -> dict[str, float]:
    """The numeric leaves of a row outside the spec's fields, by dotted name (`a.b`; a list of
    `{name, <one number>}` objects gives `a.<name>`): where an offered-load signal appears."""
    found: dict[str, float] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int | float):
            found[prefix] = float(value)
        elif isinstance(value, Mapping):
            for key, inner in value.items():
                walk(f"{prefix}.{key}", inner)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping) and "name" in item:
                    numbers = [v for k, v in item.items() if k != "name" and isinstance(v, int | float)]
                    if len(numbers) == 1:
                        found[f"{prefix}.{item['name']}"] = float(numbers[0])

    for key, value in row.items():
        if key not in SPEC_FIELDS:
            walk(key, value)
    return found


def offered_unit(name: str) -> str:
    """The unit of an offered-load field, from its name's suffix (units in names, as the house style asks)."""
    if name.endswith("bytes_s"):
        return "B/s"
    if name.endswith(("_s", "_per_sec")):
        return "/s"
    if name.endswith("_bytes"):
        return "bytes"
    return "count"


def dataset_series(run: Run) -> list[Series]:
    """croft's view of the run's containers, one value per poll (module docstring: how)."""
    taken = list(polls(run.rows))
    if not taken:
        return []
    columns: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)

    def put(group: str, name: str, unit: str, at: int, value: float) -> None:
        column = columns[(group, name, unit)]
        column[at] = column.get(at, 0.0) + value

    for at, rows in taken:
        for row in rows:
            for call in row.get("syscalls", ()):
                put("syscalls", call["name"], "calls/s", at, float(call["rate_per_sec"]))
            for field, unit in PROCESS_FIELDS.items():
                if field in row["usage"]:  # a figure croft could not read is left out of the row
                    put("process", f"process {field}", unit, at, float(row["usage"][field]))
        containers = per_container(rows)
        for row in containers.values():
            for field in CGROUP_SUMMED:
                if field in row["cgroup_usage"]:
                    put("cgroup", f"cgroup {field}", "cores", at, float(row["cgroup_usage"][field]))
        for group, worst, unit in [("cgroup", f, "fraction") for f in CGROUP_WORST] + [
            ("pressure", f, "%") for f in PRESSURE
        ]:
            usages = [r["cgroup_usage"] for r in containers.values()]
            measured = [float(usage[worst]) for usage in usages if worst in usage]
            if measured:
                title = f"cgroup {worst}" if group == "cgroup" else f"PSI {worst}"
                put(group, title, unit, at, max(measured))
        offered: dict[str, dict[str, float]] = defaultdict(dict)
        for row in rows:
            cid = str(row["process"].get("container_id"))
            for name, value in offered_fields(row).items():
                offered[name][cid] = max(offered[name].get(cid, value), value)
        for name, by_container in offered.items():
            put("offered", name, offered_unit(name), at, sum(by_container.values()))
    out = []
    for (group, name, unit), column in sorted(columns.items()):
        # a poll without the field (an idle process's row was not written, a syscall not made) is 0;
        # an offered-load field is left out where no container carried it (not measured that poll)
        if group == "offered":
            points = sorted(column.items())
        else:
            points = [(at, column.get(at, 0.0)) for at, _ in taken]
        out.append(_series(run, name if group != "syscalls" else f"{name}()", group, unit, points))
    return out


def prometheus_series(run: Run) -> list[Series]:
    """prometheus.csv per series, summed over pods (the worst pod for a fraction)."""
    by_series: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for point in run.prometheus:
        by_series[point.series][point.unix_s].append(point.value)
    out = []
    for series, by_time in sorted(by_series.items()):
        combine = max if series in PROMETHEUS_WORST else sum
        points = ((t * 1000, combine(values)) for t, values in by_time.items())
        out.append(
            _series(run, f"prom {series}", "prometheus", PROMETHEUS_UNITS.get(series, "value"), points)
        )
    return out


def scaler_series(run: Run) -> list[Series]:
    """croft scale's estimate of the request rate and the backlog it measured (scaler.log), croft
    arm only; the backlog only when some poll measured one."""
    polls = [p for p in run.scaler if p.estimate_rps is not None]
    if not polls:
        return []
    out = [
        _series(
            run,
            "croft scale estimate",
            "scaler",
            "req/s",
            ((p.unix_ms, p.estimate_rps or 0.0) for p in polls),
        )
    ]
    if any(p.backlog_requests > 0 for p in polls):
        out.append(
            _series(
                run,
                "croft scale backlog",
                "scaler",
                "requests",
                ((p.unix_ms, p.backlog_requests) for p in polls),
            )
        )
    return out


def all_series(run: Run) -> list[Series]:
    """Every series of the run, in `GROUPS` order."""
    found = [
        *load_series(run),
        *replica_series(run),
        *dataset_series(run),
        *prometheus_series(run),
        *scaler_series(run),
    ]
    return sorted(found, key=lambda s: GROUPS.index(s.group))


def has_offered_fields(runs: Sequence[Run]) -> bool:
    """Whether any row of any run carries a field the spec does not list (an offered-load signal)."""
    return any(offered_fields(row) for run in runs for row in run.rows)


def cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else ""
    return str(value)


def write_csv(path: Path, rows: Sequence[AttrsInstance]) -> Path:
    """attrs rows as CSV (header: the field names; None as an empty cell)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        if rows:
            writer.writerow([f.name for f in attrs.fields(type(rows[0]))])
        for row in rows:
            writer.writerow([cell(v) for v in attrs.astuple(row, recurse=False)])
    return path


def text_table(rows: Sequence[AttrsInstance], columns: Sequence[str] | None = None) -> str:
    """attrs rows as an aligned plain-text table (for the notebooks' output)."""
    if not rows:
        return "(no rows)"
    names = list(columns or [f.name for f in attrs.fields(type(rows[0]))])
    cells = [names, *([cell(getattr(r, n)) for n in names] for r in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(names))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


@attrs.frozen
class BurstSummary:
    """One series of one run around the burst: mean before the onset, mean during the burst, their
    ratio (None when the baseline is 0), and the peak during the burst, in the series' unit."""

    run: str
    autoscaler: str
    signal: str
    group: str
    unit: str
    before_mean: float | None
    burst_mean: float | None
    ratio: float | None
    burst_peak: float | None


def burst_summary(run: Run, series: Series) -> BurstSummary:
    end = (run.burst_s or (0.0, math.inf))[1]
    before = [v for t, v in zip(series.t_s, series.values, strict=True) if run.start_s <= t < 0]
    during = [v for t, v in zip(series.t_s, series.values, strict=True) if 0 <= t <= end]
    before_mean = sum(before) / len(before) if before else None
    burst_mean = sum(during) / len(during) if during else None
    ratio = None if not before_mean or burst_mean is None else burst_mean / before_mean
    return BurstSummary(
        run.name, run.record.autoscaler, series.name, series.group, series.unit,
        before_mean, burst_mean, ratio, max(during, default=None),
    )  # fmt: skip
