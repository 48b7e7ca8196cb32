"""Power and sample size for the comparisons of `harness.stats.stats` (per-repetition values).

Pure (numpy + scipy). Method throughout: a normal approximation on the log scale, where
the multiplicative noise of latency and throughput is roughly symmetric, using t quantiles
(df = n1+n2-2) for small n, an efficiency factor for the decision rule actually used, and
the hard floor that Mann-Whitney U cannot reach p below 2/C(n1+n2, n1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special

Array = npt.NDArray[np.float64]

# The formulas are for a t-test on logs, inflated by 1/efficiency for the rule we run. A
# verdict needs both Mann-Whitney U (efficiency 3/pi vs t for normal data) and the
# bootstrap CI of the median ratio to exclude 0; the median's efficiency, 2/pi, binds.
# With 3/pi, simulated power at the reported MDE was only ~70% (n=10, log-normal); with
# 2/pi it is 84-86% for n=6..20 (benchmarks/stats_power.py prints it): slightly
# conservative, which is the safe side for "n needed" and "detectable change".
DECISION_EFFICIENCY = 2 / math.pi


def min_attainable_p(n1: int, n2: int) -> float:
    """Smallest two-sided Mann-Whitney p possible with these arm sizes: 2 / C(n1+n2, n1)."""
    if n1 + n2 <= 1000:
        return min(1.0, 2 / math.comb(n1 + n2, n1))
    # lgamma, not math.comb: the sample-size search asks about n in the tens of thousands
    log_comb = math.lgamma(n1 + n2 + 1) - math.lgamma(n1 + 1) - math.lgamma(n2 + 1)
    return min(1.0, 2 * math.exp(-log_comb))


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
    sd * sqrt((1/n1 + 1/n2) / E), t with n1+n2-2 df, E = DECISION_EFFICIENCY = 2/pi.
    The result is an increase (a decrease of the same log size is 1 - 1/(1 + mde)).
    None when Mann-Whitney cannot reach alpha with these arm sizes.
    """
    if min_attainable_p(n1, n2) > alpha:
        return None
    df = n1 + n2 - 2
    # special.stdtrit is the t quantile without scipy.stats' per-call overhead (~25x faster)
    z = special.stdtrit(df, 1 - alpha / 2) + special.stdtrit(df, power)
    spread = math.sqrt((1 / n1 + 1 / n2) / DECISION_EFFICIENCY)
    return noise.to_change(float(z) * noise.sd * spread)


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
