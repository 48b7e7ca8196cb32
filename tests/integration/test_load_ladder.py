"""A load ladder on the SSH testbed: sockperf under-load from a to b at 5k and 2M msg/s
(2 s trials, 3 repetitions, RPS off on b: one variant, since what is tested is the
ladder run, its curve and its report; variants side by side on one figure are the unit
tests' (tests/unit/test_load_ladder.py), and each trial costs sockperf's own 4.4 s here).
The 2M rung is more than this machine sends: it is marked saturated. Its report page is
opened in Chromium (a screenshot of the section: test-artifacts/load-ladder-report.png).
The capacity gate's verdicts (an A/A pair passes, a sender under a token-bucket shaper
fails on its SLO capacity) are judged on three such runs measured alone on this
machine's CPUs and stored (tests/unit/test_gate_runs.py, tests/golden/gate_runs/).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"  # as tests/browser
PROFILE = """\
name: ladder
hosts: {client: {host: a}, server: {host: b}}
workload:
  tool: sockperf.under-load
  duration: 2
  load: {rates: [5k, 2M], slo: 2000, knee: 4}
  client: {role: client, cpus: "0"}
  server: {role: server, cpus: "1"}
collect: {proc_stat: {roles: [server]}}
variants:
  rps-off: {setup: {server: {rps: {"${iface}": none}}}}
repeat: 3
metrics:
  # gated with the capacity: what the sender achieved at each rung
  send_rate: {direction: higher, max_regression: 50%}
"""

pytestmark = [pytest.mark.skipif(shutil.which("sockperf") is None,
                               reason="sockperf is not installed"),
              pytest.mark.serial]  # sockperf's saturated rung: alone on the CPUs


def run(bed: tb.Testbed, profile: Path, results: Path) -> Path:
    before = set(results.glob("*/*"))
    proc = run_napilab("run", str(profile), "-i", str(bed.inventory_path), "--transport", "ssh",
                       "-o", str(results), "--format", "html,json,text", timeout=600)
    assert proc.returncode == 0, proc.stderr
    (created,) = {p for p in set(results.glob("*/*")) - before if p.is_dir()}
    return created


def test_a_ladder_run_its_curves_and_its_report(testbed: tb.Testbed, tmp_path: Path) -> None:
    profile = tmp_path / "ladder.yaml"
    profile.write_text(PROFILE)
    results = tmp_path / "results"
    first = run(testbed, profile, results)
    doc = json.loads((first / "report.json").read_text())
    curves = {c["variant"]: c for c in doc["load"]["curves"]}
    assert set(curves) == {"rps-off"}
    for curve in curves.values():
        top = curve["points"][-1]
        assert top["rung"] == "2M" and top["saturated"] and top["short"] == 3
        assert top["achieved"]["value"] < 1_900_000
        assert not any(p["saturated"] for p in curve["points"][:-1])
        assert all(p["achieved"]["value"] > 0.95 * p["offered"] for p in curve["points"][:-1])
        capacity = curve["capacity"]
        assert capacity["low"] <= capacity["value"]
        assert capacity["high"] is None or capacity["value"] <= capacity["high"]
    text = (first / "report.txt").read_text()
    assert "SATURATED 3/3" in text and "capacity (latency_p99 <= 2000 us)" in text
    _screenshot(first / "report.html")


def _screenshot(page: Path) -> None:
    """The report in headless Chromium: the load section and its figures render; a
    screenshot of the section is kept with the test artifacts."""
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path("/usr/bin/chromium").exists():
        return
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                    args=["--no-sandbox", "--headless", "--disable-gpu"])
        try:
            tab = browser.new_page(viewport={"width": 1200, "height": 900})
            tab.goto(page.as_uri())
            section = tab.locator("section#load")
            assert section.locator("table#load-table tbody tr").count() == 2
            assert section.locator("tr.saturated").count() == 1
            assert section.locator("figure svg").count() >= 3
            section.screenshot(path=str(ARTIFACTS / "load-ladder-report.png"))
        finally:
            browser.close()
