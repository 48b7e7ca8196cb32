"""harness.stats (stats, power, noise, pool): synthetic data, known answers, fixed seeds.

The simulation tests print the rates they measure (visible in `pytest` output);
`benchmarks/stats_power.py` prints the same figures at larger scale, with timings.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from harness.errors import NapilabError
from harness.stats.noise import calibrate, drift, noise_exceeds_effect
from harness.stats.pool import _weighted_percentiles, pooled_percentiles
from harness.stats.power import (
    Noise,
    min_attainable_p,
    min_n_per_arm,
    minimal_detectable_effect,
    n_per_arm_needed,
)
from harness.stats.stats import (
    Adjust,
    Array,
    Comparison,
    Direction,
    GateStatus,
    MetricSamples,
    StatsError,
    Verdict,
    adjust_p,
    check_regression,
    compare,
    compare_metrics,
    mann_whitney,
    median_ci,
    relative_change,
    summarize,
)

SIGMA = 0.05  # log-normal noise of the acceptance simulations
N = 10  # repetitions per arm
SIMS = 1000
Say = Callable[[str], None]


@pytest.fixture
def say(capsys: pytest.CaptureFixture[str]) -> Iterator[Say]:
    """Print a measured figure past pytest's capture, so it shows in every test run."""

    def emit(line: str) -> None:
        with capsys.disabled():
            print(f"\n    [stats] {line}", end="")

    yield emit


def _arms(rng: np.random.Generator, shift: float) -> tuple[Array, Array]:
    base = rng.lognormal(math.log(100), SIGMA, N)
    return base, rng.lognormal(math.log(100 * (1 + shift)), SIGMA, N)


# --- acceptance simulations -------------------------------------------------------------


def test_aa_false_positive_rate_at_most_5_percent(say: Say) -> None:
    rng = np.random.default_rng(20240601)
    verdicts = [compare(*_arms(rng, 0.0), "lower", seed=i).verdict for i in range(SIMS)]
    fpr = sum(v in (Verdict.BETTER, Verdict.WORSE) for v in verdicts) / SIMS
    say(f"A/A false-positive rate, n={N}/arm, sigma={SIGMA}: {fpr:.1%} ({SIMS} sims)")
    assert fpr <= 0.05


def test_ten_percent_shift_detected_in_the_right_direction(say: Say) -> None:
    rng = np.random.default_rng(20240602)
    up = [compare(*_arms(rng, 0.10), "lower", seed=i).verdict for i in range(SIMS // 2)]
    down = [compare(*_arms(rng, -0.10), "lower", seed=i).verdict for i in range(SIMS // 2)]
    power = (up.count(Verdict.WORSE) + down.count(Verdict.BETTER)) / SIMS
    wrong = (up.count(Verdict.BETTER) + down.count(Verdict.WORSE)) / SIMS
    say(f"power for a ±10% median shift, n={N}/arm, sigma={SIGMA}: {power:.1%} "
        f"(wrong direction {wrong:.1%})")
    assert power >= 0.80
    assert wrong == 0


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


def test_bootstrap_ci_of_relative_change_covers_the_true_change(say: Say) -> None:
    rng = np.random.default_rng(11)
    covered = 0
    for i in range(SIMS):
        _, low, high = relative_change(*_arms(rng, 0.10), seed=i)
        covered += low <= 0.10 <= high
    say(f"bootstrap 95% CI of the median change covers +10%: {covered / SIMS:.1%}")
    assert 0.92 <= covered / SIMS <= 0.995


def test_power_formula_predicts_simulated_power(say: Say) -> None:
    """At the MDE the formula reports, simulated detection should be near 80%."""
    mde = minimal_detectable_effect(Noise(SIGMA, True), N, N)
    assert mde is not None
    rng = np.random.default_rng(5)
    hits = sum(compare(*_arms(rng, mde), "lower", seed=i).verdict is Verdict.WORSE
               for i in range(300))
    say(f"MDE n={N} sigma={SIGMA}: {mde:.1%}; simulated power there: {hits / 300:.0%}")
    assert 0.75 <= hits / 300 <= 0.95


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


def test_holm_floor_makes_small_runs_not_enough_data() -> None:
    # n = 4 per arm: smallest p = 2/C(8,4) = 2/70 = 0.029 < 0.05 alone, but Holm over two
    # metrics needs 2 * 0.029 = 0.057 < 0.05, which no data can give.
    base, var = [10.0, 11, 12, 13], [20.0, 21, 22, 23]
    assert compare(base, var, "lower").verdict is Verdict.WORSE
    two = compare_metrics({m: MetricSamples(base, var, "lower") for m in ("a", "b")})
    assert {c.verdict for c in two.values()} == {Verdict.NOT_ENOUGH_DATA}


# --- verdict rules -------------------------------------------------------------------------


def test_significant_change_below_min_effect_is_same() -> None:
    rng = np.random.default_rng(8)
    base, var = _arms(rng, 0.10)
    assert compare(base, var, "lower").verdict is Verdict.WORSE
    c = compare(base, var, "lower", min_effect=0.5)
    assert c.p_value < 0.05
    assert c.verdict is Verdict.SAME
    assert "min effect" in c.reason


def test_not_enough_data_reports_the_n_needed() -> None:
    rng = np.random.default_rng(9)
    c = compare(rng.lognormal(0, 0.3, 5), rng.lognormal(0, 0.3, 5), "lower", min_effect=0.05)
    assert c.verdict is Verdict.NOT_ENOUGH_DATA
    assert c.mde is not None and c.mde > 0.05
    assert c.n_needed is not None and c.n_needed > 5
    assert f"{c.n_needed} per arm" in c.reason


def test_three_per_arm_can_never_be_significant() -> None:
    c = compare([1.0, 2, 3], [100.0, 200, 300], "lower")
    assert min_attainable_p(3, 3) == pytest.approx(0.1)
    assert c.verdict is Verdict.NOT_ENOUGH_DATA
    assert c.mde is None


def test_throughput_increase_is_better() -> None:
    c = compare([100.0, 101, 99, 100, 102, 98], [120.0, 121, 119, 122, 118, 120], "higher")
    assert c.verdict is Verdict.BETTER
    assert c.change == pytest.approx(0.2)
    assert c.change_ci[0] > 0


def test_mann_whitney_methods() -> None:
    p, how = mann_whitney([1.0, 2, 3], [4.0, 5, 6])
    assert how == "exact"
    assert p == pytest.approx(0.1)  # 2/C(6,3): the most extreme of 20 splits, both tails
    assert mann_whitney([1.0, 1, 1], [1.0, 1, 1]) == (1.0, "all-equal")
    tied = mann_whitney([1.0, 1, 2, 2, 3], [2.0, 3, 3, 4, 4])
    assert tied[1] == "permutation"
    # C(10, 5) = 252 relabellings: exhaustive, so close to the tie-corrected normal approx
    assert tied[0] == pytest.approx(
        sps.mannwhitneyu([1, 1, 2, 2, 3], [2, 3, 3, 4, 4], method="asymptotic").pvalue, abs=0.05)
    big = np.arange(60.0)
    assert mann_whitney(big, big + 0.5)[1] == "asymptotic"


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
    c = compare(xs, shuffled, direction, n_boot=200)
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
    assert compare(xs, ys, "lower", n_boot=200) == compare(xs2, ys2, "lower", n_boot=200)


_SWAP = {Verdict.BETTER: Verdict.WORSE, Verdict.WORSE: Verdict.BETTER}


@settings(max_examples=40, deadline=None)
@given(values, st.floats(0.5, 2.0))
def test_direction_flip_swaps_better_and_worse(xs: list[float], factor: float) -> None:
    ys = [x * factor for x in xs]
    low: Comparison = compare(xs, ys, Direction.LOWER, n_boot=200)
    high = compare(xs, ys, Direction.HIGHER, n_boot=200)
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
    lambda: compare([0.0, 0, 1], [1.0, 2, 3], "lower"),  # baseline median 0
    lambda: compare([-3.0, -2, -1], [1.0, 2, 3], "lower"),
    lambda: compare([1.0], [1.0], "sideways"),
    lambda: compare_metrics({}),
    lambda: compare([1.0, 2], [1.0, 2], "lower", alpha=0),
    lambda: compare([1.0, 2], [1.0, 2], "lower", min_effect=-0.1),
    lambda: compare([1.0, 2], [1.0, 2], "lower", n_boot=10),
    lambda: check_regression([1.0] * 5, [1.0] * 5, "lower", 0),
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
    # (t(0.975, 18) + t(0.8, 18)) * 0.05 * sqrt(0.2 / (2/pi)) = 2.9632 * 0.05 * 0.5605
    assert mde == pytest.approx(math.expm1(2.9632 * 0.05 * math.sqrt(0.2 * math.pi / 2)), rel=1e-3)
    needed = n_per_arm_needed(noise, mde)
    assert needed == N
    assert minimal_detectable_effect(noise, 3, 3) is None
    assert n_per_arm_needed(noise, 0.0) is None


# --- gate and calibration ------------------------------------------------------------------


def test_regression_gate_statuses() -> None:
    rng = np.random.default_rng(12)
    base = rng.lognormal(math.log(50), SIGMA, N)
    slow = rng.lognormal(math.log(60), SIGMA, N)
    same = rng.lognormal(math.log(50), SIGMA, N)
    assert check_regression(base, slow, "lower", 5).status is GateStatus.REGRESSION
    assert check_regression(slow, base, "lower", 5).status is GateStatus.IMPROVEMENT
    assert check_regression(base, same, "lower", 10).status is GateStatus.NOISE
    tiny = check_regression(base[:3], slow[:3], "lower", 5)
    assert tiny.status is GateStatus.NOT_ENOUGH_DATA
    gate = check_regression(base, slow, "lower", 5)
    assert gate.comparison.change > 0.05 and gate.comparison.p_value < 0.05


def test_calibration_reports_noise_and_detectable_change() -> None:
    rng = np.random.default_rng(13)
    cal = calibrate(rng.lognormal(math.log(80), SIGMA, 20), n_per_arm=N)
    assert cal.summary.cv == pytest.approx(SIGMA, rel=0.35)
    assert cal.log_sd is not None
    assert cal.mde == minimal_detectable_effect(Noise(cal.log_sd, True), N, N)
    assert cal.mde is not None and 0.05 < cal.mde < 0.13
    by_n = dict(cal.mde_by_n)
    assert by_n[3] is None
    assert by_n[30] is not None and by_n[10] is not None and by_n[30] < by_n[10]
    assert cal.ci_rel_width is not None and cal.drift is not None


# --- noise and drift -----------------------------------------------------------------------


def test_noise_exceeds_effect() -> None:
    rng = np.random.default_rng(14)
    base = rng.lognormal(0, SIGMA, N)
    assert noise_exceeds_effect(base, 0.005).exceeds
    assert not noise_exceeds_effect(base, 0.5).exceeds
    unknown = noise_exceeds_effect(base[:4], 0.5)
    assert unknown.exceeds and unknown.half_width is None


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
    out = pooled_percentiles(reps, [50, 99, 99.9], n_boot=200)
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
