"""Statistics for the lines of an A/B table (the pure wiring of harness.stats.stats).

Per column: n, median, 95% CI of the median, CV (`stats.summarize`) and a drift test
along the trial order (`stats_noise.drift`). Per compared column and line: the
`stats.Comparison` against its baseline column, with p-values Holm-adjusted across
every comparison of the table (all lines x all compared columns: every "better" and
"worse" in one table is defensible together), and the baseline-noise check
(`stats_noise.noise_exceeds_effect`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from harness.stats.noise import drift, noise_exceeds_effect
from harness.stats.stats import (
    Adjust,
    Comparison,
    MetricSamples,
    StatsError,
    compare_metrics,
    summarize,
)
from reports.ab.directions import judge
from reports.ab.model import Cell, Line

SEED = 0  # fixed: a report rendered twice from the same data prints the same CIs
N_BOOT = 2000


def describe(cell: Cell) -> Cell:
    """The cell with its summary and drift test filled in (when it has values)."""
    if not cell.values:
        return cell
    summary = summarize(cell.values)
    trend = None
    if len(cell.values) >= 2:
        order = cell.trials if len(cell.trials) == len(cell.values) else None
        trend = drift(cell.values, order)
    return replace(cell, summary=summary, drift=trend)


def not_comparable(base: Cell, other: Cell) -> str:
    """Why these two cells cannot be compared, or "" when they can."""
    if not base.values or not other.values:
        return "no values in " + ("the baseline" if not base.values else "this column")
    if not all(np.isfinite(base.values)) or not all(np.isfinite(other.values)):
        return "non-finite values"
    if float(np.median(base.values)) <= 0:
        # A counter that stays 0 in the baseline (e.g. received_rps with RPS off) has no
        # relative change; the medians in the table still show the difference.
        return "baseline median is 0: relative change undefined"
    return ""


def _unbounded(found: Comparison) -> Comparison:
    low, high = found.change_ci
    if math.isnan(low) or math.isnan(high):
        low = -math.inf if math.isnan(low) else low
        high = math.inf if math.isnan(high) else high
        return replace(found, change_ci=(low, high))
    return found


def with_stats(lines: Sequence[Line], pairs: Sequence[tuple[str, str]],
               policies: Mapping[str, Any], *,
               min_effect: Mapping[int, float] | None = None) -> tuple[list[Line], int]:
    """Lines with summaries, directions and Holm-adjusted comparisons; and the family size.

    `min_effect` (line index -> fraction) overrides the policy's min_effect; the gate
    passes its regression thresholds this way.
    """
    judged = [judge(policies, ln.source, ln.metric, ln.unit) for ln in lines]
    described = [replace(ln, cells={c: describe(cell) for c, cell in ln.cells.items()},
                         direction=j.direction.value, direction_origin=j.origin)
                 for ln, j in zip(lines, judged, strict=True)]
    family: dict[str, MetricSamples] = {}
    effects: dict[str, float] = {}
    notes: list[dict[str, str]] = [{} for _ in lines]
    for i, line in enumerate(described):
        for base, other in pairs:
            why = not_comparable(line.cells[base], line.cells[other])
            if why:
                notes[i][other] = why
                continue
            key = f"{i}\t{other}"
            family[key] = MetricSamples(line.cells[base].values, line.cells[other].values,
                                        judged[i].direction)
            pct = judged[i].min_effect_pct
            effects[key] = (min_effect or {}).get(i, (pct or 0.0) / 100)
    # A resample of a baseline with zeros in it (e.g. ping's rtt_mdev of 0 and 1 us) can
    # have median 0: that ratio is +inf, and numpy's percentile interpolates inf - inf
    # into NaN (with a RuntimeWarning). The interval is then unbounded on that side.
    with np.errstate(invalid="ignore"):
        results = {k: _unbounded(c) for k, c in compare_metrics(
            family, adjust=Adjust.HOLM, min_effect=effects, n_boot=N_BOOT,
            seed=SEED).items()} if family else {}
    out = []
    for i, line in enumerate(described):
        comparisons = {}
        noise = {}
        for base, other in pairs:
            found = results.get(f"{i}\t{other}")
            if found is None:
                continue
            comparisons[other] = found
            try:
                noise[other] = noise_exceeds_effect(line.cells[base].values, found.change)
            except StatsError as exc:  # only on values already refused above
                notes[i][other] = str(exc)
        out.append(replace(line, comparisons=comparisons, noise=noise, notes=notes[i]))
    return out, len(family)
