"""The trace breakdown drawn (reports.trace.breakdown): per comparison, each stage's
distribution in A and in B (the histograms of every traced trial and CPU merged, the
share of events per bucket over the bucket's middle, log x axis), and the stages'
medians stacked per variant (a stack of overlapping stages: its height is no latency
anyone saw, the caption says so)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from napilab.reports.plots.svg import color, label, log_numbers, numbers
from napilab.reports.trace.breakdown import Breakdown, Hist

Drawn = tuple[Figure, str] | str
MAX_PANELS = 12


def _curve(hist: Hist, unit: str) -> tuple[np.ndarray, np.ndarray]:
    scale = 1e-3 if unit == "us" else 1.0
    buckets = hist.buckets()
    total = hist.total or 1
    x = np.array([(b + (w / 2 if w > 1 else 0)) * scale for b, w, _ in buckets])
    y = np.array([c / total for _, _, c in buckets])
    return np.maximum(x, scale * 0.5), y


def distributions(found: Breakdown) -> Drawn:
    """One panel per stage with events in either arm: A's and B's share of events per
    bucket."""
    panels = []
    for s in found.stages:
        hists = [(v, found.hists.get((v, s.role, s.stage))) for v in found.traced]
        if any(h is not None and h.total for _, h in hists):
            panels.append((s, hists))
    if not panels:
        return "no stage had an event in either arm"
    shown = panels[:MAX_PANELS]
    cols = min(3, len(shown))
    rows = (len(shown) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.3 * rows), squeeze=False)
    roles = {s.role for s, _ in shown}
    for ax, (stage, hists) in zip(axes.flat, shown, strict=False):
        for i, (variant, hist) in enumerate(hists):
            if hist is None or not hist.total:
                continue
            x, y = _curve(hist, stage.unit)
            # one bucket (a work stage of 1 packet per poll) is a point, not a step
            ax.step(x, y, where="mid", color=color(i), label=label(variant), linewidth=1.2,
                    marker="o" if len(x) == 1 else None, markersize=4)
        ax.set_xscale("log")
        log_numbers(ax.xaxis)
        numbers(ax.yaxis)
        name = stage.stage if len(roles) == 1 else f"{stage.role}: {stage.stage}"
        ax.set_title(label(name))
        ax.set_xlabel(stage.unit)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right")
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    fig.tight_layout()
    note = "share of each arm's events per histogram bucket, every traced trial and CPU"
    if len(panels) > len(shown):
        note += f"; {len(panels) - len(shown)} more stage(s) not drawn"
    return fig, note


def stacked(found: Sequence[Breakdown]) -> Drawn:
    """Per variant (its traced trials), the time stages' p50 medians stacked."""
    columns: dict[str, dict[str, float]] = {}
    stages: list[str] = []
    for bd in found:
        for s in bd.stages:
            if s.unit != "us":
                continue
            key = s.stage if len({x.role for x in bd.stages}) == 1 else f"{s.role}: {s.stage}"
            for variant, value in ((bd.baseline, s.a_p50), (bd.variant, s.b_p50)):
                if value is not None:
                    columns.setdefault(variant, {})[key] = value
                    if key not in stages:
                        stages.append(key)
    if not columns:
        return "no time stage had an event"
    variants = list(columns)
    fig, ax = plt.subplots(figsize=(min(12.0, 2.5 + 1.1 * len(variants)), 3.2))
    bottom = np.zeros(len(variants))
    for i, stage in enumerate(stages):
        heights = np.array([columns[v].get(stage, 0.0) for v in variants])
        ax.bar(range(len(variants)), heights, 0.6, bottom=bottom, color=color(i),
               label=label(stage))
        bottom += heights
    ax.set_xticks(range(len(variants)), [label(v) for v in variants],
                  rotation=20 if len(variants) > 3 else 0)
    ax.set_ylabel("us")
    ax.set_ylim(0, float(bottom.max()) * 1.08 or 1.0)
    numbers(ax.yaxis)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig, ("p50 of each time stage (median over the traced repetitions), stacked; "
                 "stages overlap, so a stack's height is no end-to-end latency")


def figures(found: Sequence[Breakdown]) -> list[tuple[str, str, Drawn]]:
    """(name, title, drawn) of every figure of the breakdown."""
    out: list[tuple[str, str, Drawn]] = [
        (f"stages-{i}", f"Stage distributions, {bd.variant} vs {bd.baseline} (log x)",
         distributions(bd)) for i, bd in enumerate(found)]
    out.append(("stages-stacked", "Stage medians stacked per variant", stacked(found)))
    return out
