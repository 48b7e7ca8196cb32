"""The latency-CPU frontier (reports.ab.frontier) as a figure: the primary latency
metric against busy cores, one point per variant at its medians with both 95% CIs of
the median as error bars; the frontier's variants filled and joined in order of cores,
the dominated ones hollow (no line joins them: a frontier judged beyond the noise need
not be a staircase). For a `matrix`, one more panel per axis: the points coloured by
that parameter's value, filled where they are on that value's own frontier."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from napilab.reports.ab import frontier as ab_frontier
from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Table, with_unit
from napilab.reports.plots.svg import color, label, numbers

Drawn = tuple[Figure, str] | str
MAX_NAMED = 16  # points labelled with their variant's name; beyond, the text lists them


def _bars(ci: tuple[float, float] | None, value: float) -> list[float]:
    if ci is None or not all(math.isfinite(b) for b in ci):
        return [0.0, 0.0]
    return [max(value - ci[0], 0.0), max(ci[1] - value, 0.0)]


def _draw(ax: Axes, found: ab_frontier.Frontier, colours: dict[str, str],
          named: bool, legend: str | None = None) -> None:
    for i, p in enumerate(found.points):
        colour = colours.get(p.variant, "#333333")
        ax.errorbar([p.cores], [p.latency], xerr=[[b] for b in _bars(p.cores_ci, p.cores)],
                    yerr=[[b] for b in _bars(p.latency_ci, p.latency)], fmt="none",
                    ecolor=colour, elinewidth=0.8, alpha=0.6, zorder=2)
        ax.scatter([p.cores], [p.latency], s=40 if p.on_frontier else 30, zorder=3,
                   color=colour if p.on_frontier else "white", edgecolors=colour,
                   linewidths=1.2, label=legend if i == 0 else None)
        if named:
            ax.annotate(label(p.variant), (p.cores, p.latency), textcoords="offset points",
                        xytext=(4, 4), fontsize=6)


def frontier(run: RunData, table: Table) -> Drawn:
    return figure(table, run.manifest.parameters)


def figure(table: Table, parameters: Mapping[str, Mapping[str, Any]] | None = None) -> Drawn:
    """The frontier of the table's columns (a run's variants, or `napilab compare`'s
    label x variant columns), with a panel per matrix axis of `parameters`."""
    found = ab_frontier.frontier(table)
    if isinstance(found, str):
        return found
    groups = ab_frontier.axes(parameters, [p.variant for p in found.points])
    panels = 1 + len(groups)
    fig, axes = plt.subplots(1, panels, figsize=(5.6 * panels, 3.8), squeeze=False)
    first = axes[0][0]
    colours = {v: color(i) for i, v in enumerate(table.variants)}
    named = len(found.points) <= MAX_NAMED
    _draw(first, found, colours, named)
    first.set_title(label(f"all {len(found.points)} variants"))
    for ax, (axis, values) in zip(axes[0][1:], groups.items(), strict=True):
        for i, (value, members) in enumerate(values.items()):
            part = ab_frontier.frontier(table, members)
            points = part.points if isinstance(part, ab_frontier.Frontier) else tuple(
                p for p in found.points if p.variant in members)
            _draw(ax, ab_frontier.Frontier(found.latency_label, found.latency_unit, points),
                  {p.variant: color(i) for p in points}, False, label(f"{axis}={value}"))
        ax.set_title(label(f"by {axis}"))
        ax.legend(fontsize=6)
    for ax in axes[0]:
        ax.set_xlabel("busy cores")
        ax.set_ylabel(label(with_unit(found.latency_label, found.latency_unit)))
        numbers(ax.xaxis, ax.yaxis)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    front = ", ".join(p.variant for p in found.front)
    note = (f"filled: the frontier (no other variant is clearly better on latency or busy "
            f"cores, beyond the intervals, and no worse on the other): {front}; hollow: "
            "dominated; bars: 95% CIs of the medians (below 6 repetitions, the range of "
            "the repetitions)")
    if groups:
        note += "; a panel per matrix axis, filled where a point is on its value's own " \
                "frontier"
    return fig, note
