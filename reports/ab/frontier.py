"""The latency-CPU frontier of a run: which variants no other beats on both.

One point per column of the A/B table: the median of its primary latency line (the
first primary line in microseconds, p99 when there is one) and the median of its busy
cores (reports.ab.cpu_cost; several roles' busy cores are summed per trial), each with
its distribution-free 95% CI of the median (below 6 repetitions, which cannot give one,
the range of the repetitions). A variant is *dominated* when another is clearly better
on one of the two (its interval wholly below this one's: at 3 repetitions, every one of
them better than every one of the other's) and no
worse on the other (its median below this one's, or inside this one's CI): a hair's
difference of medians that the repetitions cannot tell apart dominates nothing, so two
variants within each other's noise both stay on the frontier. The others form the
frontier. For a `matrix`, the same per axis: the points grouped by that parameter's
values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from napilab.harness.stats.stats import StatsError, summarize
from napilab.reports.ab.model import Line, Table, format_number

MIN_VARIANTS = 3
COST = ("cpu", "busy_cores")


@dataclass(frozen=True)
class Point:
    variant: str
    latency: float
    latency_ci: tuple[float, float] | None
    cores: float
    cores_ci: tuple[float, float] | None
    dominated_by: str | None = None  # the variant that dominates it (None: on the frontier)

    @property
    def on_frontier(self) -> bool:
        return self.dominated_by is None


@dataclass(frozen=True)
class Frontier:
    latency_label: str
    latency_unit: str
    points: tuple[Point, ...]

    @property
    def front(self) -> list[Point]:
        """The non-dominated points, by busy cores."""
        return sorted((p for p in self.points if p.on_frontier), key=lambda p: p.cores)


def latency_line(tab: Table) -> Line | None:
    """The primary latency line the frontier is drawn for: a primary line in us (p99
    first), else any latency line in us."""
    timed = [ln for ln in tab.lines if ln.unit == "us" and ln.direction == "lower"]
    for pool in ([ln for ln in timed if ln.primary], timed):
        if pool:
            return next((ln for ln in pool if ln.metric.endswith("p99")), pool[0])
    return None


def _cores(tab: Table, column: str) -> list[float]:
    """Busy cores per trial of a column, summed over the roles that have them."""
    per_trial: dict[int, float] = {}
    lines = [ln for ln in tab.lines if (ln.source, ln.metric) == COST]
    for line in lines:
        cell = line.cells.get(column)
        if cell is None:
            continue
        trials = cell.trials if len(cell.trials) == len(cell.values) else range(len(cell.values))
        for trial, value in zip(trials, cell.values, strict=True):
            if math.isfinite(value):
                per_trial[trial] = per_trial.get(trial, 0.0) + value
    return list(per_trial.values())


def _median(values: Sequence[float]) -> tuple[float, tuple[float, float] | None] | None:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    try:
        summary = summarize(finite)
    except StatsError:
        return None
    ci = summary.median_ci
    if ci is not None:
        return summary.median, (ci.low, ci.high)
    # too few repetitions for a 95% CI of the median (n < 6): their range stands for it
    return summary.median, (min(finite), max(finite)) if len(finite) > 1 else None


def frontier(tab: Table, columns: Sequence[str] | None = None) -> Frontier | str:
    """The frontier of these columns (every column by default), or why there is none."""
    columns = list(columns if columns is not None else tab.variants)
    if len(columns) < MIN_VARIANTS:
        return f"{len(columns)} variant(s): a frontier needs {MIN_VARIANTS} or more"
    line = latency_line(tab)
    if line is None:
        return "no latency line (us) in the table"
    if not any((ln.source, ln.metric) == COST for ln in tab.lines):
        return "no busy cores: the proc_stat collector was not enabled"
    points = []
    for column in columns:
        latency = _median(line.cells[column].values) if column in line.cells else None
        cores = _median(_cores(tab, column))
        if latency is not None and cores is not None:
            points.append(Point(column, latency[0], latency[1], cores[0], cores[1]))
    if len(points) < MIN_VARIANTS:
        return f"{len(points)} variant(s) have both a latency and busy cores"
    return Frontier(line.label, line.unit, tuple(_judged(points)))


def _clearly_below(q: float, q_ci: tuple[float, float] | None, p: float,
                   p_ci: tuple[float, float] | None) -> bool:
    if q_ci is None or p_ci is None:
        return q < p
    return q_ci[1] < p_ci[0]


def _no_worse(q: float, p: float, p_ci: tuple[float, float] | None) -> bool:
    return q <= p or (p_ci is not None and q <= p_ci[1])


def dominates(q: Point, p: Point) -> bool:
    """q dominates p (module doc)."""
    latency = _clearly_below(q.latency, q.latency_ci, p.latency, p.latency_ci)
    cores = _clearly_below(q.cores, q.cores_ci, p.cores, p.cores_ci)
    return (latency and _no_worse(q.cores, p.cores, p.cores_ci)) or \
        (cores and _no_worse(q.latency, p.latency, p.latency_ci))


def _judged(points: list[Point]) -> list[Point]:
    out = []
    for p in points:
        better = [q for q in points if q is not p and dominates(q, p)]
        best = min(better, key=lambda q: (q.latency, q.cores)) if better else None
        out.append(Point(p.variant, p.latency, p.latency_ci, p.cores, p.cores_ci,
                         best.variant if best else None))
    return out


def axes(parameters: Mapping[str, Mapping[str, Any]] | None,
         columns: Sequence[str]) -> dict[str, dict[str, list[str]]]:
    """Matrix axis -> value -> its columns (in table order): the per-axis views, for
    axes with two values or more."""
    out: dict[str, dict[str, list[str]]] = {}
    for column in columns:
        for axis, value in ((parameters or {}).get(column) or {}).items():
            out.setdefault(str(axis), {}).setdefault(str(value), []).append(column)
    return {a: groups for a, groups in out.items() if len(groups) > 1}


def text(found: Frontier) -> list[str]:
    """The frontier as lines for the text and Markdown reports."""
    unit = f" {found.latency_unit}" if found.latency_unit else ""
    out = [f"frontier of {found.latency_label} vs busy cores ({len(found.front)} of "
           f"{len(found.points)} variants; medians, dominated only beyond their "
           "intervals):"]
    for p in found.front:
        out.append(f"{p.variant}: {format_number(p.latency)}{unit} at "
                   f"{format_number(p.cores)} cores")
    dominated = [p for p in found.points if not p.on_frontier]
    if dominated:
        out.append("dominated: " + ", ".join(f"{p.variant} (by {p.dominated_by})"
                                             for p in dominated))
    return out
