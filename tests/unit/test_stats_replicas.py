"""harness.stats.replicas: one verdict across replicas. The per-replica effect and its
refusals, the random-effects interval checked against a computation by hand (Paule-
Mandel's tau^2 solved here by root finding, the HKSJ interval from its formula), the
edge cases (one replica, two, identical replicas, a replica without a value), the
verdicts (better, worse, no change with and without a margin, inconclusive when the
replicas disagree or nothing could be pooled), Holm over the family, and every printed
estimate inside its own interval. benchmarks/stats_replicas.py measures coverage and
error rates at scale."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize
from scipy import stats as sps

from napilab.harness.stats.replicas import (
    Effect,
    Missing,
    Pooled,
    ReplicaError,
    ReplicaVerdict,
    judge,
    judgements,
    pool,
    replica_effect,
    try_effect,
)
from napilab.harness.stats.stats import StatsError

# Three replicas of a latency that B lowers by ~20%, trial noise ~1%
AGREE = {f"r{i}": ([100.0, 102.0, 101.0, 99.0], [80.0 + i, 81.0 + i, 80.0 + i, 82.0 + i])
         for i in range(3)}


def effects_of(data: dict[str, tuple[list[float], list[float]]]) -> dict[str, Effect]:
    return {name: replica_effect(a, b) for name, (a, b) in data.items()}


def test_a_replicas_effect_is_the_difference_of_mean_logs_with_welchs_variance() -> None:
    e = replica_effect([100, 110, 105], [80, 85, 90, 88])
    la, lb = np.log([100, 110, 105]), np.log([80, 85, 90, 88])
    va, vb = la.var(ddof=1) / 3, lb.var(ddof=1) / 4
    assert e.effect == pytest.approx(lb.mean() - la.mean())
    assert e.variance == pytest.approx(va + vb)
    assert e.df == pytest.approx((va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 3))
    assert (e.n_a, e.n_b, e.n_missing) == (3, 4, 0)
    assert e.change == pytest.approx(math.exp(lb.mean() - la.mean()) - 1)
    low, high = e.change_ci()
    half = sps.t.isf(0.025, e.df) * math.sqrt(va + vb)
    assert (low, high) == pytest.approx((math.expm1(e.effect - half),
                                         math.expm1(e.effect + half)))


def test_a_missing_trial_is_dropped_and_counted() -> None:
    e = replica_effect([100, math.nan, 110, 105], [80, 85, 90])
    assert (e.n_a, e.n_missing) == (3, 1)
    assert e.effect == pytest.approx(replica_effect([100, 110, 105], [80, 85, 90]).effect)


@pytest.mark.parametrize(("a", "b", "why"), [
    ([1.0], [1.0, 2.0], "variant A: n=1: at least 2 trials"),
    ([1.0, 2.0], [3.0, math.nan], "variant B: n=1"),
    ([1.0, 0.0], [1.0, 2.0], "a value <= 0"),
    ([1.0, 2.0], [-1.0, 2.0], "variant B: a value <= 0"),
    ([5.0, 5.0], [6.0, 6.0], "zero variance"),
    ([1.0, math.inf], [1.0, 2.0], "infinite"),
    ([], [1.0, 2.0], "no samples"),
    ([math.nan, math.nan], [1.0, 2.0], "all 2 values are NaN"),
])
def test_a_replica_without_an_effect_is_refused_saying_why(a: list[float], b: list[float],
                                                           why: str) -> None:
    with pytest.raises(ReplicaError, match=why) as info:
        replica_effect(a, b)
    assert isinstance(info.value, StatsError) and isinstance(info.value, ValueError)
    missing = try_effect(a, b)
    assert isinstance(missing, Missing) and why in missing.reason


def paule_mandel(y: np.ndarray, v: np.ndarray) -> float:
    """tau^2 solving sum w_i (y_i - mu_w)^2 = k - 1, w_i = 1/(v_i + tau^2); 0 when even
    tau^2 = 0 leaves it below k - 1 (by root finding, not statsmodels)."""
    def q(tau2: float) -> float:
        w = 1 / (v + tau2)
        mu = (w * y).sum() / w.sum()
        return float((w * (y - mu) ** 2).sum() - (y.size - 1))
    return 0.0 if q(0.0) <= 0 else float(optimize.brentq(q, 0.0, 10.0, xtol=1e-14))


@pytest.mark.parametrize("spread", [(-0.10, -0.20, -0.05), (-0.10, -0.11, -0.09)])
def test_the_interval_by_hand(spread: tuple[float, ...]) -> None:
    """Paule-Mandel's tau^2, mu, the HKSJ se (sum w (y - mu)^2 / ((k-1) sum w)), t with
    k-1 df: statsmodels' fit (through pool) gives the numbers computed here; the
    modified interval takes the larger of the HKSJ and the plain random-effects se.
    The first spread has tau^2 > 0, the second Q < k - 1 (tau^2 = 0, HKSJ narrower
    than the fixed-effect interval, the modified one not)."""
    v = np.array([0.002, 0.003, 0.002])
    y = np.array(spread)
    effects = {f"r{i}": Effect(float(e), float(var), 4.0, 3, 3)
               for i, (e, var) in enumerate(zip(y, v, strict=True))}
    tau2 = paule_mandel(y, v)
    w = 1 / (v + tau2)
    mu = (w * y).sum() / w.sum()
    se_hksj = math.sqrt((w * (y - mu) ** 2).sum() / (2 * w.sum()))
    se_re = math.sqrt(1 / w.sum())
    t = sps.t.isf(0.025, 2)
    q = ((y - (y / v).sum() / (1 / v).sum()) ** 2 / v).sum()  # Cochran's Q, fixed weights
    for interval, se in (("hksj", se_hksj), ("hksj-modified", max(se_hksj, se_re))):
        got = pool(effects, interval=interval)
        assert got.tau2 == pytest.approx(tau2, abs=1e-7)
        assert got.effect == pytest.approx(mu, abs=1e-9)
        assert got.se == pytest.approx(se, rel=1e-5) and got.df == 2
        assert got.ci == pytest.approx((math.expm1(mu - t * se), math.expm1(mu + t * se)),
                                       rel=1e-5)
        assert got.p == pytest.approx(2 * sps.t.sf(abs(mu) / se, 2), rel=1e-4)
        assert got.q == pytest.approx(q) and got.q_p == pytest.approx(sps.chi2.sf(q, 2))
        assert got.i2 == pytest.approx(max(0.0, (q - 2) / q))
        assert sum(r.weight for r in got.replicas.values()) == pytest.approx(1.0)
    assert (tau2 > 0) == (spread[1] == -0.20)
    if tau2 == 0:
        assert se_hksj < se_re  # what the modification is for


def test_dersimonian_laird_is_truncated_at_zero() -> None:
    """statsmodels' DL tau^2 can be negative (Q < k - 1): pool takes it as 0."""
    close = {f"r{i}": Effect(e, 0.002, 4.0, 3, 3) for i, e in enumerate((-0.10, -0.11))}
    assert pool(close, tau2_method="dl").tau2 == 0.0
    far = {f"r{i}": Effect(e, 0.002, 4.0, 3, 3) for i, e in enumerate((-0.10, -0.30))}
    y, v = np.array([-0.10, -0.30]), np.array([0.002, 0.002])
    w = 1 / v
    q = (w * (y - y.mean()) ** 2).sum()
    dl = (q - 1) / (w.sum() - (w ** 2).sum() / w.sum())
    assert pool(far, tau2_method="dl").tau2 == pytest.approx(dl)


def test_one_replica_is_its_own_welch_interval_without_tau() -> None:
    e = replica_effect([100, 102, 101, 99], [80, 81, 80, 82])
    got = pool({"only": e})
    assert got.k == 1 and got.n == 1 and got.tau is None and got.i2 is None
    assert got.q_p is None and got.ci == pytest.approx(e.change_ci())
    assert "one replica" in got.note
    assert judge({"p99": got}, {"p99": True}) == {"p99": "better"}


def test_two_identical_replicas_keep_a_real_interval() -> None:
    """Equal effects: Q = 0, the plain HKSJ interval has zero width (and p = 0); the
    modified one (napilab's) stays at least the random-effects width."""
    twins = effects_of({"a": AGREE["r0"], "b": AGREE["r0"]})
    plain = pool(twins, interval="hksj")
    assert plain.ci[0] == plain.ci[1] == plain.change and "zero-width" in plain.note
    got = pool(twins)
    assert got.tau == 0 and got.i2 == 0 and got.q == pytest.approx(0, abs=1e-12)
    assert got.se == pytest.approx(math.sqrt(twins["a"].variance / 2))
    assert got.ci[0] < got.change < got.ci[1]
    flat = effects_of({"a": ([100, 110, 95], [104, 96, 108]),
                       "b": ([100, 110, 95], [104, 96, 108])})
    assert judge({"p99": pool(flat)}, {"p99": True}) == {"p99": "no change"}


def test_replicas_that_agree_are_better_and_counted() -> None:
    got = pool(effects_of(AGREE))
    assert got.k == 3 and got.change < -0.1 and got.ci[1] < 0 and got.p < 0.05
    assert got.counts(True) == (3, 0) and got.counts(False) == (0, 3)
    found = judgements({"p99": got}, {"p99": True})["p99"]
    assert found.verdict is ReplicaVerdict.BETTER and (found.better, found.n) == (3, 3)
    assert found.summary.startswith("better on 3 of 3, worse on 0 of 3 replicas, pooled -")
    assert judge({"tput": got}, {"tput": False}) == {"tput": "worse"}


def test_a_replica_with_a_failed_metric_is_listed_not_pooled() -> None:
    effects: dict[str, Effect | Missing] = dict(effects_of(AGREE))
    effects["r3"] = try_effect([100.0], [80.0, 81.0])
    got = pool(effects)
    assert got.k == 3 and got.n == 4 and set(got.missing) == {"r3"}
    assert got.change == pool(effects_of(AGREE)).change
    found = judgements({"p99": got}, {"p99": True})["p99"]
    assert found.verdict == "better" and "of 4" in found.summary
    assert "(1 without a value)" in found.summary


def test_nothing_to_pool_is_inconclusive_never_a_pass() -> None:
    with pytest.raises(ReplicaError, match=r"no replica gave an effect.*n=1"):
        pool({"r0": try_effect([100.0], [90.0, 91.0])})
    with pytest.raises(ReplicaError, match="no replicas"):
        pool({})
    found = judgements({"p99": None, "tput": pool(effects_of(AGREE))},
                       {"p99": True, "tput": False})
    assert found["p99"].verdict == "inconclusive" and found["p99"].p_adjusted is None
    # the unjudged metric still counts in Holm's family (at p = 1)
    alone = judgements({"tput": pool(effects_of(AGREE))}, {"tput": False})["tput"]
    assert found["tput"].p_adjusted == pytest.approx(min(1.0, 2 * alone.p_value))


def test_replicas_that_disagree_beyond_their_noise_are_inconclusive() -> None:
    got = pool(effects_of({"up": ([100, 101, 99], [130, 131, 129]),
                           "down": ([100, 101, 99], [70, 71, 69]),
                           "flat": ([100, 101, 99], [100, 99, 101])}))
    assert got.q_p is not None and got.q_p < 0.05 and got.counts(True) == (1, 1)
    found = judgements({"p99": got}, {"p99": True})["p99"]
    assert found.verdict == "inconclusive" and "disagree beyond their noise" in found.reason
    # all significantly lower but by -10% to -30%: t on 2 df cannot pool them into a
    # significant change, and "no change" would hide three real ones
    same_side = pool(effects_of({"a": ([100, 101, 99], [70, 71, 69]),
                                 "b": ([100, 101, 99], [90, 91, 89]),
                                 "c": ([100, 101, 99], [80, 81, 79])}))
    assert same_side.q_p is not None and same_side.q_p < 0.05
    assert same_side.ci[0] < 0 < same_side.ci[1] and same_side.counts(True) == (3, 0)
    found = judgements({"p99": same_side}, {"p99": True})["p99"]
    assert found.verdict == "inconclusive" and "pooled change is not significant" in found.reason
    # as many again with the same spread: heterogeneous, significant, one side: better
    more = pool(effects_of({f"{n}{i}": ([100, 101, 99], [level + i, level + 1 + i, level - 1 + i])
                            for i in range(2) for n, level in (("a", 70), ("b", 90),
                                                               ("c", 80))}))
    assert more.q_p is not None and more.q_p < 0.05 and more.ci[1] < 0
    assert judge({"p99": more}, {"p99": True}) == {"p99": "better"}


def test_no_change_says_whether_it_is_an_equivalence_claim() -> None:
    flat = pool(effects_of({f"r{i}": ([100, 102, 101, 99], [100.5, 101, 99.5, 100])
                            for i in range(3)}))
    assert flat.ci[0] < 0 < flat.ci[1]
    plain = judgements({"p99": flat}, {"p99": True})["p99"]
    assert plain.verdict == "no change" and "not an equivalence claim" in plain.reason
    within = judgements({"p99": flat}, {"p99": True}, margin=0.05)["p99"]
    assert within.verdict == "no change" and "within +-5.0%" in within.reason
    assert flat.ci[0] > -0.05 and flat.ci[1] < 0.05
    wide = pool(effects_of({f"r{i}": ([100, 120, 90], [104, 86, 118]) for i in range(2)}))
    assert wide.ci[0] < -0.05 and wide.ci[1] > 0.05
    neither = judgements({"p99": wide}, {"p99": True}, margin=0.05)["p99"]
    assert neither.verdict == "inconclusive" and "neither beyond nor within" in neither.reason


def test_a_change_beyond_the_margin_is_tested_against_the_margin() -> None:
    """-20% is better beyond a 5% margin; a change whose interval reaches the margin is
    not, even when it excludes 0."""
    got = pool(effects_of(AGREE))
    assert judge({"p99": got}, {"p99": True}, margin=0.05) == {"p99": "better"}
    near = {"r": Effect(math.log(0.96), (0.02 / sps.t.isf(0.025, 10)) ** 2, 10.0, 6, 6)}
    small = pool(near)
    assert small.ci[1] < 0 and small.ci[0] < -0.05 < small.ci[1]
    assert judge({"p99": small}, {"p99": True}) == {"p99": "better"}
    assert judge({"p99": small}, {"p99": True}, margin=0.05) == {"p99": "inconclusive"}


def single(p: float, effect: float = -0.2) -> Pooled:
    """A one-replica Pooled whose two-sided p is exactly `p`."""
    se = abs(effect) / sps.t.isf(p / 2, 10)
    return pool({"r": Effect(effect, se ** 2, 10.0, 6, 6)})


def test_holm_over_the_primary_family() -> None:
    """p = 0.03 alone is better; beside two flat metrics Holm takes it to 0.09: its 95%
    interval still excludes 0, so the verdict is inconclusive, never no change. Holm's
    step-down: 0.01, 0.02, 0.03 adjust to 0.03, 0.04, 0.04 (all better)."""
    lower = dict.fromkeys("abc", True)
    assert single(0.03).p == pytest.approx(0.03) and single(0.03).tau is None
    assert judge({"a": single(0.03)}, {"a": True}) == {"a": "better"}
    flat = single(0.9)
    found = judgements({"a": single(0.03), "b": flat, "c": flat}, lower)
    assert found["a"].p_adjusted == pytest.approx(0.09)
    assert found["a"].verdict == "inconclusive" and "Holm over 3" in found["a"].reason
    assert found["b"].verdict == "no change"
    stepped = judgements({"a": single(0.01), "b": single(0.02), "c": single(0.03)}, lower)
    assert [stepped[m].p_adjusted for m in "abc"] == pytest.approx([0.03, 0.04, 0.04])
    assert {m: j.verdict.value for m, j in stepped.items()} == dict.fromkeys("abc", "better")


def test_judge_refuses_what_it_cannot_judge() -> None:
    got = pool(effects_of(AGREE))
    with pytest.raises(StatsError, match="no direction"):
        judge({"p99": got}, {})
    with pytest.raises(StatsError, match="alpha"):
        judge({"p99": got}, {"p99": True}, alpha=0.1)
    with pytest.raises(StatsError, match="margin"):
        judge({"p99": got}, {"p99": True}, margin=5)
    with pytest.raises(StatsError, match="no metrics"):
        judge({}, {})


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.floats(-0.5, 0.5), st.floats(1e-5, 0.05), st.floats(1, 30)),
                min_size=1, max_size=10),
       st.sampled_from(("hksj-modified", "hksj", "re-z")), st.sampled_from(("pm", "dl")),
       st.booleans(), st.sampled_from((None, 0.02, 0.1)))
def test_every_estimate_lies_inside_its_interval_and_agrees_with_its_verdict(
        rows: list[tuple[float, float, float]], interval: str, tau2_method: str,
        lower: bool, margin: float | None) -> None:
    effects = {f"r{i}": Effect(e, v, df, 3, 3) for i, (e, v, df) in enumerate(rows)}
    got = pool(effects, interval=interval, tau2_method=tau2_method)
    assert got.ci[0] <= got.change <= got.ci[1]
    assert all(math.isfinite(x) for x in (got.change, *got.ci, got.p, got.se))
    for r in got.replicas.values():
        assert r.ci[0] <= r.change <= r.ci[1]
    verdict = judgements({"m": got}, {"m": lower}, margin=margin)["m"].verdict
    d = margin or 0.0
    if verdict in ("better", "worse"):
        assert got.ci[0] > d or got.ci[1] < -d
        assert (verdict == "better") == ((got.change < 0) == lower)
    if verdict == "no change" and margin:  # an equivalence claim
        assert -margin < got.ci[0] and got.ci[1] < margin
    elif verdict == "no change":  # not significant
        assert got.ci[0] <= 0 <= got.ci[1]


def test_each_replica_is_weighted_by_the_variants_variances_pooled_over_replicas() -> None:
    """v_i = s_A^2/n_a,i + s_B^2/n_b,i, each variant's log variance pooled over the
    replicas (3 trials give a variance on 2 df: too noisy to weight by); weights="own"
    takes each replica's Welch variance."""
    data = {"r0": ([100.0, 104.0, 98.0], [80.0, 86.0, 83.0]),
            "r1": ([100.0, 101.0, 100.5, 99.0], [90.0, 90.5, 91.0, 89.0]),
            "r2": ([50.0, 55.0, 52.0], [45.0, 41.0, 47.0])}
    effects = effects_of(data)
    logs = {n: (np.log(a), np.log(b)) for n, (a, b) in data.items()}
    dof = {n: (la.size - 1, lb.size - 1) for n, (la, lb) in logs.items()}
    s_a = sum(la.var(ddof=1) * dof[n][0] for n, (la, _) in logs.items()) / \
        sum(d[0] for d in dof.values())
    s_b = sum(lb.var(ddof=1) * dof[n][1] for n, (_, lb) in logs.items()) / \
        sum(d[1] for d in dof.values())
    v = np.array([s_a / la.size + s_b / lb.size for la, lb in logs.values()])
    y = np.array([e.effect for e in effects.values()])
    w = 1 / (v + paule_mandel(y, v))
    got = pool(effects)
    assert got.effect == pytest.approx((w * y).sum() / w.sum())
    assert [r.weight for r in got.replicas.values()] == pytest.approx(list(w / w.sum()))
    own = np.array([e.variance for e in effects.values()])
    w_own = 1 / (own + paule_mandel(y, own))
    assert pool(effects, weights="own").effect == pytest.approx((w_own * y).sum() / w_own.sum())
    # a replica's own interval is its Welch one either way
    assert got.replicas["r1"].ci == pytest.approx(effects["r1"].change_ci())
