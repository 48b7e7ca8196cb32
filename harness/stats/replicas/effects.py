"""One replica's effect of variant B against variant A on the log scale. Pure.

A *replica* is one host set (a pair, one NIC model, one rack) that ran the same A/B
experiment; it gives, per metric, one value per trial of each variant. Its effect is the
difference of the mean logs, log(B/A) of the geometric means, with the Welch variance
var = s_a^2/n_a + s_b^2/n_b of the log values and the Welch-Satterthwaite degrees of
freedom. That is the effect and the noise the random-effects pooling of
`harness.stats.replicas.meta` weights each replica by; its own interval (Welch's t on
logs, as `harness.stats.two_sample` has it for one run) is what "better on k of N
replicas" counts.

What is refused (ReplicaError, a StatsError and a ValueError, with the reason: never a
NaN, never a silent 0):
- fewer than 2 values on a side (n=1 has no within-replica variance to weight by);
- a value <= 0 (no log ratio; such a metric is not pooled on the log scale);
- an infinite value, or no values at all;
- zero variance: every trial of both variants gave the same value each, so the replica
  has no noise to be weighted by (it would outweigh every other replica).
NaN values are missing trials (a failed measurement): dropped and counted, as
`harness.stats.stats.clean` does for one run. `try_effect` returns the refusal as a
`Missing` record instead of raising, for a table that goes on with the other replicas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from napilab.harness.stats.stats import StatsError, clean


class ReplicaError(StatsError, ValueError):
    """A replica's values give no effect, or no replica gave one: the reason in words.
    A StatsError (napilab's statistics refuse, never guess) and a ValueError."""


@dataclass(frozen=True)
class Effect:
    """One replica's effect on one metric: log(B/A) of the geometric means.

    effect     mean(log b) - mean(log a); exp(effect) - 1 is the change (-0.12: 12%
               lower in B)
    variance   its Welch variance s_a^2/n_a + s_b^2/n_b (log scale), > 0
    df         Welch-Satterthwaite degrees of freedom of `variance`
    n_a, n_b   trials used per variant (NaN trials left out)
    n_missing  NaN trials dropped (both variants)
    var_a, var_b  the sample variances of the log values of A and of B (None when the
               Effect was built from a variance alone): what `pool` pools over replicas
    """

    effect: float
    variance: float
    df: float
    n_a: int
    n_b: int
    n_missing: int = 0
    var_a: float | None = None
    var_b: float | None = None

    @property
    def change(self) -> float:
        """The ratio of geometric means - 1."""
        return math.expm1(self.effect)

    def log_ci(self, alpha: float = 0.05) -> tuple[float, float]:
        """Welch's t interval of `effect` at 1 - alpha (t with `df`): symmetric, so it
        always holds effect."""
        from scipy import stats as sps

        half = float(sps.t.isf(alpha / 2, self.df)) * math.sqrt(self.variance)
        return self.effect - half, self.effect + half

    def change_ci(self, alpha: float = 0.05) -> tuple[float, float]:
        """`log_ci` as changes (ratio - 1): holds `change`."""
        low, high = self.log_ci(alpha)
        return math.expm1(low), math.expm1(high)


@dataclass(frozen=True)
class Missing:
    """A replica that gave no effect for this metric, and why (the ReplicaError's words):
    a failed metric, too few trials, a value <= 0. Listed, never pooled, never a pass."""

    reason: str


def replica_effect(a: Sequence[float], b: Sequence[float]) -> Effect:
    """The effect log(B/A) of one replica from its per-trial values of variant A and B
    (module doc); raises ReplicaError for what has no such effect."""
    try:
        x, missing_a = clean(a, "variant A")
        y, missing_b = clean(b, "variant B")
    except StatsError as exc:
        raise ReplicaError(str(exc)) from None
    for what, values in (("A", x), ("B", y)):
        if values.size < 2:
            raise ReplicaError(f"variant {what}: n={values.size}: at least 2 trials per "
                             "variant are needed for a within-replica variance")
        if values[0] <= 0:
            raise ReplicaError(f"variant {what}: a value <= 0 ({values[0]:g}): no log ratio")
    la, lb = np.log(x), np.log(y)
    sa, sb = float(np.var(la, ddof=1)), float(np.var(lb, ddof=1))
    va, vb = sa / la.size, sb / lb.size
    variance = va + vb
    if not variance > 0:
        raise ReplicaError("zero variance: every trial gave the same value within each "
                         "variant, no within-replica noise to weight this replica by")
    df = variance ** 2 / (va ** 2 / (la.size - 1) + vb ** 2 / (lb.size - 1))
    return Effect(float(np.mean(lb) - np.mean(la)), variance, float(df), int(x.size),
                  int(y.size), missing_a + missing_b, sa, sb)


def try_effect(a: Sequence[float], b: Sequence[float]) -> Effect | Missing:
    """`replica_effect`, or a `Missing` record with the reason it was refused."""
    try:
        return replica_effect(a, b)
    except ReplicaError as exc:
        return Missing(str(exc))
