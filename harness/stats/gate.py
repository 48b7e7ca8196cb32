"""The nightly gate's statistics: is a candidate worse than its baseline by more than a
threshold? Pure (numpy + scipy); the evidence is `harness.stats.compare.evidence`.

Per gated metric with threshold T (a fraction) and the metric's direction, three
one-sided tests of the change against T itself, on the worse and the better side:
  regression    H0 "worse by at most T" rejected; p Holm-adjusted over every gated case,
                so a nightly job gating 20 metrics does not go red on one in twenty;
  improvement   H0 "better by at most T" rejected (Holm over the gated cases);
  within        H0 "worse by T or more" rejected at alpha: the worse-side 95% confidence
                bound of the change is inside the threshold, so the pass means something;
  inconclusive  none of these: the runs cannot tell; `n_needed` says how many
                repetitions per run would show an unchanged metric within T.
"Worse" is up for lower-is-better metrics and down for higher-is-better ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import numpy.typing as npt

from harness.stats.compare import Comparison, Evidence, MetricSamples, evidence
from harness.stats.power import n_per_arm_needed
from harness.stats.stats import Adjust, Direction, StatsError, Verdict, adjust_p


class GateStatus(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    WITHIN = "within"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class GateSamples:
    baseline: npt.ArrayLike
    candidate: npt.ArrayLike
    direction: Direction | str
    max_regression_pct: float


@dataclass(frozen=True)
class GateResult:
    """`napilab check` on one metric; the evidence (change, CI, p) is in `comparison`,
    whose p is the regression test's (p_adjusted: Holm over the gated cases)."""

    status: GateStatus
    max_regression_pct: float
    comparison: Comparison
    p_within: float  # one-sided p of H0 "worse by the threshold or more"
    p_improvement: float  # Holm-adjusted


_VERDICT = {GateStatus.REGRESSION: Verdict.WORSE, GateStatus.IMPROVEMENT: Verdict.BETTER,
            GateStatus.WITHIN: Verdict.SAME, GateStatus.INCONCLUSIVE: Verdict.NOT_ENOUGH_DATA}


def gate_metrics(cases: Mapping[str, GateSamples], *, alpha: float = 0.05, power: float = 0.8,
                 n_boot: int = 2000, seed: int = 0) -> dict[str, GateResult]:
    """Regression, improvement, within or inconclusive for each case (module doc)."""
    if not cases:
        return {}
    found: dict[str, tuple[Evidence, float]] = {}
    for name, case in cases.items():
        higher = str(case.direction) == Direction.HIGHER.value
        if not 0 < case.max_regression_pct < (100 if higher else float("inf")):
            raise StatsError(f"{name}: max regression must be a positive percentage (below "
                             f"100 for a higher-is-better metric), got "
                             f"{case.max_regression_pct}")
        samples = MetricSamples(case.baseline, case.candidate, case.direction)
        found[name] = (evidence(samples, n_boot=n_boot, seed=seed),
                       case.max_regression_pct / 100)
    tests = {name: _one_sided(e, t) for name, (e, t) in found.items()}
    m = len(tests)
    reg_adj = adjust_p([t[0] for t in tests.values()], Adjust.HOLM)
    imp_adj = adjust_p([t[1] for t in tests.values()], Adjust.HOLM)
    out = {}
    for (name, (e, threshold)), p_reg, p_imp in zip(found.items(), reg_adj, imp_adj,
                                                    strict=True):
        raw_reg, _, p_within = tests[name]
        out[name] = _decide(e, threshold, (raw_reg, p_reg, p_imp, p_within), m, alpha, power)
    return out


def _one_sided(e: Evidence, threshold: float) -> tuple[float, float, float]:
    """(p regression, p improvement, p within), unadjusted."""
    if e.direction is Direction.LOWER:
        # a decrease cannot pass -100%: a threshold of 100% or more bounds it just above
        better = -min(threshold, 0.99)
        return (e.p(threshold, "greater"), e.p(better, "less"), e.p(threshold, "less"))
    return (e.p(-threshold, "less"), e.p(threshold, "greater"), e.p(-threshold, "greater"))


def _decide(e: Evidence, threshold: float, p: tuple[float, float, float, float], m: int,
            alpha: float, power: float) -> GateResult:
    raw_reg, p_reg, p_imp, p_within = p
    n1, n2 = e.baseline.n, e.variant.n
    need = None
    if e.untestable:
        status, reason = GateStatus.INCONCLUSIVE, e.untestable
    elif e.floor(1) * m > alpha:
        status = GateStatus.INCONCLUSIVE
        reason = (f"n={n1}/{n2}: smallest attainable adjusted one-sided p "
                  f"{e.floor(1) * m:.3g} > {alpha:g}")
    elif p_reg < alpha:
        status = GateStatus.REGRESSION
        reason = f"worse by more than {threshold:.0%}: {e.method} p={p_reg:.3g} (Holm)"
    elif p_imp < alpha:
        status = GateStatus.IMPROVEMENT
        reason = f"better by more than {threshold:.0%}: {e.method} p={p_imp:.3g} (Holm)"
    elif p_within < alpha:
        status = GateStatus.WITHIN
        reason = f"within {threshold:.0%}: worse-side 95% bound inside it (p={p_within:.3g})"
    else:
        status = GateStatus.INCONCLUSIVE
        if e.noise is not None:
            need = n_per_arm_needed(e.noise, threshold, alpha, power, sides=1)
        reason = (f"cannot tell whether the change is within {threshold:.0%}"
                  + (f"; ~{need} repetitions per run would" if need else ""))
    comparison = Comparison(e.direction, e.baseline, e.variant, e.change, e.ci, e.confidence,
                            raw_reg, p_reg, Adjust.HOLM, e.test_name, alpha, threshold, None,
                            need, _VERDICT[status], reason, e.rank_p)
    return GateResult(status, threshold * 100, comparison, p_within, p_imp)


def check_regression(baseline: npt.ArrayLike, candidate: npt.ArrayLike,
                     direction: Direction | str, max_regression_pct: float, *,
                     alpha: float = 0.05, power: float = 0.8, n_boot: int = 2000,
                     seed: int = 0) -> GateResult:
    """The gate on one metric (a family of one); see `gate_metrics`."""
    if not max_regression_pct > 0:
        raise StatsError(f"max regression must be a positive percentage, got {max_regression_pct}")
    only = gate_metrics({"": GateSamples(baseline, candidate, direction, max_regression_pct)},
                        alpha=alpha, power=power, n_boot=n_boot, seed=seed)
    return only[""]

