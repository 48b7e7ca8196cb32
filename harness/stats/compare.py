"""Verdicts: a family of primary comparisons (the A/B table), exploratory rows, and the
nightly gate's threshold tests. Pure (numpy + scipy).

Per metric the evidence is the relative change of the medians (what a table shows), a CI
for it, and a test chosen by `harness.stats.two_sample.choose_test` (Welch's t on logs below 10
repetitions per arm, Mann-Whitney U from 10 or with values <= 0). A change "beyond b" is
tested one side at a time against the bound b itself, never as "significant against 0
with the point estimate past b": a true +3% with a 5% bound is flagged at most alpha of
the time (benchmarks/stats_power.py measures it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from harness.stats.power import Noise, minimal_detectable_effect, n_per_arm_needed, pooled_noise
from harness.stats.stats import (
    Adjust,
    Direction,
    StatsError,
    Summary,
    Verdict,
    adjust_p,
    clean,
    relative_change,
    summarize,
)
from harness.stats.two_sample import (
    RANK,
    WELCH,
    Alternative,
    LogT,
    choose_test,
    rank_floor,
    rank_p,
    welch_log_t,
)

Array = npt.NDArray[np.float64]


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
    change: float  # variant median / baseline median - 1
    change_ci: tuple[float, float]  # Welch t CI (ratio of geometric means) or bootstrap
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
    method: str  # WELCH or RANK
    logt: LogT | None
    noise: Noise | None
    rank_p: float
    seed: int
    untestable: str  # why no test is possible ("" when one is)
    rank_how: str  # exact / permutation / asymptotic / all-equal
    _memo: dict[tuple[float, str], float] = field(default_factory=dict, compare=False,
                                                  repr=False)

    def p(self, bound: float, alternative: Alternative) -> float:
        """One-sided p of H0: change <= bound ("greater") or >= bound ("less")."""
        if self.untestable:
            return 1.0
        if self.method == WELCH:
            assert self.logt is not None
            return self.logt.p(bound, alternative)
        key = (bound, alternative)
        if key not in self._memo:  # a rank test per bound: the verdict asks a few times
            self._memo[key] = rank_p(self.x, self.y, bound, alternative, seed=self.seed)[0]
        return self._memo[key]

    def floor(self, sides: int) -> float:
        """Smallest p the test can give (Mann-Whitney's discreteness; 0 for t)."""
        if self.method == WELCH:
            return 0.0
        return rank_floor(self.x.size, self.y.size) * sides / 2

    @property
    def test_name(self) -> str:
        return WELCH if self.method == WELCH else f"{RANK} ({self.rank_how})"


def evidence(s: MetricSamples, *, confidence: float = 0.95, n_boot: int = 2000,
             seed: int = 0) -> Evidence:
    """The change of the medians, the test that applies and its CI (Welch t interval of
    the ratio of geometric means; bootstrap percentile CI of the median ratio for the rank
    test). Raises StatsError for what cannot be compared at all (no values, an infinite
    value, a non-positive baseline median)."""
    try:
        direction = Direction(s.direction)
    except ValueError:
        raise StatsError(f"direction must be 'lower' or 'higher', got {s.direction!r}") from None
    x, _ = clean(s.baseline, "baseline")
    y, _ = clean(s.variant, "variant")
    method = choose_test(x.size, y.size, bool(np.all(x > 0) and np.all(y > 0)))
    if method == WELCH:  # the CI is Welch's; the bootstrap would be thrown away
        base = float(np.median(x))
        if base <= 0:
            raise StatsError(f"relative change needs a positive baseline median, got {base:g}")
        change, low, high = float(np.median(y)) / base - 1, -math.inf, math.inf
    else:
        change, low, high = relative_change(x, y, confidence=confidence, n_boot=n_boot,
                                            seed=seed)
    logt = welch_log_t(x, y) if method == WELCH and min(x.size, y.size) >= 2 else None
    untestable = ""
    if np.unique(np.concatenate([x, y])).size == 1:
        untestable = "all values equal"
    elif method == WELCH and min(x.size, y.size) < 2:
        untestable = "one repetition in an arm: no spread to judge by"
    elif method == WELCH and logt is None:
        untestable = "no spread in either arm and no known resolution"
    if logt is not None:
        low, high = logt.ci(confidence)
    greater, how = rank_p(x, y, 0.0, "greater", seed=seed)
    less, _ = rank_p(x, y, 0.0, "less", seed=seed)
    found = Evidence(direction, summarize(s.baseline, confidence),
                     summarize(s.variant, confidence), x, y, change, (low, high), confidence,
                     method, logt, pooled_noise([x, y]), min(1.0, 2 * min(greater, less)),
                     seed, untestable, how)
    found._memo.update({(0.0, "greater"): greater, (0.0, "less"): less})
    return found


def compare(baseline: npt.ArrayLike, variant: npt.ArrayLike, direction: Direction | str, *,
            alpha: float = 0.05, power: float = 0.8, min_effect: float = 0.0,
            confidence: float = 0.95, n_boot: int = 2000, seed: int = 0) -> Comparison:
    """Compare one metric (a family of one); see `compare_metrics`."""
    only = compare_metrics({"": MetricSamples(baseline, variant, direction)}, alpha=alpha,
                           power=power, adjust=Adjust.NONE, min_effect=min_effect,
                           confidence=confidence, n_boot=n_boot, seed=seed)
    return only[""]


def compare_metrics(metrics: Mapping[str, MetricSamples], *, alpha: float = 0.05,
                    power: float = 0.8, adjust: Adjust | str = Adjust.HOLM,
                    min_effect: float | Mapping[str, float] = 0.0, confidence: float = 0.95,
                    n_boot: int = 2000, seed: int = 0) -> dict[str, Comparison]:
    """Verdicts for a family of primary comparisons (the metrics that matter).

    Per metric, with d = min_effect (0: any change): p = 2 * min(p of "change > +d",
    p of "change < -d"), one-sided tests of `Evidence.p`; then Holm (default) or
    Benjamini-Hochberg across the family. Verdict:
    - "not-enough-data": no test possible (one repetition in an arm), or the rank test's
      smallest p times the family size (Holm) cannot reach alpha;
    - "better"/"worse": adjusted p < alpha and the medians moved the same way (for the rank
      test the bootstrap CI must exclude 0 too); `direction` decides which;
    - "~" with d = 0: no significant change (all values equal included);
    - with d > 0: "~" when both one-sided tests show the change is within +-d (TOST at
      alpha), else "not-enough-data" with the n per arm that would decide it.
    The MDE and n_needed use alpha/m (Bonferroni, the first Holm step).
    """
    if not metrics:
        raise StatsError("no metrics to compare")
    _check_levels(alpha=alpha, power=power, confidence=confidence)
    if n_boot < 100:
        raise StatsError(f"n_boot must be at least 100 for a percentile CI, got {n_boot}")
    method = Adjust(adjust)
    m = len(metrics)
    effects = {}
    for name in metrics:
        effect = min_effect.get(name, 0.0) if isinstance(min_effect, Mapping) else min_effect
        if not 0 <= effect < 1:
            raise StatsError(f"{name}: min_effect must be in [0, 1), got {effect}")
        effects[name] = effect
    found = {name: evidence(s, confidence=confidence, n_boot=n_boot, seed=seed)
             for name, s in metrics.items()}
    raw = {name: min(1.0, 2 * min(e.p(effects[name], "greater"), e.p(-effects[name], "less")))
           for name, e in found.items()}
    adjusted = dict(zip(raw, adjust_p(list(raw.values()), method), strict=True))
    alpha_eff = alpha if method is Adjust.NONE else alpha / m
    holm = m if method is Adjust.HOLM else 1
    return {name: _decide(e, raw[name], adjusted[name], method, (alpha, alpha_eff), holm,
                          power, effects[name]) for name, e in found.items()}


def explore(s: MetricSamples, *, alpha: float = 0.05, confidence: float = 0.95,
            n_boot: int = 2000, seed: int = 0) -> Comparison:
    """A descriptive (non-primary) row: change, CI and unadjusted two-sided p, verdict
    "exploratory": it claims nothing about family-wise error."""
    e = evidence(s, confidence=confidence, n_boot=n_boot, seed=seed)
    p = min(1.0, 2 * min(e.p(0.0, "greater"), e.p(0.0, "less")))
    return Comparison(e.direction, e.baseline, e.variant, e.change, e.ci, e.confidence, p, p,
                      Adjust.NONE, e.test_name, alpha, 0.0, None, None, Verdict.EXPLORATORY,
                      "exploratory: not a primary metric, no family-wise error control",
                      e.rank_p)


def _check_levels(**levels: float) -> None:
    for name, value in levels.items():
        if not 0 < value < 1:
            raise StatsError(f"{name} must be between 0 and 1, got {value}")


def _decide(e: Evidence, p_raw: float, p_adj: float, method: Adjust,
            alphas: tuple[float, float], holm: int, power: float, bound: float) -> Comparison:
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
    agrees = (e.change > 0) == up and e.change != 0
    ci_clear = (e.ci[0] > 0 and up) or (e.ci[1] < 0 and not up)
    beyond = f" beyond +-{bound:.1%}" if bound else ""
    if e.untestable:
        verdict = Verdict.SAME if e.untestable == "all values equal" else Verdict.NOT_ENOUGH_DATA
        reason = e.untestable
    elif floor > alpha:
        verdict = Verdict.NOT_ENOUGH_DATA
        reason = f"n={n1}/{n2}: smallest attainable adjusted p {floor:.3g} > {alpha:g}{need}"
    elif p_adj < alpha and agrees and (e.method == WELCH or ci_clear):
        improved = up == (e.direction is Direction.HIGHER)
        verdict = Verdict.BETTER if improved else Verdict.WORSE
        reason = f"{e.method} p={p_adj:.3g} < {alpha:g}{beyond}"
    elif p_adj < alpha:
        verdict = Verdict.SAME
        reason = ("the test and the medians disagree on the direction" if not agrees else
                  "bootstrap CI of the median change includes 0")
    elif bound and max(e.p(bound, "less"), e.p(-bound, "greater")) < alpha:
        verdict = Verdict.SAME
        reason = f"within +-{bound:.1%} (both one-sided tests p < {alpha:g})"
    elif bound:
        verdict = Verdict.NOT_ENOUGH_DATA
        n_needed = _n_margin(e.noise, e.change, bound, alpha if abs(e.change) < bound
                             else alpha_eff, power, 1 if abs(e.change) < bound else 2)
        need = f"; ~{n_needed} per arm would decide it" if n_needed else ""
        reason = f"neither beyond nor within +-{bound:.1%} at this n{need}"
    else:
        verdict = Verdict.SAME
        shown = "n/a" if mde is None else f"{mde:.1%}"
        reason = f"no significant change (p={p_adj:.3g}); detectable change at this n: {shown}"
    return Comparison(e.direction, e.baseline, e.variant, e.change, e.ci, e.confidence,
                      p_raw, p_adj, method, e.test_name, alpha, bound, mde, n_needed, verdict,
                      reason, e.rank_p)


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
