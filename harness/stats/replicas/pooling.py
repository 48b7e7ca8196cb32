"""Several replicas (host sets) measured one change: is it there, how big, and does it
hold across them?

- Each replica's effect is the difference of the mean logs of its trials, log(B/A), with
  Welch's variance (var(log A)/n_A + var(log B)/n_B) and degrees of freedom: a ratio,
  so replicas whose absolute latencies differ (another NIC, another CPU) pool.
- The replicas' effects are pooled by a random-effects model: each replica's true change
  may differ from the others' by a between-replica spread tau^2, estimated by
  Paule-Mandel (statsmodels' `combine_effects`, method_re="pm"). The interval is
  Hartung-Knapp-Sidik-Jonkman's (t with k-1 degrees of freedom on the weighted residual
  scale), modified never to be narrower than the plain random-effects one (the scale
  taken at least 1): with 2-3 replicas the unmodified HKSJ interval can be narrower than
  the replicas' own noise allows.
- One replica: its own Welch interval; nothing to pool, no tau.

`judge` gives a verdict per primary metric with Holm over the family: "better" or
"worse" when the Holm-adjusted p-value is below alpha; "inconclusive" when the
replicas disagree beyond their noise (Cochran's Q significant and replicas significant
on both sides), or when nothing could be pooled; else "no change" (not significant, or
inside `margin` when one is given). Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Effect:
    """One replica's log(B/A) with its variance and Welch degrees of freedom."""

    effect: float
    variance: float
    df: float
    n_a: int
    n_b: int


@dataclass(frozen=True)
class Pooled:
    """The change pooled over k replicas: `change` = exp(effect) - 1 with its interval
    `ci` (B/A - 1 at both ends), the two-sided p-value of no change, tau (log scale;
    None for one replica), I^2, Cochran's Q p-value, and each replica's change and
    interval by name."""

    effect: float
    change: float
    ci: tuple[float, float]
    p: float
    k: int
    tau: float | None
    i2: float | None
    q_p: float | None
    replicas: dict[str, tuple[float, tuple[float, float]]]


def replica_effect(a: Sequence[float], b: Sequence[float]) -> Effect:
    """log(B/A) of one replica from its trials' values of the baseline (a) and the
    variant (b). ValueError (the replica is left out, saying why) for fewer than 2
    values a side, a value that is not positive, or no variation at all."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"{len(a)} and {len(b)} trials: 2 a side are needed")
    if any(not (v > 0 and math.isfinite(v)) for v in (*a, *b)):
        raise ValueError("a value is not positive: no log scale")
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    va, vb = _var(la) / len(la), _var(lb) / len(lb)
    variance = va + vb
    if variance <= 0:
        raise ValueError("no variation between trials: no interval")
    df = variance ** 2 / ((va ** 2 / (len(la) - 1) if va else 0)
                          + (vb ** 2 / (len(lb) - 1) if vb else 0))
    return Effect(_mean(lb) - _mean(la), variance, df, len(a), len(b))


def pool(effects: Mapping[str, Effect], *, alpha: float = 0.05) -> Pooled:
    """The random-effects pool of the replicas' effects (keyed by replica name)."""
    from scipy import stats as sp

    if not effects:
        raise ValueError("no replica to pool")
    own = {name: _own_ci(e, alpha) for name, e in effects.items()}
    if len(effects) == 1:
        (name, e), = effects.items()
        p = float(2 * sp.t.sf(abs(e.effect) / math.sqrt(e.variance), e.df))
        return Pooled(e.effect, math.expm1(e.effect), own[name][1], p, 1, None, None, None,
                      own)
    import warnings

    import numpy as np
    from statsmodels.stats.meta_analysis import combine_effects

    names = list(effects)
    with warnings.catch_warnings():  # identical replicas: Q = 0, statsmodels' I^2 divides
        warnings.simplefilter("ignore", RuntimeWarning)
        res = combine_effects(np.array([effects[n].effect for n in names]),
                              np.array([effects[n].variance for n in names]),
                              method_re="pm", row_names=names)
    k = len(names)
    cochran = float(res.q)
    i2 = max(0.0, (cochran - (k - 1)) / cochran) if cochran > 0 else 0.0
    estimate = float(res.mean_effect_re)
    scale = max(1.0, float(res.scale_hksj_re))  # modified HKSJ
    se = math.sqrt(float(res.var_eff_w_re) * scale)
    q = float(sp.t.ppf(1 - alpha / 2, k - 1))
    low, high = estimate - q * se, estimate + q * se
    p = float(2 * sp.t.sf(abs(estimate) / se, k - 1))
    q_p = float(sp.chi2.sf(cochran, k - 1))
    return Pooled(estimate, math.expm1(estimate), (math.expm1(low), math.expm1(high)), p, k,
                  math.sqrt(max(0.0, float(res.tau2))), i2, q_p, own)


def judge(pooled_by_metric: Mapping[str, Pooled], lower_is_better: Mapping[str, bool], *,
          alpha: float = 0.05, margin: float | None = None) -> dict[str, str]:
    """A verdict per metric (Holm over the metrics given: the primary family)."""
    adjusted = _holm({m: p.p for m, p in pooled_by_metric.items()})
    out = {}
    for metric, found in pooled_by_metric.items():
        lower = lower_is_better.get(metric, True)
        sides = {("better" if (hi < 0 if lower else lo > 0) else "worse")
                 for _, (lo, hi) in ((c, ci) for c, ci in found.replicas.values())
                 if lo > 0 or hi < 0}
        if found.q_p is not None and found.q_p < alpha and len(sides) == 2:
            out[metric] = "inconclusive"
        elif adjusted[metric] < alpha:
            out[metric] = "better" if (found.change < 0) == lower else "worse"
        elif margin is not None and -margin <= found.ci[0] and found.ci[1] <= margin:
            out[metric] = "no change"
        else:
            out[metric] = "no change" if margin is None else "inconclusive"
    return out


def _own_ci(e: Effect, alpha: float) -> tuple[float, tuple[float, float]]:
    from scipy import stats as sp

    half = float(sp.t.ppf(1 - alpha / 2, e.df)) * math.sqrt(e.variance)
    return math.expm1(e.effect), (math.expm1(e.effect - half), math.expm1(e.effect + half))


def _holm(p: Mapping[str, float]) -> dict[str, float]:
    order = sorted(p, key=lambda m: p[m])
    out, running = {}, 0.0
    for i, metric in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p[metric]))
        out[metric] = running
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _var(values: Sequence[float]) -> float:
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)
