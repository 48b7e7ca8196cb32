"""The nightly gate on the SSH testbed, on runs measured during the test: a candidate
profile that turns RPS on (to CPU 1) against one that leaves it off is a regression of
CPU cost, gated by an absolute threshold.

The demo's gate on real nights (an A/A night passes, a night under a token-bucket shaper
is a regression, a regressed night never becomes the next night's baseline) is judged on
four nights measured alone on this machine's CPUs and stored
(tests/unit/test_gate_runs.py); test_cross_run.py catches a shaped run measured during
the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab

pytestmark = pytest.mark.serial  # verdicts measured on the testbed: alone on the CPUs

# One variant, the same name in both profiles: RPS off in one, to CPU 1 in the other
COST = """\
name: cost
hosts: {sender: {host: a}, receiver: {host: b}}
workload: {tool: ping, duration: 2, client: {role: sender, cpus: "0"}, server: {role: receiver}}
collect: {proc_stat: {roles: [receiver], cpus: "1"}}
variants:
  x: {setup: {receiver: {rps: {"${iface}": RPS}}}}
repeat: 5
metrics:
  rtt_avg: {direction: lower, max_regression: 25%}
  received: {direction: higher, max_regression: 25%}
"""


def run_night(bed: tb.Testbed, profile: Path, results: Path) -> Path:
    before = set(results.glob("*/*"))
    proc = run_napilab("run", str(profile), "-i", str(bed.inventory_path), "--transport", "ssh",
                       "-o", str(results), "--format", "text")
    assert proc.returncode == 0, proc.stderr
    (created,) = {p for p in set(results.glob("*/*")) - before if p.is_dir()}
    return created


def test_a_cpu_cost_from_zero_is_gated_by_an_absolute_threshold(
        testbed: tb.Testbed, tmp_path: Path) -> None:
    """A candidate profile that turns RPS on (to CPU 1) against one that leaves it off:
    softirq time on CPU 1 goes from 0 ms to some hundred ms. With `--max-regression
    softirq=+20ms` the row is judged in ms (Welch's t on the raw values) and is a
    regression: exit 3, never "n/a" or skipped."""
    results = tmp_path / "results"
    off = tmp_path / "off" / "cost.yaml"
    on = tmp_path / "on" / "cost.yaml"
    for path, rps in ((off, "none"), (on, '"1"')):
        path.parent.mkdir()
        path.write_text(COST.replace("RPS", rps))
    run_off = run_night(testbed, off, results)
    run_on = run_night(testbed, on, results)
    proc = run_napilab("check", str(run_on), "--baseline", str(run_off), "--intended", "profile",
                       "--max-regression", "softirq=+20ms", "--json", str(tmp_path / "c.json"))
    print(proc.stdout + proc.stderr)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    (case,) = [c for c in doc["cases"] if c["metric"] == "softirq"]
    found = case["comparison"]
    assert case["status"] == "regression" and case["threshold"] == "+20 ms"
    assert found["scale"] == "absolute" and found["test"] == "welch-t"
    assert found["change"] > 20 and found["change_ci"][0] > 20
    assert "+20 ms" in proc.stdout and "softirq" in proc.stdout
