"""Percentiles of per-transaction latencies pooled across repetitions, with cluster CIs.

Pure (numpy + scipy). Input: one array of per-transaction latencies (µs) per repetition,
e.g. from `latency/<trial>.parquet`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special

from napilab.harness.stats.stats import StatsError

Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DEFAULT_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)
# A bootstrap over R clusters has at most C(2R-1, R) distinct resamples and its percentile
# CI under-covers when R is small (126 resamples at R = 5); below this no CI is given.
MIN_REPETITIONS_FOR_CI = 5
# q/100 * N is integral for the usual percentiles but floating point may land just above;
# a 1e-6 slack keeps ceil() on the intended rank (float64 error at N ~ 1e9 is ~1e-7).
_RANK_SLACK = 1e-6


@dataclass(frozen=True)
class PooledPercentile:
    percentile: float  # e.g. 99.9
    value: float  # of the pooled samples
    ci: tuple[float, float] | None  # cluster-bootstrap percentile CI; None if too few reps
    per_repetition: tuple[float, ...]  # the same percentile within each repetition
    boot: tuple[float, ...] = ()  # the cluster-bootstrap replicates behind `ci`

    @property
    def spread(self) -> tuple[float, float]:
        """(min, max) of the per-repetition values: how much repetitions disagree."""
        return min(self.per_repetition), max(self.per_repetition)


@dataclass(frozen=True)
class PooledLatency:
    n_repetitions: int
    n_samples: int
    confidence: float
    n_boot: int
    percentiles: tuple[PooledPercentile, ...]
    note: str  # why there is no CI, else ""


def pooled_percentiles(repetitions: Sequence[npt.ArrayLike],
                       percentiles: Sequence[float] = DEFAULT_PERCENTILES, *,
                       confidence: float = 0.95, n_boot: int = 2000,
                       seed: int = 0) -> PooledLatency:
    """Percentiles of all repetitions' samples pooled, with a cluster-bootstrap CI.

    Percentile definition: the inverted empirical CDF (numpy `method="inverted_cdf"`):
    the smallest sample with at least q% of samples at or below it; no interpolation, so
    every value, and every bootstrap value, is a latency that was measured.

    CI method: bootstrap that resamples whole REPETITIONS (clusters) with replacement, not
    transactions. Transactions within a repetition share its boot of the workload, IRQ
    placement, cache and frequency state and neighbours, so they are far from
    independent; the between-repetition variation is the uncertainty that matters for
    "would another run give the same p99". Resampling 10M transactions as if they were
    independent would give a CI orders of magnitude too narrow (pseudo-replication).
    The interval is Hesterberg's (2015) expanded percentile interval: tails at
    Phi(-sqrt(R/(R-1)) t(R-1, (1+c)/2)) instead of (1-c)/2, because a plain percentile
    interval over R = 10 clusters covered only ~90% for a nominal 95% (simulation in
    benchmarks/stats_power.py, which prints the current figure).

    Speed: a resample is a vector of multiplicities c_r (multinomial). Its q-th
    percentile is the smallest pooled value v with sum_r c_r * #{x_r <= v} >= q% of
    sum_r c_r * n_r; it is found exactly by bisection over the ranks of the sorted pooled
    samples, counting with `searchsorted` in each sorted repetition, for all resamples
    and percentiles at once: O(log N) passes of O(R * n_boot * len(percentiles) * log n).
    """
    reps = [_repetition(r, i) for i, r in enumerate(repetitions)]
    if not reps:
        raise StatsError("pooled percentiles: no repetitions")
    qs = np.asarray(percentiles, dtype=np.float64)
    if qs.size == 0 or np.any((qs <= 0) | (qs > 100)):
        raise StatsError(f"percentiles must be in (0, 100], got {list(percentiles)}")
    sizes = np.array([r.size for r in reps], dtype=np.int64)
    pooled = np.sort(np.concatenate(reps))
    values = pooled[_rank(qs[None, :], np.array([pooled.size]))[0] - 1]
    per_rep = np.array([r[_rank(qs, np.array(r.size)) - 1] for r in reps])  # (R, Q)
    cis: list[tuple[float, float] | None] = [None] * qs.size
    boots: list[tuple[float, ...]] = [()] * qs.size
    note = ""
    if len(reps) >= MIN_REPETITIONS_FOR_CI:
        rng = np.random.default_rng(seed)
        counts = rng.multinomial(len(reps), np.full(len(reps), 1 / len(reps)), size=n_boot)
        boot = _weighted_percentiles(reps, pooled, counts, sizes, qs)  # (n_boot, Q)
        tail = _expanded_tail(confidence, len(reps))
        low, high = np.percentile(boot, [100 * tail, 100 * (1 - tail)], axis=0,
                                  method="inverted_cdf")
        cis = [(float(lo), float(hi)) for lo, hi in zip(low, high, strict=True)]
        boots = [tuple(float(v) for v in col) for col in boot.T]
    else:
        note = (f"{len(reps)} repetitions < {MIN_REPETITIONS_FOR_CI}: too few to bootstrap "
                "over repetitions; no CI")
    rows = tuple(PooledPercentile(float(q), float(v), ci, tuple(float(x) for x in col), b)
                 for q, v, ci, col, b in zip(qs, values, cis, per_rep.T, boots, strict=True))
    return PooledLatency(len(reps), int(pooled.size), confidence, n_boot, rows, note)


def pooled_change(baseline: PooledPercentile, variant: PooledPercentile,
                  confidence: float = 0.95) -> tuple[float, tuple[float, float] | None]:
    """variant / baseline - 1 of the pooled percentiles (the value a pooled line shows)
    and its cluster-bootstrap CI: percentiles of the ratio of the two arms' independent
    replicates (pass replicates drawn with different seeds), with the expanded tail of
    the arm with fewer repetitions. None without replicates for both arms."""
    if baseline.value <= 0:
        raise StatsError(f"pooled p{baseline.percentile:g}: baseline value {baseline.value:g}"
                         " is not positive: no relative change")
    change = variant.value / baseline.value - 1
    if not baseline.boot or not variant.boot:
        return change, None
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.asarray(variant.boot) / np.asarray(baseline.boot) - 1
    clusters = min(len(baseline.per_repetition), len(variant.per_repetition))
    tail = _expanded_tail(confidence, clusters)
    low, high = np.nanpercentile(ratio, [100 * tail, 100 * (1 - tail)])
    return change, (float(low), float(high))


def _expanded_tail(confidence: float, clusters: int) -> float:
    """Tail probability of Hesterberg's expanded percentile interval for `clusters`."""
    # Plain percentile intervals from few clusters are too narrow (they miss the
    # R/(R-1) variance factor and t vs normal): 89-90% for a nominal 95% at R = 10 in
    # benchmarks/stats_power.py. Expanding to Phi(-sqrt(R/(R-1)) * t(R-1, 1-a/2)) fixes it.
    t = special.stdtrit(clusters - 1, (1 + confidence) / 2)
    return float(special.ndtr(-math.sqrt(clusters / (clusters - 1)) * t))


def _repetition(values: npt.ArrayLike, index: int) -> Array:
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size == 0:
        raise StatsError(f"repetition {index}: no samples (drop failed repetitions first)")
    if not np.all(np.isfinite(arr)):
        raise StatsError(f"repetition {index}: non-finite latency")
    return np.sort(arr)


def _rank(qs: Array, totals: IntArray) -> IntArray:
    """1-based rank of the q-th percentile among `totals` samples (broadcasting)."""
    raw = np.ceil(qs / 100 * totals - _RANK_SLACK).astype(np.int64)
    return np.clip(raw, 1, totals)


def _weighted_percentiles(reps: list[Array], pooled: Array, counts: IntArray,
                          sizes: IntArray, qs: Array) -> Array:
    target = _rank(qs[None, :], (counts @ sizes)[:, None])  # (B, Q)
    low = np.zeros(target.shape, dtype=np.int64)
    high = np.full(target.shape, pooled.size - 1, dtype=np.int64)
    for _ in range(math.ceil(math.log2(pooled.size)) + 1):
        if np.array_equal(low, high):
            break
        mid = (low + high) // 2
        v = pooled[mid]
        below = np.zeros(target.shape, dtype=np.int64)
        for r, rep in enumerate(reps):
            below += counts[:, r, None] * np.searchsorted(rep, v, side="right")
        ok = below >= target
        high = np.where(ok, mid, high)
        low = np.where(ok, low, mid + 1)
    return pooled[low]
