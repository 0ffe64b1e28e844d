"""Figures of research/burst_signals.ipynb and research/lead_time.ipynb, for a paper: every axis
labelled with its unit, a legend on every panel, mean ± sd across runs, written as SVG and PDF
(text kept as text in the SVG; no creation date, so an unchanged figure is an unchanged file)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import attrs
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from burst_series import Run, Series, burst_summary
from leadtime import OBJECTIVE_MS, Distribution, LeadTime, objective_crossed_s

FORMATS: tuple[str, ...] = ("svg", "pdf")
TOP_SYSCALLS = 6
# where a request shows in the syscalls: its connection accepted, read, answered
MEAN_SD_OFFERED = ("ingress.tcp_data_segments_s", "ingress.tcp_connections_s", "ingress.listen_backlog")
REQUEST_SYSCALLS = ("accept4()", "accept()", "recvfrom()", "read()", "sendto()", "write()")
OBJECTIVE_COLOR = "tab:red"


def paper_style() -> None:
    """rcParams for print: small serif-free fonts, text as text in SVG, TrueType in PDF."""
    plt.rcParams.update(
        {
            "font.size": 8,
            "axes.titlesize": 9,
            "legend.fontsize": 7,
            "svg.fonttype": "none",
            "svg.hashsalt": "croft",
            "pdf.fonttype": 42,
            "axes.grid": True,
            "grid.alpha": 0.3,
        }
    )


def save(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """`<out_dir>/<stem>.svg` and `.pdf`; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        path = out_dir / f"{stem}.{fmt}"
        fig.savefig(
            path,
            format=fmt,
            bbox_inches="tight",
            metadata={"Date": None} if fmt == "svg" else {"CreationDate": None},
        )
        paths.append(path)
    plt.close(fig)
    return paths


def _mark_burst(ax: Axes, run: Run, crossed: float | None) -> None:
    if run.burst_s is not None:
        ax.axvspan(*run.burst_s, color="0.9", zorder=0)
    if crossed is not None:
        ax.axvline(crossed, color=OBJECTIVE_COLOR, linestyle=":", linewidth=1)


def _plot(ax: Axes, series: Sequence[Series], ylabel: str, empty: str, **style: object) -> None:
    for s in series:
        ax.plot(s.t_s, s.values, label=s.name, linewidth=1, **style)  # type: ignore[arg-type]
    ax.set_ylabel(ylabel)
    if series:
        ax.legend(loc="upper left", ncols=2)
    else:
        ax.text(0.5, 0.5, empty, transform=ax.transAxes, ha="center", va="center", color="0.4")


def _twin(ax: Axes, series: Sequence[Series], ylabel: str, color: str) -> None:
    """`series` on a right-hand axis; its legend entries join the left axis' legend."""
    if not series:
        return
    right = ax.twinx()
    for s in series:
        right.plot(s.t_s, s.values, label=s.name, linewidth=1, color=color, linestyle="--")
    right.set_ylabel(ylabel)
    right.grid(False)
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = right.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, loc="upper left", ncols=2)


def _named(series: Sequence[Series], *names: str) -> list[Series]:
    return [s for s in series if s.name in names]


def _group(series: Sequence[Series], group: str) -> list[Series]:
    return [s for s in series if s.group == group]


def top_syscalls(run: Run, series: Sequence[Series], count: int = TOP_SYSCALLS) -> list[Series]:
    """The request path's syscalls (REQUEST_SYSCALLS) present in the run, then the others with the
    highest mean rate during the burst, `count` in all."""
    calls = _group(series, "syscalls")
    preferred = [s for name in REQUEST_SYSCALLS for s in calls if s.name == name]
    others = sorted(
        (s for s in calls if s not in preferred), key=lambda s: -(burst_summary(run, s).burst_mean or 0.0)
    )
    return (preferred + others)[:count]


def run_figure(run: Run, series: Sequence[Series], out_dir: Path) -> list[Path]:
    """Every candidate signal of one run around its burst's onset, with p95 latency and replicas on
    the same time axis: `<out_dir>/burst_signals-<run>.svg|pdf`."""
    crossed = objective_crossed_s(run)
    fig, axes = plt.subplots(9, 1, figsize=(7, 17), sharex=True)
    latency, replicas, calls, offered, queues, cgroup, pressure, prom_cpu, prom_net = axes
    _plot(latency, _named(series, "p95 latency"), "p95 latency (ms)", "no latency")
    latency.axhline(
        OBJECTIVE_MS,
        color=OBJECTIVE_COLOR,
        linestyle="--",
        linewidth=1,
        label=f"objective {OBJECTIVE_MS:g} ms",
    )
    latency.set_yscale("log")
    _twin(latency, _named(series, "offered (client)"), "offered load (req/s)", "0.3")
    _plot(replicas, _group(series, "replicas"), "replicas / pods", "no timeline.json")
    _plot(calls, top_syscalls(run, series), "syscalls (calls/s)", "no dataset rows for this run's containers")
    calls.set_yscale("symlog", linthresh=1.0)
    offered_all = _group(series, "offered")
    scaler = _group(series, "scaler")
    rates = [s for s in offered_all if s.unit == "/s"] + [s for s in scaler if s.unit == "req/s"]
    _plot(offered, rates, "offered-load signal (per s)", "the rows carry no offered-load field")
    _twin(offered, _named(series, "offered (client)"), "client offered (req/s)", "0.3")
    queued = [s for s in offered_all if s.unit != "/s"] + [s for s in scaler if s.unit != "req/s"]
    levels = [attrs.evolve(s, name=s.label) for s in queued]
    _plot(queues, levels, "offered-load bytes / queues", "the rows carry no offered-load field")
    if levels:
        queues.set_yscale("symlog", linthresh=1.0)
    _plot(cgroup, _named(series, "cgroup cpu_cores"), "cgroup CPU (cores)", "no dataset rows")
    _twin(
        cgroup,
        _named(series, "cgroup cpu_throttled_fraction"),
        "throttled (fraction of periods)",
        "tab:purple",
    )
    _plot(pressure, _group(series, "pressure"), "PSI avg10 (%)", "no dataset rows")
    _plot(prom_cpu, _named(series, "prom cpu_cores"), "Prometheus CPU (cores)", "no Prometheus CPU series")
    _twin(prom_cpu, _named(series, "prom cpu_throttled_fraction"), "throttled (fraction)", "tab:purple")
    net = _named(series, "prom network_rx_bytes_s", "prom network_tx_bytes_s")
    _plot(prom_net, net, "Prometheus network (B/s)", "no Prometheus network series")
    for ax in axes:
        _mark_burst(ax, run, crossed)
    prom_net.set_xlabel("time from burst onset (s); shaded: burst; red dotted: p95 first > objective")
    fig.suptitle(f"{run.name} ({run.record.autoscaler})")
    fig.tight_layout(rect=(0, 0, 1, 0.99))
    return save(fig, out_dir, f"burst_signals-{run.name}")


def mean_sd(
    per_run: Sequence[Series], step_s: float = 1.0
) -> tuple[list[float], list[float], list[float], list[int]]:
    """(t, mean, sd, n) on a `step_s` grid over the runs' common span: each run's series linearly
    interpolated, sd 0 for one run."""
    start = max(s.t_s[0] for s in per_run)
    end = min(s.t_s[-1] for s in per_run)
    grid = [start + i * step_s for i in range(math.floor((end - start) / step_s) + 1)] if end >= start else []
    means, sds, counts = [], [], []
    for t in grid:
        values = [_interp(s, t) for s in per_run]
        mean = sum(values) / len(values)
        means.append(mean)
        sds.append(
            math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
        )
        counts.append(len(values))
    return grid, means, sds, counts


def _interp(series: Series, t: float) -> float:
    ts, vs = series.t_s, series.values
    for i in range(1, len(ts)):
        if ts[i] >= t:
            if ts[i] == ts[i - 1]:
                return vs[i]
            return vs[i - 1] + (vs[i] - vs[i - 1]) * (t - ts[i - 1]) / (ts[i] - ts[i - 1])
    return vs[-1]


def mean_sd_figure(runs: Sequence[Run], series: Sequence[Sequence[Series]], out_dir: Path) -> list[Path]:
    """Mean ± sd across runs of the main signal of each group, on the time axis from the onset:
    `<out_dir>/burst_signals-mean_sd.svg|pdf`."""
    names = ["p95 latency", "spec.replicas", "offered (client)"]
    names += ["sendto()", "recvfrom()"]
    offered = {s.name for found in series for s in found if s.group == "offered"}
    # the two ingress candidates (a rate and a queue), and any offered-load field beyond ingress
    names += [n for n in MEAN_SD_OFFERED if n in offered]
    names += sorted(n for n in offered if not n.startswith("ingress."))
    names += ["croft scale estimate"]
    names += ["cgroup cpu_cores", "cgroup cpu_throttled_fraction", "PSI cpu_pressure_avg10", "prom cpu_cores"]
    panels = [
        (n, [next(s for s in found if s.name == n) for found in series if any(s.name == n for s in found)])
        for n in names
    ]
    panels = [(n, found) for n, found in panels if found]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 1.6 * len(panels) + 0.6), sharex=True, squeeze=False)
    for ax, (name, found) in zip(axes[:, 0], panels, strict=True):
        t, mean, sd, _ = mean_sd(found)
        ax.plot(t, mean, linewidth=1.2, label=f"{name}: mean (n = {len(found)} runs)")
        ax.fill_between(
            t,
            # a log axis (p95) shows the band's lower edge down to a tenth of the mean
            [max(m - d, m / 10) if name == "p95 latency" else m - d for m, d in zip(mean, sd, strict=True)],
            [m + d for m, d in zip(mean, sd, strict=True)],
            alpha=0.3,
            label="± sd",
        )
        if name == "p95 latency":
            ax.set_yscale("log")
            ax.axhline(
                OBJECTIVE_MS,
                color=OBJECTIVE_COLOR,
                linestyle="--",
                linewidth=1,
                label=f"objective {OBJECTIVE_MS:g} ms",
            )
        ax.axvline(0, color="0.3", linewidth=0.8)
        ax.set_ylabel(found[0].unit)
        ax.legend(loc="upper left")
    axes[-1, 0].set_xlabel("time from burst onset (s)")
    fig.tight_layout()
    return save(fig, out_dir, "burst_signals-mean_sd")


def lead_time_figure(rows: Sequence[LeadTime], dists: Sequence[Distribution], out_dir: Path) -> list[Path]:
    """Per signal: each run's lead time (a marker per autoscaler arm), the mean ± sd across runs,
    and 0 where p95 crossed the objective: `<out_dir>/lead_time.svg|pdf`."""
    order = [d.signal for d in dists]
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(order) + 1.2))
    markers: dict[str, str] = {}
    for row in rows:
        if row.lead_s is None:
            continue
        new_arm = row.autoscaler not in markers
        marker = markers.setdefault(row.autoscaler, "osD^v"[len(markers) % 5])
        label = f"one run, arm {row.autoscaler}" if new_arm else None
        ax.plot(
            row.lead_s,
            order.index(row.signal),
            marker=marker,
            linestyle="",
            color="tab:blue",
            alpha=0.6,
            label=label,
        )
    labelled = False
    for y, d in enumerate(dists):
        if d.mean_s is None:
            ax.text(
                0.99,
                y,
                "no lead time",
                transform=ax.get_yaxis_transform(),
                ha="right",
                va="center",
                color="0.4",
            )
            continue
        label = None if labelled else "mean ± sd across runs"
        labelled = True
        ax.errorbar(
            d.mean_s, y, xerr=d.sd_s or 0.0, fmt="|", color="black", capsize=3, markersize=10, label=label
        )
    ax.axvline(
        0, color=OBJECTIVE_COLOR, linestyle="--", linewidth=1, label=f"p95 first > {OBJECTIVE_MS:g} ms"
    )
    ax.set_yticks(range(len(order)), order)
    ax.set_ylim(-0.7, len(order) - 0.3)
    ax.invert_yaxis()
    ax.set_xlabel("lead time (s): detection before p95 crosses the objective (> 0 is early)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.6 / (0.28 * len(order) + 1.2)), ncols=2)
    fig.tight_layout()
    return save(fig, out_dir, "lead_time")
