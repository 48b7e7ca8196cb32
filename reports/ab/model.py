"""The A/B table's records (re-exported by reports.ab.compare) and how its numbers print.

A Table has columns (a run's variants, or `A:variant`/`B:variant` across two runs), lines
(one per metric) and `pairs`: which column is compared with which baseline column.
Each Line carries, per column, the values and their summary, and per compared column
the `harness.stats.Comparison` against its baseline (Holm-adjusted across the table).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field

from napilab.harness.stats.compare import ABSOLUTE, RATIO, Comparison
from napilab.harness.stats.noise import Drift, NoiseCheck
from napilab.harness.stats.pool import PooledPercentile
from napilab.harness.stats.stats import Summary


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
    # column -> role ("" for all roles) -> the cores budget the profile states
    # (variants.NAME.cores; reports.ab.tradeoff)
    budgets: dict[str, dict[str, float]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the run's data says besides the lines (a host
    # without a PMU: reports.ab.cpu_cost.notes)

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


# a count needs no unit: "NET_RX softirqs", not "... (count)"; nor do cores, which the
# CPU cost lines name ("busy cores")
UNITLESS = ("", "count", "cores")


def with_unit(name: str, unit: str) -> str:
    """A metric's name with its unit in the one style of the table's labels and every
    plot: `latency p99 (us)`, `softirq time (ms)`, `rtt_avg (sender, us)`; no unit for
    counts, never twice."""
    if unit in UNITLESS or re.search(rf"[(, ]{re.escape(unit)}\)$", name):
        return name
    qualified = re.fullmatch(r"(.*) \(([^()]+)\)", name)  # `rtt_avg (sender)`
    if qualified:
        return f"{qualified[1]} ({qualified[2]}, {unit})"
    return f"{name} ({unit})"


def _pct_number(change: float) -> str:
    if math.isinf(change):  # an unbounded CI side (see reports.ab.line_stats._unbounded)
        return "+inf" if change > 0 else "-inf"
    pct = change * 100
    if abs(pct) >= 100:
        return f"{pct:+,.0f}"
    if abs(pct) >= 1:
        return f"{pct:+.1f}"
    return f"{pct:+.2f}"


def _ratio_number(change: float) -> str:
    if math.isinf(change):
        return "xinf" if change > 0 else "x0"
    return f"x{format_number(1 + change)}"


# From a tenfold increase on, a ratio reads better than a percentage (x24 vs +2,300%).
RATIO_FROM = 10.0


def as_ratio(change: float | None, ci: tuple[float, float] | None = None) -> bool:
    """The notation of one comparison, decided for its change and its CI together: a
    ratio (x24, CI x15.3..x29.6) when the change or a finite CI bound is a tenfold
    increase or more, else percentages (+93.5%, CI -48.3..+899%). One rule for both, so
    a row never reads `x11.4` next to `+149..+2,397%`; decreases stay percentages, which
    never pass -100%."""
    bounds = [] if ci is None else list(ci)
    return any(v is not None and math.isfinite(v) and 1 + v >= RATIO_FROM
               for v in [change, *bounds])




def format_signed(value: float, unit: str = "") -> str:
    """An absolute change: +0.98 cores, -190 ms, +3 (a count needs no unit)."""
    return _signed(value, unit)


def _signed(value: float, unit: str) -> str:
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    text = format_number(abs(value))
    sign = "" if not text.strip("0.,") else "-" if value < 0 else "+"
    shown = sign + text
    return f"{shown} {unit}" if unit not in UNITLESS else shown


def format_pct(change: float | None, ci: tuple[float, float] | None = None,
               scale: str = RATIO, unit: str = "") -> str:
    """A relative change in the notation its CI shares (`as_ratio`): +12.3%, -0.41%,
    +899%, or x24; an absolute one (scale "absolute", a zero baseline or an absolute
    threshold) in the metric's unit: +9,800 ms."""
    if change is None or math.isnan(change):
        return "-"
    if scale == ABSOLUTE:
        return _signed(change, unit)
    if as_ratio(change, ci):
        return _ratio_number(change)
    return _pct_number(change) + "%"


def _ci_missing(ci: tuple[float, float] | None) -> bool:
    return ci is None or math.isnan(ci[0]) or math.isnan(ci[1])


def format_ci(ci: tuple[float, float] | None, change: float | None = None,
              scale: str = RATIO, unit: str = "") -> str:
    """A CI of a relative change, compact, in its change's notation: +8.1..+16.0%, or
    x0.52..x19.1 when the change or a bound is tenfold (`as_ratio`); absolute:
    +9,650..+9,950 ms."""
    if ci is None or _ci_missing(ci):
        return "-"
    if scale == ABSOLUTE:
        return f"{_signed(ci[0], '')}..{_signed(ci[1], unit)}"
    if as_ratio(change, ci):
        return f"{_ratio_number(ci[0])}..{_ratio_number(ci[1])}"
    return f"{_pct_number(ci[0])}..{_pct_number(ci[1])}%"


P_FLOOR = 0.001  # smaller p-values print as "<0.001": the digits beyond mean nothing


def format_p(p: float | None) -> str:
    """A p-value as a reader of a cover letter expects it, in at most 6 characters:
    <0.001, 0.004, 0.049, 0.12, 1.00. Below 0.1 the third decimal is cut, never rounded
    up, so the printed p and the verdict at alpha 0.05 always agree (0.0496 prints
    0.049, not 0.050)."""
    if p is None or math.isnan(p):
        return "-"
    if p < P_FLOOR:
        return "<0.001"
    if p < 0.1:
        return f"{math.floor(p * 1000 + 1e-9) / 1000:.3f}"
    return f"{p:.2f}"


def p_text(p: float | None) -> str:
    """`p=0.004` or `p<0.001`, for prose."""
    shown = format_p(p)
    return f"p{shown}" if shown.startswith("<") else f"p={shown}"


def verdict_text(comparison: Comparison | None) -> tuple[str, str]:
    """(verdict, n needed) as the tables print them; n needed only for not-enough-data."""
    if comparison is None:
        return "n/a", ""
    verdict = comparison.verdict.value
    need = f"n={comparison.n_needed}" if verdict == "not-enough-data" and \
        comparison.n_needed else ""
    return verdict, need
