"""Pooling one metric's replica effects into one change: a random-effects model. Pure.

Model: replica i's effect y_i = log(B/A) (`harness.stats.replicas.effects`) is
y_i = mu + u_i + e_i, with u_i ~ N(0, tau^2) the replica's own departure (its NIC, its
rack: real between-replica heterogeneity) and e_i ~ N(0, v_i) its trial noise. mu, the
change the replicas share on average, is what the verdict is about.

v_i = s_A^2/n_a,i + s_B^2/n_b,i with each variant's log variance pooled over the
replicas (weights "pooled", the default): a replica's own Welch variance from 3 trials
a side rests on 2-4 degrees of freedom, and weighting by it put the replicas whose
noise happened to look small first: 93.8% (modified HKSJ) and 91.3% (HKSJ) coverage
at 10 replicas of 3 trials, against 97.4% and 93.7% pooled (benchmarks/stats_replicas.py,
"mHK own", "HKSJ own"). Pooling assumes each variant's CV is alike on every replica; where it is not
(CV 0.05 on half the replicas, 0.10 on the others) the HKSJ interval's own scale keeps
the coverage (the "mixed CV" rows). Effects built from a variance alone (no per-variant
variances) are weighted by it.

Fitting is statsmodels' (`statsmodels.stats.meta_analysis.combine_effects`, imported
inside `pool`: `napilab --help` never loads it):
- tau^2 by Paule-Mandel (its "iterated"; the estimator recommended for a few studies),
  DerSimonian-Laird's coverage the same in every row of
  benchmarks/stats_replicas.py (docs/statistics.md, "Across replicas", has the figures);
  "dl" stays selectable for that comparison. statsmodels' DL is not truncated at 0: a
  negative DL tau^2 (Q < k - 1) is taken as 0, which is where Paule-Mandel puts it too;
- the interval of mu: Hartung-Knapp-Sidik-Jonkman, mu +- t(k-1) * se, se^2 the
  weighted residual variance sum w_i (y_i - mu)^2 / ((k-1) sum w_i), w_i = 1/(v_i +
  tau^2) (statsmodels' "random effect wls" row); by default the *modified* HKSJ, whose
  se is never below the plain random-effects one (1/sum w_i): plain HKSJ shrinks to a
  point when the replicas happen to agree (two equal effects give a zero-width
  interval): its per-metric coverage is near 95%, but the narrow intervals it draws by
  chance put 4.1-5.9% of A/A tables of 3 metrics (Holm) at a false verdict, above 5%
  in 10 of 16 settings; the modified one at most 3.3% (benchmarks/stats_replicas.py;
  docs/statistics.md).
  The p-value is the same t test (t(k-1)) of mu = 0, so p < alpha exactly when the
  interval excludes 0.
- One replica (k=1): its own Welch t interval (Welch-Satterthwaite df); tau^2 cannot be
  estimated and is None: the record says so, a table shows it.
- No replica with an effect (every one failed the metric or had too few trials): no
  estimate, no interval: ReplicaError; `judge` takes None for such a metric and says
  "inconclusive" (harness.stats.replicas.verdicts).

Every interval is symmetric on the log scale around its estimate, so exp(.) - 1 keeps
each printed change inside its printed interval.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from napilab.harness.stats.replicas.effects import Effect, Missing, ReplicaError
from napilab.harness.stats.stats import StatsError

Alternative = Literal["greater", "less"]
TAU2_METHODS = ("pm", "dl")
INTERVALS = ("hksj-modified", "hksj", "re-z")
TAU2_METHOD = "pm"
INTERVAL = "hksj-modified"
WEIGHTS = ("pooled", "own")
WEIGHTING = "pooled"


@dataclass(frozen=True)
class ReplicaChange:
    """One replica's own change on the metric, beside the pooled one.

    effect    its Effect (log ratio, Welch variance and df, trials)
    change    exp(effect) - 1
    ci        its Welch t interval at 1 - alpha, as changes (holds `change`)
    side      +1 when that interval lies above 0 (B significantly higher), -1 below,
              0 when it holds 0; which side is "better" is the metric's direction
    weight    its share of the pooled estimate (the random-effects weights sum to 1)
    """

    effect: Effect
    change: float
    ci: tuple[float, float]
    side: int
    weight: float


@dataclass(frozen=True)
class Pooled:
    """One metric's change across replicas (module doc).

    effect     mu, the pooled log(B/A)
    change     exp(mu) - 1 (-0.12: 12% lower in B)
    ci         its interval at 1 - alpha, as changes: always holds `change`
    p          two-sided p of mu = 0 (the interval's own t test: p < alpha exactly when
               the interval excludes 0)
    k          replicas pooled (with an effect)
    tau        between-replica sd on the log scale (None for one replica: not estimable)
    i2         I^2 = max(0, (Q - (k-1)) / Q), the share of the spread beyond the noise
               (None for one replica)
    q_p        p of Cochran's Q test of no heterogeneity (chi^2, k-1 df; None for one)
    replicas   each pooled replica's own change (ReplicaChange) by name, in given order
    se, df     the standard error of mu and the t degrees of freedom (k - 1, or the one
               replica's Welch df; inf for the normal interval)
    tau2, q    tau^2 and Cochran's Q (None for one replica)
    n          replicas named: pooled and missing
    missing    the reason of each replica without an effect, by name
    method     how the interval was made, in words
    alpha      1 - the interval's confidence
    note       what limits this estimate ("" when nothing does)
    """

    effect: float
    change: float
    ci: tuple[float, float]
    p: float
    k: int
    tau: float | None
    i2: float | None
    q_p: float | None
    replicas: dict[str, ReplicaChange]
    se: float
    df: float
    tau2: float | None
    q: float | None
    n: int
    missing: dict[str, str]
    method: str
    alpha: float
    note: str = ""

    def p_beyond(self, bound: float, alternative: Alternative) -> float:
        """One-sided p of H0: mu <= bound ("greater") or mu >= bound ("less"), bound on
        the log scale (the same t as the interval)."""
        from scipy import stats as sps

        if self.se == 0:
            above = self.effect > bound
            return 0.0 if above == (alternative == "greater") else 1.0
        t = (self.effect - bound) / self.se
        return float(sps.t.sf(t, self.df) if alternative == "greater"
                     else sps.t.cdf(t, self.df))

    def counts(self, lower_is_better: bool) -> tuple[int, int]:
        """(better, worse): replicas whose own interval excludes no change on that side."""
        good = -1 if lower_is_better else 1
        sides = [r.side for r in self.replicas.values()]
        return sides.count(good), sides.count(-good)


def pool(effects: Mapping[str, Effect | Missing], *, alpha: float = 0.05,
         tau2_method: str = TAU2_METHOD, interval: str = INTERVAL,
         weights: str = WEIGHTING) -> Pooled:
    """Pool one metric's per-replica effects (keyed by replica name; a `Missing` one is
    listed, not pooled) into the random-effects change and its interval (module doc).
    `tau2_method` ("pm", "dl") and `interval` ("hksj-modified", "hksj", or "re-z", the
    textbook normal interval) exist for benchmarks/stats_replicas.py; napilab uses the
    defaults. Raises ReplicaError when no replica has an effect (the verdict is then
    "inconclusive": `judge` takes None for such a metric) or Paule-Mandel does not
    converge; StatsError for a bad argument."""
    if not 0 < alpha < 1:
        raise StatsError(f"alpha must be between 0 and 1, got {alpha}")
    if tau2_method not in TAU2_METHODS or interval not in INTERVALS or weights not in WEIGHTS:
        raise StatsError(f"tau2_method must be one of {TAU2_METHODS}, interval one of "
                         f"{INTERVALS}, weights one of {WEIGHTS}; got {tau2_method!r}, "
                         f"{interval!r}, {weights!r}")
    usable = {name: e for name, e in effects.items() if isinstance(e, Effect)}
    missing = {name: e.reason for name, e in effects.items() if isinstance(e, Missing)}
    if not usable:
        why = "; ".join(f"{name}: {reason}" for name, reason in missing.items())
        raise ReplicaError(f"no replica gave an effect ({why})" if why else "no replicas")
    if len(usable) == 1:
        (name, only), = usable.items()
        replica = _replica(only, 1.0, alpha)
        return _pooled(only.effect, math.sqrt(only.variance), only.df, None, None, None,
                       {name: replica}, missing, "one replica: its own Welch t interval on "
                       "logs", alpha, "one replica: whether the change holds on other "
                       "hardware is unknown")
    return _random_effects(usable, missing, alpha, tau2_method, interval, weights)


def _random_effects(usable: Mapping[str, Effect], missing: dict[str, str], alpha: float,
                    tau2_method: str, interval: str, weights: str) -> Pooled:
    from statsmodels.stats.meta_analysis import combine_effects

    y = np.array([e.effect for e in usable.values()])
    v = _within(list(usable.values())) if weights == "pooled" else \
        np.array([e.variance for e in usable.values()])
    k = y.size
    # statsmodels' own I^2 divides by Q (0 for identical effects) and a negative DL
    # tau^2 makes NaN weights: neither is used (I^2 is computed below, DL refitted)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        fit = combine_effects(y, v, method_re=tau2_method, use_t=True, maxiter=200)
        if fit.tau2 < 0:  # statsmodels' DL is not truncated: Q < k - 1, tau^2 is 0
            fit = combine_effects(y, v, method_re="pm", use_t=True)
    tau2 = float(fit.tau2)
    mu = float(fit.mean_effect_re)
    if tau2_method == "pm" and tau2 > 0 and not math.isclose(fit.scale_hksj_re, 1.0,
                                                               rel_tol=1e-3):
        raise ReplicaError("Paule-Mandel's tau^2 did not converge "
                           f"(Q*/(k-1) = {fit.scale_hksj_re:.4g})")
    var_re = float(fit.var_eff_w_re)  # 1 / sum w_i: the random-effects variance, scale 1
    var_hksj = float(fit.var_hksj_re)
    var = {"hksj": var_hksj, "hksj-modified": max(var_hksj, var_re), "re-z": var_re}[interval]
    df = math.inf if interval == "re-z" else float(k - 1)
    q = float(fit.q)
    from scipy import stats as sps

    q_p = float(sps.chi2.sf(q, k - 1))
    shares = np.asarray(fit.weights_rel_re, dtype=np.float64)
    replicas = {name: _replica(e, float(w), alpha)
                for (name, e), w in zip(usable.items(), shares, strict=True)}
    words = {"hksj": "Hartung-Knapp-Sidik-Jonkman", "re-z": "normal (z)",
             "hksj-modified": "modified Hartung-Knapp-Sidik-Jonkman (never below the "
                              "random-effects se)"}[interval]
    tau_words = {"pm": "Paule-Mandel", "dl": "DerSimonian-Laird"}[tau2_method]
    method = f"random effects over {k} replicas, tau^2 by {tau_words}, {words} interval" + \
        (f", t with {k - 1} df" if interval != "re-z" else "")
    note = "" if var > 0 else "the replicas' effects are identical: a zero-width interval"
    return _pooled(mu, math.sqrt(var), df, tau2, q, q_p, replicas, missing, method, alpha,
                   note)


def _pooled(mu: float, se: float, df: float, tau2: float | None, q: float | None,
            q_p: float | None, replicas: dict[str, ReplicaChange], missing: dict[str, str],
            method: str, alpha: float, note: str) -> Pooled:
    from scipy import stats as sps

    half = float(sps.t.isf(alpha / 2, df)) * se
    # se is 0 only for the plain HKSJ interval of identical effects
    p = float(min(1.0, 2 * sps.t.sf(abs(mu) / se, df))) if se > 0 else float(mu == 0)
    k = len(replicas)
    i2 = None if q is None else (max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0)
    return Pooled(mu, math.expm1(mu), (math.expm1(mu - half), math.expm1(mu + half)), p, k,
                  None if tau2 is None else math.sqrt(tau2), i2, q_p, replicas, se, df, tau2,
                  q, k + len(missing), missing, method, alpha, note)


def _replica(e: Effect, weight: float, alpha: float) -> ReplicaChange:
    low, high = e.log_ci(alpha)
    side = 1 if low > 0 else -1 if high < 0 else 0
    return ReplicaChange(e, e.change, (math.expm1(low), math.expm1(high)), side, weight)


def _within(effects: list[Effect]) -> np.ndarray:
    """Each replica's variance with each variant's log variance pooled over the replicas
    (s_A^2/n_a + s_B^2/n_b): 3 trials give a variance on 2 df, too noisy to weight by
    (module doc); the replicas' own variances where an Effect has none."""
    if any(e.var_a is None or e.var_b is None for e in effects):
        return np.array([e.variance for e in effects])
    pooled_a = sum((e.n_a - 1) * (e.var_a or 0.0) for e in effects) / \
        sum(e.n_a - 1 for e in effects)
    pooled_b = sum((e.n_b - 1) * (e.var_b or 0.0) for e in effects) / \
        sum(e.n_b - 1 for e in effects)
    return np.array([pooled_a / e.n_a + pooled_b / e.n_b for e in effects])
