"""The A/B table's statistics on synthetic stored runs (RunStore, fixed seeds): each line's
Comparison equals harness.stats.compare on the same values, p-values are Holm-adjusted
across the primary lines (the others are exploratory), directions come from the
profile's policies or the documented defaults, a NaN drops a value and an infinite one
fails only its line, and the text and HTML renderers show the evidence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from napilab.harness.stats.compare import MetricSamples, compare_metrics
from napilab.harness.stats.pool import pooled_change, pooled_percentiles
from napilab.harness.stats.stats import Adjust, Verdict, adjust_p
from napilab.reports.ab.compare import load_run, table
from napilab.reports.ab.directions import default_direction, judge
from napilab.reports.ab.table_json import table_doc
from napilab.reports.formats.render import html, text
from tests.synthetic_runs import lognormal, store_run

BASE = [100.0, 101, 102, 103, 104, 105, 106, 107]
STRONG = [120.0, 121, 122, 123, 124, 125, 126, 127]  # complete separation: p = 2/C(16,8)
MODERATE = [102.5, 104.0, 105, 106, 107, 108, 109, 110]  # Welch on logs: raw p = 0.034
NULL = [100.5, 101.5, 102.5, 103.5, 104.5, 105.5, 106.5, 107.5]
ALL_PRIMARY = {"rtt_min": {}, "rtt_avg": {}, "rtt_max": {}, "received": {}}


def test_line_comparison_is_harness_stats_on_the_stored_values(tmp_path: Path) -> None:
    base, slow = lognormal(1, 10, 100), lognormal(2, 10, 120)
    run = store_run(tmp_path, {"ping.rtt_avg": {"off": base, "on": slow}})
    line = table(load_run(run)).lines[0]
    expected = compare_metrics({"x": MetricSamples(base, slow, "lower")}, seed=0)["x"]
    found = line.comparisons["on"]
    assert found == expected
    assert found.verdict is Verdict.WORSE
    # 10 per arm: Mann-Whitney, whose estimate is the Hodges-Lehmann ratio
    pairs = np.log(np.asarray(slow))[:, None] - np.log(np.asarray(base))[None, :]
    assert found.change == pytest.approx(np.expm1(np.median(pairs)))
    assert found.change_ci[0] > 0.1 and found.change_ci[1] < 0.3
    cell = line.cells["on"]
    assert cell.summary is not None and cell.summary.n == 10
    assert cell.summary.median_ci is not None  # n = 10 >= 6
    assert cell.summary.cv == pytest.approx(np.std(slow, ddof=1) / np.mean(slow))
    assert cell.trials == tuple(range(2, 21, 2))  # interleaved: "on" runs second
    assert not cell.drifting


def welch_p(x: list[float], y: list[float]) -> float:
    """Two-sided Welch's t on logs with napilab's df (Welch-Satterthwaite less one, at
    least min(n) - 1)."""
    lx, ly = np.log(x), np.log(y)
    a, b = np.var(lx, ddof=1) / lx.size, np.var(ly, ddof=1) / ly.size
    df = max((a + b) ** 2 / (a * a / (lx.size - 1) + b * b / (ly.size - 1)) - 1,
             min(lx.size, ly.size) - 1)
    t = (ly.mean() - lx.mean()) / np.sqrt(a + b)
    return float(2 * sps.t.sf(abs(t), df))


def test_holm_across_lines_keeps_a_lone_significant_line_from_a_verdict(tmp_path: Path) -> None:
    alone = store_run(tmp_path / "alone", {"ping.rtt_avg": {"off": BASE, "on": MODERATE}})
    assert table(load_run(alone)).lines[0].comparisons["on"].verdict is Verdict.WORSE

    values = {"ping.rtt_min": {"off": BASE, "on": STRONG},
              "ping.rtt_avg": {"off": BASE, "on": MODERATE},
              "ping.rtt_max": {"off": BASE, "on": NULL}}
    tab = table(load_run(store_run(tmp_path / "three", values, policies=ALL_PRIMARY)))
    assert tab.family == 3
    raw = [welch_p(BASE, v) for v in (STRONG, MODERATE, NULL)]
    assert 0.025 < raw[1] < 0.05
    adjusted = adjust_p(raw, Adjust.HOLM)
    found = [ln.comparisons["on"] for ln in tab.lines]
    assert {c.test_method for c in found} == {"welch-log-t"}  # 8 repetitions per arm
    assert [c.p_value for c in found] == pytest.approx(raw)
    assert [c.p_adjusted for c in found] == pytest.approx(adjusted)
    assert adjusted[1] == pytest.approx(2 * raw[1])  # second smallest p, times m - 1
    # the second line's own 95% CI excludes 0, so it is not "~": Holm is the reason it is
    # not judged, and its row says so
    assert [c.verdict for c in found] == [Verdict.WORSE, Verdict.NOT_ENOUGH_DATA, Verdict.SAME]
    assert "Holm over 3" in found[1].reason and found[1].change_ci[0] > 0


def test_descriptive_rows_are_exploratory_and_outside_the_family(tmp_path: Path) -> None:
    values = {"ping.rtt_min": {"off": BASE, "on": STRONG},
              "ping.rtt_avg": {"off": BASE, "on": MODERATE}}
    tab = table(load_run(store_run(tmp_path, values)))  # ping's default primary: rtt_avg
    rtt_min, rtt_avg = tab.lines
    assert (rtt_min.primary, rtt_avg.primary, tab.family) == (False, True, 1)
    assert rtt_min.comparisons["on"].verdict is Verdict.EXPLORATORY
    assert rtt_min.comparisons["on"].change_ci[0] > 0.15  # change and CI still shown
    assert rtt_avg.comparisons["on"].verdict is Verdict.WORSE  # a family of one
    assert "exploratory" in text(load_run(next(tmp_path.glob("*/*"))))


def test_holm_family_spans_every_compared_variant(tmp_path: Path) -> None:
    values = {"ping.rtt_avg": {"off": BASE, "on": MODERATE, "other": NULL}}
    tab = table(load_run(store_run(tmp_path, values)))
    assert tab.pairs == (("off", "on"), ("off", "other")) and tab.family == 2
    found = tab.lines[0].comparisons["on"]
    assert found.p_adjusted == pytest.approx(2 * found.p_value)


def test_a_nan_drops_a_value_and_an_infinite_one_fails_only_its_line(tmp_path: Path) -> None:
    nan, inf = float("nan"), float("inf")
    values = {"ping.rtt_avg": {"off": [*BASE[:7], nan], "on": STRONG},
              "ping.rtt_min": {"off": BASE, "on": [*STRONG[:7], inf]}}
    run = load_run(store_run(tmp_path, values, policies=ALL_PRIMARY))
    tab = table(run)
    avg, low = tab.lines
    assert avg.comparisons["on"].baseline.n == 7 and avg.comparisons["on"].verdict is \
        Verdict.WORSE
    assert low.comparisons == {} and "infinite value in this column" in low.notes["on"]
    assert "infinite value" in text(run) and tab.family == 1


@pytest.mark.parametrize(("source", "metric", "unit", "expected"), [
    ("neper", "latency_p99", "us", "lower"), ("ping", "rtt_avg", "us", "lower"),
    ("ping", "time", "ms", "lower"), ("proc_stat", "hardirq", "ms", "lower"),
    ("proc_stat", "idle", "ms", "higher"), ("softnet_stat", "dropped", "count", "lower"),
    ("softnet_stat", "time_squeeze", "count", "lower"),
    ("interrupts", "function_call_interrupts", "count", "lower"),
    ("iperf3", "throughput", "bits/s", "higher"), ("neper", "num_transactions", "count",
                                                   "higher"),
    ("ping", "received", "count", "higher"), ("ping", "received_per_second", "1/s", "higher"),
    ("sockperf", "message_rate", "msg/s", "higher"), ("iperf3", "retransmits", "count",
                                                      "lower"),
    ("softnet_stat", "processed", "count", None)])
def test_default_directions(source: str, metric: str, unit: str, expected: str | None) -> None:
    found = default_direction(source, metric, unit)
    assert (found.value if found else None) == expected


def test_policy_direction_wins_over_default_and_unknown_is_assumed_lower() -> None:
    assert judge({}, "softnet_stat", "processed").origin == "assumed"
    assert judge({}, "softnet_stat", "processed").direction.value == "lower"
    by_name = judge({"processed": {"direction": "higher"}}, "softnet_stat", "processed")
    assert (by_name.direction.value, by_name.origin) == ("higher", "policy")
    # "source.metric" is more specific than "metric"
    both = {"rtt_avg": {"direction": "higher"}, "ping.rtt_avg": {"direction": "lower",
                                                                  "max_regression": 3.0}}
    found = judge(both, "ping", "rtt_avg")
    assert (found.direction.value, found.max_regression_pct) == ("lower", 3.0)
    # thresholds without a direction keep the default rule
    only_limit = judge({"throughput": {"min_effect": 2.0}}, "iperf3", "throughput")
    assert (only_limit.direction.value, only_limit.origin) == ("higher", "default")
    assert only_limit.min_effect_pct == 2.0


def test_direction_from_policy_decides_better_or_worse(tmp_path: Path) -> None:
    more = [v * 1.3 for v in BASE]
    default = table(load_run(store_run(tmp_path / "d", {
        "softnet_stat.processed": {"off": BASE, "on": more}}, units={
            "softnet_stat.processed": "count"}, policies={"processed": {}})))
    line = default.lines[0]
    assert (line.direction, line.direction_origin, line.primary) == ("lower", "assumed", True)
    assert line.comparisons["on"].verdict is Verdict.WORSE
    assert "direction unknown" in text(load_run(next((tmp_path / "d").glob("*/*"))))
    policy = table(load_run(store_run(tmp_path / "p", {
        "softnet_stat.processed": {"off": BASE, "on": more}},
        policies={"softnet_stat.processed": {"direction": "higher"}})))
    assert policy.lines[0].direction_origin == "policy"
    assert policy.lines[0].comparisons["on"].verdict is Verdict.BETTER


def test_min_effect_from_policy(tmp_path: Path) -> None:
    base, slower = lognormal(3, 12, 100, 0.005), lognormal(4, 12, 103, 0.005)
    values = {"ping.rtt_avg": {"off": base, "on": slower}}
    plain = table(load_run(store_run(tmp_path / "a", values))).lines[0].comparisons["on"]
    assert plain.verdict is Verdict.WORSE
    judged = table(load_run(store_run(tmp_path / "b", values, policies={
        "rtt_avg": {"min_effect": 5.0}}))).lines[0].comparisons["on"]
    assert judged.min_effect == 0.05 and judged.verdict is Verdict.SAME
    assert "within" in judged.reason


def test_not_enough_data_names_the_n_needed(tmp_path: Path) -> None:
    run = store_run(tmp_path, {"ping.rtt_avg": {"off": [100.0, 101, 99], "on": [110.0, 112,
                                                                                 111]}},
                    policies={"rtt_avg": {"min_effect": 10}})
    line = table(load_run(run)).lines[0]
    found = line.comparisons["on"]
    assert found.verdict is Verdict.NOT_ENOUGH_DATA and found.n_needed is not None
    assert line.noise["on"].known  # n = 3: the t interval of the log mean
    assert f"need n={found.n_needed}" in text(load_run(run))


def test_zero_baseline_drift_and_noise_notes(tmp_path: Path) -> None:
    rising = [100.0 + 3 * i for i in range(8)]
    values = {"softnet_stat.received_rps": {"off": [0.0] * 8, "on": [50.0] * 8},
              "ping.rtt_avg": {"off": rising, "on": [v + 1 for v in rising]}}
    run = load_run(store_run(tmp_path, values))
    tab = table(run)
    zero, drifting = tab.lines
    # a zero baseline: an absolute change (Welch's t on the raw values), in the unit
    found = zero.comparisons["on"]
    assert (found.scale, found.change, found.test_method) == ("absolute", 50.0, "welch-t")
    assert drifting.cells["off"].drifting and drifting.cells["off"].drift is not None
    assert drifting.cells["off"].drift.tau == pytest.approx(1.0)
    noise = drifting.noise["on"]
    assert noise.exceeds and noise.half_width is not None  # CI half-width >> 1% effect
    report = text(run)
    assert "drift along trials in off" in report and "baseline noise exceeds" in report
    assert "+50" in report and "relative change undefined" not in report


def test_pooled_percentile_lines_bootstrap_over_repetitions(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    fast = [rng.lognormal(3.0, 0.3, 2000) for _ in range(6)]
    slow = [rng.lognormal(3.3, 0.3, 2000) for _ in range(6)]
    run = store_run(tmp_path, {"ping.rtt_avg": {
        "off": [float(np.mean(r)) for r in fast], "on": [float(np.mean(r)) for r in slow]}},
        latencies={"off": fast, "on": slow}, policies={"pooled.latency_p99": {}})
    tab = table(load_run(run))
    pooled = {ln.metric: ln for ln in tab.lines if ln.source == "pooled"}
    assert list(pooled) == ["latency_p50", "latency_p90", "latency_p99", "latency_p99.9",
                            "latency_p99.99"]
    p99 = pooled["latency_p99"]
    expected = pooled_percentiles(fast).percentiles[2]
    cell = p99.cells["off"]
    assert cell.pooled is not None and cell.value == expected.value
    assert cell.pooled.ci == expected.ci
    assert expected.ci is not None and expected.ci[0] <= expected.value <= expected.ci[1]
    assert cell.values == expected.per_repetition
    found = p99.comparisons["on"]
    assert found.verdict is Verdict.WORSE and tab.family == 1  # only the named line
    # the change column describes the pooled values the row shows
    on = p99.cells["on"].pooled
    assert on is not None
    assert found.change == pytest.approx(on.value / expected.value - 1)
    change, ci = pooled_change(cell.pooled, on)
    assert ci is not None and found.change_ci == pytest.approx(ci)
    assert ci[0] < change < ci[1]
    assert pooled["latency_p50"].comparisons["on"].verdict is Verdict.EXPLORATORY
    assert "latency p99 (pooled)" in text(load_run(run))


def test_renderers_show_the_evidence_in_80_columns(tmp_path: Path) -> None:
    values = {"ping.rtt_min": {"off": BASE, "on": STRONG},
              "ping.received": {"off": BASE, "on": [v * 0.7 for v in BASE]},
              "ping.rtt_avg": {"off": BASE, "on": NULL}}
    run = load_run(store_run(tmp_path, values, units={"ping.received": "count"},
                             policies=ALL_PRIMARY))
    report = text(run)
    assert max(len(line) for line in report.splitlines()) <= 80
    rows = {line.split()[0]: line for line in report.splitlines() if line.startswith("  rtt")
            or line.startswith("  received")}
    assert "worse" in rows["rtt_min"] and "+19.3%" in rows["rtt_min"]
    assert "<0.001" in rows["rtt_min"]  # Holm over 3 of a Welch p ~1e-10 (8 per arm)
    page = html(run)
    assert 'id="verdicts"' in page and "verdict-worse" in page
    assert page.index('id="verdicts"') < page.index('id="ab-table"')
    assert "change vs off" in page and "<strong>2</strong> worse" in page
    assert 'class="num verdict-same"' in page
    doc = table_doc(table(run))
    compared = doc["lines"][0]["comparisons"]["on"]
    assert compared["verdict"] == "worse" and compared["adjust"] == "holm"
    assert doc["family"] == 3


def test_a_baseline_median_of_a_half_gives_a_bounded_ci_and_one_repetition_none(
        tmp_path: Path) -> None:
    """ping's rtt_mdev is often 0 or 1 us: at 2 vs 2 with a 0 (no logarithm, a rank
    interval unattainable) Welch's t on the raw values bounds the change on both sides,
    never below -100% for a value that cannot go below 0 (it was +100% with a CI open
    above: +inf%). An arm of one repetition has no interval: -inf..+inf, null in JSON."""
    run = load_run(store_run(tmp_path / "a", {"ping.rtt_mdev": {"off": [0.0, 1.0],
                                                                 "on": [1.0, 1.0]}}))
    found = table(run).lines[0].comparisons["on"]
    low, high = found.change_ci
    assert found.change == 1.0 and low == -1.0 and 1.0 < high < float("inf")
    assert "x0..x" in text(run) and "inf" not in text(run)
    one = load_run(store_run(tmp_path / "b", {"ping.rtt_mdev": {"off": [2.0],
                                                                 "on": [1.0, 3.0]}}))
    assert "-inf..+inf%" in text(one)
    assert table_doc(table(one))["lines"][0]["comparisons"]["on"]["change_ci"] == [None, None]
