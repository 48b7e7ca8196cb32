"""The A/B table's records (re-exported by reports.ab.compare) and how its numbers print.

A Table has columns (a run's variants, or `A:variant`/`B:variant` across two runs), lines
(one per metric) and `pairs`: which column is compared with which baseline column.
Each Line carries, per column, the values and their summary, and per compared column
the `harness.stats.Comparison` against its baseline (Holm-adjusted across the table).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from harness.stats.compare import Comparison
from harness.stats.noise import Drift, NoiseCheck
from harness.stats.pool import PooledPercentile
from harness.stats.stats import Summary


@dataclass(frozen=True)
class Cell:
    values: tuple[float, ...]  # one per completed repetition, in trial order
    trials: tuple[int, ...] = ()  # the trial index (execution order) of each value
    summary: Summary | None = None  # n, median, 95% CI of the median, CV
    drift: Drift | None = None  # Mann-Kendall trend along the trials (n >= 2)
    pooled: PooledPercentile | None = None  # pooled-distribution lines only

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def value(self) -> float | None:
        """What the table shows: the pooled percentile, else the median of repetitions."""
        return self.pooled.value if self.pooled is not None else self.median

    @property
    def drifting(self) -> bool:
        return self.drift is not None and self.drift.significant


@dataclass(frozen=True)
class Line:
    label: str
    source: str
    metric: str
    role: str | None
    unit: str
    cells: dict[str, Cell]
    direction: str = "lower"  # which way is better
    direction_origin: str = "assumed"  # policy | default | assumed (see reports.ab.directions)
    comparisons: dict[str, Comparison] = field(default_factory=dict)  # compared column ->
    noise: dict[str, NoiseCheck] = field(default_factory=dict)  # baseline noise vs effect
    notes: dict[str, str] = field(default_factory=dict)  # compared column -> why no stats
    primary: bool = False  # in the multiple-comparison family (harness.stats.family)

    @property
    def key(self) -> str:
        """How the profile's `metrics:` and `check --max-regression` name this line."""
        return f"{self.source}.{self.metric}"


@dataclass(frozen=True)
class Table:
    variants: list[str]  # the columns, baselines first within each pair
    baseline: str
    lines: list[Line]
    pairs: tuple[tuple[str, str], ...] = ()  # (baseline column, compared column)
    adjust: str = "holm"
    family: int = 0  # number of comparisons the p-values were adjusted over

    @property
    def compared(self) -> list[str]:
        return [other for _, other in self.pairs]

    def baseline_of(self, column: str) -> str:
        return next(base for base, other in self.pairs if other == column)


def format_number(value: float | None, unit: str = "") -> str:
    """Cover-letter style: thousands separators, integers as integers, and three
    significant digits for small fractional values."""
    if value is None:
        return "-"
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def _pct_number(change: float) -> str:
    if math.isinf(change):  # an unbounded CI side (see reports.ab.line_stats._unbounded)
        return "+inf" if change > 0 else "-inf"
    pct = change * 100
    if abs(pct) >= 100:
        return f"{pct:+,.0f}"
    if abs(pct) >= 1:
        return f"{pct:+.1f}"
    return f"{pct:+.2f}"


# From a tenfold increase on, a ratio reads better than a percentage (x24 vs +2,300%).
_RATIO_FROM = 9.0


def format_pct(change: float | None) -> str:
    """A relative change as a signed percentage: +12.3%, -0.41%, +900%; x24 beyond +900%."""
    if change is None:
        return "-"
    if change >= _RATIO_FROM:
        return f"x{format_number(1 + change)}"
    return _pct_number(change) + "%"


def format_ci(ci: tuple[float, float] | None) -> str:
    """A CI of a relative change, compact: +8.1..+16.0%, or x20..x27 for large ratios."""
    if ci is None or math.isnan(ci[0]) or math.isnan(ci[1]):
        return "-"
    if ci[0] >= _RATIO_FROM:
        high = "inf" if math.isinf(ci[1]) else format_number(1 + ci[1])
        return f"x{format_number(1 + ci[0])}..x{high}"
    return f"{_pct_number(ci[0])}..{_pct_number(ci[1])}%"


def format_p(p: float | None) -> str:
    """Two significant digits in at most 5 characters: 0.028, 0.5, 1, 5e-04."""
    if p is None:
        return "-"
    return f"{p:.0e}" if p < 0.01 else f"{p:.2g}"


def verdict_text(comparison: Comparison | None) -> tuple[str, str]:
    """(verdict, n needed) as the tables print them; n needed only for not-enough-data."""
    if comparison is None:
        return "n/a", ""
    verdict = comparison.verdict.value
    need = f"n={comparison.n_needed}" if verdict == "not-enough-data" and \
        comparison.n_needed else ""
    return verdict, need
