"""An interrupted run continues with --resume: SIGINT in the middle of trial 3 of 6,
then `napilab run ... --resume RUN_DIR` runs trials 3-6 only; trials 1-2 stay byte for
byte as they were, and the report renders."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from harness.hosts import testbed as tb
from tests.integration.test_faults import PROFILE, knobs, wait_for_workload, wait_no_workload

NAPILAB = str(Path(sys.executable).parent / "napilab")


def digest(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_sigint_then_resume(testbed: tb.Testbed, tmp_path: Path) -> None:
    wait_no_workload(testbed)
    before = knobs(testbed)
    profile = tmp_path / "resume.yaml"
    profile.write_text(PROFILE.replace("DURATION", "3").replace("REPEAT", "3")
                       .replace("ARGS", "{}").replace("name: faults", "name: resume")
                       + "variants:\n  one: {}\n  two: {setup: {receiver: {rps: {data0: none}}}}\n")
    args = [NAPILAB, "run", str(profile), "-i", str(testbed.inventory_path), "-o",
            str(tmp_path / "r"), "--format", "html"]
    run = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_dir = None
    deadline = time.time() + 120
    while time.time() < deadline:  # until trial 3 is running its workload
        dirs = list((tmp_path / "r" / "resume").glob("*")) if (tmp_path / "r").exists() else []
        if dirs:
            run_dir = dirs[0]
            trials = json.loads((run_dir / "manifest.json").read_text()).get("trials", [])
            if len(trials) == 6 and trials[2]["status"] == "running":
                break
        time.sleep(0.1)
    else:
        run.kill()
        raise AssertionError(f"trial 3 never ran: {run.communicate()}")
    assert run_dir is not None
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
    rows = pd.read_parquet(run_dir / "samples.parquet")
    assert set(rows["trial"]) == {1, 2}

    resumed = subprocess.run([*args, "--resume", str(run_dir)], capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [t["status"] for t in manifest["trials"]] == ["ok"] * 6
    assert manifest["status"] == "complete" and len(manifest["resumed"]) == 1
    after = digest(run_dir / "raw")
    assert {k: v for k, v in after.items() if k[:3] in ("001", "002")} == first_two
    assert {k[:3] for k in after} == {"001", "002", "003", "004", "005", "006"}
    final = pd.read_parquet(run_dir / "samples.parquet")
    assert sorted(set(final["trial"])) == [1, 2, 3, 4, 5, 6]
    pd.testing.assert_frame_equal(final[final["trial"] <= 2].reset_index(drop=True),
                                  rows.reset_index(drop=True))
    assert "two" in (run_dir / "report.html").read_text()
    assert knobs(testbed) == before

    again = subprocess.run([*args, "--resume", str(run_dir)], capture_output=True, text=True)
    assert again.returncode == 2 and "nothing to resume" in again.stderr
    changed = tmp_path / "changed.yaml"
    changed.write_text(profile.read_text().replace("duration: 3", "duration: 4"))
    refused = subprocess.run([NAPILAB, "run", str(changed), "-i", str(testbed.inventory_path),
                              "--resume", str(run_dir)], capture_output=True, text=True)
    assert refused.returncode == 2 and "the profile changed" in refused.stderr
