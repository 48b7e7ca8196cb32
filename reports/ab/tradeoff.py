"""What a change in latency cost: the CPU side of every better/worse verdict, and when
two compared variants did not run on the same number of cores.

Read from the A/B table's `cpu` lines (reports.ab.cpu_cost): `busy_cores` as an absolute
shift in cores (a change of cores is what a reviewer weighs, "+0.98 cores": the
difference of means with Welch's t interval below 10 repetitions, Hodges-Lehmann with
its Moses interval from 10, as for any absolute change), CPU-us per operation as the
line's own relative change. A profile may state each variant's cores budget (`cores: N`, or
`cores: {ROLE: N}`); compared variants with different budgets, or without budgets
whose busy cores differ by at least `UNEQUAL` with a CI clear of 0, get an equal-cores
note (the reviewers' "a fair comparison would be ..."), and a variant whose busy cores
exceed its budget gets one too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from napilab.harness.stats.compare import MetricSamples, evidence
from napilab.reports.ab.cpu_cost import SOURCE
from napilab.reports.ab.model import (
    Line,
    Table,
    format_ci,
    format_number,
    format_pct,
    format_signed,
)

BUSY = "busy_cores"
PER_OP = "cpu_us_per_"
UNEQUAL = 0.25  # cores: a difference a reader must be told about
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Shift:
    role: str | None
    change: float  # cores, variant - baseline
    ci: tuple[float, float]

    @property
    def clear(self) -> bool:
        """The CI excludes 0."""
        return self.ci[0] > 0 or self.ci[1] < 0


def _where(line: Line) -> str:
    return f" ({line.role})" if line.role else ""


def busy_shift(line: Line, base: str, other: str) -> Shift | None:
    """The change of busy cores as the comparisons judge an absolute change
    (harness.stats.compare.evidence, absolute): below 10 repetitions the difference of
    means with Welch's t interval on the raw values, from 10 Hodges-Lehmann with the
    Moses interval. Either way the estimate lies inside its interval."""
    x = [v for v in line.cells[base].values if math.isfinite(v)]
    y = [v for v in line.cells[other].values if math.isfinite(v)]
    if not x or not y:
        return None
    found = evidence(MetricSamples(x, y, "lower"), confidence=CONFIDENCE, absolute=True)
    return Shift(line.role, found.change, found.ci)


def _busy_lines(tab: Table) -> list[Line]:
    return [ln for ln in tab.lines if ln.source == SOURCE and ln.metric == BUSY]


def cost(tab: Table, column: str) -> str:
    """"at +0.98 cores busy (sut, 95% CI +0.95..+1.01), +34% CPU-us per transaction
    (sut)", or "" when the table has no CPU cost of this column."""
    base = tab.baseline_of(column)
    parts = []
    for line in _busy_lines(tab):
        shift = busy_shift(line, base, column)
        if shift is None:
            continue
        where = f"{line.role}, " if line.role else ""
        parts.append(f"{format_signed(shift.change)} cores busy "
                     f"({where}95% CI {format_ci(shift.ci, shift.change, 'absolute')})")
    for line in tab.lines:
        found = line.comparisons.get(column)
        if line.source != SOURCE or not line.metric.startswith(PER_OP) or found is None:
            continue
        what = line.metric[len(PER_OP):]
        change = format_pct(found.change, found.change_ci, found.scale, line.unit)
        parts.append(f"{change} CPU-us per {what}{_where(line)}")
    return "at " + ", ".join(parts) if parts else ""


def budgets(document: Mapping[str, Any], variants: list[str]) -> dict[str, dict[str, float]]:
    """variant -> role ("" for all roles together) -> its cores budget (`cores:`)."""
    out: dict[str, dict[str, float]] = {}
    for name in variants:
        found = ((document.get("variants") or {}).get(name) or {}).get("cores")
        if isinstance(found, int | float) and not isinstance(found, bool):
            out[name] = {"": float(found)}
        elif isinstance(found, Mapping):
            out[name] = {str(r): float(n) for r, n in found.items()
                         if isinstance(n, int | float) and not isinstance(n, bool)}
    return out


def _cores(value: float) -> str:
    return format_number(value) + (" core" if value == 1 else " cores")


def notes(tab: Table) -> list[str]:
    """The equal-cores and over-budget notes of this table (module doc)."""
    out: list[str] = []
    budget = tab.budgets
    lines = _busy_lines(tab)
    for base, other in tab.pairs:
        a, b = budget.get(base), budget.get(other)
        if a and b and a != b:
            out.append(f"unequal cores: {other} has a budget of {_budget(b)} and {base} of "
                       f"{_budget(a)}: a fair comparison gives both the same cores")
            continue
        for line in lines:
            shift = busy_shift(line, base, other)
            if shift is None or not shift.clear or abs(shift.change) < UNEQUAL:
                continue
            more, fewer = (other, base) if shift.change > 0 else (base, other)
            low, high = shift.ci if shift.change > 0 else (-shift.ci[1], -shift.ci[0])
            on = f" on {line.role}" if line.role else ""
            out.append(f"unequal cores: {more} used {format_number(abs(shift.change))} more "
                       f"busy cores than {fewer}{on} (95% CI "
                       f"{format_ci((low, high), abs(shift.change), 'absolute')}): a fair "
                       f"comparison gives {fewer} the same cores (napilab docs reports)")
    for variant, wanted in budget.items():
        used = {line.role or "": line.cells[variant].median for line in lines
                if variant in line.cells and line.cells[variant].median is not None}
        if "" in wanted and used:
            used[""] = sum(v for v in used.values() if v is not None)
        for role, limit in wanted.items():
            median = used.get(role)
            if median is None or median <= limit * 1.05:
                continue
            where = f" ({role})" if role else ""
            out.append(f"over budget: {variant} used {format_number(median)} busy cores"
                       f"{where}, its budget is {_cores(limit)}")
    return out


def _budget(wanted: Mapping[str, float]) -> str:
    return ", ".join(f"{_cores(n)}" + (f" on {role}" if role else "")
                     for role, n in wanted.items())
