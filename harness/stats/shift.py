"""The rank test's estimate of a change and its interval: Hodges-Lehmann with the Moses
(Mann-Whitney inversion) interval. Pure (numpy + scipy).

For a shift d between two samples (x baseline, y variant, on the scale the comparison
uses: logs of positive values, else the raw values), the Hodges-Lehmann estimate is the
median of the n1 * n2 pairwise differences y_j - x_i, and the interval is
[D(k), D(N - k + 1)] of the sorted differences, k the largest rank with
P(U <= k - 1) <= (1 - c) / 2 under the null distribution of the Mann-Whitney U
(Moses 1953; Hollander & Wolfe, ch. 4). It is exactly the set of shifts the two-sided
Mann-Whitney test at level 1 - c does not reject, so the interval and the test agree
(without ties; with ties the permutation test may differ by a hair, and the verdict
rules of harness.stats.compare then ask both), and the estimate always lies inside it.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special

from napilab.harness.stats.two_sample import EXACT_MAX_N, u_counts

Array = npt.NDArray[np.float64]


def hodges_lehmann(x: Array, y: Array, confidence: float) -> tuple[float, float, float]:
    """(estimate, low, high) of the shift y - x: the median of the pairwise differences
    and the Moses interval (module doc); (-inf, inf) when n is too small for one."""
    d = np.sort((y[:, None] - x[None, :]).ravel())
    estimate = float(np.median(d))
    k = moses_rank(x.size, y.size, confidence)
    if k < 1:
        return estimate, -math.inf, math.inf
    return estimate, float(d[k - 1]), float(d[d.size - k])


def moses_rank(n1: int, n2: int, confidence: float) -> int:
    """The rank k of the Moses interval's lower bound (0: no interval at this n)."""
    total = n1 * n2
    tail = (1 - confidence) / 2
    if max(n1, n2) <= EXACT_MAX_N:
        counts = u_counts(n2, n1)
        cdf = np.cumsum(counts) / counts.sum()  # P(U <= u), u = 0..N
        ok = np.flatnonzero(cdf <= tail + 1e-12)  # u = k - 1 with P(U <= k-1) <= tail
        return int(ok[-1]) + 1 if ok.size else 0
    z = float(special.ndtri(1 - tail))
    k = math.floor(total / 2 - z * math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12))
    return max(0, k)
