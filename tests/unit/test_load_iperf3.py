"""An iperf3 UDP ladder's achieved load is what the receiver got (docs/load.md): a rung
the sender reached but the receiver could not take is saturated. The run is stored from
the real 3.12 captures at -b 10M, 100M, 1G and 20G (tests/data/iperf3/3.12/udp_b*.json;
at 20G the sender sent 19.99 Gbit/s and the receiver got 11.0, 45% lost)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.profile.profile import load_profile
from napilab.reports.ab.compare import load_run
from napilab.reports.formats import render
from napilab.reports.load.curves import LoadReport, load_report
from napilab.runners.registry import TOOLS
from napilab.runners.workloads import iperf3
from tests.synthetic_runs import store_run

DATA = Path(__file__).parents[1] / "data" / "iperf3" / "3.12"
RUNGS = {"10M": 10e6, "100M": 100e6, "1G": 1e9, "20G": 20e9}
METRICS = ("throughput", "sender_throughput", "jitter", "lost_percent")
PROFILE = """\
name: udp-ladder
hosts: {client: {host: a}, server: {host: b}}
workload:
  tool: iperf3
  duration: 3
  load: {rates: [10M, 100M, 1G, 20G]}
  client: {role: client, args: {u: true}}
  server: {role: server}
variants:
  plain: {}
repeat: 2
"""


def capture(rung: str) -> dict[str, float]:
    values = iperf3.values(iperf3.parse((DATA / f"udp_b{rung}.json").read_text()))
    return {v.metric: float(v.value) for v in values if v.metric in METRICS}


def ladder_run(tmp_path: Path, achieved: list[str] | None = None) -> LoadReport:
    """The four captures stored as a run of the profile's ladder (each capture as both
    repetitions of its rung), the ladder recorded as a run records it; `achieved`
    replaces the ladder's achieved-rate metrics."""
    path = tmp_path / "udp.yaml"
    path.write_text(PROFILE)
    profile = load_profile(path)
    assert profile.load is not None
    names = [v.name for v in profile.variants]
    assert names == [f"plain+{r}" for r in RUNGS]
    values: dict[str, dict[str, list[float]]] = {f"iperf3.{m}": {} for m in METRICS}
    for name in names:
        measured = capture(name.split("+")[1])
        for metric in METRICS:
            values[f"iperf3.{metric}"][name] = [measured[metric]] * 2
    units = {"iperf3.throughput": "bits/s", "iperf3.sender_throughput": "bits/s",
             "iperf3.lost_percent": "%"}
    run = store_run(tmp_path / "results", values, variants=names, profile="udp-ladder",
                    units=units)
    manifest = run / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["workload_source"] = "iperf3"
    doc["load"] = profile.load.record() | {"variants": {
        v.name: {"base": v.base, "rung": v.rung.label, "rate": v.rung.rate}
        for v in profile.variants if v.rung is not None}}
    if achieved is not None:
        doc["load"]["achieved"] = achieved
    manifest.write_text(json.dumps(doc))
    loaded = load_run(run)
    found = load_report(loaded.samples, loaded.manifest)
    assert found is not None
    return found


def test_the_achieved_rate_of_a_udp_rung_is_what_the_receiver_got() -> None:
    axis = TOOLS["iperf3"].load
    assert axis is not None and axis.achieved == ("throughput", "sender_throughput")
    sent, got = capture("20G")["sender_throughput"], capture("20G")["throughput"]
    assert sent == pytest.approx(19.99e9, rel=1e-3) and got == pytest.approx(11.0e9, rel=1e-2)


def test_a_rung_the_receiver_cannot_take_is_saturated(tmp_path: Path) -> None:
    report = ladder_run(tmp_path)
    (curve,) = report.curves
    assert [p.rung for p in curve.points] == list(RUNGS)
    assert [p.saturated for p in curve.points] == [False, False, False, True]
    top = curve.points[-1]
    assert top.short == 2 and top.achieved is not None
    assert top.achieved.value == pytest.approx(capture("20G")["throughput"])
    for point in curve.points[:-1]:  # 1G: 0.017% lost, 999.5 Mbit/s arrived
        assert point.achieved is not None and point.offered is not None
        assert point.achieved.value > 0.99 * point.offered
    assert "jitter" in top.metrics
    run_dir = next((tmp_path / "results" / "udp-ladder").iterdir())
    assert "SATURATED 2/2" in render.render(load_run(run_dir), "text")


def test_by_the_senders_rate_alone_that_rung_was_not_saturated(tmp_path: Path) -> None:
    # how runs recorded before this change read: the sender reached 20G to 0.03%
    report = ladder_run(tmp_path, achieved=["sender_throughput"])
    (curve,) = report.curves
    assert not any(p.saturated for p in curve.points)
