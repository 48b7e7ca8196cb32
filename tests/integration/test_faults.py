"""Hosts come back after every fault: a failing workload, SIGINT mid-workload, the
sshd of a host killed mid-trial and restarted, napilab SIGKILLed (then `napilab
restore`), and a second run on locked hosts is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab
from tests.conftest import NapilabRuns, comm, netns_pids, sysfs, workload_pings

PROFILE = """\
name: faults
hosts:
  sender: {host: a}
  receiver: {host: b}
setup:
  receiver:
    netdev: {data0: {gro_flush_timeout: 30000, napi_defer_hard_irqs: 3}}
    rps: {data0: "1"}
workload:
  tool: ping
  duration: DURATION
  client: {role: sender, cpus: "0", args: ARGS}
  server: {role: receiver}
collect:
  softnet_stat: {roles: [receiver]}
repeat: REPEAT
"""
KNOBS = ("gro_flush_timeout", "napi_defer_hard_irqs", "queues/rx-0/rps_cpus")


def knobs(bed: tb.Testbed) -> dict[str, str]:
    return {k: sysfs(bed, "b", k) for k in KNOBS}


def profile(tmp_path: Path, duration: float = 6, repeat: int = 1, args: str = "{}") -> Path:
    path = tmp_path / "faults.yaml"
    path.write_text(PROFILE.replace("DURATION", str(duration)).replace("REPEAT", str(repeat))
                    .replace("ARGS", args))
    return path


def start_run(runs: NapilabRuns, tmp_path: Path, prof: Path,
              *extra: str) -> subprocess.Popen[str]:
    # an earlier test's ping would pass for this run's workload in wait_for_workload
    wait_no_workload(runs.bed)
    return runs.start("run", str(prof), "-i", str(runs.bed.inventory_path), "-o",
                      str(tmp_path / "results"), "--format", "", *extra)


def wait_for_workload(bed: tb.Testbed, timeout: float = 30) -> None:
    """Until a ping flood runs inside namespace a (settings are applied by then). Tests
    start only when no earlier ping is left (see wait_no_workload)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if workload_pings(bed, "a"):
            return
        time.sleep(0.05)
    raise AssertionError("the workload never started")


def wait_no_workload(bed: tb.Testbed, timeout: float = 90) -> None:
    """A SIGKILLed napilab leaves its client running until its `timeout` wrapper ends
    it (the bound on every workload process); wait for that."""
    deadline = time.time() + timeout
    while workload_pings(bed, "a"):
        assert time.time() < deadline, "a workload outlived its timeout wrapper"
        time.sleep(0.2)


def manifest(tmp_path: Path) -> dict[str, object]:
    run_dir = next((tmp_path / "results" / "faults").iterdir())
    return json.loads((run_dir / "manifest.json").read_text())  # type: ignore[no-any-return]


def test_failing_workload_keep_going(testbed: tb.Testbed, tmp_path: Path) -> None:
    before = knobs(testbed)
    proc = run_napilab("run", str(profile(tmp_path, 1, 2, "{preload: 100000}")), "-i",
                       str(testbed.inventory_path), "-o", str(tmp_path / "results"),
                       "--keep-going", "--format", "html", timeout=120)
    assert proc.returncode == 4, proc.stderr
    assert knobs(testbed) == before
    doc = manifest(tmp_path)
    trials = doc["trials"]
    assert isinstance(trials, list) and [t["status"] for t in trials] == ["failed", "failed"]
    assert "ping failed" in trials[0]["error"]
    # ping's own complaint (its stderr) is in the error
    assert "invalid argument: '100000'" in trials[0]["error"]
    assert doc["status"] == "partial"
    run_dir = next((tmp_path / "results" / "faults").iterdir())
    html = (run_dir / "report.html").read_text()
    assert "2 trial(s) failed" in html and "invalid argument: &#39;100000&#39;" in html


def test_sigint_mid_workload_restores_and_exits_130(testbed: tb.Testbed, tmp_path: Path,
                                                    napilab_runs: NapilabRuns) -> None:
    before = knobs(testbed)
    run = start_run(napilab_runs, tmp_path, profile(tmp_path, 20))
    wait_for_workload(testbed)
    assert knobs(testbed) != before  # applied
    started = time.time()
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert time.time() - started < 15, "restore took too long after SIGINT"
    assert knobs(testbed) == before
    doc = manifest(tmp_path)
    assert doc["status"] == "interrupted" and doc["incomplete"] is True
    left = netns_pids(testbed, "a")
    assert [p for p in left if comm(p) != "sshd"] == [], "the workload outlived the run"


def _sshd_pids(bed: tb.Testbed, node: str) -> list[str]:
    return [p for p in netns_pids(bed, node) if comm(p) == "sshd"]


def test_sshd_killed_mid_trial_and_restarted(testbed: tb.Testbed, tmp_path: Path,
                                             napilab_runs: NapilabRuns) -> None:
    before = knobs(testbed)
    run = start_run(napilab_runs, tmp_path, profile(tmp_path, 6))
    wait_for_workload(testbed)
    for pid in _sshd_pids(testbed, "b"):  # the listener and the live session: a real drop
        os.kill(int(pid), signal.SIGKILL)
    time.sleep(1.5)
    node = testbed.state / "b"
    subprocess.run(["ip", "netns", "exec", f"{testbed.prefix}-b", "/usr/sbin/sshd", "-f",
                    str(node / "sshd_config"), "-E", str(node / "sshd.log")], check=True)
    _, err = run.communicate(timeout=120)
    assert knobs(testbed) == before, err
    # the SSH transport reconnects with backoff: the trial completes and restores
    assert run.returncode == 0, err
    doc = manifest(tmp_path)
    assert doc["status"] == "complete"


def test_sigkill_then_restore_and_stale_lock(testbed: tb.Testbed, tmp_path: Path,
                                             napilab_runs: NapilabRuns) -> None:
    before = knobs(testbed)
    run = start_run(napilab_runs, tmp_path, profile(tmp_path, 20))
    wait_for_workload(testbed)
    run.kill()
    run.communicate(timeout=30)
    assert knobs(testbed) != before  # nobody restored them
    second = run_napilab("run", str(profile(tmp_path, 1)), "-i",
                         str(testbed.inventory_path), "-o", str(tmp_path / "results2"), timeout=60)
    assert second.returncode == 1
    assert "which is no longer running" in second.stderr
    assert "napilab restore" in second.stderr
    assert knobs(testbed) != before  # the refused run touched nothing
    restore = run_napilab("restore", "-i", str(testbed.inventory_path), timeout=60)
    assert restore.returncode == 0, restore.stderr
    assert "b: restored 3 setting(s)" in restore.stdout
    assert "removed the stale lock" in restore.stdout
    assert knobs(testbed) == before
    wait_no_workload(testbed)


def test_concurrent_run_is_refused(testbed: tb.Testbed, tmp_path: Path,
                                   napilab_runs: NapilabRuns) -> None:
    wait_no_workload(testbed)
    before = knobs(testbed)
    first = start_run(napilab_runs, tmp_path, profile(tmp_path, 20))
    try:
        wait_for_workload(testbed)
        second = run_napilab("run", str(profile(tmp_path, 1)), "-i",
                             str(testbed.inventory_path), "-o", str(tmp_path / "other"), timeout=60)
        assert second.returncode == 1
        assert "locked by run" in second.stderr and "one napilab run per host" in second.stderr
        assert not (tmp_path / "other").exists()
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert knobs(testbed) == before


@pytest.mark.parametrize("bad", [
    "net.core.busy_poll;reboot", "net.core.$(reboot)", "net.core.`id`", "net.core.'x'",
    "net.core.busy poll", "net.core.busy\\npoll"])
def test_injection_in_names_is_refused(bad: str, tmp_path: Path) -> None:
    text = PROFILE.replace("DURATION", "1").replace("REPEAT", "1").replace("ARGS", "{}")
    text = text.replace("    rps: {data0: \"1\"}\n", f"    sysctl: {{\"{bad}\": 1}}\n")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    proc = run_napilab("validate", str(path))
    assert proc.returncode == 2, proc.stderr
    if "\\n" in bad:  # a newline is refused wherever it is, before the name is checked
        assert "bad.yaml:8:14: setup.receiver.sysctl.net.core.busy\\npoll: the key " \
            "'net.core.busy\\npoll' contains a control character" in proc.stderr
    else:
        assert "is not a sysctl name" in proc.stderr


@pytest.mark.parametrize("value", ["1;reboot", "$(id)", "`id`", "'1'", "1 2", "1\\n2"])
def test_injection_in_values_is_refused(value: str, tmp_path: Path) -> None:
    text = PROFILE.replace("DURATION", "1").replace("REPEAT", "1").replace("ARGS", "{}")
    text = text.replace("    rps: {data0: \"1\"}\n",
                        f"    sysctl: {{net.core.busy_read: \"{value}\"}}\n"
                        f"    napi: {{\"data0;x\": {{defer-hard-irqs: \"{value}\"}}}}\n"
                        f"    xps: {{data0: \"{value}\"}}\n")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    proc = run_napilab("validate", str(path))
    assert proc.returncode == 2, proc.stderr
    assert "setup.receiver.sysctl.net.core.busy_read" in proc.stderr
    if "\\n" in value:  # refused as it is read, with its place, before any other check
        assert "bad.yaml:9:41: setup.receiver.napi.data0;x.defer-hard-irqs: '1\\n2' " \
            "contains a control character" in proc.stderr
        assert "bad.yaml:10:18: setup.receiver.xps.data0: '1\\n2'" in proc.stderr
        return
    assert "setup.receiver.napi.data0;x: 'data0;x' is not an interface name" in proc.stderr
    assert "bad.yaml:10:18: setup.receiver.xps.data0: " in proc.stderr  # the short form's key


def test_a_cpu_the_host_lacks_is_refused_before_the_first_trial(
        testbed: tb.Testbed, tmp_path: Path) -> None:
    """The inventory says nothing of b's CPUs; its online CPUs (0-1 here) are read when
    the run starts. An RPS CPU 63 in the second variant: exit 2 before the first trial
    (it was refused only when that variant's first trial applied, after trial 1 ran,
    as the mask 8000000000000000), the CPU quoted as the profile wrote it, nothing
    changed on b, no run directory left."""
    before = knobs(testbed)
    prof = tmp_path / "faults.yaml"
    prof.write_text(PROFILE.replace("DURATION", "1").replace("REPEAT", "1")
                    .replace("ARGS", "{}") + "variants:\n  near: {}\n"
                    "  far: {setup: {receiver: {rps: {data0: \"63\"}}}}\n")
    proc = run_napilab("run", str(prof), "-i", str(testbed.inventory_path),
                       "-o", str(tmp_path / "results"), "--format", "", timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{prof}:19:41: variants.far.setup.receiver.rps.data0: " in proc.stderr
    assert "CPU 63 ('63') is not online on b (online: 0-1)" in proc.stderr
    assert "8000000000000000" not in proc.stderr
    assert knobs(testbed) == before
    assert list((tmp_path / "results").iterdir()) == []  # no run directory is left
