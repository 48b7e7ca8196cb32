"""Verdicts: a family of primary comparisons (the A/B table), exploratory rows, and the
nightly gate's threshold tests. Pure (numpy + scipy).

Per metric the evidence is a test chosen by `harness.stats.two_sample.choose_test`
(Welch's t on logs below 10 repetitions per arm, Mann-Whitney U from 10 or with values
<= 0, Welch's t on raw values for an absolute change or values <= 0 in tiny arms) and
the change and CI *of that test's own estimator*, so a printed change always lies
inside its printed interval and the verdict agrees with both:
- Welch's t on logs: the ratio of geometric means - 1, with the Welch t interval;
- Mann-Whitney on positive values: the Hodges-Lehmann ratio (median of the pairwise
  ratios) - 1, with the Moses interval that inverts the test (harness.stats.shift);
- Mann-Whitney with a value <= 0 (counters): the Hodges-Lehmann shift of the raw values
  and its Moses interval, relative to the baseline median (scale "relative"), or in the
  metric's own unit when the baseline median is 0 (scale "absolute": a cost that goes
  from 0 to 9,800 ms is +9,800 ms, not "n/a");
- Welch's t on raw values (a zero baseline, an absolute threshold, or a value <= 0 in
  arms too small for a bounded rank interval): the difference of means, relative to the
  baseline mean (a counter that fell to 0 is -100%) or absolute as above, with the Welch
  interval.
A change "beyond b" is tested one side at a time against the bound b itself, never as
"significant against 0 with the point estimate past b": a true +3% with a 5% bound is
flagged at most alpha of the time (benchmarks/stats_power.py measures it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from napilab.harness.stats.family import Direction
from napilab.harness.stats.nightly import NightNoise
from napilab.harness.stats.power import (
    Noise,
    minimal_detectable_effect,
    n_per_arm_needed,
    pooled_noise,
)
from napilab.harness.stats.shift import hodges_lehmann
from napilab.harness.stats.stats import (
    Adjust,
    StatsError,
    Summary,
    Verdict,
    adjust_p,
    clean,
    summarize,
)
from napilab.harness.stats.two_sample import (
    RANK,
    WELCH,
    WELCH_RAW,
    Alternative,
    LogT,
    choose_test,
    rank_floor,
    rank_p,
    welch_log_t,
)

Array = npt.NDArray[np.float64]

# The scale of a change (Comparison.scale): what `change` and `change_ci` are.
RATIO = "ratio"  # every value > 0: a ratio - 1 (printed as a percentage)
RELATIVE = "relative"  # a value <= 0, baseline median > 0: a shift / the baseline median
ABSOLUTE = "absolute"  # baseline median <= 0: a shift in the metric's unit


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
    change: float  # the test's own estimate (module doc), on `scale`
    change_ci: tuple[float, float]  # its interval: always holds `change`
    confidence: float
    p_value: float  # unadjusted p of the question asked (see compare_metrics, gate)
    p_adjusted: float
    adjust: Adjust
    test_method: str  # welch-log-t, or mann-whitney (exact/permutation/asymptotic/all-equal)
    alpha: float
    min_effect: float  # the bound the change was tested against (min_effect, threshold)
    mde: float | None  # smallest |change| detectable at these n (see stats_power)
    n_needed: int | None  # n per arm that would decide this comparison
    verdict: Verdict
    reason: str
    rank_p: float | None = None  # two-sided Mann-Whitney p: the distribution-free evidence
    scale: str = RATIO  # RATIO, RELATIVE or ABSOLUTE (module doc)


@dataclass(frozen=True)
class Nights:
    """A candidate night against a reference level of earlier nights."""

    noise: NightNoise
    anchor: tuple[int, ...]  # indices of the anchor nights in the series
    series: int  # nights in the series


@dataclass(frozen=True)
class Evidence:
    """Everything one comparison's verdict is decided from."""

    direction: Direction
    baseline: Summary
    variant: Summary
    x: Array
    y: Array
    change: float
    ci: tuple[float, float]
    confidence: float
    method: str  # WELCH, WELCH_RAW or RANK
    logt: LogT | None
    noise: Noise | None
    rank_p: float
    seed: int
    untestable: str  # why no test is possible ("" when one is)
    rank_how: str  # exact / permutation / asymptotic / all-equal
    scale: str  # RATIO, RELATIVE or ABSOLUTE
    base: float  # the baseline median (mean under welch-t; RELATIVE: what a relative
    #              bound is a share of)
    nights: Nights | None = None  # the nightly gate's reference (harness.stats.nightly)
    _memo: dict[tuple[float, str], float] = field(default_factory=dict, compare=False,
                                                  repr=False)

    def p(self, bound: float, alternative: Alternative) -> float:
        """One-sided p of H0: change <= bound ("greater") or >= bound ("less")."""
        if self.untestable:
            return 1.0
        if self.method != RANK:
            assert self.logt is not None
            return self.logt.p(bound, alternative)
        key = (bound, alternative)
        if key not in self._memo:  # a rank test per bound: the verdict asks a few times
            if self.scale == RATIO:
                found = rank_p(self.x, self.y, bound, alternative, seed=self.seed)
            else:  # a location shift of the raw values, as the Moses interval has it
                shift = bound * self.base if self.scale == RELATIVE else bound
                found = rank_p(self.x, self.y, shift, alternative, seed=self.seed,
                               additive=True)
            self._memo[key] = found[0]
        return self._memo[key]

    def floor(self, sides: int) -> float:
        """Smallest p the test can give (Mann-Whitney's discreteness; 0 for t)."""
        if self.method != RANK:
            return 0.0
        return rank_floor(self.x.size, self.y.size) * sides / 2

    @property
    def test_name(self) -> str:
        return self.method if self.method != RANK else f"{RANK} ({self.rank_how})"


def evidence(s: MetricSamples, *, confidence: float = 0.95, seed: int = 0,
             absolute: bool = False) -> Evidence:
    """The change, its CI and the test that applies, all from one estimator (module doc);
    `absolute`: judge the change in the metric's unit (an absolute gate threshold).
    Raises StatsError for what cannot be compared at all (no values, an infinite value)."""
    try:
        direction = Direction(s.direction)
    except ValueError:
        raise StatsError(f"direction must be 'lower' or 'higher', got {s.direction!r}") from None
    x, _ = clean(s.baseline, "baseline")
    y, _ = clean(s.variant, "variant")
    positive = bool(np.all(x > 0) and np.all(y > 0))
    base = float(np.median(x))
    absolute = absolute or base <= 0
    scale = ABSOLUTE if absolute else RATIO if positive else RELATIVE
    method = choose_test(x.size, y.size, positive, absolute)
    logt = None
    if method in (WELCH, WELCH_RAW):
        logt, base, change, (low, high) = _welch(x, y, method, scale, base, confidence)
    else:
        est, low, high = hodges_lehmann(np.log(x) if scale == RATIO else x,
                                        np.log(y) if scale == RATIO else y, confidence)
        if scale == RATIO:
            change, low, high = math.expm1(est), math.expm1(low), math.expm1(high)
        elif scale == RELATIVE:
            change, low, high = est / base, low / base, high / base
        else:
            change = est
    untestable = ""
    if np.unique(np.concatenate([x, y])).size == 1:
        untestable = "all values equal"
        change, low, high = 0.0, 0.0, 0.0
    elif method != RANK and min(x.size, y.size) < 2:
        untestable = "one repetition in an arm: no spread to judge by"
    elif method != RANK and logt is None:
        untestable = "no spread in either arm and no known resolution"
    greater, how = rank_p(x, y, 0.0, "greater", seed=seed)
    less, _ = rank_p(x, y, 0.0, "less", seed=seed)
    found = Evidence(direction, summarize(s.baseline, confidence),
                     summarize(s.variant, confidence), x, y, change, (low, high), confidence,
                     method, logt, pooled_noise([x, y], absolute=scale == ABSOLUTE),
                     min(1.0, 2 * min(greater, less)), seed, untestable, how, scale, base)
    found._memo.update({(0.0, "greater"): greater, (0.0, "less"): less})
    return found


def _welch(x: Array, y: Array, method: str, scale: str, base: float, confidence: float
           ) -> tuple[LogT | None, float, float, tuple[float, float]]:
    """Welch's t (on logs for WELCH): the test, the base a RELATIVE change is a share of
    (the baseline mean: a counter that fell to 0 is -100%), the change and its CI."""
    logt = welch_log_t(x, y, log=method == WELCH) if min(x.size, y.size) >= 2 else None
    if method == WELCH_RAW and scale == RELATIVE and float(np.mean(x)) > 0:
        base = float(np.mean(x))
    if logt is not None and scale == RELATIVE:  # the raw shift as a share of the base
        logt = LogT(logt.diff / base, logt.se / base, logt.df, logt.sd / base, False)
    if logt is None:  # one repetition in an arm: no interval
        change = math.expm1(float(np.mean(np.log(y)) - np.mean(np.log(x)))) \
            if method == WELCH else \
            float(np.mean(y) - np.mean(x)) / (base if scale == RELATIVE else 1.0)
        return None, base, change, (-math.inf, math.inf)
    low, high = logt.ci(confidence)
    if scale == RELATIVE and min(float(x.min()), float(y.min())) >= 0:
        low = max(low, -1.0)  # a metric that cannot go below 0 cannot fall by more than 100%
    return logt, base, logt.change, (low, high)


def compare(baseline: npt.ArrayLike, variant: npt.ArrayLike, direction: Direction | str, *,
            alpha: float = 0.05, power: float = 0.8, min_effect: float = 0.0,
            confidence: float = 0.95, seed: int = 0) -> Comparison:
    """Compare one metric (a family of one); see `compare_metrics`."""
    only = compare_metrics({"": MetricSamples(baseline, variant, direction)}, alpha=alpha,
                           power=power, adjust=Adjust.NONE, min_effect=min_effect,
                           confidence=confidence, seed=seed)
    return only[""]


def compare_metrics(metrics: Mapping[str, MetricSamples], *, alpha: float = 0.05,
                    power: float = 0.8, adjust: Adjust | str = Adjust.HOLM,
                    min_effect: float | Mapping[str, float] = 0.0, confidence: float = 0.95,
                    seed: int = 0) -> dict[str, Comparison]:
    """Verdicts for a family of primary comparisons (the metrics that matter).

    Per metric, with d = min_effect (0: any change): p = 2 * min(p of "change > +d",
    p of "change < -d"), one-sided tests of `Evidence.p`; then Holm (default) or
    Benjamini-Hochberg across the family. Verdict:
    - "not-enough-data": no test possible (one repetition in an arm), or the rank test's
      smallest p times the family size (Holm) cannot reach alpha;
    - "better"/"worse": adjusted p < alpha and the 95% CI lies beyond +-d on that side;
      `direction` decides which;
    - "~" with d = 0: no significant change and a CI that holds 0 (all values equal
      included); a CI that excludes 0 without an adjusted p < alpha (Holm) is
      "not-enough-data", saying so;
    - with d > 0: "~" when the whole 95% CI is within +-d, else "not-enough-data" with
      the n per arm that would decide it; an ABSOLUTE change (zero baseline) has d = 0.
    The MDE and n_needed use alpha/m (Bonferroni, the first Holm step).
    """
    if not metrics:
        raise StatsError("no metrics to compare")
    _check_levels(alpha=alpha, power=power, confidence=confidence)
    method = Adjust(adjust)
    m = len(metrics)
    effects = {}
    for name in metrics:
        effect = min_effect.get(name, 0.0) if isinstance(min_effect, Mapping) else min_effect
        if not 0 <= effect < 1:
            raise StatsError(f"{name}: min_effect must be in [0, 1), got {effect}")
        effects[name] = effect
    found = {name: evidence(s, confidence=confidence, seed=seed)
             for name, s in metrics.items()}
    for name, e in found.items():
        if e.scale == ABSOLUTE:  # a zero baseline has no relative bound: any change
            effects[name] = 0.0
    raw = {name: min(1.0, 2 * min(e.p(effects[name], "greater"), e.p(-effects[name], "less")))
           for name, e in found.items()}
    adjusted = dict(zip(raw, adjust_p(list(raw.values()), method), strict=True))
    alpha_eff = alpha if method is Adjust.NONE else alpha / m
    holm = m if method is Adjust.HOLM else 1
    return {name: _decide(e, raw[name], adjusted[name], method, (alpha, alpha_eff), holm,
                          power, effects[name]) for name, e in found.items()}


def explore(s: MetricSamples, *, alpha: float = 0.05, confidence: float = 0.95,
            seed: int = 0) -> Comparison:
    """A descriptive (non-primary) row: change, CI and unadjusted two-sided p, verdict
    "exploratory": it claims nothing about family-wise error."""
    e = evidence(s, confidence=confidence, seed=seed)
    p = min(1.0, 2 * min(e.p(0.0, "greater"), e.p(0.0, "less")))
    return Comparison(e.direction, e.baseline, e.variant, e.change, e.ci, e.confidence, p, p,
                      Adjust.NONE, e.test_name, alpha, 0.0, None, None, Verdict.EXPLORATORY,
                      "exploratory: not a primary metric, no family-wise error control",
                      e.rank_p, e.scale)


def _check_levels(**levels: float) -> None:
    for name, value in levels.items():
        if not 0 < value < 1:
            raise StatsError(f"{name} must be between 0 and 1, got {value}")


def _decide(e: Evidence, p_raw: float, p_adj: float, method: Adjust,
            alphas: tuple[float, float], holm: int, power: float, bound: float) -> Comparison:
    """The verdict, never at odds with the printed change and CI: better/worse only when
    the CI lies beyond +-bound on that side, "~" only when the CI holds 0 (with a bound:
    when the CI lies within +-bound); where the family's correction is what keeps a CI
    that excludes 0 from a verdict, the row says so and is not-enough-data."""
    alpha, alpha_eff = alphas
    n1, n2 = e.baseline.n, e.variant.n
    mde = minimal_detectable_effect(e.noise, n1, n2, alpha_eff, power) if e.noise else None
    wanted = max(abs(e.change), bound)
    floor = e.floor(2) * holm
    # the n per arm that would decide it: asked only where it is printed (a search)
    n_needed = n_per_arm_needed(e.noise, wanted, alpha_eff, power) \
        if e.noise and (floor > alpha or (e.untestable and e.untestable != "all values equal")) \
        else None
    need = f"; ~{n_needed} per arm would detect {wanted:.1%}" if n_needed else ""
    up = e.p(bound, "greater") <= e.p(-bound, "less")
    beyond = f" beyond +-{bound:.1%}" if bound else ""
    if e.untestable:
        verdict = Verdict.SAME if e.untestable == "all values equal" else Verdict.NOT_ENOUGH_DATA
        reason = e.untestable
    elif floor > alpha:
        verdict = Verdict.NOT_ENOUGH_DATA
        reason = f"n={n1}/{n2}: smallest attainable adjusted p {floor:.3g} > {alpha:g}{need}"
    elif p_adj < alpha and _ci_beyond(e.ci, bound, up):
        improved = up == (e.direction is Direction.HIGHER)
        verdict = Verdict.BETTER if improved else Verdict.WORSE
        reason = f"{e.method} p={p_adj:.3g} < {alpha:g}{beyond}"
    elif p_adj < alpha:  # the rank test with ties and the Moses interval differ
        verdict = Verdict.NOT_ENOUGH_DATA
        reason = (f"{e.method} p={p_adj:.3g} < {alpha:g} but the 95% CI reaches "
                  f"{'+-' + format(bound, '.1%') if bound else '0'}: the test and its "
                  "interval disagree (ties)")
    elif bound and _ci_same(e.ci, bound):
        verdict = Verdict.SAME
        reason = f"within +-{bound:.1%}: the whole 95% CI is inside it"
    elif bound:
        verdict = Verdict.NOT_ENOUGH_DATA
        n_needed = _n_margin(e.noise, e.change, bound, alpha if abs(e.change) < bound
                             else alpha_eff, power, 1 if abs(e.change) < bound else 2)
        need = f"; ~{n_needed} per arm would decide it" if n_needed else ""
        reason = f"neither beyond nor within +-{bound:.1%} at this n{need}"
    elif not _ci_same(e.ci, bound):
        verdict = Verdict.NOT_ENOUGH_DATA
        n_needed = n_per_arm_needed(e.noise, abs(e.change), alpha_eff, power) \
            if e.noise else None
        need = f"; ~{n_needed} per arm would decide it" if n_needed else ""
        why = (f"Holm over {holm} primary comparisons: p={p_raw:.3g} alone, {p_adj:.3g} "
               "adjusted" if method is not Adjust.NONE and p_raw < alpha else
               f"p={p_adj:.3g} (ties)")
        reason = f"the 95% CI excludes 0 but {why} >= {alpha:g}: not judged{need}"
    else:
        verdict = Verdict.SAME
        shown = "n/a" if mde is None else f"{mde:.1%}"
        reason = f"no significant change (p={p_adj:.3g}); detectable change at this n: {shown}"
    return Comparison(e.direction, e.baseline, e.variant, e.change, e.ci, e.confidence,
                      p_raw, p_adj, method, e.test_name, alpha, bound, mde, n_needed, verdict,
                      reason, e.rank_p, e.scale)


def _n_margin(noise: Noise | None, change: float, bound: float, alpha: float,
              power: float, sides: int) -> int | None:
    """n per arm at which a change like this one would be decided against +-bound: shown
    inside it (one-sided tests) or beyond it (two-sided); the margin is the distance
    between the change and the bound, on the log scale."""
    if noise is None:
        return None
    margin = abs(noise.to_delta(bound) - noise.to_delta(change))
    return n_per_arm_needed(noise, noise.to_change(margin), alpha, power, sides=sides) \
        if margin > 0 else None


def _ci_beyond(ci: tuple[float, float], bound: float, up: bool) -> bool:
    """Does the CI lie beyond +bound (up) or -bound: what better/worse needs."""
    return ci[0] > bound if up else ci[1] < -bound


def _ci_same(ci: tuple[float, float], bound: float) -> bool:
    """Does the CI bear "~" out: within +-bound, or holding 0 without a bound."""
    return -bound < ci[0] and ci[1] < bound if bound else ci[0] <= 0 <= ci[1]


def agree(c: Comparison) -> Comparison:
    """A comparison whose change and CI were replaced after its verdict (a pooled
    percentile line shows the pooled values' change and their cluster-bootstrap CI)
    brought back to the rules of `_decide`: the change inside its CI (a percentile
    bootstrap over few clusters can leave it outside: the CI is then stretched to it,
    and the reason says so), better/worse only with the CI beyond +-bound on that side,
    "~" only with a CI that holds 0 (within +-bound, with a bound). A verdict the CI
    does not bear out becomes not-enough-data, with the reason."""
    if c.verdict is Verdict.EXPLORATORY:
        return c
    low, high = c.change_ci
    if math.isnan(low) or math.isnan(high):
        return c
    notes = []
    if not low <= c.change <= high:
        low, high = min(low, c.change), max(high, c.change)
        notes.append("CI stretched to hold the change")
    verdict, bound = c.verdict, c.min_effect
    if verdict in (Verdict.BETTER, Verdict.WORSE) and \
            not _ci_beyond((low, high), bound, c.change > 0):
        verdict = Verdict.NOT_ENOUGH_DATA
        notes.append(f"the test says {c.verdict.value} but this CI does not bear it out")
    elif verdict is Verdict.SAME and not _ci_same((low, high), bound):
        verdict = Verdict.NOT_ENOUGH_DATA
        notes.append("the test found no change but this CI excludes "
                     + (f"+-{bound:.1%}" if bound else "0"))
    if not notes:
        return c
    return replace(c, change_ci=(low, high), verdict=verdict,
                   reason=f"{c.reason}; {'; '.join(notes)}")
