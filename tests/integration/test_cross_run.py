"""compare and check on real testbed runs (netns + veth + ping flood), through the CLI.

- Two runs of one profile that differ only in a knob the profiles set
  (gro_flush_timeout) compare fine; the knob is listed as an intended difference.
- A host-fact difference cannot be produced on one machine, so it is made by editing the
  stored manifest of a copy of the second run (kernel_release of host b, as a patched
  kernel would report): compare Baseline=A Patched=B then fails with exit 2, passes with
  --intended kernel (listing it as intended) and with --allow-mismatch.
- The nightly gate sees a real latency regression: a tbf qdisc on host b's data
  interface (netem is not available here) rate-limits the echo replies, so they queue;
  `napilab check` against the results directory exits 3 and the JUnit XML names it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab

pytestmark = pytest.mark.serial  # verdicts measured on the testbed: alone on the CPUs

KNOB_PROFILE = """\
name: knob
hosts:
  sender: {{host: a}}
  receiver: {{host: b}}
setup:
  receiver:
    netdev: {{"${{iface}}": {{gro_flush_timeout: {gro}}}}}
workload:
  tool: ping
  duration: 1
  client: {{role: sender, cpus: "0"}}
  server: {{role: receiver}}
variants:
  rps-off:
    setup: {{receiver: {{rps: {{"${{iface}}": none}}}}}}
repeat: 2
"""
GATE_PROFILE = """\
name: gate
hosts:
  sender: {host: a}
  receiver: {host: b}
workload:
  tool: ping
  duration: 1
  client: {role: sender, cpus: "0"}
  server: {role: receiver}
variants:
  default: {}
repeat: 5
report:
  table:
    - {label: ping rtt avg (us), source: ping, metric: rtt_avg, role: sender}
    - {label: Echo replies received, source: ping, metric: received, role: sender}
"""


def run_profile(bed: tb.Testbed, tmp_path: Path, text: str, name: str, results: Path) -> Path:
    profile = tmp_path / f"{name}.yaml"
    profile.write_text(text)
    before = set(results.glob("*/*"))
    proc = run_napilab("run", str(profile), "-i", str(bed.inventory_path), "--transport", "local",
                       "-o", str(results), "--format", "text", timeout=120)
    assert proc.returncode == 0, proc.stderr
    (created,) = set(results.glob("*/*")) - before
    return created


@contextmanager
def slow_replies(bed: tb.Testbed) -> Iterator[None]:
    """Host b's replies through a 1 Mbit/s token bucket: each queues behind the last."""
    netns = next(n.netns for n in bed.nodes if n.name == "b")
    tc = ["ip", "netns", "exec", netns, "tc", "qdisc"]
    subprocess.run([*tc, "add", "dev", "data0", "root", "tbf", "rate", "1mbit", "burst",
                    "1600", "latency", "50ms"], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run([*tc, "del", "dev", "data0", "root"], check=True, capture_output=True)


def test_compare_knob_difference_passes_host_fact_difference_fails(
        testbed: tb.Testbed, tmp_path: Path) -> None:
    results = tmp_path / "results"
    run_a = run_profile(testbed, tmp_path, KNOB_PROFILE.format(gro=0), "a", results)
    run_b = run_profile(testbed, tmp_path, KNOB_PROFILE.format(gro=20000), "b", results)

    proc = run_napilab("compare", str(run_a), str(run_b), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "intended: rps-off/b: data0/gro_flush_timeout: A '0', B '20000'" in proc.stdout
    assert "B vs A (baseline)" in proc.stdout  # one variant: the labels are the columns
    assert "MISMATCH" not in proc.stdout

    # Documented above: a kernel difference is simulated in the stored copy of run B.
    patched = tmp_path / "patched"
    shutil.copytree(run_b, patched)
    manifest = json.loads((patched / "manifest.json").read_text())
    manifest["host_facts"]["b"]["kernel_release"] += "-patched"
    (patched / "manifest.json").write_text(json.dumps(manifest))
    proc = run_napilab("compare", f"Baseline={run_a}", f"Patched={patched}", timeout=120)
    assert proc.returncode == 2
    assert "differ in more than the knobs under test" in proc.stderr
    assert "b: kernel_release: Baseline" in proc.stderr and "-patched" in proc.stderr
    proc = run_napilab("compare", f"Baseline={run_a}", f"Patched={patched}", "--intended",
                       "kernel", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "intended: b: kernel_release: Baseline" in proc.stdout
    assert proc.stdout.count("Patched vs Baseline (baseline)") == 1
    proc = run_napilab("compare", str(run_a), str(patched), "--allow-mismatch", "--format",
                       "json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [d["key"] for d in doc["confounders"]] == ["kernel_release"]
    assert [d["key"] for d in doc["intended"]] == ["data0/gro_flush_timeout"]
    rtt = next(ln for ln in doc["table"]["lines"] if ln["metric"] == "rtt_avg")
    assert rtt["cells"]["A"]["summary"]["n"] == 2


def test_check_catches_a_real_latency_regression(testbed: tb.Testbed, tmp_path: Path) -> None:
    results = tmp_path / "results"
    run_profile(testbed, tmp_path, GATE_PROFILE, "gate", results)
    with slow_replies(testbed):
        candidate = run_profile(testbed, tmp_path, GATE_PROFILE, "gate", results)
    junit, summary = tmp_path / "gate.xml", tmp_path / "gate.json"
    proc = run_napilab("check", str(candidate), "--baseline", str(results), "--junit", str(junit),
                       "--json", str(summary), timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    root = ET.parse(junit).getroot()
    failed = {case.get("name") for case in root.iter("testcase") if case.find("failure")
              is not None}
    assert "ping.rtt_avg[sender]" in failed
    doc = json.loads(summary.read_text())
    rtt = next(c for c in doc["cases"] if c["metric"] == "rtt_avg")
    assert rtt["status"] == "regression" and rtt["comparison"]["change"] > 1.0
    print(f"\ntbf regression: rtt_avg {rtt['comparison']['change']:+.0%}, "
          f"p(Holm) {rtt['comparison']['p_adjusted']:.3g}")
    # the same runs the other way round: the candidate is the baseline, rtt improves
    baseline_dir = Path(doc["baseline"]["dir"])
    proc = run_napilab("check", str(baseline_dir), "--baseline", str(candidate), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "improvement" in proc.stdout


@pytest.fixture(autouse=True)
def _no_qdisc_left(testbed: tb.Testbed) -> Iterator[None]:
    yield
    netns = next(n.netns for n in testbed.nodes if n.name == "b")
    shown = subprocess.run(["ip", "netns", "exec", netns, "tc", "qdisc", "show", "dev",
                            "data0"], capture_output=True, text=True, check=False).stdout
    assert "tbf" not in shown
