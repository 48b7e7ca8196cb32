"""Offered-load ladders (`workload.load`): the profile's expansion into rungs, the curves'
intervals and crossings, the report of a ladder run, and `check` on its capacity."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from napilab.harness.errors import InputError
from napilab.harness.profile.load import parse_rate
from napilab.harness.profile.profile import load_profile
from napilab.harness.stats.curves import Crossing, crossing, crossing_change, estimate
from napilab.reports.ab.compare import load_run
from napilab.reports.formats import render
from napilab.reports.load.curves import load_report
from napilab.reports.nightly.baselines import Reference
from napilab.reports.nightly.check import gate, gate_text
from napilab.reports.nightly.thresholds import Threshold
from tests.synthetic_runs import lognormal, store_run

PROFILE = """\
name: ladder
hosts:
  client: {host: a}
  server: {host: b}
workload:
  tool: sockperf.under-load
  duration: 2
  load: LOAD
  client: {role: client, args: {m: 64}}
  server: {role: server}
variants:
  plain: {}
  busy: {setup: {server: {netdev: {data0: {napi_defer_hard_irqs: 2}}}}}
baseline: busy
repeat: 2
"""


def write(tmp_path: Path, load: str, text: str = PROFILE) -> Path:
    path = tmp_path / "ladder.yaml"
    path.write_text(text.replace("LOAD", load))
    return path


def test_each_variant_runs_every_rung_compared_within_it(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, "[10k, 1.5M, max]"))
    assert [v.name for v in profile.variants] == [
        "busy+10k", "plain+10k", "busy+1.5M", "plain+1.5M", "busy+max", "plain+max"]
    assert profile.comparisons == (("busy+10k", "plain+10k"), ("busy+1.5M", "plain+1.5M"),
                                   ("busy+max", "plain+max"))
    assert [v.workload.client.args["mps"] for v in profile.variants] == [
        10000, 10000, 1500000, 1500000, "max", "max"]
    assert profile.variants[1].base == "plain" and profile.variants[1].rung is not None
    assert [t.variant for t in profile.trials()][:3] == ["busy+10k", "plain+10k", "busy+1.5M"]
    assert profile.load is not None and profile.load.unit == "msg/s"
    assert profile.load.tolerance == 5.0 and profile.load.knee == 2.0


def test_the_command_tool_takes_the_rate_as_a_placeholder(tmp_path: Path) -> None:
    text = PROFILE.replace("tool: sockperf.under-load", "tool: command").replace(
        "args: {m: 64}", "args: {argv: ['gen', '--rate', '${rate}'], metrics: "
        "{rps: 'rps=(\\\\d+)'}}").replace("  server: {role: server}\n", "")
    load = "{rates: [100, 2k], unit: req/s, achieved: [rps], slo: 5, metric: rps}"
    profile = load_profile(write(tmp_path, load, text))
    assert [v.workload.client.args["argv"][-1] for v in profile.variants] == [
        100, 100, 2000, 2000]
    assert profile.load is not None and profile.load.achieved == ("rps",)


@pytest.mark.parametrize(("load", "message"), [
    ("[10k, 5k]", "the rates go up"),
    ("[max, 10k]", "the rates go up"),
    ("[ten]", "expected a rate like"),
    ("[0]", "a rate is above 0"),
    ("[]", "non-empty list"),
    ("{rates: [1k], knee: 1}", "a factor above 1"),
    ("{rates: [1k], unit: req/s}", "`unit` and `achieved` are for the command tool"),
    ("{rates: [1k], slope: 2}", "slope"),
])
def test_a_bad_ladder_is_bad_input_at_its_line(tmp_path: Path, load: str,
                                               message: str) -> None:
    with pytest.raises(InputError) as found:
        load_profile(write(tmp_path, load))
    assert message in str(found.value) and "ladder.yaml:8" in str(found.value)


def test_a_closed_loop_tool_takes_no_ladder(tmp_path: Path) -> None:
    text = PROFILE.replace("tool: sockperf.under-load", "tool: neper.tcp_rr").replace(
        "args: {m: 64}", "args: {}")
    with pytest.raises(InputError, match="closed loop"):
        load_profile(write(tmp_path, "[1k]", text))


def test_the_ladder_is_the_profiles_not_a_variants(tmp_path: Path) -> None:
    text = PROFILE.replace("  plain: {}", "  plain: {workload: {load: [1k]}}")
    with pytest.raises(InputError, match=r"variants\.plain\.workload\.load: the load ladder"):
        load_profile(write(tmp_path, "[10k]", text))
    with pytest.raises(InputError, match=r"variants\.plain\.workload\.load: the load ladder"):
        load_profile(write(tmp_path, "[10k]", text.replace("  load: LOAD\n", "")))


def test_rates() -> None:
    assert parse_rate("10k") == 10_000 and parse_rate("1.5M") == 1_500_000
    assert parse_rate("2G") == 2e9 and parse_rate(250) == 250 and parse_rate("max") is None
    assert isinstance(parse_rate(True), str) and isinstance(parse_rate("-3"), str)


def test_an_estimate_is_inside_its_interval() -> None:
    rng = random.Random(1)
    for _ in range(200):
        values = [rng.lognormvariate(3, 0.5) for _ in range(rng.randint(2, 6))]
        for log in (True, False):
            found = estimate(values, log=log)
            assert found is not None and found.low is not None and found.high is not None
            assert found.low <= found.value <= found.high
    one = estimate([5.0], log=True)
    assert one is not None and one.low is None and one.bounds == pytest.approx((5.0, 5.0))
    # a rate of 3 repetitions far apart: its t interval would reach below 0 (the VM
    # testbed's 2M rung, 10.6k msg/s with CI -4.1k..25.3k); a rate cannot, nor cores
    wide = estimate([4_000.0, 11_000.0, 16_800.0], log=False, floor=0.0)
    assert wide is not None and wide.low == 0.0 and wide.low <= wide.value <= (wide.high or 0)
    assert (estimate([4_000.0, 11_000.0, 16_800.0], log=False) or wide).low < 0  # type: ignore[operator]


def test_a_crossing_is_inside_its_interval_on_any_curves() -> None:
    rng = random.Random(2)
    for _ in range(500):
        n = rng.randint(1, 6)
        loads = sorted(rng.uniform(1, 1000) for _ in range(n))
        value = [rng.uniform(1, 100) for _ in range(n)]
        upper = [v * rng.uniform(1, 2) for v in value]
        lower = [v / rng.uniform(1, 2) for v in value]
        saturated = [rng.random() < 0.15 for _ in range(n)]
        found = crossing(loads, (value, upper, lower), 50.0, saturated)
        assert found is not None
        assert found.low <= found.value
        assert found.high is None or found.value <= found.high


def test_crossings_interpolate_stop_at_saturation_and_are_censored() -> None:
    loads = [10.0, 20.0, 40.0]
    flat = ([1.0, 1.0, 1.0],) * 3
    above = crossing(loads, flat, 50.0, [False] * 3)  # never passed
    assert above == Crossing(40.0, 40.0, None, above=True)
    below = crossing(loads, ([60.0, 70.0, 80.0],) * 3, 50.0, [False] * 3)
    assert below is not None and below.below and below.value == 10.0
    # log-linear between 10 (at 20) and 100 (at 40): 50 is at 20 + 0.699 * 20
    mid = crossing(loads, ([10.0, 10.0, 100.0],) * 3, 50.0, [False] * 3)
    assert mid is not None and mid.value == pytest.approx(33.98, abs=0.01)
    stop = crossing(loads, ([10.0, 10.0, 10.0],) * 3, 50.0, [False, False, True])
    assert stop is not None and stop.value == 20.0  # nothing claimed past the last reached


def test_a_crossing_change_is_judged_on_its_interval() -> None:
    ref = Crossing(180.0, 170.0, 190.0)
    assert crossing_change(Crossing(120.0, 110.0, 130.0), ref, 10).status == "regression"
    assert crossing_change(Crossing(178.0, 175.0, 185.0), ref, 10).status == "within"
    assert crossing_change(Crossing(300.0, 280.0, 320.0), ref, 10).status == "improvement"
    assert crossing_change(Crossing(150.0, 60.0, 400.0), ref, 10).status == "inconclusive"
    # below the ladder: no lower end, so never "within"
    assert crossing_change(Crossing(10.0, 10.0, 12.0, below=True), ref, 10).status == \
        "regression"


RUNGS = [("10k", 10_000.0), ("50k", 50_000.0), ("200k", 200_000.0), ("2M", 2_000_000.0)]


def ladder_run(results: Path, p99: dict[str, list[float]], seed: int = 0,
               achieved_top: float = 600_000.0) -> Path:
    """A stored sockperf ladder run: variants plain and busy at RUNGS, 3 repetitions;
    P99 the latency_p99 medians per rung (us) per variant."""
    values: dict[str, dict[str, list[float]]] = {
        "sockperf.latency_p99": {}, "sockperf.latency_p50": {}, "sockperf.send_rate": {},
        "cpu.busy_cores": {}}
    names = []
    for i, (label, rate) in enumerate(RUNGS):
        for j, base in enumerate(("plain", "busy")):
            name = f"{base}+{label}"
            names.append(name)
            s = seed + 10 * i + j
            values["sockperf.latency_p99"][name] = lognormal(s, 3, p99[base][i], 0.05)
            values["sockperf.latency_p50"][name] = lognormal(s + 1, 3, p99[base][i] / 3, 0.05)
            sent = min(rate, achieved_top)
            values["sockperf.send_rate"][name] = lognormal(s + 2, 3, sent, 0.01)
            values["cpu.busy_cores"][name] = lognormal(s + 3, 3, 0.5 + j * 0.5, 0.05)
    units = {"sockperf.send_rate": "msg/s", "cpu.busy_cores": "cores"}
    run = store_run(results, values, variants=names, profile="ladder", units=units,
                    policies={"latency_p99": {"direction": "lower"}})
    path = run / "manifest.json"
    doc = json.loads(path.read_text())
    doc["workload_source"] = "sockperf"
    doc["groups"] = {n: f"load-{n.split('+')[1]}" for n in names}
    doc["comparisons"] = [[f"plain+{r}", f"busy+{r}"] for r, _ in RUNGS]
    doc["load"] = {"unit": "msg/s", "achieved": ["send_rate"], "tolerance": 5.0,
                   "knee": 2.0, "slo": 100.0, "metric": "latency_p99",
                   "max_regression": 10.0, "rungs": [[r, v] for r, v in RUNGS],
                   "variants": {n: {"base": n.split("+")[0], "rung": n.split("+")[1],
                                    "rate": dict(RUNGS)[n.split("+")[1]]} for n in names}}
    path.write_text(json.dumps(doc))
    return run


CURVES = {"plain": [20.0, 30.0, 400.0, 900.0], "busy": [15.0, 18.0, 60.0, 800.0]}


def test_a_ladder_run_reports_curves_saturation_knee_and_capacity(tmp_path: Path) -> None:
    run = load_run(ladder_run(tmp_path, CURVES))
    found = load_report(run.samples, run.manifest)
    assert found is not None and [c.variant for c in found.curves] == ["plain", "busy"]
    plain, busy = found.curves
    assert [p.saturated for p in plain.points] == [False, False, False, True]
    assert plain.points[-1].short == 3
    assert plain.capacity is not None and 50_000 < plain.capacity.value < 200_000
    assert busy.capacity is not None and busy.capacity.value == pytest.approx(200_000, rel=0.02)
    for c in found.curves:
        for cross in (c.capacity, c.knee):
            assert cross is not None and cross.low <= cross.value
            assert cross.high is None or cross.value <= cross.high
    text = render.render(run, "text")
    assert "SATURATED 3/3" in text and "capacity (latency_p99 <= 100 us)" in text
    assert all(len(line) <= 80 for line in text.splitlines() if "SATURATED" in line)
    page = render.render(run, "html")
    assert 'id="load-table"' in page and 'id="plot-load-latency-p99"' in page
    assert 'id="plot-load-cores-sender"' in page and "mathdefault" not in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    assert page.index('<section id="verdicts">') < page.index('<section id="load">') < \
        page.index('<section id="ab_table">')
    doc = json.loads(render.render(run, "json"))
    assert doc["load"]["curves"][0]["points"][3]["saturated"] is True
    assert "Latency under offered load" in render.render(run, "md")


def _gate(base: Path, cand: Path, limits: dict[str, Threshold] | None = None) -> Any:
    ref = load_run(base)
    return gate(Reference("run", (ref,)), load_run(cand), limits)


def test_check_gates_the_capacity(tmp_path: Path) -> None:
    base = ladder_run(tmp_path / "a", CURVES)
    same = ladder_run(tmp_path / "b", CURVES, seed=100)
    shaped = ladder_run(tmp_path / "c", {"plain": [20.0, 300.0, 900.0, 900.0],
                                         "busy": [15.0, 250.0, 800.0, 800.0]}, seed=200)
    regressed = _gate(base, shaped)
    capacity = [c for c in regressed.cases if c.metric == "capacity"]
    assert [c.status for c in capacity] == ["regression", "regression"]
    assert regressed.status == "regression"
    shown = gate_text(regressed)
    assert "capacity at latency_p99" in shown and "200k (95% CI" in shown
    assert "ratio " in shown
    aa = _gate(base, same)
    assert {c.status for c in aa.cases if c.metric == "capacity"} <= {"within", "improvement"}
    knee = _gate(base, same, {"knee": Threshold(50.0)})
    assert [c.metric for c in knee.cases if c.source == "load"] == [
        "capacity", "capacity", "knee", "knee"]
    with pytest.raises(InputError, match="relative threshold"):
        _gate(base, same, {"capacity": Threshold(None, 5.0, "")})
