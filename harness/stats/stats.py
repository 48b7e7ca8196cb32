"""Statistics behind every "better" / "worse" / "~" napilab prints: pure, numpy + scipy only.

A *sample* here is one value per repetition (trial) of one metric for one variant, e.g. the
`latency_p99` of each of the 5 repetitions. This module holds the building blocks:
cleaning, summaries with the distribution-free CI of the median, the Mann-Whitney U test
and multiplicity adjustment.

NaN values are missing measurements: dropped one by one and counted (`Summary.n_missing`).
Infinite values and empty or all-NaN inputs raise `StatsError`; nothing here returns a
number it could not compute.
Companions: `harness.stats.two_sample` (which test applies: Welch's t on logs or raw values,
or Mann-Whitney), `harness.stats.shift` (Hodges-Lehmann and the Moses interval),
`harness.stats.compare` (verdicts of a family of comparisons and of the nightly gate),
`harness.stats.nightly` (a nightly series' anchor level and night-to-night noise),
`harness.stats.power` (detectable effect, n needed, reachability of a design),
`harness.stats.noise` (noise vs effect, drift, A/A calibration), `harness.stats.pool`
(pooled per-transaction latency percentiles), `harness.stats.family` (which metrics are
primary, directions), `harness.stats.changes` (change points across nightly runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from napilab.harness.errors import NapilabError
from napilab.harness.stats.two_sample import rank_p

Array = npt.NDArray[np.float64]


class StatsError(NapilabError):
    """A statistic cannot be computed from these samples; never reported as a result."""


class Verdict(StrEnum):
    BETTER = "better"
    WORSE = "worse"
    SAME = "~"
    NOT_ENOUGH_DATA = "not-enough-data"
    EXPLORATORY = "exploratory"  # a descriptive row: change and CI, no family-wise claim


class Adjust(StrEnum):
    """Multiple-testing correction across the metrics of one comparison."""

    HOLM = "holm"  # family-wise error rate (default: every "better" is defensible)
    BH = "bh"  # Benjamini-Hochberg false discovery rate
    NONE = "none"


def clean(values: npt.ArrayLike, what: str = "samples") -> tuple[Array, int]:
    """Sorted finite values and the number of NaNs dropped; raise StatsError if none remain.

    Sorting makes every result invariant to input order (the bootstrap and permutation
    draws index into the sorted array).
    """
    try:
        arr = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise StatsError(f"{what}: not numeric ({exc})") from exc
    if np.isinf(arr).any():
        raise StatsError(f"{what}: infinite value among {arr.size} samples")
    missing = np.isnan(arr)
    kept = np.sort(arr[~missing])
    if kept.size == 0:
        why = "no samples" if arr.size == 0 else f"all {arr.size} values are NaN"
        raise StatsError(f"{what}: {why}")
    return kept, int(missing.sum())


@dataclass(frozen=True)
class MedianCI:
    """Distribution-free CI of the median: order statistics `ranks` (1-based) of the sample."""

    low: float
    high: float
    coverage: float  # exact coverage of this pair of order statistics, >= the requested one
    ranks: tuple[int, int]


def min_n_for_median_ci(confidence: float = 0.95) -> int:
    """Smallest n whose widest order-statistic interval [x(1), x(n)] reaches `confidence`."""
    return math.ceil(math.log2(2 / (1 - confidence)) - 1e-12)


def median_ci(values: npt.ArrayLike, confidence: float = 0.95) -> MedianCI | None:
    """Binomial (order-statistic) CI of the median; None when n is too small for it.

    Method: the count of samples below the true median is Binomial(n, 1/2), so
    [x(k), x(n-k+1)] covers it with probability 1 - 2 P(B <= k-1); k is the largest rank
    with coverage >= `confidence`. Exact and distribution-free for continuous data (ties
    only widen it); coverage is discrete, so the achieved value is reported. At 95% this
    needs n >= 6; below that there is no such interval and None is returned.
    """
    x, _ = clean(values)
    n = x.size
    tail = _binomial_tail(n)
    ok = np.flatnonzero(tail <= (1 - confidence) / 2 + 1e-12)
    if ok.size == 0:
        return None
    k = int(ok[-1]) + 1
    return MedianCI(float(x[k - 1]), float(x[n - k]), float(1 - 2 * tail[k - 1]), (k, n - k + 1))


@lru_cache(maxsize=1024)
def _binomial_tail(n: int) -> Array:
    """P(Binomial(n, 1/2) <= k) for k = 0..n-1 (cached: every summary of n values asks)."""
    return np.asarray(sps.binom.cdf(np.arange(n), n, 0.5), dtype=np.float64)


@dataclass(frozen=True)
class Summary:
    """One metric of one variant across its repetitions."""

    n: int
    n_missing: int
    median: float
    minimum: float
    maximum: float
    mean: float
    stdev: float | None  # sample standard deviation (ddof=1); None for n < 2
    cv: float | None  # coefficient of variation stdev/|mean|; None for n < 2 or mean 0
    median_ci: MedianCI | None
    note: str  # why median_ci is None, else ""


def summarize(values: npt.ArrayLike, confidence: float = 0.95) -> Summary:
    """n, median, min, max, mean, CV, and the binomial order-statistic CI of the median."""
    x, missing = clean(values)
    n = x.size
    mean = float(np.mean(x))
    stdev = float(np.std(x, ddof=1)) if n >= 2 else None
    cv = stdev / abs(mean) if stdev is not None and mean != 0 else None
    ci = median_ci(x, confidence)
    note = "" if ci else (f"n={n} < {min_n_for_median_ci(confidence)}: too few samples for "
                          f"a {confidence:.0%} CI of the median")
    return Summary(n, missing, float(np.median(x)), float(x[0]), float(x[-1]), mean,
                   stdev, cv, ci, note)


def mann_whitney(baseline: npt.ArrayLike, variant: npt.ArrayLike, *,
                 seed: int = 0) -> tuple[float, str]:
    """Two-sided Mann-Whitney U p-value and the method used to get it: twice the smaller
    one-sided p of `harness.stats.two_sample.rank_p` (exact without ties, permutation with
    ties, asymptotic for large n), capped at 1. All values equal gives p = 1 ("all-equal").
    """
    x, _ = clean(baseline, "baseline")
    y, _ = clean(variant, "variant")
    greater, how = rank_p(x, y, 0.0, "greater", seed=seed)
    less, _ = rank_p(x, y, 0.0, "less", seed=seed)
    return min(1.0, 2 * min(greater, less)), how


def adjust_p(p_values: Sequence[float], method: Adjust | str = Adjust.HOLM) -> list[float]:
    """Adjusted p-values: Holm step-down (FWER) or Benjamini-Hochberg step-up (FDR).

    Holm: sorted p(1..m), adj(i) = max_{j<=i} min(1, (m-j+1) p(j)).
    BH:   adj(i) = min_{j>=i} min(1, m/j p(j)).
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.size == 0 or not np.all((p >= 0) & (p <= 1)):
        raise StatsError(f"p-values must be in [0, 1], got {list(p_values)}")
    method = Adjust(method)
    m, order = p.size, np.argsort(p, kind="stable")
    ranked = p[order]
    if method is Adjust.HOLM:
        ranked = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ranked))
    elif method is Adjust.BH:
        scaled = np.minimum(1.0, m / np.arange(1, m + 1) * ranked)
        ranked = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = ranked
    return [float(v) for v in out]
