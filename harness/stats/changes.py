"""Level shifts (change points) in the nightly history of one metric. Pure: the
detection is ruptures' PELT (Killick et al. 2012, exact optimal segmentation under a
penalty), the library performance-CI teams use for this, not a home-made detector.

Method: the runs' medians on the log scale (multiplicative noise; a raw scale relative
to the median when a value is <= 0), standardised by a robust estimate of the night-to-
night noise (the MAD of successive differences, which a level shift barely moves), then
PELT with the l2 cost, segments of at least MIN_SEGMENT runs and the penalty
PENALTY * log(n) per change point (a BIC-type penalty, in units of the noise variance).
A second pass re-estimates the noise as the pooled SD within the first pass's segments
and segments again. PENALTY = 4 was chosen on benchmarks/stats_power.py's synthetic
histories (30 nights, each the median of 5 repetitions with 5% log-normal noise): no
change point in ~99% of A/A histories and a +8% step found within one night in ~96%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt
import ruptures

Array = npt.NDArray[np.float64]

PENALTY = 4.0
MIN_SEGMENT = 2
MIN_RUNS = 6  # fewer runs than this: no segmentation is attempted
_PASSES = 2


@dataclass(frozen=True)
class ChangePoint:
    index: int  # position (in the given sequence) of the first value of the new level
    before: float  # median of the segment before
    after: float  # median of the segment from `index` on
    change: float  # after / before - 1 (absolute difference when a value is <= 0)


def change_points(values: Sequence[float], *, penalty: float = PENALTY) -> list[ChangePoint]:
    """Change points of a series in run order; NaN values (runs without this metric)
    are skipped and indices refer to the original positions. Returns [] for fewer than
    MIN_RUNS finite values or a series without noise."""
    raw = np.asarray(values, dtype=np.float64)
    keep = np.flatnonzero(np.isfinite(raw))
    y = raw[keep]
    if y.size < MIN_RUNS:
        return []
    positive = bool(np.all(y > 0))
    scale = abs(float(np.median(y))) or 1.0
    x = np.log(y) if positive else y / scale
    noise = _mad_of_differences(x)
    found: list[int] = []
    for _ in range(_PASSES):
        if noise <= 0:
            return []
        found = _segment(x, noise, penalty)
        noise = _within_sd(x, found) or noise
    edges = [0, *found, y.size]
    out = []
    for left, cut, right in zip(edges, edges[1:], edges[2:], strict=False):
        before = float(np.median(y[left:cut]))
        after = float(np.median(y[cut:right]))
        change = after / before - 1 if positive else after - before
        out.append(ChangePoint(int(keep[cut]), before, after, change))
    return out


def _mad_of_differences(x: Array) -> float:
    d = np.diff(x)
    return float(np.median(np.abs(d - np.median(d)))) / 0.6745 / math.sqrt(2)


def _within_sd(x: Array, cuts: list[int]) -> float:
    edges = [0, *cuts, x.size]
    residuals = np.concatenate([x[a:b] - x[a:b].mean() for a, b in pairwise(edges)])
    df = x.size - len(edges) + 1
    return math.sqrt(float(np.sum(residuals ** 2)) / df) if df > 0 else 0.0


def _segment(x: Array, noise: float, penalty: float) -> list[int]:
    z = ((x - np.median(x)) / noise).reshape(-1, 1)
    algo = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(z)
    return [int(i) for i in algo.predict(pen=penalty * math.log(x.size))[:-1]]
