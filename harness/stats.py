"""Statistics behind every "better" / "worse" / "~" napilab prints: pure, numpy + scipy only.

A *sample* here is one value per repetition (trial) of one metric for one variant, e.g. the
`latency_p99` of each of the 10 repetitions. Variants are compared on the median; the tests
are distribution-free (order statistics, Mann-Whitney U, bootstrap) because latency
distributions are skewed and heavy-tailed. Effect sizes and power use a normal
approximation on the log scale, where multiplicative noise (the usual kind) is symmetric.

NaN values are missing measurements: dropped and counted (`Summary.n_missing`). Infinite
values, empty or all-NaN inputs and a non-positive baseline median for a relative change
raise `StatsError`; nothing here returns a number it could not compute.
Per-transaction latency pooling lives in `harness.stats_pool`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from harness.errors import NapilabError

Array = npt.NDArray[np.float64]

# Below these sizes the exact null distributions are cheap (<5 ms) and better than the
# normal approximation; above them the asymptotic test is accurate.
EXACT_MAX_N = 50
PERMUTATION_MAX_N = 100
PERMUTATIONS = 9999
# Asymptotic relative efficiency of Mann-Whitney U vs the t-test for normal data (3/pi):
# the power formulas are for a t-test on logs, inflated by 1/ARE for the test we run.
MW_EFFICIENCY = 3 / math.pi
_BOOT_CHUNK = 4_000_000  # resampled values held in memory at once


class StatsError(NapilabError):
    """A statistic cannot be computed from these samples; never reported as a result."""


class Direction(StrEnum):
    """Which way is an improvement for a metric."""

    LOWER = "lower"  # latency, cpu, drops
    HIGHER = "higher"  # throughput, transactions


class Verdict(StrEnum):
    BETTER = "better"
    WORSE = "worse"
    SAME = "~"
    NOT_ENOUGH_DATA = "not-enough-data"


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
    tail = sps.binom.cdf(np.arange(n), n, 0.5)
    ok = np.flatnonzero(tail <= (1 - confidence) / 2 + 1e-12)
    if ok.size == 0:
        return None
    k = int(ok[-1]) + 1
    return MedianCI(float(x[k - 1]), float(x[n - k]), float(1 - 2 * tail[k - 1]), (k, n - k + 1))


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
    """Two-sided Mann-Whitney U p-value and the method used to get it.

    - no ties, both arms <= EXACT_MAX_N: exact null distribution ("exact");
    - ties (rounded tool output) and n1+n2 <= PERMUTATION_MAX_N: permutation test of the
      midrank sum, exhaustive when C(n1+n2, n1) <= PERMUTATIONS, else PERMUTATIONS seeded
      random relabellings with p = (hits+1)/(PERMUTATIONS+1) ("permutation"): the exact
      no-ties table is wrong with ties and the normal approximation is poor for small n;
    - otherwise normal approximation with tie correction and continuity ("asymptotic").
    All values equal gives p = 1 ("all-equal").
    """
    x, _ = clean(baseline, "baseline")
    y, _ = clean(variant, "variant")
    pooled = np.concatenate([x, y])
    distinct = np.unique(pooled).size
    if distinct == 1:
        return 1.0, "all-equal"
    if distinct == pooled.size and max(x.size, y.size) <= EXACT_MAX_N:
        return float(sps.mannwhitneyu(x, y, method="exact").pvalue), "exact"
    if distinct < pooled.size and pooled.size <= PERMUTATION_MAX_N:
        return _rank_sum_permutation_p(pooled, x.size, np.random.default_rng(seed)), "permutation"
    return float(sps.mannwhitneyu(x, y, method="asymptotic").pvalue), "asymptotic"


def _rank_sum_permutation_p(pooled: Array, n1: int, rng: np.random.Generator) -> float:
    ranks = sps.rankdata(pooled)  # midranks; the null distribution is symmetric about centre
    centre = n1 * (pooled.size + 1) / 2
    observed = abs(float(ranks[:n1].sum()) - centre) - 1e-9  # midrank sums are k/2: exact
    if math.comb(pooled.size, n1) <= PERMUTATIONS:
        picks = np.array(list(combinations(range(pooled.size), n1)))
        return float(np.mean(np.abs(ranks[picks].sum(axis=1) - centre) >= observed))
    shuffled = rng.permuted(np.tile(ranks, (PERMUTATIONS, 1)), axis=1)
    hits = np.count_nonzero(np.abs(shuffled[:, :n1].sum(axis=1) - centre) >= observed)
    return (hits + 1) / (PERMUTATIONS + 1)


def min_attainable_p(n1: int, n2: int) -> float:
    """Smallest two-sided Mann-Whitney p possible with these arm sizes: 2 / C(n1+n2, n1)."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


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


def bootstrap_medians(x: Array, n_boot: int, rng: np.random.Generator) -> Array:
    """Medians of `n_boot` resamples (with replacement) of x, vectorised in chunks."""
    out = np.empty(n_boot)
    step = max(1, _BOOT_CHUNK // x.size)
    for start in range(0, n_boot, step):
        stop = min(n_boot, start + step)
        out[start:stop] = np.median(x[rng.integers(0, x.size, (stop - start, x.size))], axis=1)
    return out


def relative_change(baseline: npt.ArrayLike, variant: npt.ArrayLike, *, confidence: float = 0.95,
                    n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """variant median / baseline median - 1 and its bootstrap percentile CI (low, high).

    Method: each arm is resampled independently (numpy Generator seeded with `seed`),
    the ratio of medians recomputed, and the (1-c)/2, (1+c)/2 percentiles taken.
    Raises StatsError unless the baseline median is positive.
    """
    x, _ = clean(baseline, "baseline")
    y, _ = clean(variant, "variant")
    base = float(np.median(x))
    if base <= 0:
        raise StatsError(f"relative change needs a positive baseline median, got {base:g}")
    rng = np.random.default_rng(seed)
    with np.errstate(divide="ignore", invalid="ignore"):  # a resample median may be 0
        boot = bootstrap_medians(y, n_boot, rng) / bootstrap_medians(x, n_boot, rng) - 1
    low, high = np.nanpercentile(boot, [50 * (1 - confidence), 50 * (1 + confidence)])
    return float(np.median(y)) / base - 1, float(low), float(high)


@dataclass(frozen=True)
class Noise:
    """Spread of one or more arms for the power formulas: pooled SD of log(values), or,
    when a value is <= 0 (counters such as drops can be 0), the pooled SD relative to the
    first arm's median."""

    sd: float
    log_scale: bool

    def to_delta(self, change: float) -> float:
        return abs(math.log1p(change)) if self.log_scale else abs(change)

    def to_change(self, delta: float) -> float:
        return math.expm1(delta) if self.log_scale else delta


def pooled_noise(arms: Sequence[Array]) -> Noise | None:
    """Pooled within-arm SD (df = sum(n_i) - len(arms)); None without a degree of freedom."""
    df = sum(a.size for a in arms) - len(arms)
    if df < 1:
        return None
    log_scale = all(bool(np.all(a > 0)) for a in arms)
    scale = abs(float(np.median(arms[0]))) or 1.0
    scaled = [np.log(a) if log_scale else a / scale for a in arms]
    ss = sum(float(np.sum((a - a.mean()) ** 2)) for a in scaled)
    return Noise(math.sqrt(ss / df), log_scale)


def min_n_per_arm(alpha: float) -> int:
    """Smallest equal arm size at which Mann-Whitney can reach p <= alpha at all."""
    n = 1
    while min_attainable_p(n, n) > alpha:
        n += 1
    return n


def minimal_detectable_effect(noise: Noise, n1: int, n2: int, alpha: float = 0.05,
                              power: float = 0.8) -> float | None:
    """Smallest |relative change| detected with `power` at two-sided `alpha`.

    Method: normal approximation on the log scale, delta = (t(1-alpha/2) + t(power)) *
    sd * sqrt((1/n1 + 1/n2) / ARE), t with n1+n2-2 df, ARE = 3/pi for Mann-Whitney vs t.
    None when Mann-Whitney cannot reach alpha with these arm sizes.
    """
    if min_attainable_p(n1, n2) > alpha:
        return None
    df = n1 + n2 - 2
    z = sps.t.ppf(1 - alpha / 2, df) + sps.t.ppf(power, df)
    return noise.to_change(float(z) * noise.sd * math.sqrt((1 / n1 + 1 / n2) / MW_EFFICIENCY))


def n_per_arm_needed(noise: Noise, change: float, alpha: float = 0.05, power: float = 0.8,
                     n_max: int = 100_000) -> int | None:
    """Repetitions per arm for `minimal_detectable_effect` to reach |change|; None if 0
    change or more than n_max. Bisection: the MDE falls monotonically with n."""
    if change == 0 or change <= -1:
        return None
    target = noise.to_delta(change)

    def enough(n: int) -> bool:
        mde = minimal_detectable_effect(noise, n, n, alpha, power)
        return mde is not None and noise.to_delta(mde) <= target

    low, high = min_n_per_arm(alpha), n_max
    if not enough(high):
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid + 1, high)
    return low
