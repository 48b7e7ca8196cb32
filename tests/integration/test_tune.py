"""`napilab tune` on the SSH testbed: a study over b's RPS x napi_defer_hard_irqs x
gro_flush_timeout (sockperf ping-pong, 1 s candidates), SIGKILLed while a candidate's
settings are applied, `napilab restore` puts b back, `tune --resume` measures that
candidate again and finishes (budget, confirmation, report, recommended.yaml when one
is confirmed); a candidate that breaks the workload stops the search with b restored."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab
from tests.conftest import NapilabRuns, sysfs

PROFILE = """\
name: tune-it
hosts: {client: {host: a}, server: {host: b}}
workload:
  tool: sockperf.ping-pong
  duration: 1
  client: {role: client, cpus: "0", args: {m: "${size}"}}
  server: {role: server, cpus: "1"}
collect: {proc_stat: {roles: [server]}}
variants:
  default: {}
  tuned:
    setup:
      server:
        rps: {"${iface}": "${rps}"}
        netdev: {"${iface}": {napi_defer_hard_irqs: "${defer}", gro_flush_timeout: "${gro}"}}
    workload: {client: {args: {m: "${size}"}}}
baseline: default
repeat: 3
tune:
  parameters:
    rps: [none, "1"]
    defer: [0, 3]
    gro: [0, 30000]
    size: SIZES
  goal: {minimise: latency_p99, subject_to: {busy_cores: 2}}
  budget: {trials: 4}
  duration: 1
  confirm: {top: 2}
  seed: 3
"""
KNOBS = ("gro_flush_timeout", "napi_defer_hard_irqs", "queues/rx-0/rps_cpus")

pytestmark = pytest.mark.skipif(shutil.which("sockperf") is None,
                                reason="sockperf is not installed")


def knobs(bed: tb.Testbed) -> dict[str, str]:
    return {k: sysfs(bed, "b", k) for k in KNOBS}


def write(tmp_path: Path, sizes: str) -> Path:
    path = tmp_path / "tune-it.yaml"
    text = PROFILE.replace("SIZES", sizes)
    # the baseline's messages are the size the template's first choice has
    path.write_text(text.replace('args: {m: "${size}"}}\n  server', 'args: {m: 64}}\n  server',
                                 1))
    return path


def study_state(results: Path) -> tuple[Path, dict[str, object]] | None:
    found = sorted(results.glob("tune-it/tune-*/tune.json"))
    if not found:
        return None
    try:
        return found[0].parent, json.loads(found[0].read_text())
    except ValueError:  # never: it is written whole (atomic_write); say so if it is not
        raise AssertionError(f"{found[0]} is not whole JSON") from None


def test_a_killed_study_is_restored_and_resumed(testbed: tb.Testbed, tmp_path: Path,
                                                napilab_runs: NapilabRuns) -> None:
    prof, inv, results = write(tmp_path, "[64]"), str(testbed.inventory_path), tmp_path / "r"
    before = knobs(testbed)
    dry = run_napilab("tune", str(prof), "-i", inv, "--dry-run", timeout=600)
    assert dry.returncode == 0, dry.stderr
    assert "space: 8 points" in dry.stdout and "budget: 4 candidates" in dry.stdout
    assert not results.exists()  # the dry run touched nothing
    proc = napilab_runs.start("tune", str(prof), "-i", inv, "-o", str(results))
    deadline = time.time() + 300
    killed_at = None
    while time.time() < deadline and proc.poll() is None:
        found = study_state(results)
        if found:
            cands = found[1]["candidates"]
            assert isinstance(cands, list)
            ok = [c for c in cands if c["state"] == "ok"]
            running = [c for c in cands if c["state"] == "running" and c["run"]]
            if len(ok) >= 1 and running:
                time.sleep(1.2)  # its settings are applied, its trial runs
                proc.kill()
                killed_at = running[0]["number"]
                break
        time.sleep(0.1)
    proc.communicate(timeout=30)
    assert killed_at is not None, "the study never reached its second candidate"
    restore = run_napilab("restore", "-i", inv, timeout=120)
    assert restore.returncode == 0, restore.stderr
    assert knobs(testbed) == before
    found = study_state(results)
    assert found is not None
    study, _ = found
    resumed = run_napilab("tune", str(prof), "-i", inv, "--resume", str(study), "--quiet",
                          timeout=600)
    assert resumed.returncode in (0, 5), resumed.stderr
    assert f"candidate t{killed_at:03d} was running when the study stopped" in resumed.stderr
    assert knobs(testbed) == before
    _, state = study_state(results) or (None, {})
    cands = state["candidates"]
    assert isinstance(cands, list)
    assert sum(1 for c in cands if c["state"] == "ok") == 4
    assert [c["state"] for c in cands if c["number"] == killed_at] == ["interrupted"]
    again = next(c for c in cands if c["number"] == killed_at + 1)
    killed = next(c for c in cands if c["number"] == killed_at)
    assert again["values"] == killed["values"]  # the same point, measured again
    confirmation = state["confirmation"]
    assert isinstance(confirmation, dict) and len(confirmation["verdicts"]) >= 1
    text = (study / "tune.txt").read_text()
    assert "Confirmation (re-measured" in text
    if resumed.returncode == 0:  # a candidate was confirmed better: it runs as written
        assert (study / "recommended.yaml").exists()
        valid = run_napilab("validate", str(study / "recommended.yaml"), timeout=600)
        assert valid.returncode == 0, valid.stderr
    else:
        assert "none is recommended" in resumed.stderr
        assert not (study / "recommended.yaml").exists()


def test_a_candidate_that_breaks_the_workload_stops_the_search(testbed: tb.Testbed,
                                                               tmp_path: Path) -> None:
    """A message larger than UDP takes: sockperf refuses it (and exits 0, printing its
    usage), the trial fails, the search stops at that candidate with b restored."""
    prof, inv, results = write(tmp_path, "[70000]"), str(testbed.inventory_path), tmp_path / "r"
    before = knobs(testbed)
    done = run_napilab("tune", str(prof), "-i", inv, "-o", str(results), timeout=600)
    assert done.returncode == 1, done.stderr
    assert "broke the workload" in done.stderr and "the search stopped" in done.stderr
    assert "Traceback" not in done.stderr
    assert knobs(testbed) == before
    found = study_state(results)
    assert found is not None
    _, state = found
    cands = state["candidates"]
    assert isinstance(cands, list) and [c["state"] for c in cands] == ["broken"]
    assert isinstance(state["stopped"], dict) and state["stopped"]["candidate"] == "t000"
