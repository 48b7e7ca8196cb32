"""An interrupted run continues with --resume: SIGINT in the middle of trial 3 of 6,
then `napilab run ... --resume RUN_DIR` runs trials 3-6 only; trials 1-2 stay byte for
byte as they were, and the report renders."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd

from napilab.harness.lab import netns as tb
from napilab.harness.store.store import load_samples
from tests.cli import run_napilab
from tests.conftest import NapilabRuns
from tests.integration.test_faults import PROFILE, knobs, wait_for_workload, wait_no_workload


def digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def wait_for_trial(results: Path, trial: int, run: subprocess.Popen[str]) -> Path:
    """The run directory, once its manifest shows `trial` (1-based) running. A run
    directory appears with its manifest in it; the test reads only what exists."""
    deadline = time.time() + 120
    while time.time() < deadline:
        for manifest in results.glob("*/manifest.json"):
            trials = json.loads(manifest.read_text()).get("trials", [])
            if len(trials) >= trial and trials[trial - 1]["status"] == "running":
                return manifest.parent
        if run.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"trial {trial} never ran: exit {run.poll()}")


def test_sigint_then_resume(testbed: tb.Testbed, tmp_path: Path,
                            napilab_runs: NapilabRuns) -> None:
    wait_no_workload(testbed)
    before = knobs(testbed)
    profile = tmp_path / "resume.yaml"
    profile.write_text(PROFILE.replace("DURATION", "3").replace("REPEAT", "3")
                       .replace("ARGS", "{}").replace("name: faults", "name: resume")
                       + "variants:\n  one: {}\n  two: {setup: {receiver: {rps: {data0: none}}}}\n")
    args = ["run", str(profile), "-i", str(testbed.inventory_path), "-o",
            str(tmp_path / "r"), "--format", "html"]
    run = napilab_runs.start(*args)
    run_dir = wait_for_trial(tmp_path / "r" / "resume", 3, run)
    wait_for_workload(testbed)
    time.sleep(1)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert "--resume" in err
    assert knobs(testbed) == before
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [t["status"] for t in manifest["trials"]] == ["ok", "ok", "interrupted", "pending",
                                                         "pending", "pending"]
    first_two = {k: v for k, v in digest(run_dir / "raw").items() if k[:3] in ("001", "002")}
    rows = load_samples(run_dir)
    assert set(rows["trial"]) == {1, 2}

    resumed = run_napilab(*args, "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [t["status"] for t in manifest["trials"]] == ["ok"] * 6
    assert manifest["status"] == "complete" and len(manifest["resumed"]) == 1
    after = digest(run_dir / "raw")
    assert {k: v for k, v in after.items() if k[:3] in ("001", "002")} == first_two
    assert {k[:3] for k in after} == {"001", "002", "003", "004", "005", "006"}
    final = load_samples(run_dir)
    assert sorted(set(final["trial"])) == [1, 2, 3, 4, 5, 6]
    pd.testing.assert_frame_equal(final[final["trial"] <= 2].reset_index(drop=True),
                                  rows.reset_index(drop=True))
    assert "two" in (run_dir / "report.html").read_text()
    assert knobs(testbed) == before

    again = run_napilab(*args, "--resume", str(run_dir))
    assert again.returncode == 2 and "nothing to resume" in again.stderr
    changed = tmp_path / "changed.yaml"
    changed.write_text(profile.read_text().replace("duration: 3", "duration: 4"))
    refused = run_napilab("run", str(changed), "-i", str(testbed.inventory_path),
                          "--resume", str(run_dir))
    assert refused.returncode == 2 and "the profile changed" in refused.stderr
