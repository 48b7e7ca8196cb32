"""The nightly gate's statistics: is a candidate worse than its baseline by more than a
threshold? Pure (numpy + scipy); the evidence is `harness.stats.compare.evidence`.

Per gated metric with threshold T and the metric's direction, three one-sided tests of
the change against T itself, on the worse and the better side:
  regression    H0 "worse by at most T" rejected; p Holm-adjusted over every gated case,
                so a nightly job gating 20 metrics does not go red on one in twenty;
  improvement   H0 "better by at most T" rejected (Holm over the gated cases);
  within        H0 "worse by T or more" rejected at alpha: the worse-side 95% confidence
                bound of the change is inside the threshold, so the pass means something;
  inconclusive  none of these: the runs cannot tell; `n_needed` says how many
                repetitions per run would show an unchanged metric within T.
"Worse" is up for lower-is-better metrics and down for higher-is-better ones.

The interval the gate prints is the 90% CI (GATE_CONFIDENCE): its bounds are the
one-sided 95% bounds these tests use, so a status never contradicts its row (within:
the worse-side bound is inside T; regression: the better-side bound is beyond it).
T is relative (a percentage of the baseline) or absolute (`+500 ms`, in the metric's
unit: Welch's t on the raw values). A baseline median of 0 has no relative change: a
rise from 0 that the test shows is beyond any relative threshold (regression), and
"within" needs an absolute threshold, so without one such a case is inconclusive and
says so; it is never skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from napilab.harness.stats.compare import (
    ABSOLUTE,
    RATIO,
    RELATIVE,
    Comparison,
    Evidence,
    MetricSamples,
    Nights,
    evidence,
)
from napilab.harness.stats.family import Direction
from napilab.harness.stats.nightly import (
    NIGHTS_T,
    OUTLIER_MIN,
    anchor,
    level_t,
    night_noise,
    repeat_needed,
)
from napilab.harness.stats.power import n_per_arm_needed
from napilab.harness.stats.stats import Adjust, StatsError, Verdict, adjust_p, clean, summarize
from napilab.harness.stats.two_sample import LogT, rank_p


class GateStatus(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    WITHIN = "within"
    INCONCLUSIVE = "inconclusive"


GATE_CONFIDENCE = 0.90  # two one-sided 95% bounds (module doc)
PASSING = ("improvement", "within")


def night_status(statuses: Sequence[str]) -> str:
    """One rule for a night from its gated cases' statuses: "regression" when any case
    is one; "pass" only when every case is judged within or better; else
    "inconclusive" (a case inconclusive, skipped or in error keeps the night from
    passing). No case at all is inconclusive: nothing was shown."""
    if "regression" in statuses:
        return "regression"
    return "pass" if statuses and all(s in PASSING for s in statuses) else "inconclusive"


@dataclass(frozen=True)
class GateSamples:
    baseline: npt.ArrayLike
    candidate: npt.ArrayLike
    direction: Direction | str
    max_regression_pct: float  # relative threshold, percent (unused when absolute is set)
    max_regression_abs: float | None = None  # absolute threshold, in the metric's unit
    # a nightly series (oldest first) instead of one baseline: `baseline` is then unused;
    # the reference is its anchor level (harness.stats.nightly), `pinned`: night 0 alone
    series: tuple[npt.ArrayLike, ...] | None = None
    pinned: bool = False


@dataclass(frozen=True)
class GateResult:
    """`napilab check` on one metric; the evidence (change, CI, p) is in `comparison`,
    whose p is the regression test's (p_adjusted: Holm over the gated cases)."""

    status: GateStatus
    max_regression_pct: float  # the relative threshold (percent), or the absolute one
    comparison: Comparison
    p_within: float  # one-sided p of H0 "worse by the threshold or more"
    p_improvement: float  # Holm-adjusted
    nights: Nights | None = None  # a nightly series' anchor and noise, when there was one


_VERDICT = {GateStatus.REGRESSION: Verdict.WORSE, GateStatus.IMPROVEMENT: Verdict.BETTER,
            GateStatus.WITHIN: Verdict.SAME, GateStatus.INCONCLUSIVE: Verdict.NOT_ENOUGH_DATA}


def gate_metrics(cases: Mapping[str, GateSamples], *, alpha: float = 0.05, power: float = 0.8,
                 seed: int = 0) -> dict[str, GateResult]:
    """Regression, improvement, within or inconclusive for each case (module doc)."""
    if not cases:
        return {}
    for name, case in cases.items():
        higher = str(case.direction) == Direction.HIGHER.value
        if case.max_regression_abs is None and \
                not 0 < case.max_regression_pct < (100 if higher else float("inf")):
            raise StatsError(f"{name}: max regression must be a positive percentage (below "
                             f"100 for a higher-is-better metric), got "
                             f"{case.max_regression_pct}")
        if case.max_regression_abs is not None and not case.max_regression_abs > 0:
            raise StatsError(f"{name}: an absolute threshold must be positive, got "
                             f"{case.max_regression_abs}")
    found: dict[str, tuple[Evidence, float]] = {}
    for name, case in cases.items():
        samples = MetricSamples(case.baseline, case.candidate, case.direction)
        if case.series is not None:
            found[name] = night_evidence(case, seed)
            continue
        if case.max_regression_abs is not None:
            found[name] = (evidence(samples, confidence=GATE_CONFIDENCE, seed=seed,
                                    absolute=True), case.max_regression_abs)
            continue
        e = evidence(samples, confidence=GATE_CONFIDENCE, seed=seed)
        # a relative threshold on a zero baseline: any shown rise is beyond it (bound 0)
        found[name] = (e, 0.0 if e.scale == ABSOLUTE else case.max_regression_pct / 100)
    tests = {name: _one_sided(e, t) for name, (e, t) in found.items()}
    m = len(tests)
    reg_adj = adjust_p([t[0] for t in tests.values()], Adjust.HOLM)
    imp_adj = adjust_p([t[1] for t in tests.values()], Adjust.HOLM)
    out = {}
    for (name, (e, threshold)), p_reg, p_imp in zip(found.items(), reg_adj, imp_adj,
                                                    strict=True):
        raw_reg, _, p_within = tests[name]
        shown = cases[name].max_regression_abs or cases[name].max_regression_pct
        out[name] = _decide(e, threshold, shown, (raw_reg, p_reg, p_imp, p_within), m,
                            alpha, power)
    return out


def _worse(e: Evidence, value: float, threshold: float) -> bool:
    """Is `value` (a change on e's scale) worse than the change `threshold`?"""
    return value > threshold if e.direction is Direction.LOWER else value < -threshold


def _better(e: Evidence, value: float, threshold: float) -> bool:
    """Is `value` better than a change `threshold` the better way?"""
    return value < -threshold if e.direction is Direction.LOWER else value > threshold


def _one_sided(e: Evidence, threshold: float) -> tuple[float, float, float]:
    """(p regression, p improvement, p within), unadjusted."""
    if e.direction is Direction.LOWER:
        # a relative decrease cannot pass -100%: a threshold of 100% or more bounds it
        # just above
        better = -min(threshold, 0.99) if e.scale != ABSOLUTE else -threshold
        return (e.p(threshold, "greater"), e.p(better, "less"), e.p(threshold, "less"))
    return (e.p(-threshold, "less"), e.p(threshold, "greater"), e.p(-threshold, "greater"))


def _decide(e: Evidence, threshold: float, shown: float,
            p: tuple[float, float, float, float], m: int, alpha: float,
            power: float) -> GateResult:
    raw_reg, p_reg, p_imp, p_within = p
    n1, n2 = e.baseline.n, e.variant.n
    low, high = e.ci
    worse_bound, better_bound = (high, low) if e.direction is Direction.LOWER else (low, high)
    what = _threshold_text(e, threshold)
    need = None
    if e.untestable == "all values equal":
        status, reason = GateStatus.WITHIN, "all values equal: no change"
    elif e.untestable:
        status, reason = GateStatus.INCONCLUSIVE, e.untestable
    elif e.floor(1) * m > alpha:
        status = GateStatus.INCONCLUSIVE
        reason = (f"n={n1}/{n2}: smallest attainable adjusted one-sided p "
                  f"{e.floor(1) * m:.3g} > {alpha:g}")
    elif p_reg < alpha and _worse(e, better_bound, threshold):
        status = GateStatus.REGRESSION
        reason = f"worse by more than {what}: {e.method} p={p_reg:.3g} (Holm)"
    elif p_imp < alpha and _better(e, worse_bound, threshold):
        status = GateStatus.IMPROVEMENT
        reason = f"better by more than {what}: {e.method} p={p_imp:.3g} (Holm)"
    elif e.scale == ABSOLUTE and threshold == 0:
        status = GateStatus.INCONCLUSIVE
        reason = ("baseline median 0: a relative threshold cannot show it within; give an "
                  "absolute one (--max-regression METRIC=+VALUE, e.g. cpu_time=+500ms)")
    elif p_within < alpha and not _worse(e, worse_bound, threshold) \
            and worse_bound != threshold:
        status = GateStatus.WITHIN
        reason = f"within {what}: the worse-side 95% bound is inside it (p={p_within:.3g})"
    else:
        status = GateStatus.INCONCLUSIVE
        need, reason = _undecided(e, threshold, p_reg, m, alpha, power)
    comparison = Comparison(e.direction, e.baseline, e.variant, e.change, e.ci, e.confidence,
                            raw_reg, p_reg, Adjust.HOLM, e.test_name, alpha, threshold, None,
                            need, _VERDICT[status], reason, e.rank_p, e.scale)
    return GateResult(status, shown, comparison, p_within, p_imp, e.nights)


def _undecided(e: Evidence, threshold: float, p_reg: float, m: int, alpha: float,
               power: float) -> tuple[int | None, str]:
    """Why an inconclusive case is one, and the repeat that would decide it."""
    what = _threshold_text(e, threshold)
    need, hint = None, ""
    if e.nights is not None:
        need, hint = _nights_hint(e, threshold, alpha, power)
    elif e.noise is not None:
        need = n_per_arm_needed(e.noise, threshold, alpha, power, sides=1)
        hint = f"; ~{need} repetitions per run would" if need else ""
    low, high = e.ci
    better_bound = low if e.direction is Direction.LOWER else high
    if _worse(e, better_bound, threshold):
        reason = (f"the {e.confidence:.0%} CI lies beyond {what}, but the regression "
                  f"test's p={p_reg:.3g} after Holm over {m} gated case(s) is not below "
                  f"{alpha:g}")
    elif _worse(e, e.change, threshold):
        reason = f"worse than {what} by the estimate, but its CI reaches back inside it"
    else:
        reason = f"cannot tell whether the change is within {what}{hint}"
    if e.nights is not None and e.nights.noise.nights < OUTLIER_MIN:
        reason += (f" (night-to-night noise from {e.nights.noise.nights} night(s), df "
                   f"{e.nights.noise.df:.3g}: more nights decide)")
    return need, reason


def _nights_hint(e: Evidence, threshold: float, alpha: float,
                 power: float) -> tuple[int | None, str]:
    """What repeat per night would decide an unchanged night, or why none would."""
    assert e.nights is not None
    noise = e.nights.noise
    if not noise.known:
        return None, ("; the reference is one night: night-to-night noise is unknown "
                      "until the series has two")
    bound = math.log1p(threshold) if e.scale == RATIO else \
        threshold * (e.base if e.scale == RELATIVE else 1.0)
    need = repeat_needed(noise, bound, len(e.nights.anchor), e.variant.n, alpha, power)
    shown = noise.between_text(e.scale == RATIO)
    if need is None:
        return None, (f"; night-to-night noise alone (sd {shown} over "
                      f"{noise.nights} nights) is too large for a single night to show it: "
                      "no repeat decides; a wider threshold or quieter hosts would")
    if need <= e.variant.n:
        return need, (f"; repeat {e.variant.n} was estimated to decide but this night "
                      f"left it undecided: more repetitions or longer trials")
    return need, f"; ~{need} repetitions per night would (night-to-night sd {shown})"


def night_evidence(case: GateSamples, seed: int = 0) -> tuple[Evidence, float]:
    """The evidence of a candidate night against its series' anchor level
    (harness.stats.nightly) and the threshold on its scale (as gate_metrics has it)."""
    assert case.series is not None
    direction = Direction(case.direction)
    series = [clean(night, "night")[0] for night in case.series]
    y, _ = clean(case.candidate, "candidate")
    absolute = case.max_regression_abs is not None
    log = not absolute and all(bool(np.all(v > 0)) for v in [*series, y])
    rel = (case.max_regression_pct or 0) / 100
    noise = night_noise(series, log)
    raw_base = float(np.median(series[0]))
    # the anchor needs the threshold on the levels' scale: for raw values relative to
    # the first night's median (the anchor's own median decides the gate's scale below)
    level_bound = case.max_regression_abs if absolute else \
        math.log1p(rel) if log else rel * abs(raw_base)
    nights, dropped = anchor(series, log, noise, float(level_bound or 0.0), direction,
                             case.pinned)
    if dropped:  # an outlier night is not noise of the level: estimated without it
        noise = night_noise([v for i, v in enumerate(series) if i not in dropped], log)
    x = np.sort(np.concatenate([series[i] for i in nights]))
    base = float(np.median(x))
    scale = RATIO if log else ABSOLUTE if absolute or base <= 0 else RELATIVE
    threshold = case.max_regression_abs if absolute else \
        (0.0 if scale == ABSOLUTE else rel)
    untestable = ""
    if np.unique(np.concatenate([x, y])).size == 1:
        untestable = "all values equal"
    elif noise.var <= 0:
        untestable = "no spread in any night and no known resolution"
    t = level_t(series, nights, y, log, noise) if not untestable else None
    if t is None:
        change, ci = 0.0, (0.0, 0.0) if untestable == "all values equal" else \
            (-math.inf, math.inf)
        t = LogT(0.0, 1.0, 1.0, 0.0, log)
    else:
        change, ci = t.change, t.ci(GATE_CONFIDENCE)
        if scale == RELATIVE:  # the raw shift as a share of the anchor's median
            t = LogT(t.diff / base, t.se / base, t.df, t.sd / base, False)
            change, ci = t.change, t.ci(GATE_CONFIDENCE)
    greater, how = rank_p(x, y, 0.0, "greater", seed=seed)
    less, _ = rank_p(x, y, 0.0, "less", seed=seed)
    e = Evidence(direction, summarize(x, GATE_CONFIDENCE), summarize(y, GATE_CONFIDENCE),
                 x, y, change, ci, GATE_CONFIDENCE, NIGHTS_T, t, None,
                 min(1.0, 2 * min(greater, less)), seed, untestable, how, scale, base,
                 Nights(noise, nights, len(series)))
    return e, float(threshold or 0.0)


def _threshold_text(e: Evidence, threshold: float) -> str:
    if e.scale == ABSOLUTE:
        return f"{threshold:+g} (absolute)" if threshold else "0 (a zero baseline)"
    return f"{threshold:.0%}"
