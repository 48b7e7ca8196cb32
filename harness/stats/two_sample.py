"""The two-sample tests behind every verdict, and the rule for which one applies.

Pure (numpy + scipy). A comparison asks whether the variant's level differs from the
baseline's by more than a relative `bound` (0 for "any change", a metric's min_effect, or
the gate's threshold), one side at a time; a two-sided question is both sides, doubled.

Which test (`choose_test`; the rule depends only on the design, never on the values'
outcome, so it cannot be tuned into significance):
- **Welch's t on log values** ("welch-log-t") when every value of both arms is positive
  and an arm has fewer than RANK_TEST_MIN_N repetitions. Latency and rate noise is
  multiplicative (a slow repetition is slow by a factor), so logs make it additive and
  symmetric; Welch's t does not assume equal spread in the two arms (a knob that removes
  jitter changes the spread). Its p can go below any level, so a large, clean effect is
  judged at n = 3-5, where no distribution-free test can be: the smallest two-sided
  Mann-Whitney p is 0.1 at 3 vs 3 and 0.0079 at 5 vs 5, before any multiplicity
  adjustment. Integer-valued data (1 us resolution) get a variance floor of
  (resolution/2)^2 per value: two arms that each repeat one integer are not infinitely
  precise (benchmarks/stats_power.py measures the A/A rate on such data).
- **Welch's t on raw values** ("welch-t") below RANK_TEST_MIN_N when the change is
  absolute: the baseline median is <= 0 (a cost that appears: 0 -> 9,800 ms) or the
  gate's threshold is absolute (`cpu_time=+500ms`).
- **Welch's t on raw values** also when a value is <= 0 (counters: no logarithm) and the
  arms are so small that Mann-Whitney cannot reach RANK_INTERVAL_ALPHA two-sided (3 vs 3,
  2 vs 5): its Moses interval would be -inf..+inf, and a counter that fell to 0 at
  repeat 2 would print "-100% (-inf..+inf%)", an interval that says nothing. The change
  is the difference of means relative to the baseline mean (scale "relative"), its
  interval Welch's.
- **Mann-Whitney U** ("mann-whitney") from RANK_TEST_MIN_N repetitions per arm, and
  below that when a value is <= 0 with a positive baseline median and the arms can reach
  RANK_INTERVAL_ALPHA (4 vs 4 and more). From
  10 per arm its discreteness no longer costs much power, its efficiency relative to t
  is >= 0.95 for log-normal noise and higher with outlier repetitions, and it needs no
  distributional model. A bound b is tested by comparing variant/(1+b) with the
  baseline (a location shift variant - b on the raw scale).

numpy and scipy are imported by the functions that compute with them: the rule
(`choose_test`, `rank_floor`) is what `napilab validate` reads, through
harness.stats.power, and it starts without either (benchmarks/startup.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

Alternative = Literal["greater", "less"]

RANK_TEST_MIN_N = 10  # repetitions per arm from which Mann-Whitney decides
EXACT_MAX_N = 50  # exact Mann-Whitney null distribution up to this arm size (no ties)
PERMUTATION_MAX_N = 100  # with ties: permutation test up to this total size
PERMUTATIONS = 9999
WELCH = "welch-log-t"
WELCH_RAW = "welch-t"  # an absolute change (a zero baseline, an absolute threshold)
RANK = "mann-whitney"
RANK_INTERVAL_ALPHA = 0.05  # the rank test's smallest p must reach this to bound its CI
_RESOLUTIONS = tuple(10.0 ** -k for k in range(0, 7))  # 1, 0.1, ... 1e-6


def choose_test(n1: int, n2: int, all_positive: bool, absolute: bool = False) -> str:
    """WELCH for small arms of positive values, WELCH_RAW for small arms judged on an
    absolute scale (a zero baseline median, an absolute threshold) or holding a value <= 0
    too few for a bounded rank interval, RANK otherwise (see the module doc)."""
    if min(n1, n2) >= RANK_TEST_MIN_N:
        return RANK
    if absolute:
        return WELCH_RAW
    if all_positive:
        return WELCH
    return RANK if rank_floor(n1, n2) <= RANK_INTERVAL_ALPHA else WELCH_RAW


def resolution(values: Array) -> float:
    """The coarsest of 1, 0.1, ..., 1e-6 that every value is a multiple of; 0 if none.

    Tools print latencies rounded (ping and neper to 1 us after conversion, sockperf to
    1 ns): the rounding is a floor under the noise a few repetitions can show."""
    import numpy as np

    for step in _RESOLUTIONS:
        scaled = values / step
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 * np.maximum(1.0, np.abs(scaled))):
            return step
    return 0.0


@dataclass(frozen=True)
class LogT:
    """Welch's t on logs (or, `log` False, on the raw values): the estimate and its
    standard error; one-sided p for any bound."""

    diff: float  # mean(log variant) - mean(log baseline); raw: mean(variant) - mean(base)
    se: float  # standard error of diff, with the resolution floor
    df: float  # Welch-Satterthwaite degrees of freedom less one (welch_log_t)
    sd: float  # pooled SD of the logs (for power), with the floor
    log: bool = True

    def p(self, bound: float, alternative: Alternative) -> float:
        """H0: change <= bound ("greater") or change >= bound ("less"); change is
        exp(diff) - 1, the ratio of geometric means minus 1 (raw: diff itself)."""
        from scipy import special

        t = (self.diff - (math.log1p(bound) if self.log else bound)) / self.se
        return float(special.stdtr(self.df, -t if alternative == "greater" else t))

    def ci(self, confidence: float) -> tuple[float, float]:
        from scipy import special

        half = float(special.stdtrit(self.df, (1 + confidence) / 2)) * self.se
        low, high = self.diff - half, self.diff + half
        return (math.expm1(low), math.expm1(high)) if self.log else (low, high)

    @property
    def change(self) -> float:
        return math.expm1(self.diff) if self.log else self.diff


def rounding_variance(values: Array, step: float, *, log: bool) -> float:
    """The variance that rounding `values` to `step` alone implies: (step / 2)^2, relative
    to their median on logs: the floor under a sample variance of few rounded values."""
    import numpy as np

    return (step / 2 / (float(np.median(values)) if log else 1.0)) ** 2


def welch_log_t(x: Array, y: Array, *, log: bool = True) -> LogT | None:
    """Welch's t on log values (x baseline, y variant, both positive, n >= 2 each); with
    `log` False on the raw values (an absolute change: WELCH_RAW).

    Method: d = mean(log y) - mean(log x); per arm the sample variance of the logs, at
    least ((resolution/2) / median)^2 when the data are rounded (see `resolution`; raw:
    (resolution/2)^2); se = sqrt(v1/n1 + v2/n2); the Welch-Satterthwaite df less one (at
    least min(n1, n2) - 1, see below). None when both arms have no spread and no
    resolution is known (nothing bounds the noise).
    """
    import numpy as np

    lx, ly = (np.log(x), np.log(y)) if log else (x, y)
    step = resolution(np.concatenate([x, y]))
    floors = [rounding_variance(a, step, log=log) for a in (x, y)]
    v1 = max(float(np.var(lx, ddof=1)), floors[0])
    v2 = max(float(np.var(ly, ddof=1)), floors[1])
    n1, n2 = lx.size, ly.size
    a, b = v1 / n1, v2 / n2
    if a + b == 0:
        return None
    # Welch-Satterthwaite df less one, never below Hsu's min(n) - 1: with 3 repetitions
    # per arm and spreads 4x apart the plain df gave 5.6% false verdicts at alpha 5%; this
    # stays at or below 5% for every n and spread ratio benchmarks/stats_power.py tries
    df = max((a + b) ** 2 / (a * a / (n1 - 1) + b * b / (n2 - 1)) - 1, min(n1, n2) - 1)
    sd = math.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / (n1 + n2 - 2))
    return LogT(float(np.mean(ly) - np.mean(lx)), math.sqrt(a + b), df, sd, log)


def rank_p(x: Array, y: Array, bound: float, alternative: Alternative, *,
           seed: int = 0, additive: bool = False) -> tuple[float, str]:
    """One-sided Mann-Whitney p of H0: y/(1+bound) (`additive`: y - bound) is not
    shifted above ("greater") or below ("less") x, and how it was computed:
    - no ties, both arms <= EXACT_MAX_N: exact null distribution ("exact");
    - ties and n1+n2 <= PERMUTATION_MAX_N: permutation of the midrank sum, exhaustive when
      C(n1+n2, n1) <= PERMUTATIONS, else PERMUTATIONS seeded relabellings with
      p = (hits+1)/(PERMUTATIONS+1) ("permutation");
    - otherwise the normal approximation with tie correction ("asymptotic").
    """
    import numpy as np
    from scipy import stats as sps

    shifted = y - bound if additive else y / (1 + bound)
    pooled = np.concatenate([x, shifted])
    distinct = np.unique(pooled).size
    if distinct == 1:
        return 1.0, "all-equal"
    if distinct == pooled.size and max(x.size, y.size) <= EXACT_MAX_N:
        above = int(np.count_nonzero(shifted[:, None] > x[None, :]))  # U of the variant
        counts = u_counts(y.size, x.size)
        tail = counts[above:] if alternative == "greater" else counts[:above + 1]
        return float(tail.sum() / counts.sum()), "exact"
    if distinct < pooled.size and pooled.size <= PERMUTATION_MAX_N:
        return _permutation_p(pooled, y.size, alternative, np.random.default_rng(seed)), \
            "permutation"
    return float(sps.mannwhitneyu(shifted, x, alternative=alternative,
                                  method="asymptotic").pvalue), "asymptotic"


@lru_cache(maxsize=256)
def u_counts(m: int, n: int) -> Array:
    """Null distribution of U (pairs where the m-sample is above the n-sample), as counts
    of the C(m+n, m) equally likely orderings: c(m, n, u) = c(m-1, n, u-n) + c(m, n-1, u),
    by whether the largest value belongs to the m-sample. scipy's exact test gives the
    same numbers at ~50x the per-call cost, which the A/A simulations pay millions of
    times."""
    import numpy as np

    if m == 0 or n == 0:
        return np.ones(1)
    out = np.zeros(m * n + 1)
    largest_in_m = u_counts(m - 1, n)
    out[n:n + largest_in_m.size] += largest_in_m
    largest_in_n = u_counts(m, n - 1)
    out[:largest_in_n.size] += largest_in_n
    return out


def _permutation_p(pooled: Array, n_y: int, alternative: Alternative,
                   rng: np.random.Generator) -> float:
    """One-sided permutation p of the variant's midrank sum (the last n_y of `pooled`)."""
    import numpy as np
    from scipy import stats as sps

    ranks = sps.rankdata(pooled)
    sign = 1.0 if alternative == "greater" else -1.0
    tail = ranks[::-1]  # the variant first: picks index the relabelled variant arm
    observed = sign * float(tail[:n_y].sum()) - 1e-9  # midrank sums are k/2: exact
    if math.comb(pooled.size, n_y) <= PERMUTATIONS:
        picks = np.array(list(combinations(range(pooled.size), n_y)))
        return float(np.mean(sign * tail[picks].sum(axis=1) >= observed))
    shuffled = rng.permuted(np.tile(ranks, (PERMUTATIONS, 1)), axis=1)
    hits = np.count_nonzero(sign * shuffled[:, :n_y].sum(axis=1) >= observed)
    return (hits + 1) / (PERMUTATIONS + 1)


def rank_floor(n1: int, n2: int) -> float:
    """Smallest two-sided Mann-Whitney p possible with these arm sizes: 2 / C(n1+n2, n1)."""
    if n1 + n2 <= 1000:
        return min(1.0, 2 / math.comb(n1 + n2, n1))
    # lgamma, not math.comb: the sample-size search asks about n in the tens of thousands
    log_comb = math.lgamma(n1 + n2 + 1) - math.lgamma(n1 + 1) - math.lgamma(n2 + 1)
    return min(1.0, 2 * math.exp(-log_comb))
