"""Power, sample size and reachability for the comparisons of `harness.stats.compare`.

Pure (numpy + scipy). Method throughout: a normal approximation on the log scale, where
the multiplicative noise of latency and throughput is roughly symmetric, with t quantiles
(df = n1+n2-2) for small n. For Welch's t on logs (the test below RANK_TEST_MIN_N
repetitions) that is the test itself; for Mann-Whitney an efficiency factor accounts for
the decision rule, and the hard floor 2/C(n1+n2, n1) below which its p cannot go applies.

numpy and scipy are imported by the functions that compute with them: `napilab validate`
reads `reachability` (harness.profile.design) and starts without either
(benchmarks/startup.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from napilab.harness.stats.two_sample import RANK, RANK_TEST_MIN_N, choose_test, rank_floor

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Array = npt.NDArray[np.float64]

# A Mann-Whitney verdict is the test and its own Moses interval (harness.stats.shift),
# which agree: Mann-Whitney's efficiency relative to t for normal noise, 3/pi, applies.
DECISION_EFFICIENCY = 3 / math.pi
# What "a clean effect" means in the reachability message: the change Welch's t on logs
# detects with 80% power at this noise (log-scale SD), the noise of the A/A runs of the
# testbed's ping flood and of typical lab latency percentiles.
REFERENCE_NOISE = 0.05


def min_attainable_p(n1: int, n2: int) -> float:
    """Smallest two-sided Mann-Whitney p possible with these arm sizes: 2 / C(n1+n2, n1)."""
    return rank_floor(n1, n2)


@dataclass(frozen=True)
class Noise:
    """Spread of one or more arms for the power formulas: pooled SD of log(values), or,
    when a value is <= 0 (counters such as drops can be 0), the pooled SD relative to the
    first arm's median."""

    sd: float
    log_scale: bool
    absolute: bool = False  # in the values' unit (an absolute change: Welch's t on raw values)

    def to_delta(self, change: float) -> float:
        return abs(math.log1p(change)) if self.log_scale else abs(change)

    def to_change(self, delta: float) -> float:
        return math.expm1(delta) if self.log_scale else delta


def pooled_noise(arms: Sequence[Array], *, absolute: bool = False) -> Noise | None:
    """Pooled within-arm SD (df = sum(n_i) - len(arms)); None without a degree of freedom.
    `absolute`: in the values' own unit (an absolute change)."""
    import numpy as np

    df = sum(a.size for a in arms) - len(arms)
    if df < 1:
        return None
    log_scale = not absolute and all(bool(np.all(a > 0)) for a in arms)
    scale = 1.0 if absolute else abs(float(np.median(arms[0]))) or 1.0
    scaled = [np.log(a) if log_scale else a / scale for a in arms]
    ss = sum(float(np.sum((a - a.mean()) ** 2)) for a in scaled)
    return Noise(math.sqrt(ss / df), log_scale, absolute)


def min_n_per_arm(alpha: float) -> int:
    """Smallest equal arm size at which Mann-Whitney can reach p <= alpha at all."""
    n = 1
    while min_attainable_p(n, n) > alpha:
        n += 1
    return n


def _z(df: int, alpha: float, power: float, sides: int) -> float:
    # special.stdtrit is the t quantile without scipy.stats' per-call overhead (~25x faster)
    from scipy import special

    return float(special.stdtrit(df, 1 - alpha / sides) + special.stdtrit(df, power))


def minimal_detectable_effect(noise: Noise, n1: int, n2: int, alpha: float = 0.05,
                              power: float = 0.8, *, sides: int = 2) -> float | None:
    """Smallest |relative change| detected with `power` at level `alpha` (`sides` 2 or 1).

    Method: delta = (t(1-alpha/sides) + t(power)) * sd * sqrt((1/n1 + 1/n2) / E), t with
    n1+n2-2 df; E = 1 for Welch's t on logs (the test at these n, see
    `harness.stats.two_sample.choose_test`), DECISION_EFFICIENCY = 2/pi for Mann-Whitney. The
    result is an increase (a decrease of the same log size is 1 - 1/(1 + mde)). None with
    fewer than 2 repetitions in an arm, or when Mann-Whitney cannot reach alpha at all.
    """
    if min(n1, n2) < 2:
        return None
    method = choose_test(n1, n2, noise.log_scale, noise.absolute)
    if method == RANK and min_attainable_p(n1, n2) * sides / 2 > alpha:
        return None
    efficiency = 1.0 if method != RANK else DECISION_EFFICIENCY
    spread = math.sqrt((1 / n1 + 1 / n2) / efficiency)
    return noise.to_change(_z(n1 + n2 - 2, alpha, power, sides) * noise.sd * spread)


def n_per_arm_needed(noise: Noise, change: float, alpha: float = 0.05, power: float = 0.8,
                     n_max: int = 100_000, *, sides: int = 2) -> int | None:
    """Repetitions per arm for `minimal_detectable_effect` to reach |change|; None if 0
    change or more than n_max. Bisection: the MDE falls monotonically with n (at the
    switch to Mann-Whitney it jumps up once, so the search starts on each side)."""
    if change == 0 or change <= -1:
        return None
    target = noise.to_delta(change)

    def enough(n: int) -> bool:
        mde = minimal_detectable_effect(noise, n, n, alpha, power, sides=sides)
        return mde is not None and noise.to_delta(mde) <= target

    if noise.log_scale:
        for n in range(2, RANK_TEST_MIN_N):
            if enough(n):
                return n
    low, high = max(2, RANK_TEST_MIN_N if noise.log_scale else min_n_per_arm(alpha)), n_max
    if not enough(high):
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid + 1, high)
    return low


@dataclass(frozen=True)
class Reach:
    """What a design (repetitions per arm, comparisons in the family) can judge."""

    n: int
    family: int
    alpha: float
    rank_floor: float  # smallest Holm-adjusted two-sided Mann-Whitney p: floor * family
    distribution_free: bool  # rank_floor < alpha
    repeat_needed: int  # smallest repeat for a distribution-free verdict

    @property
    def ok(self) -> bool:
        return self.n >= 2 and self.family >= 1 and self.distribution_free

    @property
    def clean_change(self) -> float | None:
        """The change judged with 80% power at REFERENCE_NOISE (Welch's t on logs at
        alpha / family); None without a spread or a family. Computed when asked: the t
        quantile is scipy's, and a design that is ok never needs it."""
        if self.n < 2 or self.family < 1:
            return None
        z = _z(2 * self.n - 2, self.alpha / self.family, 0.8, 2)
        return math.expm1(z * REFERENCE_NOISE * math.sqrt(2 / self.n))

    def message(self) -> str:
        """"" when ok, else what cannot be reached and what to change."""
        if self.family < 1:
            return ("no primary metric in the table: nothing is judged; name the metrics "
                    "that matter under `metrics:`")
        if self.n < 2:
            return (f"repeat {self.n}: one repetition per variant has no spread, so no "
                    f"verdict is possible; use repeat >= {self.repeat_needed}")
        if self.distribution_free:
            return ""
        seen = "" if self.clean_change is None else (
            f"; at {REFERENCE_NOISE:.0%} noise a change of {self.clean_change:+.0%} is then "
            "judged 80% of the time")
        return (f"repeat {self.n} with {self.family} primary comparison(s): smallest "
                f"reachable adjusted p of a distribution-free (rank) test "
                f"{self.rank_floor:.2g} > {self.alpha:g}, so every verdict rests on Welch's "
                f"t on log values alone (a log-normal noise model){seen}; use repeat >= "
                f"{self.repeat_needed} or name fewer primary metrics")


def reachability(n: int, family: int, alpha: float = 0.05) -> Reach:
    """Can a design with `n` repetitions per variant and `family` primary comparisons
    (Holm) reach a verdict? Distribution-free when 2/C(2n, n) * family < alpha; below
    that, only the model-based Welch's t on logs can, which `validate` and `plan` say."""
    floor = min_attainable_p(n, n) * max(family, 1) if n >= 1 else 1.0
    need = 2
    while min_attainable_p(need, need) * max(family, 1) >= alpha:
        need += 1
    return Reach(n, family, alpha, min(1.0, floor), floor < alpha, need)
