"""Latency-load curves: a rung's estimate with its interval, and where a curve crosses a
bound (the knee, the SLO capacity) with the interval that follows from the rungs' own.

A rung's value over its repetitions is the geometric mean for a positive metric (a
latency: Student's t on the logs, as the A/B verdicts' Welch test on logs) or the mean
(busy cores, an achieved rate: t on the raw values). Its interval is the t interval at
`confidence`; one repetition has none.

A crossing is read on one grid of loads (each rung's achieved rate) for three curves:
the estimates, the interval's upper ends and its lower ends. The crossing of the upper
curve comes first, the estimates' next, the lower curve's last (pointwise order, and
log-linear interpolation keeps it inside each segment): the crossing of the estimates
and its interval [upper's, lower's], so the printed load is inside its own interval.
A rung that could not offer its load (saturated) counts as crossed at the rung before
it: nothing is claimed past the last load the generator reached. A crossing before
the first rung is censored below it, one past the last above it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float | None  # None: one repetition, no interval
    high: float | None
    n: int

    @property
    def bounds(self) -> tuple[float, float]:
        """The interval, or the value itself twice when there is none."""
        return (self.value if self.low is None else self.low,
                self.value if self.high is None else self.high)


def estimate(values: Sequence[float], *, log: bool, confidence: float = CONFIDENCE,
             floor: float | None = None) -> Estimate | None:
    """Geometric mean (LOG) or mean of the finite values, with its t interval; FLOOR
    clips the interval's low end where the quantity cannot go (a rate, busy cores: 0),
    which the mean of values at or above it never passes."""
    x = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    if log:
        x = x[x > 0]
    if not x.size:
        return None
    y = np.log(x) if log else x
    centre = float(y.mean())
    if x.size < 2:
        low = high = None
    else:
        half = float(sps.t.ppf(0.5 + confidence / 2, x.size - 1) * y.std(ddof=1)
                     / math.sqrt(x.size))
        low, high = centre - half, centre + half
        if floor is not None and not log:
            low = max(low, floor)
    back = (lambda v: float(math.exp(v))) if log else float
    return Estimate(back(centre), None if low is None else back(low),
                    None if high is None else back(high), int(x.size))


@dataclass(frozen=True)
class Crossing:
    """A load where a curve passes its bound: `value` inside [low, high]; `below`: the
    first rung already passed it (value is that rung's load, nothing is known below);
    `above`: no rung passed it (value is the last rung's load, the true one higher)."""

    value: float
    low: float
    high: float | None  # None: above the last rung
    below: bool = False  # even the low end is at the first rung
    above: bool = False  # the estimate did not cross at all


def crossing(loads: Sequence[float], curves: tuple[Sequence[float], Sequence[float],
             Sequence[float]], bound: float, saturated: Sequence[bool]) -> Crossing | None:
    """Where the (estimate, upper, lower) CURVES over LOADS first pass BOUND (module doc);
    None without rungs."""
    if not loads:
        return None
    value, upper, lower = (_first(loads, c, bound, saturated) for c in curves)
    return Crossing(
        value=loads[-1] if value is None else value,
        low=loads[-1] if upper is None else upper,
        high=lower,
        below=saturated[0] or _passed(curves[0][0], bound),
        above=value is None)


def _passed(level: float, bound: float) -> bool:
    return not level <= bound  # NaN passes: nothing shows it under


def _first(loads: Sequence[float], levels: Sequence[float], bound: float,
           saturated: Sequence[bool]) -> float | None:
    """The load where LEVELS first passes BOUND, log-linearly between rungs; None: never."""
    for i, (load, level) in enumerate(zip(loads, levels, strict=True)):
        if not (saturated[i] or _passed(level, bound)):
            continue
        if i == 0:
            return load
        before, previous = loads[i - 1], levels[i - 1]
        if saturated[i] or load <= before or not level > 0 or not previous > 0:
            return before
        part = (math.log(bound) - math.log(previous)) / (math.log(level) - math.log(previous))
        return before + min(1.0, max(0.0, part)) * (load - before)
    return None


@dataclass(frozen=True)
class CrossingChange:
    """A candidate's crossing against a reference's, as a ratio with its interval."""

    status: str  # regression | improvement | within | inconclusive (harness.stats.gate)
    ratio: float
    low: float
    high: float
    reason: str


def crossing_change(candidate: Crossing, reference: Crossing,
                    threshold_pct: float) -> CrossingChange:
    """Higher is better (a capacity, a knee): the ratio candidate/reference with the
    interval [candidate's low / reference's high, candidate's high / reference's low];
    regression when the whole interval is below 1 - T, improvement when it is above
    1 + T, within when its low end is at or above 1 - T, else inconclusive. A crossing
    above the ladder is taken at its top rung (the gate judges what the ladder shows);
    one below the first rung has no lower end (0)."""
    def ends(found: Crossing) -> tuple[float, float]:
        low = 0.0 if found.below else found.low
        return low, found.high if found.high is not None else found.value

    c_low, c_high = ends(candidate)
    r_low, r_high = ends(reference)
    ratio = candidate.value / reference.value if reference.value > 0 else math.inf
    low = c_low / r_high if r_high > 0 else math.inf
    high = c_high / r_low if r_low > 0 else math.inf
    floor, ceiling = 1 - threshold_pct / 100, 1 + threshold_pct / 100
    if high < floor:
        status, why = "regression", f"the ratio's interval is below {floor:g} throughout"
    elif low > ceiling:
        status, why = "improvement", f"the ratio's interval is above {ceiling:g}"
    elif low >= floor:
        status, why = "within", f"the ratio's low end is at or above {floor:g}"
    else:
        status, why = "inconclusive", (f"the ratio's interval {low:.3g}..{high:.3g} "
                                       f"straddles {floor:g}")
    return CrossingChange(status, ratio, low, min(high, 1e12), why)
