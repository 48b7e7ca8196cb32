"""`napilab calibrate`: the derived A/A plan (pure) and the calibration of a stored A/A
run (noise, detectable change at the profile's repeat count, A/A verdict)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.cli.analysis import aa_plan
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from napilab.harness.stats.noise import calibrate
from napilab.harness.stats.power import Noise, n_per_arm_needed
from napilab.reports.ab.calibration import calibrate_run, calibration_doc, calibration_text, n_for
from napilab.reports.ab.compare import load_run
from tests.synthetic_runs import lognormal, store_run

PROFILE = """\
name: cal
hosts:
  sender: {host: a}
  receiver: {host: b, iface: data0}
setup:
  receiver:
    netdev: {data0: {gro_flush_timeout: 0}}
workload:
  tool: ping
  duration: 1
  client: {role: sender}
  server: {role: receiver}
variants:
  rps-off:
    setup: {receiver: {rps: {data0: none}}}
  rps-remote:
    setup: {receiver: {rps: {data0: "1"}}}
repeat: 4
order: blocked
"""
INVENTORY = """\
transport: local
hosts:
  a: {address: 127.0.0.1}
  b: {address: 127.0.0.1}
"""


def test_aa_plan_runs_the_baseline_twice_interleaved(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PROFILE)
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    bound = bind(load_profile(tmp_path / "p.yaml"), load_inventory(tmp_path / "inv.yaml"))
    plan = aa_plan(bound)
    profile = plan.profile
    assert profile.name == "cal-calibrate"
    assert [v.name for v in profile.variants] == ["rps-off", "rps-off-again"]
    assert profile.variants[0].settings == profile.variants[1].settings
    assert profile.variants[1].settings == bound.profile.variants[0].settings
    assert profile.order == "interleaved" and profile.repeat == 4
    assert [t.variant for t in plan.trials()][:4] == ["rps-off", "rps-off-again"] * 2
    assert set(profile.document["variants"]) == {"rps-off", "rps-off-again"}
    assert plan.settings(profile.variants[1]) == bound.settings(bound.profile.variants[0])


def test_calibrate_run_pools_both_copies_in_trial_order(tmp_path: Path) -> None:
    first, second = lognormal(1, 5, 100, 0.03), lognormal(2, 5, 100, 0.03)
    run = load_run(store_run(tmp_path, {"ping.rtt_avg": {"off": first, "off-again": second},
                                        "ping.rtt_min": {"off": [0.0] * 5,
                                                         "off-again": [0.0] * 5}}))
    lines = calibrate_run(run, n_per_arm=5)
    rtt = lines[0]
    interleaved = [v for pair in zip(first, second, strict=True) for v in pair]
    expected = calibrate(interleaved, n_per_arm=5)
    assert rtt.calibration == expected
    assert rtt.calibration is not None and rtt.calibration.summary.n == 10
    assert rtt.calibration.mde is not None and 0.02 < rtt.calibration.mde < 0.2
    assert rtt.aa is not None and rtt.aa.verdict.value in ("~", "not-enough-data")
    assert rtt.calibration.log_sd is not None
    assert n_for(rtt) == n_per_arm_needed(Noise(rtt.calibration.log_sd, True), 0.05)
    assert n_for(lines[1]) is None  # median 0: no relative change to detect
    meta = {"profile": "synth", "baseline": "off", "n_per_arm": 5}
    text = calibration_text(lines, **meta)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "rtt_avg" in text and "A/A should be ~" in text
    doc = json.loads(json.dumps(calibration_doc(lines, **meta)))
    assert doc["lines"][0]["detectable_change"] == pytest.approx(expected.mde)
    assert doc["lines"][0]["detectable_by_n"]["10"] == pytest.approx(dict(expected.mde_by_n)[10])
