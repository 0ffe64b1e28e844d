"""The boundary's figure: seconds above the latency objective against the time a burst takes to reach
its peak, one line per arm (simulated: solid, with the 95 % confidence interval of the mean as bars;
real: markers on a dotted line), the oracle's seconds shaded (below them no reactive scaler can
go), one panel per connection bound. PNG, and PDF and SVG beside it for print."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import boundary

COLORS = {"hpa": "tab:blue", "croft-sendto": "tab:orange", "croft-offered": "tab:green"}


def bound_title(bound_s: float) -> str:
    if bound_s > 0:
        return f"connections closed at {bound_s:g} s of age"
    return "connections unbounded (kept alive while used)"


def draw(table: Sequence[boundary.Cell], path: Path, title: str) -> Path:
    """Draw `table` (cells of any bounds) to `path` (PNG) and its .pdf and .svg; returns `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {"font.size": 12, "axes.titlesize": 13, "legend.fontsize": 10, "svg.fonttype": "none"}
    )
    bounds = sorted({c.bound_s for c in table}, reverse=True)
    fig, axes = plt.subplots(1, max(len(bounds), 1), figsize=(7.5 * max(len(bounds), 1), 5.6), squeeze=False)
    top = max((c.mean("slo_seconds") or 0.0 for c in table), default=1.0)
    for ax, bound in zip(axes[0], bounds, strict=False):
        mine = [c for c in table if c.bound_s == bound]
        shapes = sorted({c.shape_s for c in mine})
        oracle = [c for c in mine if c.arm == "oracle" and c.source == "sim"]
        if oracle:
            xs = [c.shape_s for c in sorted(oracle, key=lambda c: c.shape_s)]
            ys = [c.mean("slo_seconds") or 0.0 for c in sorted(oracle, key=lambda c: c.shape_s)]
            ax.fill_between(
                xs, 0, ys, color="0.6", alpha=0.35, lw=0, label="oracle: out of any reactive scaler's reach"
            )
            ax.plot(xs, ys, color="0.3", lw=1.2, ls="--", label=boundary.ARM_LABELS["oracle"])
        for arm, color in COLORS.items():
            for source, style, marker in (("sim", "-", "o"), ("real", ":", "s")):
                cells = sorted(
                    (c for c in mine if c.arm == arm and c.source == source), key=lambda c: c.shape_s
                )
                if not cells:
                    continue
                xs = [c.shape_s for c in cells]
                ys = [c.mean("slo_seconds") or 0.0 for c in cells]
                errors = []
                for c, y in zip(cells, ys, strict=True):
                    ci = c.summary("slo_seconds").ci95
                    errors.append((0.0, 0.0) if ci is None else (y - ci[0], ci[1] - y))
                n = "/".join(sorted({str(c.n) for c in cells}))
                ax.errorbar(
                    xs, ys, yerr=list(zip(*errors, strict=True)), color=color, ls=style, marker=marker,
                    ms=6 if source == "sim" else 8, mfc=color if source == "sim" else "white",
                    capsize=3, lw=1.8, label=f"{boundary.ARM_LABELS[arm]}, {source} (n={n})",
                )  # fmt: skip
        ax.set_xticks(shapes)
        ax.set_xticklabels(["step" if s == 0 else f"{s:g}" for s in shapes])
        ax.set_xlabel("seconds to reach the peak (5x the base)")
        ax.set_ylabel("seconds with p95 above 500 ms (mean, 95 % CI)")
        ax.set_ylim(0, top * 1.45 + 1)
        ax.set_title(bound_title(bound))
        ax.grid(alpha=0.3)
        ax.legend(loc="best", framealpha=0.9)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    for vector in (".pdf", ".svg"):
        fig.savefig(path.with_suffix(vector))
    plt.close(fig)
    return path
