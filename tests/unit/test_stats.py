"""harness.stats (stats, power, noise, pool, gate...): synthetic data, known answers,
fixed seeds.

The simulation tests print the rates they measure (visible in `pytest` output);
`benchmarks/stats_power.py` prints the same figures at larger scale, with timings.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from napilab.harness.errors import NapilabError
from napilab.harness.stats.changes import change_points
from napilab.harness.stats.compare import Comparison, MetricSamples, compare, compare_metrics
from napilab.harness.stats.family import Direction
from napilab.harness.stats.gate import GateResult, GateSamples, GateStatus, gate_metrics
from napilab.harness.stats.noise import calibrate, drift, noise_exceeds_effect
from napilab.harness.stats.pool import _weighted_percentiles, pooled_percentiles
from napilab.harness.stats.power import (
    Noise,
    min_n_per_arm,
    minimal_detectable_effect,
    n_per_arm_needed,
    reachability,
)
from napilab.harness.stats.stats import (
    Adjust,
    Array,
    StatsError,
    Verdict,
    adjust_p,
    mann_whitney,
    median_ci,
    summarize,
)
from napilab.harness.stats.two_sample import (
    RANK,
    WELCH,
    WELCH_RAW,
    choose_test,
    resolution,
    welch_log_t,
)

SIGMA = 0.05  # log-normal noise of the acceptance simulations
N = 10  # repetitions per arm
SIMS = 1000
Say = Callable[[str], None]


def gate_one(baseline: npt.ArrayLike, candidate: npt.ArrayLike, direction: str,
             max_regression_pct: float, **kwargs: Any) -> GateResult:
    """The gate on one metric: a family of one."""
    case = GateSamples(baseline, candidate, direction, max_regression_pct)
    return gate_metrics({"m": case}, **kwargs)["m"]


@pytest.fixture
def say(capsys: pytest.CaptureFixture[str]) -> Iterator[Say]:
    """Print a measured figure past pytest's capture, so it shows in every test run."""

    def emit(line: str) -> None:
        with capsys.disabled():
            print(f"\n    [stats] {line}", end="")

    yield emit


def _arms(rng: np.random.Generator, shift: float, n: int = N) -> tuple[Array, Array]:
    base = rng.lognormal(math.log(100), SIGMA, n)
    return base, rng.lognormal(math.log(100 * (1 + shift)), SIGMA, n)


# --- acceptance simulations (benchmarks/stats_power.py prints them at full scale) ------


def _table(rng: np.random.Generator, n: int, shift: float, sigma: float = SIGMA,
           family: int = 5, shifted: int = 5, seed: int = 0) -> list[Verdict]:
    metrics = {str(i): MetricSamples(rng.lognormal(math.log(100), sigma, n),
                                     rng.lognormal(math.log(100 * (1 + shift if i < shifted
                                                                   else 1)), sigma, n),
                                     "lower") for i in range(family)}
    found = compare_metrics(metrics, seed=seed)
    return [found[str(i)].verdict for i in range(family)]


@pytest.mark.parametrize("n", [3, 5, 10])
def test_aa_false_positives_per_table_at_most_5_percent(n: int, say: Say) -> None:
    rng = np.random.default_rng(20240601 + n)
    sims = 300
    hits = sum(any(v in (Verdict.BETTER, Verdict.WORSE) for v in _table(rng, n, 0.0, seed=i))
               for i in range(sims))
    say(f"A/A tables with a false verdict, n={n}, 5 primary metrics: {hits / sims:.1%}")
    assert hits / sims <= 0.05


def test_ten_percent_shift_of_five_primary_metrics_is_flagged_at_n5(say: Say) -> None:
    rng = np.random.default_rng(20240602)
    tables = [_table(rng, 5, 0.10, seed=i) for i in range(300)]
    flagged = np.mean([Verdict.WORSE in t and Verdict.BETTER not in t for t in tables])
    say(f"+10% on 5 primary metrics, n=5, sigma 0.05: table flags it {flagged:.1%}")
    assert flagged >= 0.80


def test_a_doubling_at_n3_is_judged(say: Say) -> None:
    rng = np.random.default_rng(20240603)
    verdicts = [v for i in range(200) for v in _table(rng, 3, 1.0, 0.1, 1, 1, seed=i)]
    say(f"x2 at n=3, sigma 0.1: judged worse {verdicts.count(Verdict.WORSE) / 200:.1%}")
    assert verdicts.count(Verdict.WORSE) / 200 >= 0.95


def test_threshold_is_tested_itself_not_zero(say: Say) -> None:
    """A true +3% with a 5% threshold must be flagged at most alpha of the time; a +3%
    judged "significant against 0 with the point estimate past 5%" would be far more."""
    rng = np.random.default_rng(20240604)
    flagged = sum(gate_one(rng.lognormal(math.log(100), SIGMA, 5),
                                   rng.lognormal(math.log(103), SIGMA, 5), "lower", 5.0,
                                   ).status is GateStatus.REGRESSION
                  for _ in range(400))
    say(f"true +3% flagged against a 5% threshold, n=5: {flagged / 400:.1%}")
    assert flagged / 400 <= 0.05


def test_median_ci_coverage_matches_its_exact_binomial_coverage(say: Say) -> None:
    rng = np.random.default_rng(7)
    samples = rng.lognormal(0.0, 0.3, (4000, N))  # true median exp(0) = 1
    cis = [median_ci(s) for s in samples]
    assert all(ci is not None for ci in cis)
    hits = np.mean([ci.low <= 1.0 <= ci.high for ci in cis if ci])
    nominal = cis[0].coverage if cis[0] else math.nan
    # n=10: [x(2), x(9)] covers with 1 - 2 P(Bin(10, 1/2) <= 1) = 1 - 22/1024 = 0.9785
    assert nominal == pytest.approx(1 - 22 / 1024)
    say(f"median CI coverage n={N}: {hits:.1%} (exact {nominal:.2%}, requested 95%)")
    assert abs(hits - nominal) < 3 * math.sqrt(nominal * (1 - nominal) / len(cis))


def test_welch_ci_of_the_change_covers_the_true_change(say: Say) -> None:
    rng = np.random.default_rng(11)
    covered = 0
    for i in range(SIMS):
        c = compare(*_arms(rng, 0.10, n=5), "lower", seed=i)
        covered += c.change_ci[0] <= 0.10 <= c.change_ci[1]
    say(f"Welch 95% CI of the change covers +10% (n=5): {covered / SIMS:.1%}")
    assert 0.93 <= covered / SIMS <= 0.97


def test_power_formula_predicts_simulated_power(say: Say) -> None:
    """At the MDE the formula reports, simulated detection should be near 80%."""
    for n in (5, N):
        mde = minimal_detectable_effect(Noise(SIGMA, True), n, n)
        assert mde is not None
        rng = np.random.default_rng(5)
        hits = sum(compare(*_arms(rng, mde, n=n), "lower", seed=i).verdict
                   is Verdict.WORSE for i in range(300))
        say(f"MDE n={n} sigma={SIGMA}: {mde:.1%}; simulated power there: {hits / 300:.0%}")
        assert 0.72 <= hits / 300 <= 0.95


# --- multiple testing: hand-computed ------------------------------------------------------


def test_holm_hand_computed() -> None:
    # p = (0.01, 0.04, 0.03, 0.005), m = 4; sorted 0.005 < 0.01 < 0.03 < 0.04
    # step-down factors m-j+1 = 4, 3, 2, 1:
    #   0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04
    # running maximum: 0.02, 0.03, 0.06, 0.06 -> back in input order:
    assert adjust_p([0.01, 0.04, 0.03, 0.005], "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_benjamini_hochberg_hand_computed() -> None:
    # same p; factors m/j = 4/1, 4/2, 4/3, 4/4 on the sorted values:
    #   0.005*4 = 0.02, 0.01*2 = 0.02, 0.03*4/3 = 0.04, 0.04*1 = 0.04
    # running minimum from the largest: 0.02, 0.02, 0.04, 0.04 -> input order:
    p = [0.01, 0.04, 0.03, 0.005]
    assert adjust_p(p, Adjust.BH) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust_p(p, Adjust.BH) == pytest.approx(sps.false_discovery_control(p))


def test_adjustment_caps_at_one_and_none_is_identity() -> None:
    assert adjust_p([0.5, 0.6], "holm") == [1.0, 1.0]
    assert adjust_p([0.5, 0.6], "none") == [0.5, 0.6]
    with pytest.raises(StatsError):
        adjust_p([0.5, float("nan")])


def test_compare_metrics_applies_holm_across_metrics() -> None:
    rng = np.random.default_rng(3)
    base, var = _arms(rng, 0.10)
    metrics = {
        "latency_p99": MetricSamples(base, var, "lower"),
        "received_rps": MetricSamples(base, base[::-1], "higher"),
    }
    out = compare_metrics(metrics)
    raw = [c.p_value for c in out.values()]
    assert [c.p_adjusted for c in out.values()] == pytest.approx(adjust_p(raw, "holm"))
    assert out["latency_p99"].verdict is Verdict.WORSE
    assert out["received_rps"].verdict is Verdict.SAME
    assert all(c.adjust is Adjust.HOLM for c in out.values())


def test_rank_floor_makes_small_runs_of_counters_not_enough_data() -> None:
    # values <= 0 have no logarithm: Mann-Whitney decides. n = 4 per arm: smallest p =
    # 2/C(8,4) = 2/70 = 0.029 < 0.05 alone, but Holm over two metrics needs 2 * 0.029.
    base, var = [0.0, 11, 12, 13], [20.0, 21, 22, 23]
    alone = compare(base, var, "lower")
    assert (alone.verdict, alone.test_method) == (Verdict.WORSE, "mann-whitney (exact)")
    two = compare_metrics({m: MetricSamples(base, var, "lower") for m in ("a", "b")})
    assert {c.verdict for c in two.values()} == {Verdict.NOT_ENOUGH_DATA}


# --- which test, known answers -------------------------------------------------------------


def test_the_test_depends_on_the_design_only() -> None:
    assert choose_test(3, 3, True) == choose_test(9, 12, True) == WELCH
    assert choose_test(10, 10, True) == choose_test(25, 10, True) == RANK
    # a value <= 0: no logarithm; a rank test where it can bound its interval (4 vs 4:
    # smallest two-sided p 0.029), Welch's t on the raw values where it cannot (3 vs 3: 0.1)
    assert choose_test(4, 4, False) == choose_test(3, 9, False) == RANK
    assert choose_test(3, 3, False) == choose_test(2, 2, False) == WELCH_RAW


def test_a_counter_that_fell_to_zero_has_a_bounded_interval() -> None:
    """Seed 001 at repeat 2: a rate of ~1,000/s in the baseline and exactly 0 in the
    variant printed -100% with a 95% CI of -inf..+inf% (a Moses interval at 2 vs 2). It
    is -100% with Welch's interval on the raw values, relative to the baseline's mean."""
    for n in (2, 3):
        base, zero = [1000.0, 1040.0, 990.0][:n], [0.0] * n
        c = compare(base, zero, "higher")
        low, high = c.change_ci
        assert c.test_method == "welch-t" and c.scale == "relative"
        assert c.change == pytest.approx(-1.0)
        assert low == -1.0 and -1.0 < high < -0.5  # never below -100% for a rate
        assert c.verdict is Verdict.WORSE


def test_welch_log_t_hand_computed() -> None:
    x, y = np.array([100.0, 110, 105]), np.array([200.0, 190, 210])
    t = welch_log_t(x, y)
    assert t is not None
    a, b = np.var(np.log(x), ddof=1) / 3, np.var(np.log(y), ddof=1) / 3
    assert t.diff == pytest.approx(np.log(y).mean() - np.log(x).mean())
    assert t.se == pytest.approx(math.sqrt(a + b))
    # Welch-Satterthwaite less one (never below min(n) - 1): the small-n correction
    assert t.df == pytest.approx(max((a + b) ** 2 / (a * a / 2 + b * b / 2) - 1, 2))
    # scipy's Welch test on the logs, one-sided, with that df
    welch = sps.ttest_ind(np.log(y), np.log(x), equal_var=False, alternative="greater")
    assert t.p(0.0, "greater") == pytest.approx(sps.t.sf(welch.statistic, t.df))
    # a bound is tested itself: H0 "change <= +50%"
    shifted = (t.diff - math.log(1.5)) / t.se
    assert t.p(0.5, "greater") == pytest.approx(sps.t.sf(shifted, t.df))
    c = compare(x, y, "lower")
    assert (c.verdict, c.test_method) == (Verdict.WORSE, WELCH)
    assert c.change == pytest.approx(math.exp(t.diff) - 1)  # the estimator of its CI
    assert c.change_ci[0] < c.change < c.change_ci[1]


def test_rounded_data_get_a_resolution_floor() -> None:
    assert resolution(np.array([20.0, 21, 22])) == 1.0
    assert resolution(np.array([20.5, 21, 22])) == 0.1
    assert resolution(np.array([math.pi])) == 0.0
    # each arm repeats one integer: without the floor t would be infinite
    t = welch_log_t(np.array([20.0, 20, 20]), np.array([21.0, 21, 21]))
    assert t is not None and t.se > 0
    assert compare([20.0, 20, 20], [21.0, 21, 21], "lower").verdict is Verdict.SAME
    assert compare([20.0] * 5, [40.0] * 5, "lower").verdict is Verdict.WORSE


def test_mann_whitney_methods() -> None:
    p, how = mann_whitney([1.0, 2, 3], [4.0, 5, 6])
    assert how == "exact"
    assert p == pytest.approx(0.1)  # 2/C(6,3): the most extreme of 20 splits, both tails
    for n1, n2 in ((3, 4), (6, 6), (12, 9)):
        rng = np.random.default_rng(n1 * n2)
        x, y = rng.normal(0, 1, n1), rng.normal(1, 1, n2)
        assert mann_whitney(x, y)[0] == pytest.approx(
            sps.mannwhitneyu(x, y, method="exact").pvalue)
    assert mann_whitney([1.0, 1, 1], [1.0, 1, 1]) == (1.0, "all-equal")
    tied = mann_whitney([1.0, 1, 2, 2, 3], [2.0, 3, 3, 4, 4])
    assert tied[1] == "permutation"
    # C(10, 5) = 252 relabellings: exhaustive, so close to the tie-corrected normal approx
    assert tied[0] == pytest.approx(
        sps.mannwhitneyu([1, 1, 2, 2, 3], [2, 3, 3, 4, 4], method="asymptotic").pvalue, abs=0.05)
    big = np.arange(60.0)
    assert mann_whitney(big, big + 0.5)[1] == "asymptotic"


# --- the edge cases of a few repetitions -----------------------------------------------------


def test_one_repetition_per_arm_gives_no_verdict() -> None:
    c = compare([100.0], [300.0], "lower")
    assert c.verdict is Verdict.NOT_ENOUGH_DATA and "one repetition" in c.reason
    assert compare([100.0, 101], [300.0], "lower").verdict is Verdict.NOT_ENOUGH_DATA
    assert gate_one([100.0], [300.0], "lower", 5).status is GateStatus.INCONCLUSIVE


def test_all_equal_arms_are_the_same() -> None:
    c = compare([7.0, 7, 7], [7.0, 7, 7], "lower")
    assert (c.verdict, c.change, c.reason) == (Verdict.SAME, 0.0, "all values equal")


def test_a_nan_drops_one_value_not_the_comparison() -> None:
    c = compare([100.0, 101, 99, float("nan"), 100], [150.0, 151, 149, 152, 150], "lower")
    assert c.baseline.n == 4 and c.baseline.n_missing == 1
    assert c.verdict is Verdict.WORSE


def test_an_infinite_value_is_an_error_naming_it() -> None:
    with pytest.raises(StatsError, match="infinite"):
        compare([100.0, float("inf"), 99], [100.0, 101, 99], "lower")


# --- verdict rules -------------------------------------------------------------------------


def test_min_effect_is_tested_as_a_bound() -> None:
    rng = np.random.default_rng(8)
    base, var = _arms(rng, 0.10)
    assert compare(base, var, "lower").verdict is Verdict.WORSE
    within = compare(base, var, "lower", min_effect=0.5)
    assert within.verdict is Verdict.SAME and "within" in within.reason
    edge = compare(base, var, "lower", min_effect=0.10)  # +10% against a 10% bound
    assert edge.verdict is Verdict.NOT_ENOUGH_DATA and "neither" in edge.reason


def test_not_enough_data_reports_the_n_needed() -> None:
    rng = np.random.default_rng(9)
    c = compare(rng.lognormal(0, 0.3, 5), rng.lognormal(0, 0.3, 5), "lower", min_effect=0.05)
    assert c.verdict is Verdict.NOT_ENOUGH_DATA
    assert c.n_needed is not None and c.n_needed > 5
    assert f"{c.n_needed} per arm" in c.reason


def test_throughput_increase_is_better() -> None:
    c = compare([100.0, 101, 99, 100, 102, 98], [120.0, 121, 119, 122, 118, 120], "higher")
    assert c.verdict is Verdict.BETTER
    # the ratio of geometric means, the estimator of Welch's t on logs
    assert c.change == pytest.approx(math.exp(np.log([120.0, 121, 119, 122, 118, 120]).mean()
                                              - np.log([100.0, 101, 99, 100, 102, 98]).mean())
                                     - 1)
    assert c.change_ci[0] > 0


def test_reachability_of_a_design() -> None:
    # the rank test's floor at 5 vs 5 is 2/252 = 0.0079; times 9 primary comparisons 0.071
    nine = reachability(5, 9)
    assert nine.rank_floor == pytest.approx(9 * 2 / 252)
    assert not nine.ok and "0.071 > 0.05" in nine.message()
    assert "repeat >= 6" in nine.message()
    assert reachability(5, 2).ok and reachability(5, 2).message() == ""
    assert not reachability(5, 12).ok
    assert "one repetition" in reachability(1, 2).message()
    assert "no primary metric" in reachability(5, 0).message()


# --- properties ----------------------------------------------------------------------------

values = st.lists(st.floats(1.0, 1e4, allow_nan=False).map(lambda v: round(v, 1)),
                  min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(values, st.randoms(use_true_random=False), st.sampled_from(["lower", "higher"]))
def test_identical_arms_are_never_better_or_worse(
    xs: list[float], rnd: random.Random, direction: str
) -> None:
    shuffled = list(xs)
    rnd.shuffle(shuffled)
    c = compare(xs, shuffled, direction)
    assert c.verdict in (Verdict.SAME, Verdict.NOT_ENOUGH_DATA)
    assert c.change == 0


@settings(max_examples=40, deadline=None)
@given(values, values, st.randoms(use_true_random=False))
def test_results_do_not_depend_on_input_order(
    xs: list[float], ys: list[float], rnd: random.Random
) -> None:
    xs2, ys2 = list(xs), list(ys)
    rnd.shuffle(xs2)
    rnd.shuffle(ys2)
    assert compare(xs, ys, "lower") == compare(xs2, ys2, "lower")


_SWAP = {Verdict.BETTER: Verdict.WORSE, Verdict.WORSE: Verdict.BETTER}


@settings(max_examples=40, deadline=None)
@given(values, st.floats(0.5, 2.0))
def test_direction_flip_swaps_better_and_worse(xs: list[float], factor: float) -> None:
    ys = [x * factor for x in xs]
    low: Comparison = compare(xs, ys, Direction.LOWER)
    high = compare(xs, ys, Direction.HIGHER)
    assert high.verdict == _SWAP.get(low.verdict, low.verdict)


# --- summaries and errors ------------------------------------------------------------------


def test_summary_known_values_and_missing() -> None:
    s = summarize([3.0, 1, 2, float("nan"), 4, 5, 6])
    assert (s.n, s.n_missing, s.median, s.minimum, s.maximum, s.mean) == (6, 1, 3.5, 1, 6, 3.5)
    assert s.cv == pytest.approx(np.std([1, 2, 3, 4, 5, 6], ddof=1) / 3.5)
    assert s.median_ci is not None and s.median_ci.ranks == (1, 6)
    assert s.median_ci.coverage == pytest.approx(1 - 2 / 64)


def test_too_few_samples_for_a_median_ci_say_so() -> None:
    s = summarize([1.0, 2, 3, 4, 5])
    assert s.median_ci is None
    assert "too few samples" in s.note


@pytest.mark.parametrize("call", [
    lambda: summarize([]),
    lambda: summarize([float("nan")] * 3),
    lambda: summarize([1.0, float("inf")]),
    lambda: summarize(["fast"]),
    lambda: compare([], [1.0], "lower"),
    lambda: compare([float("nan")], [1.0], "lower"),
    lambda: compare([1.0], [1.0], "sideways"),
    lambda: compare_metrics({}),
    lambda: compare([1.0, 2], [1.0, 2], "lower", alpha=0),
    lambda: compare([1.0, 2], [1.0, 2], "lower", min_effect=-0.1),
    lambda: gate_one([1.0] * 5, [1.0] * 5, "lower", 0),
    lambda: pooled_percentiles([]),
    lambda: pooled_percentiles([[1.0, 2], []]),
    lambda: pooled_percentiles([[1.0, float("nan")]]),
    lambda: pooled_percentiles([[1.0, 2]], [0.0]),
    lambda: drift([1.0]),
    lambda: drift([1.0, 2, 3], trial_index=[0, 2]),
    lambda: calibrate([1.0, 2, 3], n_per_arm=0),
])
def test_statistics_errors_raise_stats_error(call: Callable[[], object]) -> None:
    with pytest.raises(StatsError):
        call()
    assert issubclass(StatsError, NapilabError)


# --- power ---------------------------------------------------------------------------------


def test_power_helpers_known_values() -> None:
    assert min_n_per_arm(0.05) == 4  # 2/C(6,3) = 0.1, 2/C(8,4) = 0.029
    noise = Noise(SIGMA, True)
    mde = minimal_detectable_effect(noise, N, N)
    assert mde is not None
    # (t(0.975, 18) + t(0.8, 18)) * 0.05 * sqrt(0.2 / (3/pi)) = 2.9632 * 0.05 * 0.4577
    assert mde == pytest.approx(math.expm1(2.9632 * 0.05 * math.sqrt(0.2 * math.pi / 3)), rel=1e-3)
    # from 10 per arm the rank test (efficiency 3/pi) decides; Welch's t on logs at 9
    # needs a slightly larger change (0.0728), so 10 is the smallest n
    assert n_per_arm_needed(noise, mde) == 10
    assert minimal_detectable_effect(noise, 9, 9) > mde  # type: ignore[operator]
    # below 10 per arm the test is Welch's t on logs, efficiency 1, df 4 at n = 3 (the
    # power formula's df is n1 + n2 - 2):
    # (t(0.975, 4) + t(0.8, 4)) * 0.05 * sqrt(2/3) = (2.7764 + 0.9410) * 0.05 * 0.8165
    assert minimal_detectable_effect(noise, 3, 3) == pytest.approx(
        math.expm1(3.7174 * 0.05 * math.sqrt(2 / 3)), rel=1e-3)
    assert minimal_detectable_effect(noise, 1, 5) is None
    assert n_per_arm_needed(noise, 0.0) is None
    assert n_per_arm_needed(noise, 0.2) == 3  # a large change needs few repetitions


# --- gate and calibration ------------------------------------------------------------------


def test_regression_gate_statuses() -> None:
    rng = np.random.default_rng(12)
    base = rng.lognormal(math.log(50), SIGMA, N)
    slow = rng.lognormal(math.log(60), SIGMA, N)
    same = rng.lognormal(math.log(50), SIGMA, N)
    assert gate_one(base, slow, "lower", 5).status is GateStatus.REGRESSION
    assert gate_one(slow, base, "lower", 5).status is GateStatus.IMPROVEMENT
    assert gate_one(base, same, "lower", 10).status is GateStatus.WITHIN
    tiny = gate_one(rng.lognormal(0, 0.2, 3), rng.lognormal(0, 0.2, 3), "lower", 5)
    assert tiny.status is GateStatus.INCONCLUSIVE and tiny.comparison.n_needed
    assert "repetitions per run would" in tiny.comparison.reason
    gate = gate_one(base, slow, "lower", 5)
    assert gate.comparison.change > 0.05 and gate.comparison.p_value < 0.05
    # throughput: worse is down
    assert gate_one(slow, base, "higher", 5).status is GateStatus.REGRESSION


def test_calibration_reports_noise_and_detectable_change() -> None:
    rng = np.random.default_rng(13)
    cal = calibrate(rng.lognormal(math.log(80), SIGMA, 20), n_per_arm=N)
    assert cal.summary.cv == pytest.approx(SIGMA, rel=0.35)
    assert cal.log_sd is not None
    assert cal.mde == minimal_detectable_effect(Noise(cal.log_sd, True), N, N)
    assert cal.mde is not None and 0.05 < cal.mde < 0.13
    by_n = dict(cal.mde_by_n)
    assert by_n[3] is not None and by_n[3] > by_n[5]  # type: ignore[operator]
    assert by_n[30] is not None and by_n[10] is not None and by_n[30] < by_n[10]
    assert cal.ci_rel_width is not None and cal.drift is not None


# --- noise and drift -----------------------------------------------------------------------


def test_noise_exceeds_effect() -> None:
    rng = np.random.default_rng(14)
    base = rng.lognormal(0, SIGMA, N)
    assert noise_exceeds_effect(base, 0.005).exceeds
    assert not noise_exceeds_effect(base, 0.5).exceeds
    small = noise_exceeds_effect(base[:4], 0.5)  # no median CI: the log-mean t interval
    assert small.known and not small.exceeds and "t interval" in small.reason
    unknown = noise_exceeds_effect(base[:1], 0.001)
    assert not unknown.known and not unknown.exceeds and "noise unknown" in unknown.reason


def test_drift_detects_a_trend_and_not_noise(say: Say) -> None:
    rng = np.random.default_rng(15)
    trend = drift(100 * (1 + 0.02 * np.arange(12)) * rng.lognormal(0, 0.01, 12),
                  trial_index=range(0, 24, 2))
    assert trend.significant and trend.tau > 0
    assert trend.slope_per_trial == pytest.approx(0.01, rel=0.3)  # 2% per 2 trial slots
    false = np.mean([drift(rng.lognormal(0, SIGMA, N)).significant for _ in range(400)])
    say(f"drift false-positive rate, n={N} iid: {false:.1%}")
    assert false <= 0.07
    assert not drift([3.0, 2, 1, 0.5]).testable  # 2/4! = 0.083 > 0.05


# --- pooled per-transaction percentiles ----------------------------------------------------


def test_pooled_percentiles_use_the_inverted_cdf_rank() -> None:
    rng = np.random.default_rng(16)
    reps = [rng.exponential(20, 1000 + 37 * i) for i in range(6)]
    pooled = np.sort(np.concatenate(reps))
    out = pooled_percentiles(reps, [50, 99, 99.9])
    for row in out.percentiles:
        rank = math.ceil(Fraction(row.percentile) / 100 * pooled.size)  # exact arithmetic
        assert row.value == pooled[rank - 1]
        assert row.ci is not None and row.ci[0] <= row.value <= row.ci[1]
        assert len(row.per_repetition) == 6
    assert out.n_samples == pooled.size and out.note == ""


def test_fast_cluster_resample_percentiles_equal_brute_force() -> None:
    """The bisection over pooled ranks must give what concatenating the resample gives."""
    rng = np.random.default_rng(18)
    reps = [np.sort(rng.integers(0, 50, rng.integers(1, 30)).astype(np.float64))
            for _ in range(6)]  # integer latencies: many ties, uneven repetition sizes
    pooled = np.sort(np.concatenate(reps))
    counts = rng.multinomial(6, [1 / 6] * 6, size=200)
    qs = np.array([1, 10, 50, 90, 99, 100.0])
    fast = _weighted_percentiles(reps, pooled, counts, np.array([r.size for r in reps]), qs)
    for b in range(200):
        resample = np.concatenate([r for r, c in zip(reps, counts[b], strict=True)
                                   for _ in range(c)])
        assert list(fast[b]) == list(np.quantile(resample, qs / 100, method="inverted_cdf"))


def test_pooled_ci_reflects_between_repetition_spread() -> None:
    # each repetition has its own level: the CI must be about as wide as that spread,
    # far wider than an i.i.d. bootstrap of 100k samples would make it.
    rng = np.random.default_rng(17)
    levels = np.linspace(90, 110, 10)
    reps = [lvl + rng.normal(0, 1, 10_000) for lvl in levels]
    row = pooled_percentiles(reps, [50]).percentiles[0]
    assert row.ci is not None
    assert row.ci[1] - row.ci[0] > 5
    assert row.spread[0] < 91 < 109 < row.spread[1]


def test_pooled_percentiles_without_enough_repetitions_give_no_ci() -> None:
    out = pooled_percentiles([[1.0, 2, 3], [2.0, 3, 4]], [50])
    assert out.percentiles[0].ci is None
    assert "too few" in out.note


# --- change points across nightly runs -----------------------------------------------------


def _nights(rng: np.random.Generator) -> Array:
    return np.median(rng.lognormal(math.log(100), SIGMA, (30, 5)), axis=1)


def test_a_level_shift_is_found_within_one_night(say: Say) -> None:
    found = quiet = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        quiet += not change_points(list(_nights(rng)))
        step = _nights(rng)
        step[20:] *= 1.08
        points = change_points(list(step))
        found += any(abs(p.index - 20) <= 1 for p in points)
    say(f"change points, 40 seeds: +8% step at night 20 found {found / 40:.0%}, "
        f"A/A quiet {quiet / 40:.0%}")
    assert found / 40 >= 0.9 and quiet / 40 >= 0.95


def test_change_points_skip_missing_nights_and_short_series() -> None:
    values = [100.0] * 8 + [float("nan")] + [150.0] * 8
    values = [v * (1 + 0.01 * ((i * 7) % 3 - 1)) for i, v in enumerate(values)]
    (point,) = change_points(values)
    assert point.index == 9 and point.change == pytest.approx(0.5, abs=0.03)
    assert change_points([1.0, 2, 3]) == []
    assert change_points([5.0] * 10) == []


def test_a_night_of_equal_rounded_values_still_has_noise() -> None:
    """A clean-clone make test: the reference night was ping's rtt_avg 5,5,5,5,5 us (1 us
    steps) and the shaped night 743,741,739,739,741; the series gate said "+0.00%, no
    spread in any night and no known resolution" (exit 5). Each night's variance is at
    least its rounding's, as Welch's t has it: a regression, with the change's own CI."""
    for series in ((np.array([5.0] * 5),), (np.array([5.0] * 5), np.array([5.0] * 5))):
        case = GateSamples(series[-1], np.array([743.0, 741, 739, 739, 741]), "lower", 5,
                           series=series)
        result = gate_metrics({"rtt_avg": case})["rtt_avg"]
        assert result.status is GateStatus.REGRESSION, result
        low, high = result.comparison.change_ci
        assert low <= result.comparison.change <= high
        assert result.comparison.change == pytest.approx(740.6 / 5 - 1, rel=0.01)
    quiet = GateSamples(np.array([5.0] * 5), np.array([5.0, 5, 6, 5, 5]), "lower", 25,
                        series=(np.array([5.0] * 5), np.array([5.0] * 5)))
    assert gate_metrics({"rtt_avg": quiet})["rtt_avg"].status is not GateStatus.REGRESSION
