"""The nightly gate's reference level and its two levels of noise. Pure (numpy + ruptures
through harness.stats.changes).

A nightly series is one metric's repetitions night after night (one variant). Nights
differ by more than their repetitions do (a boot, a neighbour, a placement), so a night
is one *cluster*: its level is the mean of its values (of their logs, for positive
values), and what a reference must know is how much a night's level moves about the
truth, night-to-night variance plus within-night variance over n, together.

Night-to-night noise (`night_noise`), from the series' night levels:
- more than STEP_MIN nights: the mean squared successive difference / 2 (von Neumann),
  which a slow drift barely moves, over the differences that are not steps (|d| within
  4 robust SDs, the robust SD from the MAD of the differences as in
  harness.stats.changes, at least what the nights' within variance implies); df = half
  the differences used (below the MSSD's efficiency of 2/3: the filter trims the largest
  differences, and 2/3 let A/A nights go red 2.2% of the time at between-night sd 0.05,
  benchmarks/stats_nightly.py);
- 2 to STEP_MIN nights: the sample variance of their levels (df = nights - 1): a few
  differences cannot tell a step from noise (leaving one out understates the noise),
  and on so few nights the MSSD's lost third of the degrees of freedom is what decides
  whether a regression shows (one slow night left out of five must not hide it);
- 1 night: unknown; the night's own within variance / n stands in, flagged `known`
  False (the gate's answer then says so);
never below the pooled within-night variance / n, each night's variance at least that of
its rounding (values printed in steps of 1 us: ((step / 2) / median)^2 on logs), as
Welch's t in harness.stats.two_sample has it.

The reference level (`anchor`): the first ANCHOR nights of the accepted level, not the
last few nights, so a slow drift cannot carry the reference along with it:
- the first nights of the series (or the pinned night alone), leaving out a night whose
  level is further than max(3 robust SDs of their levels, the threshold) from the median
  of the first ANCHOR + 2 nights, once there are OUTLIER_MIN of them (the night-to-night
  noise is then estimated without the nights left out): the level is what most of the
  first nights agree on, so one lucky or slow first night cannot set it once two later
  nights agree with each other, and one regressed night among the first ones is left
  out of it (the price: a brand-new series whose second and third nights both
  regressed takes that as its level; until then they are red or inconclusive, never a
  pass);
- it moves forward only to a level shift (harness.stats.changes) that is better than
  the current anchor by more than the threshold: an improvement becomes the new
  reference, a regression or a drift never does (a pin is how a slower level is
  accepted).
The candidate night is compared with the anchor by a t test on night levels:
d = level(candidate) - mean(level(anchor nights)), se^2 = V (1 + 1/K), V the
night-to-night variance, K the anchor's nights, df as above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from napilab.harness.stats.changes import change_points
from napilab.harness.stats.family import Direction
from napilab.harness.stats.two_sample import LogT, resolution, rounding_variance

Array = npt.NDArray[np.float64]

ANCHOR = 5  # nights of a level that make the reference
OUTLIER_MIN = 3  # nights before one that disagrees with the others is left out
STEP_MIN = 6  # nights up to which the noise is their levels' variance (module doc)
NIGHTS_T = "nights-t"  # the test's name in reports


@dataclass(frozen=True)
class NightNoise:
    var: float  # variance of a night's level about the truth (log or raw scale)
    df: float
    within: float  # pooled within-night variance / typical n (the floor)
    nights: int  # nights it was estimated from
    known: bool  # False: one night; the within variance stands in

    @property
    def between_sd(self) -> float:
        """Night-to-night SD beyond what the repetitions explain."""
        return math.sqrt(max(0.0, self.var - self.within))

    def between_text(self, log: bool) -> str:
        """`between_sd` as printed: a percentage for log levels, else in the unit."""
        sd = self.between_sd
        return f"{math.expm1(sd):.1%}" if log else f"{sd:.3g}"


def levels(series: Sequence[Array], log: bool) -> Array:
    return np.array([float(np.mean(np.log(v) if log else v)) for v in series])


def night_noise(series: Sequence[Array], log: bool) -> NightNoise:
    """Night-to-night variance of a night's level (module doc)."""
    m = levels(series, log)
    scaled = [np.log(v) if log else v for v in series]
    df_w = sum(v.size - 1 for v in scaled)
    step = resolution(np.concatenate(list(series))) if series else 0.0
    ss_w = sum(_sum_of_squares(v, raw, step, log) for v, raw in zip(scaled, series,
                                                                      strict=True))
    n_typ = float(np.median([v.size for v in scaled]))
    within = ss_w / df_w / n_typ if df_w > 0 else 0.0
    if m.size > STEP_MIN:
        d = np.diff(m)
        # a difference of two levels has at least twice a level's within variance: the
        # MAD of the differences alone can be far smaller, and would call noise a step
        robust = max(float(np.median(np.abs(d - np.median(d)))) / 0.6745,
                     math.sqrt(2 * within))
        kept = np.abs(d - np.median(d)) <= 4 * robust
        used = d[kept] if robust > 0 and kept.any() else d
        var = float(np.mean(used ** 2)) / 2
        df = max(1.0, used.size / 2)
        return NightNoise(max(var, within), df, within, int(m.size), True)
    if m.size >= 2:
        return NightNoise(max(float(np.var(m, ddof=1)), within), m.size - 1.0, within,
                          int(m.size), True)
    return NightNoise(within, max(1.0, float(df_w)), within, int(m.size), False)


def _sum_of_squares(scaled: Array, raw: Array, step: float, log: bool) -> float:
    """A night's sum of squares about its mean, at least what its rounding to `step`
    implies ((step / 2)^2 per degree of freedom, relative to the median on logs), as
    two_sample.welch_log_t floors each arm: a night of 5,5,5,5,5 us in ping's 1 us steps
    does have noise."""
    floor = rounding_variance(raw, step, log=log)
    return max(float(np.sum((scaled - scaled.mean()) ** 2)), (scaled.size - 1) * floor)


def anchor(series: Sequence[Array], log: bool, noise: NightNoise, threshold: float,
           direction: Direction, pinned: bool = False
           ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Indices of the anchor nights in `series` (oldest first; module doc) and of the
    first nights left out of it as outliers. `threshold` on the scale of the levels
    (log1p of a relative threshold, or absolute)."""
    if pinned or len(series) == 1:
        return (0,), ()
    m = levels(series, log)
    chosen, dropped = _first_nights(m, 0, len(m), noise, threshold)
    for cp in change_points(list(np.exp(m) if log else m)):
        if cp.index <= chosen[-1]:
            continue
        later, out = _first_nights(m, cp.index, len(m), noise, threshold)
        gain = float(np.mean(m[list(later)]) - np.mean(m[list(chosen)]))
        if (gain < -threshold) if direction is Direction.LOWER else (gain > threshold):
            chosen, dropped = later, out
    return chosen, dropped


def _first_nights(m: Array, start: int, stop: int, noise: NightNoise,
                  threshold: float) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The first ANCHOR nights from `start` that agree with the median of the first
    ANCHOR + 2, and those left out. The reach is max(3 robust SDs of those nights'
    levels (1.4826 MAD, at least the within-night SD), the threshold): robust, so the
    night being judged an outlier does not widen it."""
    window = list(range(start, min(stop, start + ANCHOR + 2)))
    dropped: list[int] = []
    if len(window) >= OUTLIER_MIN:
        center = float(np.median(m[window]))
        sd = max(1.4826 * float(np.median(np.abs(m[window] - center))),
                 math.sqrt(noise.within))
        reach = max(3 * sd, threshold)
        kept = [i for i in window if abs(m[i] - center) <= reach]
        if kept:
            dropped = [i for i in window if i not in kept]
            window = kept
    return tuple(window[:ANCHOR]), tuple(dropped)


def level_t(series: Sequence[Array], nights: Sequence[int], candidate: Array, log: bool,
            noise: NightNoise) -> LogT:
    """The t of the candidate night's level against the anchor nights' (module doc), as
    a LogT: p and CI for any bound on the same scale (ratio - 1 for logs)."""
    m = levels(series, log)
    ref = float(np.mean(m[list(nights)]))
    cand = float(np.mean(np.log(candidate) if log else candidate))
    se = math.sqrt(noise.var * (1 + 1 / len(nights)))
    return LogT(cand - ref, se, noise.df, math.sqrt(noise.var), log)


def repeat_needed(noise: NightNoise, threshold: float, nights: int, have: int,
                  alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Repetitions per night at which an unchanged night would show within `threshold`
    (one-sided), given the night-to-night part of the noise, which repetitions cannot
    reduce; None when even infinitely many would not (then only a wider threshold or a
    quieter host decides)."""
    from scipy import special

    z = float(special.stdtrit(noise.df, 1 - alpha) + special.stdtrit(noise.df, power))
    target = (threshold / z) ** 2 / (1 + 1 / nights)  # the V that would decide
    between = max(0.0, noise.var - noise.within)
    if between >= target or noise.within <= 0:
        return None
    per_rep = noise.within * have  # within-night variance of one repetition
    n = math.ceil(per_rep / (target - between))
    return n if n <= 10_000 else None
