"""Latency-load curves (reports.load.curves) as figures: one per latency metric and one per
role's busy cores, against the achieved load, the variants overlaid, each rung with its
95% interval as error bars. A saturated rung is drawn hollow with a cross; the ladder
metric's figure has the SLO as a dashed line and each variant's capacity (and its
interval) marked on the load axis."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from napilab.harness.stats.curves import Estimate
from napilab.reports.load.curves import Curve, LoadReport, Point
from napilab.reports.plots.svg import color, label, log_numbers, numbers

Drawn = tuple[Figure, str] | str
LOG_SPAN = 20.0  # a ladder spanning more than this factor of load gets a log load axis


def figures(report: LoadReport) -> list[tuple[str, str, Drawn]]:
    """(name, title, drawn) of every figure of REPORT."""
    out: list[tuple[str, str, Drawn]] = []
    unit = f" ({report.metric_unit})" if report.metric_unit else ""
    for metric in report.metrics:
        out.append((_name(f"load-{metric}"), f"{metric}{unit} against achieved load",
                    _figure(report, partial(_metric, metric), metric + unit, log=True,
                            slo=report.slo if metric == report.metric else None)))
    for role in report.roles:
        out.append((_name(f"load-cores-{role}"), f"busy cores of {role} against achieved "
                    "load", _figure(report, partial(_cores, role), f"busy cores {role}",
                                    log=False, slo=None)))
    return out


def _name(text: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", text.lower())


def _metric(metric: str, point: Point) -> Estimate | None:
    return point.metrics.get(metric)


def _cores(role: str, point: Point) -> Estimate | None:
    return point.cores.get(role)


def _figure(report: LoadReport, pick: Callable[[Point], Estimate | None], what: str, *,
            log: bool, slo: float | None) -> Drawn:
    drawn = [(c, [(p, e) for p in c.points if (e := pick(p)) is not None and p.load])
             for c in report.curves]
    if not any(points for _, points in drawn):
        return f"no rung has {what}"
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    loads = [float(p.load) for _, pts in drawn for p, _ in pts if p.load]
    for i, (curve, points) in enumerate(drawn):
        _curve(ax, curve, points, color(i))
    if slo is not None:
        ax.axhline(slo, color="#aa0000", linestyle="--", linewidth=1, label=f"SLO {slo:g}")
        for i, (curve, _) in enumerate(drawn):
            found = curve.capacity
            if found is not None and not found.below:
                ax.axvline(found.value, color=color(i), linestyle=":", linewidth=1)
    log_x = bool(loads) and max(loads) / max(min(loads), 1e-12) > LOG_SPAN
    if log_x:
        ax.set_xscale("log")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(label(f"achieved load ({report.unit})" if report.unit else "achieved load"))
    ax.set_ylabel(label(what))
    for axis, scaled in ((ax.xaxis, log_x), (ax.yaxis, log)):
        (log_numbers if scaled else numbers)(axis)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    saturated = sum(1 for c in report.curves for p in c.points if p.saturated)
    return fig, (f"{saturated} saturated rung(s) drawn hollow with a cross" if saturated
                 else "")


def _curve(ax: Axes, curve: Curve, points: list[tuple[Point, Estimate]], colour: str) -> None:
    xs = [float(p.load or 0) for p, _ in points]
    ys = [e.value for _, e in points]
    low = [max(e.value - e.bounds[0], 0.0) for _, e in points]
    high = [max(e.bounds[1] - e.value, 0.0) for _, e in points]
    xerr = [[max(p.achieved.value - p.achieved.bounds[0], 0.0) if p.achieved else 0.0
             for p, _ in points],
            [max(p.achieved.bounds[1] - p.achieved.value, 0.0) if p.achieved else 0.0
             for p, _ in points]]
    ax.errorbar(xs, ys, yerr=[low, high], xerr=xerr, color=colour, linewidth=1.2,
                elinewidth=0.8, capsize=2, marker="o", markersize=4, label=label(curve.variant))
    hollow = [(x, y) for (p, _), x, y in zip(points, xs, ys, strict=True) if p.saturated]
    if hollow:
        ax.scatter([x for x, _ in hollow], [y for _, y in hollow], s=60, facecolors="white",
                   edgecolors=colour, linewidths=1.2, zorder=4)
        ax.scatter([x for x, _ in hollow], [y for _, y in hollow], s=30, marker="x",
                   color=colour, zorder=5)

