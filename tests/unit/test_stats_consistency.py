"""Every printed row agrees with itself: the change lies inside its CI, better/worse
only with a CI beyond the bound, "~" only with a CI that holds 0, the gate's within
only with its worse-side bound inside the threshold and a regression only with its
better-side bound beyond it (property tests over random tables); the rank test's
interval is the Moses inversion of its own test; zero baselines get an absolute change."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from napilab.harness.stats.compare import ABSOLUTE, MetricSamples, compare, compare_metrics
from napilab.harness.stats.gate import GateSamples, GateStatus, gate_metrics, night_status
from napilab.harness.stats.shift import hodges_lehmann
from napilab.harness.stats.stats import Verdict
from napilab.harness.stats.two_sample import rank_p

values = st.lists(st.one_of(st.just(0.0), st.floats(0.5, 500.0)), min_size=3, max_size=12)
arms = st.tuples(values, values, st.sampled_from(["lower", "higher"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(arms, min_size=1, max_size=5), st.sampled_from([0.0, 0.02, 0.1]))
def test_table_rows_never_contradict_their_ci(family: list[tuple[list[float], list[float],
                                                                  str]],
                                              min_effect: float) -> None:
    found = compare_metrics({str(i): MetricSamples(x, y, d) for i, (x, y, d)
                             in enumerate(family)}, min_effect=min_effect)
    for c in found.values():
        low, high = c.change_ci
        assert low <= c.change <= high, c
        bound = c.min_effect
        if c.verdict in (Verdict.BETTER, Verdict.WORSE):
            assert low > bound or high < -bound, c
        if c.verdict is Verdict.SAME:
            assert (-bound < low and high < bound) if bound else low <= 0 <= high, c


@settings(max_examples=150, deadline=None)
@given(st.lists(arms, min_size=1, max_size=4), st.sampled_from([2.0, 5.0, 20.0]))
def test_gate_rows_never_contradict_their_ci(cases: list[tuple[list[float], list[float],
                                                                str]],
                                             pct: float) -> None:
    found = gate_metrics({str(i): GateSamples(x, y, d, pct) for i, (x, y, d)
                          in enumerate(cases)})
    for r in found.values():
        c = r.comparison
        low, high = c.change_ci
        assert low <= c.change <= high, r
        worse, better = (high, low) if c.direction.value == "lower" else (-low, -high)
        t = c.min_effect
        if r.status is GateStatus.WITHIN and c.scale != ABSOLUTE:
            assert worse <= t, r
        if r.status is GateStatus.REGRESSION:
            assert better > t, r


def test_the_moses_interval_inverts_the_rank_test() -> None:
    """Its bounds are where the exact two-sided Mann-Whitney p crosses 5%: a shift just
    inside is not rejected, one just outside is."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        x, y = np.sort(rng.normal(0, 1, 7)), np.sort(rng.normal(1, 1, 8))
        est, low, high = hodges_lehmann(x, y, 0.95)
        assert low <= est <= high
        eps = 1e-9
        for bound, inside in ((low + eps, True), (low - eps, False), (high - eps, True),
                              (high + eps, False)):
            p = 2 * min(rank_p(x, y, bound, "greater", additive=True)[0],
                        rank_p(x, y, bound, "less", additive=True)[0])
            assert (p >= 0.05) == inside, (bound, p)


def test_hodges_lehmann_is_the_median_of_pairwise_differences() -> None:
    x, y = np.array([1.0, 2, 3]), np.array([2.0, 5, 9])
    est, _, _ = hodges_lehmann(x, y, 0.95)
    assert est == float(np.median((y[:, None] - x[None, :]).ravel()))


def test_a_cost_from_zero_is_an_absolute_change_with_a_verdict() -> None:
    """0 ms -> ~9,800 ms (a busy-poll kthread that exists only in the variant)."""
    c = compare([0.0] * 5, [9790.0, 9810, 9800, 9830, 9770], "lower")
    assert (c.scale, c.test_method, c.verdict) == (ABSOLUTE, "welch-t", Verdict.WORSE)
    assert c.change == pytest.approx(9800.0) and c.change_ci[0] > 9000
    # gated with a relative threshold only: a rise from 0 is beyond any; never skipped
    rel = gate_metrics({"m": GateSamples([0.0] * 5, [9790.0, 9810, 9800, 9830, 9770],
                                         "lower", 5.0)})["m"]
    assert rel.status is GateStatus.REGRESSION
    same = gate_metrics({"m": GateSamples([0.0] * 5, [0.0, 0, 1, 0, 0], "lower", 5.0)})["m"]
    assert same.status is GateStatus.INCONCLUSIVE and "absolute" in same.comparison.reason
    # with an absolute threshold: judged in ms, within when the rise is small
    small = gate_metrics({"m": GateSamples([0.0, 0, 1, 0, 0], [2.0, 1, 0, 1, 1], "lower",
                                           0.0, max_regression_abs=500.0)})["m"]
    assert small.status is GateStatus.WITHIN and small.comparison.scale == ABSOLUTE
    big = gate_metrics({"m": GateSamples([0.0] * 5, [9790.0, 9810, 9800, 9830, 9770],
                                         "lower", 0.0, max_regression_abs=500.0)})["m"]
    assert big.status is GateStatus.REGRESSION and big.comparison.change_ci[0] > 500


def test_one_rule_for_a_night() -> None:
    assert night_status(["within", "improvement"]) == "pass"
    assert night_status(["within", "inconclusive"]) == "inconclusive"
    assert night_status(["within", "skipped"]) == "inconclusive"
    assert night_status(["inconclusive", "regression"]) == "regression"
    assert night_status([]) == "inconclusive"


def test_a_change_holm_keeps_from_a_verdict_says_so() -> None:
    """A CI that excludes 0 is not "~": with Holm the reason, the row is
    not-enough-data and names it."""
    base = [100.0, 101, 102, 103, 104, 105, 106, 107]
    moderate = [102.5, 104.0, 105, 106, 107, 108, 109, 110]
    strong = [120.0, 121, 122, 123, 124, 125, 126, 127]
    found = compare_metrics({"a": MetricSamples(base, moderate, "lower"),
                             "b": MetricSamples(base, strong, "lower"),
                             "c": MetricSamples(base, base[::-1], "lower")})
    assert found["a"].change_ci[0] > 0 and found["a"].verdict is Verdict.NOT_ENOUGH_DATA
    assert "Holm over 3" in found["a"].reason
    assert math.isclose(found["c"].change, 0.0, abs_tol=1e-12)
