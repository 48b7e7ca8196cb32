"""`napilab run --wait-lock DURATION --wait-quiet LOAD[,STEAL]` on the real SSH testbed
(harness.hosts.waits): a run that finds the hosts locked by another live run waits for
it, says so once, runs when the lock is released and records both waits in its
manifest; one whose wait is shorter than the other run fails as without the option,
touching nothing. The first run is always stopped (SIGINT: it restores its hosts) by the
napilab_runs fixture, whatever the test did."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab
from tests.conftest import NapilabRuns
from tests.integration.test_faults import knobs, profile, start_run, wait_for_workload


def _second(testbed: tb.Testbed, tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    where = tmp_path / "second"
    where.mkdir()
    done = run_napilab("run", str(profile(where, 1)), "-i", str(testbed.inventory_path),
                       "-o", str(where / "results"), "--format", "", *args, timeout=120)
    return done.returncode, done.stderr, where / "results"


def test_a_run_waits_for_the_lock_and_records_its_waits(
        testbed: tb.Testbed, tmp_path: Path, napilab_runs: NapilabRuns) -> None:
    before = knobs(testbed)
    # 6 s, not 2: a loaded make test's second napilab took over 2 s from its start to
    # its lock check, found the first run gone and never waited (a clean clone's run)
    first = start_run(napilab_runs, tmp_path, profile(tmp_path, 6))
    wait_for_workload(testbed)
    started = time.monotonic()
    code, err, results = _second(testbed, tmp_path, "--wait-lock", "60",
                                 "--wait-quiet", "1000,100")
    assert code == 0, err
    assert first.wait(timeout=30) == 0
    assert err.count("waiting up to 60 s for the hosts' locks: ") == 1
    (run_dir,) = (results / "faults").iterdir()
    doc = json.loads((run_dir / "manifest.json").read_text())
    lock, quiet = doc["waits"]
    first_id = json.loads(next((tmp_path / "results" / "faults").iterdir())
                          .joinpath("manifest.json").read_text())["run_id"]
    assert lock["what"] == "lock" and f"locked by run {first_id}" in lock["reason"]
    assert 0.5 < lock["seconds"] < time.monotonic() - started and lock["max_seconds"] == 60
    assert quiet["what"] == "quiet" and "reason" not in quiet  # it did not wait
    assert quiet["limits"] == {"load1": 1000.0, "steal_pct": 100.0}
    assert set(quiet["hosts"]) == {"a", "b"}
    assert all(set(r) == {"load1", "steal_pct"} for r in quiet["hosts"].values())
    assert doc["status"] == "complete" and knobs(testbed) == before


def test_a_wait_shorter_than_the_other_run_fails_as_before(
        testbed: tb.Testbed, tmp_path: Path, napilab_runs: NapilabRuns) -> None:
    before = knobs(testbed)
    start_run(napilab_runs, tmp_path, profile(tmp_path, 20))
    wait_for_workload(testbed)
    started = time.monotonic()
    code, err, results = _second(testbed, tmp_path, "--wait-lock", "1s")
    assert code == 1, err
    assert 1 <= time.monotonic() - started < 15
    assert err.count("waiting up to 1.0 s for the hosts' locks") == 1
    assert re.search(r"locked by run \w+ .*\(waited [01]\.[0-9] s: --wait-lock 1\)", err), err
    assert not results.exists()
    napilab_runs.stop_all()
    assert knobs(testbed) == before
