"""Statistics behind every "better" / "worse" / "~" napilab prints: pure, numpy + scipy only.

A *sample* here is one value per repetition (trial) of one metric for one variant, e.g. the
`latency_p99` of each of the 10 repetitions. Variants are compared on the median; the tests
are distribution-free (order statistics, Mann-Whitney U, bootstrap) because latency
distributions are skewed and heavy-tailed. Effect sizes and power use a normal
approximation on the log scale, where multiplicative noise (the usual kind) is symmetric.

NaN values are missing measurements: dropped and counted (`Summary.n_missing`). Infinite
values, empty or all-NaN inputs and a non-positive baseline median for a relative change
raise `StatsError`; nothing here returns a number it could not compute.
Companions: `harness.stats.power` (detectable effect, n needed), `harness.stats.noise`
(noise vs effect, drift, A/A calibration), `harness.stats.pool` (pooled per-transaction
latency percentiles).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from harness.errors import NapilabError
from harness.stats.power import (
    Noise,
    min_attainable_p,
    minimal_detectable_effect,
    n_per_arm_needed,
    pooled_noise,
)

Array = npt.NDArray[np.float64]

# Below these sizes the exact null distributions are cheap (<5 ms) and better than the
# normal approximation; above them the asymptotic test is accurate.
EXACT_MAX_N = 50
PERMUTATION_MAX_N = 100
PERMUTATIONS = 9999
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
    ranks = sps.rankdata(pooled)  # midranks
    # Two-sided as distance of the rank sum from its null mean, as the normal approximation
    # does; with ties the null distribution need not be symmetric, so not 2 * one tail.
    centre = n1 * (pooled.size + 1) / 2
    observed = abs(float(ranks[:n1].sum()) - centre) - 1e-9  # midrank sums are k/2: exact
    if math.comb(pooled.size, n1) <= PERMUTATIONS:
        picks = np.array(list(combinations(range(pooled.size), n1)))
        return float(np.mean(np.abs(ranks[picks].sum(axis=1) - centre) >= observed))
    shuffled = rng.permuted(np.tile(ranks, (PERMUTATIONS, 1)), axis=1)
    hits = np.count_nonzero(np.abs(shuffled[:, :n1].sum(axis=1) - centre) >= observed)
    return (hits + 1) / (PERMUTATIONS + 1)


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
class MetricSamples:
    """One metric's per-repetition values for the baseline and a variant."""

    baseline: npt.ArrayLike
    variant: npt.ArrayLike
    direction: Direction | str


@dataclass(frozen=True)
class Comparison:
    """A variant against the baseline on one metric, with the evidence for the verdict."""

    direction: Direction
    baseline: Summary
    variant: Summary
    change: float  # variant median / baseline median - 1
    change_ci: tuple[float, float]  # bootstrap percentile CI of `change`
    confidence: float
    p_value: float  # two-sided Mann-Whitney U, unadjusted
    p_adjusted: float
    adjust: Adjust
    test_method: str  # exact / permutation / asymptotic / all-equal (see mann_whitney)
    alpha: float
    min_effect: float
    mde: float | None  # smallest |change| detectable at these n (see minimal_detectable_effect)
    n_needed: int | None  # n per arm to detect max(|change|, min_effect)
    verdict: Verdict
    reason: str


def compare(baseline: npt.ArrayLike, variant: npt.ArrayLike, direction: Direction | str, *,
            alpha: float = 0.05, power: float = 0.8, min_effect: float = 0.0,
            confidence: float = 0.95, n_boot: int = 2000, seed: int = 0) -> Comparison:
    """Compare one metric (no multiple-testing correction); see `compare_metrics`."""
    only = compare_metrics({"": MetricSamples(baseline, variant, direction)}, alpha=alpha,
                           power=power, adjust=Adjust.NONE, min_effect=min_effect,
                           confidence=confidence, n_boot=n_boot, seed=seed)
    return only[""]


def compare_metrics(metrics: Mapping[str, MetricSamples], *, alpha: float = 0.05,
                    power: float = 0.8, adjust: Adjust | str = Adjust.HOLM,
                    min_effect: float | Mapping[str, float] = 0.0, confidence: float = 0.95,
                    n_boot: int = 2000, seed: int = 0) -> dict[str, Comparison]:
    """Compare a variant against the baseline on several metrics at once.

    Per metric: relative change of the median with a bootstrap percentile CI
    (`relative_change`), two-sided Mann-Whitney U p (`mann_whitney`), then Holm (default)
    or Benjamini-Hochberg adjustment across the metrics. Verdict:
    - "not-enough-data" if even the smallest attainable p (2/C(n1+n2, n1), times m under
      Holm) cannot reach alpha;
    - "better"/"worse" if adjusted p < alpha, the CI excludes 0 on the side of the change,
      and |change| > min_effect (the sign and `direction` decide which);
    - "not-enough-data" if not significant, min_effect > 0 and the minimal detectable
      effect exceeds min_effect: the run could not have seen the change that matters;
    - "~" otherwise: no significant change, or one smaller than min_effect.
    The MDE and n_needed use alpha/m (Bonferroni, the first Holm step; conservative for BH).
    """
    if not metrics:
        raise StatsError("no metrics to compare")
    _check_levels(alpha=alpha, power=power, confidence=confidence)
    if n_boot < 100:
        raise StatsError(f"n_boot must be at least 100 for a percentile CI, got {n_boot}")
    method = Adjust(adjust)
    m = len(metrics)
    evidence = {name: _evidence(s, confidence, n_boot, seed) for name, s in metrics.items()}
    adjusted = adjust_p([e.p_value for e in evidence.values()], method)
    alpha_eff = alpha if method is Adjust.NONE else alpha / m
    out = {}
    for (name, e), p_adj in zip(evidence.items(), adjusted, strict=True):
        floor = min_attainable_p(e.baseline.n, e.variant.n) * (m if method is Adjust.HOLM else 1)
        effect = min_effect.get(name, 0.0) if isinstance(min_effect, Mapping) else min_effect
        if effect < 0:
            raise StatsError(f"{name}: min_effect must be >= 0, got {effect}")
        out[name] = _decide(e, (p_adj, method), floor, (alpha, alpha_eff), power, effect)
    return out


def _check_levels(**levels: float) -> None:
    for name, value in levels.items():
        if not 0 < value < 1:
            raise StatsError(f"{name} must be between 0 and 1, got {value}")


@dataclass(frozen=True)
class _Evidence:
    direction: Direction
    baseline: Summary
    variant: Summary
    change: float
    ci: tuple[float, float]
    p_value: float
    test_method: str
    noise: Noise | None
    confidence: float


def _evidence(s: MetricSamples, confidence: float, n_boot: int, seed: int) -> _Evidence:
    try:
        direction = Direction(s.direction)
    except ValueError:
        raise StatsError(f"direction must be 'lower' or 'higher', got {s.direction!r}") from None
    x, _ = clean(s.baseline, "baseline")
    y, _ = clean(s.variant, "variant")
    change, low, high = relative_change(x, y, confidence=confidence, n_boot=n_boot, seed=seed)
    p, how = mann_whitney(x, y, seed=seed)
    return _Evidence(direction, summarize(s.baseline, confidence), summarize(s.variant, confidence),
                     change, (low, high), p, how, pooled_noise([x, y]), confidence)


def _decide(e: _Evidence, adjusted: tuple[float, Adjust], floor: float,
            alphas: tuple[float, float], power: float, min_effect: float) -> Comparison:
    (p_adj, method), (alpha, alpha_eff) = adjusted, alphas
    n1, n2 = e.baseline.n, e.variant.n
    mde = minimal_detectable_effect(e.noise, n1, n2, alpha_eff, power) if e.noise else None
    wanted = max(abs(e.change), min_effect)
    n_needed = n_per_arm_needed(e.noise, wanted, alpha_eff, power) if e.noise else None
    need = f"; ~{n_needed} per arm would detect {wanted:.1%}" if n_needed else ""
    ci_clear = (e.ci[0] > 0 and e.change > 0) or (e.ci[1] < 0 and e.change < 0)
    if floor > alpha:
        verdict = Verdict.NOT_ENOUGH_DATA
        reason = f"n={n1}/{n2}: smallest attainable adjusted p {floor:.3g} > {alpha:g}{need}"
    elif p_adj < alpha and ci_clear and abs(e.change) > min_effect:
        improved = (e.change < 0) == (e.direction is Direction.LOWER)
        verdict = Verdict.BETTER if improved else Verdict.WORSE
        reason = f"p={p_adj:.3g} < {alpha:g} and CI excludes 0"
    elif p_adj < alpha and ci_clear:
        verdict = Verdict.SAME
        reason = f"significant but |change| {abs(e.change):.1%} <= min effect {min_effect:.1%}"
    elif min_effect > 0 and (mde is None or mde > min_effect):
        verdict = Verdict.NOT_ENOUGH_DATA
        shown = "n/a" if mde is None else f"{mde:.1%}"
        reason = f"not significant, and detectable change {shown} > min effect{need}"
    else:
        verdict = Verdict.SAME
        shown = "n/a" if mde is None else f"{mde:.1%}"
        why = f"p={p_adj:.3g}" if p_adj >= alpha else "bootstrap CI includes 0"
        reason = f"no significant change ({why}); detectable change at this n: {shown}"
    return Comparison(e.direction, e.baseline, e.variant, e.change, e.ci, e.confidence,
                      e.p_value, p_adj, method, e.test_method, alpha, min_effect, mde,
                      n_needed, verdict, reason)


class GateStatus(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NOISE = "noise"
    NOT_ENOUGH_DATA = "not-enough-data"


_GATE = {Verdict.WORSE: GateStatus.REGRESSION, Verdict.BETTER: GateStatus.IMPROVEMENT,
         Verdict.SAME: GateStatus.NOISE, Verdict.NOT_ENOUGH_DATA: GateStatus.NOT_ENOUGH_DATA}


@dataclass(frozen=True)
class GateResult:
    """`napilab check` on one metric; the evidence (change, CI, p, MDE) is in `comparison`."""

    status: GateStatus
    max_regression_pct: float
    comparison: Comparison


def check_regression(baseline: npt.ArrayLike, candidate: npt.ArrayLike,
                     direction: Direction | str, max_regression_pct: float, *,
                     alpha: float = 0.05, power: float = 0.8, n_boot: int = 2000,
                     seed: int = 0) -> GateResult:
    """Nightly gate: `compare` with min_effect = max_regression_pct / 100.

    regression: significantly worse (Mann-Whitney + bootstrap CI) by more than the
    threshold; improvement: significantly better by more than it; noise: neither;
    not-enough-data: the run could not have detected a change of the threshold's size
    (so a pass would mean nothing).
    """
    if not max_regression_pct > 0:
        raise StatsError(f"max regression must be a positive percentage, got {max_regression_pct}")
    result = compare(baseline, candidate, direction, alpha=alpha, power=power,
                     min_effect=max_regression_pct / 100, n_boot=n_boot, seed=seed)
    return GateResult(_GATE[result.verdict], max_regression_pct, result)
