"""Statistics for the lines of an A/B table (the pure wiring of harness.stats*).

Per column: n, median, 95% CI of the median, CV (`stats.summarize`) and a drift test
along the trial order (`stats_noise.drift`). Per compared column and line: the
`Comparison` against its baseline column. Primary lines (`harness.stats.family`) form
the family: their p-values are Holm-adjusted across every primary comparison of the
table (all primary lines x all compared columns), so every "better" and "worse" in one
table is defensible together. Other lines are exploratory: change, CI and an unadjusted
p, no verdict. A NaN value (a repetition without this metric) is dropped on its own; an
infinite one fails its line with a note, never the table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from napilab.harness.stats.compare import (
    ABSOLUTE,
    Comparison,
    MetricSamples,
    agree,
    compare_metrics,
    explore,
)
from napilab.harness.stats.family import Workload, is_primary
from napilab.harness.stats.noise import drift, noise_exceeds_effect
from napilab.harness.stats.pool import pooled_change
from napilab.harness.stats.stats import Adjust, StatsError, adjust_p, summarize
from napilab.reports.ab.directions import judge
from napilab.reports.ab.model import Cell, Line

SEED = 0  # fixed: a report rendered twice from the same data prints the same CIs


def describe(cell: Cell) -> Cell:
    """The cell with its summary and drift test filled in (when it has finite values)."""
    finite = [v for v in cell.values if not math.isnan(v)]
    if not finite or any(math.isinf(v) for v in finite):
        return cell
    summary = summarize(cell.values)
    trend = None
    if len(finite) >= 2:
        order = cell.trials if len(cell.trials) == len(cell.values) else None
        trend = drift(cell.values, order)
    return replace(cell, summary=summary, drift=trend)


@dataclass(frozen=True)
class Uncomparable:
    """Why two cells cannot be compared; `fault`: the data is wrong (an infinite value),
    not merely insufficient (no values, a baseline median of 0)."""

    reason: str
    fault: bool = False


def not_comparable(base: Cell, other: Cell) -> Uncomparable | None:
    """Why these two cells cannot be compared, or None when they can."""
    for name, cell in (("the baseline", base), ("this column", other)):
        values = [v for v in cell.values if not math.isnan(v)]
        if not values:
            return Uncomparable("no values in " + name)
        infinite = [i for i, v in enumerate(cell.values) if math.isinf(v)]
        if infinite:
            trial = cell.trials[infinite[0]] if len(cell.trials) == len(cell.values) else "?"
            return Uncomparable(f"infinite value in {name} (trial {trial}): this line cannot "
                                "be compared", fault=True)
    return None


def _drift_family(lines: list[Line]) -> list[Line]:
    """A drift note is a claim too: the Mann-Kendall p of every testable cell of the
    table is Holm-adjusted over all of them (a table of 12 rows x 3 columns tested each
    at 5% showed a drift note in about half of all A/A tables), and a cell drifts only
    when its adjusted p is below 0.05."""
    keys = [(i, c) for i, ln in enumerate(lines) for c, cell in ln.cells.items()
            if cell.drift is not None and cell.drift.testable]
    if not keys:
        return lines
    adjusted = adjust_p([lines[i].cells[c].drift.p_value for i, c in keys  # type: ignore
                         ], Adjust.HOLM)
    out = [replace(ln, cells=dict(ln.cells)) for ln in lines]
    for (i, c), p in zip(keys, adjusted, strict=True):
        cell = out[i].cells[c]
        assert cell.drift is not None
        out[i].cells[c] = replace(cell, drift=replace(cell.drift, significant=p < 0.05))
    return out


def _unbounded(found: Comparison) -> Comparison:
    low, high = found.change_ci
    if math.isnan(low) or math.isnan(high):
        low = -math.inf if math.isnan(low) else low
        high = math.inf if math.isnan(high) else high
        return replace(found, change_ci=(low, high))
    return found


def _pooled(line: Line, base: str, other: str, found: Comparison) -> Comparison:
    """A pooled-percentile line shows pooled values: its change column describes them
    (the test is still on the per-repetition percentiles the cells hold)."""
    a, b = line.cells[base].pooled, line.cells[other].pooled
    if a is None or b is None:
        return found
    change, ci = pooled_change(a, b, found.confidence)
    return agree(replace(found, change=change, change_ci=ci or (math.nan, math.nan)))


def with_stats(lines: Sequence[Line], pairs: Sequence[tuple[str, str]],
               policies: Mapping[str, Any], *, workload: Workload | None = None) -> tuple[
                   list[Line], int]:
    """Lines with summaries, directions, the family's Holm-adjusted comparisons and the
    exploratory rows' descriptive ones; and the family size."""
    judged = [judge(policies, ln.source, ln.metric, ln.unit) for ln in lines]
    described = [replace(ln, cells={c: describe(cell) for c, cell in ln.cells.items()},
                         direction=j.direction.value, direction_origin=j.origin,
                         primary=is_primary(ln.source, ln.metric, policies, workload))
                 for ln, j in zip(lines, judged, strict=True)]
    described = _drift_family(described)
    family: dict[str, MetricSamples] = {}
    descriptive: dict[str, MetricSamples] = {}
    effects: dict[str, float] = {}
    notes: list[dict[str, str]] = [{} for _ in lines]
    for i, line in enumerate(described):
        for base, other in pairs:
            why = not_comparable(line.cells[base], line.cells[other])
            if why is not None:
                notes[i][other] = why.reason
                continue
            key = f"{i}\t{other}"
            samples = MetricSamples(line.cells[base].values, line.cells[other].values,
                                    judged[i].direction)
            (family if line.primary else descriptive)[key] = samples
            # a decrease cannot pass -100%: a min_effect of 100% or more is capped below
            effects[key] = min((judged[i].min_effect_pct or 0.0) / 100, 0.99)
    results = compare_metrics(family, adjust=Adjust.HOLM, min_effect=effects,
                              seed=SEED) if family else {}
    results |= {k: explore(s, seed=SEED) for k, s in descriptive.items()}
    out = []
    for i, line in enumerate(described):
        comparisons = {}
        noise = {}
        for base, other in pairs:
            found = results.get(f"{i}\t{other}")
            if found is None:
                continue
            found = _pooled(line, base, other, _unbounded(found))
            comparisons[other] = found
            if found.scale == ABSOLUTE:  # a zero baseline has no relative noise
                continue
            try:
                noise[other] = noise_exceeds_effect(line.cells[base].values, found.change)
            except StatsError as exc:  # only on values already refused above
                notes[i][other] = str(exc)
        out.append(replace(line, comparisons=comparisons, noise=noise, notes=notes[i]))
    return out, len(family)
