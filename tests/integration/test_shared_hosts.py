"""Faults around a run on the real SSH testbed (issue 14 items 7, 8, 10, 12, 13, 15):
a command interrupted on the persistent shell, a host unreachable at the end (its
management link down), secrets in a workload's env, a full results disk (a small
tmpfs), a resume on a host that changed, and the suite beside a `napilab testbed`.
Each test names the fault, the end state of every knob and lock and the exit code, and
undoes what it did (link up, tmpfs unmounted, runs stopped) even when it fails."""

from __future__ import annotations

import _thread
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from napilab.harness.errors import HostError
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.lab import netns as tb
from napilab.harness.transport.ssh import SSHTransport
from tests.cli import run_napilab
from tests.conftest import (
    TESTBED_PREFIX,
    NapilabRuns,
    napilab_leftovers,
    sysfs,
    workload_pings,
)

PROFILE = """\
name: shared
hosts:
  sender: {host: b}
  receiver: {host: a}
setup:
  receiver:
    netdev: {data0: {gro_flush_timeout: 30000, napi_defer_hard_irqs: 3}}
  sender:
    netdev: {data0: {gro_flush_timeout: 40000}}
workload:
  tool: ping
  duration: DURATION
  client: {role: sender}
  server: {role: receiver}
repeat: REPEAT
"""
KNOBS = ("gro_flush_timeout", "napi_defer_hard_irqs")


def knobs(bed: tb.Testbed) -> dict[str, dict[str, str]]:
    return {node: {k: sysfs(bed, node, k) for k in KNOBS} for node in ("a", "b")}


def profile(tmp_path: Path, duration: float = 2, repeat: int = 1) -> Path:
    path = tmp_path / "shared.yaml"
    path.write_text(PROFILE.replace("DURATION", str(duration)).replace("REPEAT", str(repeat)))
    return path


def manifest_of(results: Path) -> tuple[Path, dict[str, object]]:
    run_dir = next(p for p in (results / "shared").iterdir() if not p.name.startswith("."))
    return run_dir, json.loads((run_dir / "manifest.json").read_text())


def wait_trial(results: Path, trial: int, run: subprocess.Popen[str]) -> Path:
    deadline = time.time() + 120
    while time.time() < deadline and run.poll() is None:
        for path in (results / "shared").glob("[!.]*/manifest.json"):
            trials = json.loads(path.read_text()).get("trials") or []
            if len(trials) >= trial and trials[trial - 1]["status"] == "running":
                return path.parent
        time.sleep(0.05)
    raise AssertionError(f"trial {trial} never ran: {run.poll()}")


def wait_ping(bed: tb.Testbed, node: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not workload_pings(bed, node):
        assert time.time() < deadline, "the workload never started"
        time.sleep(0.05)


# -- item 7 ------------------------------------------------------------------------------


def test_interrupted_command_retires_the_persistent_shell(testbed: tb.Testbed) -> None:
    """Fault: KeyboardInterrupt while a command runs on the host's persistent shell.
    Expected: the next command reads its own output only (napilab 0.1 read the
    interrupted command's output as the next one's), on a fresh shell. No knob or lock
    is involved; in `napilab run` the interrupt ends in a restore and exit 130
    (tests/integration/test_faults.py)."""
    transport = SSHTransport(load_inventory(testbed.inventory_path).hosts["b"])
    timer = threading.Timer(0.5, _thread.interrupt_main)
    try:
        transport.run(["true"])
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            transport.run(["sh", "-c", "sleep 2; echo first"], timeout=30)
        assert transport.run(["echo", "second"]).stdout == "second\n"
        time.sleep(2)  # the interrupted command ends on the host meanwhile
        assert transport.run(["echo", "third"]).stdout == "third\n"
    finally:
        timer.cancel()
        transport.close()


def test_the_persistent_shell_runs_commands_as_env_would(testbed: tb.Testbed) -> None:
    """The persistent shell runs `env K=V cmd` as the shell's `K=V cmd` (no env exec):
    every value reaches the command unchanged (spaces, quotes, $, newlines), the
    locale is C, a name sh runs itself (echo, kill) still runs the real program, and
    no assignment stays behind in the shell for the next command."""
    transport = SSHTransport(load_inventory(testbed.inventory_path).hosts["b"])
    odd = "a b 'c' \"d\" $HOME `x` \\n\nline2"
    try:
        result = transport.run(["sh", "-c", 'printf "%s|%s" "$ODD" "$LC_ALL"'],
                               env={"ODD": odd})
        assert result.stdout == f"{odd}|C"
        assert transport.run(["echo", "a\\nb"]).stdout == "a\\nb\n"  # /bin/echo's
        assert transport.run(["sh", "-c", 'printf "[%s]" "${ODD-unset}"']).stdout \
            == "[unset]"
        missing = transport.run(["napilab-no-such-command"], check=False)
        assert missing.exit_code == 127
    finally:
        transport.close()


def test_the_persistent_shell_reads_both_streams_whole_and_survives_a_timeout_and_a_kill(
        testbed: tb.Testbed) -> None:
    """The shell's output is read by the calling thread, woken by the channel's event
    pipe (harness.transport.ssh_shell): 3 MB of stdout interleaved with 300 kB of stderr
    arrive whole and apart, with the exit code; a command past its timeout is an error
    and the next command runs on a fresh shell with its own output; a shell killed on
    the host is a dropped connection, and the next command opens another."""
    transport = SSHTransport(load_inventory(testbed.inventory_path).hosts["b"])
    script = ('i=0; while [ $i -lt 3000 ]; do printf "%01023d\\n" $i; '
              '[ $((i % 10)) = 0 ] && printf "%01023d\\n" $i >&2; i=$((i+1)); done; exit 3')
    try:
        result = transport.run(["sh", "-c", script], check=False)
        assert result.exit_code == 3
        out, err = result.stdout.splitlines(), result.stderr.splitlines()
        assert len(result.stdout) == 3000 * 1024 and len(result.stderr) == 300 * 1024
        assert out[0] == f"{0:01023d}" and out[-1] == f"{2999:01023d}"
        assert err[-1] == f"{2990:01023d}" and len(err) == 300
        with pytest.raises(HostError, match="timed out after 1s"):
            transport.run(["sh", "-c", "sleep 3; echo late"], timeout=1)
        assert transport.run(["echo", "fresh"]).stdout == "fresh\n"
        shell = transport.run(["sh", "-c", "echo $PPID"]).stdout.strip()
        with pytest.raises(HostError, match="connection dropped"):
            transport.run(["sh", "-c", f"kill -KILL {shell}; sleep 5"], timeout=30)
        assert transport.run(["echo", "again"]).stdout == "again\n"
    finally:
        transport.close()


# -- item 8 ------------------------------------------------------------------------------


def test_host_unreachable_at_the_end(testbed: tb.Testbed, tmp_path: Path,
                                     napilab_runs: NapilabRuns) -> None:
    """Fault: host a's management link goes down during the workload and stays down.
    Expected: exit 1 with the `napilab restore` hint; b restored and unlocked; a keeps
    its changed knobs, its journal and its lock (named on stderr); the report is written.
    Once the link is back, `napilab restore` restores a and clears its lock (exit 0).
    The inventory's `connect_timeout: 2` bounds each wait on the dead link (the
    unacknowledged command, the new channel, each reconnect) to 2 s instead of 10 s and
    a command's 60 s timeout."""
    before = knobs(testbed)
    node = testbed.nodes[0]
    results = tmp_path / "results"
    run = napilab_runs.start("run", str(profile(tmp_path, duration=4)), "-i",
                             str(quick_inventory(testbed, tmp_path)), "-o", str(results))
    try:
        wait_ping(testbed, "b")
        subprocess.run(["ip", "link", "set", node.mgmt_root, "down"], check=True)
        _, err = run.communicate(timeout=300)
    finally:
        subprocess.run(["ip", "link", "set", node.mgmt_root, "up"], check=True)
    assert run.returncode == 1, err
    assert "restore incomplete" in err and "napilab restore" in err
    assert "a: lock kept (cannot reach the host" in err
    now = knobs(testbed)
    assert now["b"] == before["b"] and now["a"] != before["a"]
    left = napilab_leftovers()
    assert [n for n in left if n.startswith("lock-")] and \
        [n for n in left if n.startswith("journal-") and n.endswith("-a.json")]
    run_dir, manifest = manifest_of(results)
    assert manifest["status"] == "failed"
    assert (run_dir / "report.html").exists()
    time.sleep(1)  # the link is up: routes back
    restore = run_napilab("restore", "-i", str(testbed.inventory_path), timeout=120)
    assert restore.returncode == 0, restore.stdout + restore.stderr
    assert "a: restored 2 setting(s)" in restore.stdout and "removed the stale lock" in \
        restore.stdout
    assert knobs(testbed) == before and napilab_leftovers() == []


def test_host_unreachable_before_its_settings(testbed: tb.Testbed, tmp_path: Path,
                                              napilab_runs: NapilabRuns) -> None:
    """Fault: host a's management link goes down after the run read every host's facts
    and before it applies a's settings (the order CI once hit by taking `ping -V` for the
    workload). Expected: exit 1 on the trial's own error, not on the end-of-run check
    that cannot read a again (that is said: its reboot is unknown); nothing changed on
    either host; a keeps its lock (named on stderr) until `napilab restore` clears it.
    The root namespace's unreachable route for the testbed's /29 fails the reconnects at
    once: nothing leaves the machine by the default route."""
    before = knobs(testbed)
    node = testbed.nodes[0]
    run = napilab_runs.start("run", str(profile(tmp_path, duration=1)), "-i",
                             str(quick_inventory(testbed, tmp_path)), "-o",
                             str(tmp_path / "results"), "--format", "")
    assert run.stderr is not None
    err = ""
    try:
        for line in run.stderr:  # the run's first line: facts read, no trial begun
            err += line
            if " trials -> " in line:
                subprocess.run(["ip", "link", "set", node.mgmt_root, "down"], check=True)
                break
        route = subprocess.run(["ip", "route", "get", node.mgmt_address], capture_output=True,
                               text=True, check=False)
        err += run.communicate(timeout=300)[1]
    finally:
        subprocess.run(["ip", "link", "set", node.mgmt_root, "up"], check=True)
    assert route.returncode != 0 and "No route to host" in route.stderr, route
    assert run.returncode == 1, err
    assert "napilab: error: trial failed: a: " in err, err
    assert "host a could not be read at the end of the run" in err
    assert "a: lock kept (cannot reach the host" in err
    assert knobs(testbed) == before
    assert [n for n in napilab_leftovers() if n.startswith("lock-")]
    time.sleep(1)  # the link is up: routes back
    restore = run_napilab("restore", "-i", str(testbed.inventory_path), timeout=120)
    assert restore.returncode == 0, restore.stdout + restore.stderr
    assert napilab_leftovers() == []


def quick_inventory(bed: tb.Testbed, tmp_path: Path) -> Path:
    """The testbed's inventory with `connect_timeout: 2`: each wait on a dead link (the
    unacknowledged command, the new channel, each reconnect) takes 2 s instead of 10 s
    and a command's 60 s timeout."""
    inventory = yaml.safe_load(bed.inventory_path.read_text())
    for host in inventory["hosts"].values():
        host["connect_timeout"] = 2
    quick = tmp_path / "inventory.yaml"
    quick.write_text(yaml.safe_dump(inventory))
    return quick


# -- item 10 -----------------------------------------------------------------------------

SECRET = "s3cr3t-TOKEN-4242"
SECRETS = """\
name: secrets
hosts: {sender: {host: b}}
workload:
  tool: command
  client:
    role: sender
    env: {API_TOKEN: SECRET, EF_POLL_USEC: 100000}
    show_env: [EF_POLL_USEC]
    args:
      argv: [sh, -c, 'echo token_length=${#API_TOKEN} poll=$EF_POLL_USEC']
      metrics:
        token_length: {regex: 'token_length=(\\d+)', unit: count}
        poll: {regex: 'poll=(\\d+)', unit: us}
  duration: 1
repeat: 1
"""


def test_env_values_are_secrets_unless_shown(testbed: tb.Testbed, tmp_path: Path) -> None:
    """Fault: a token in a workload's env. Expected: the command gets it (it measures
    its length), and neither the run directory (manifest, raw records, every report
    format), `napilab plan` nor a published site holds it; EF_POLL_USEC, listed in
    show_env, is shown. Exit 0 throughout."""
    prof = tmp_path / "secrets.yaml"
    prof.write_text(SECRETS.replace("SECRET", SECRET))
    results = tmp_path / "results"
    run = run_napilab("run", str(prof), "-i", str(testbed.inventory_path), "-o", str(results),
                      "--format", "html,md,json,junit,text")
    assert run.returncode == 0, run.stderr
    plan = run_napilab("plan", str(prof), "-i", str(testbed.inventory_path))
    plan_json = run_napilab("plan", str(prof), "-i", str(testbed.inventory_path), "--json")
    site = run_napilab("publish", str(results), str(tmp_path / "site"), "--raw", "copy")
    for proc in (plan, plan_json, site):
        assert proc.returncode == 0, proc.stderr
        assert SECRET not in proc.stdout + proc.stderr
    assert "'API_TOKEN=<redacted>'" in plan.stdout and "EF_POLL_USEC=100000" in plan.stdout
    run_dir = next((results / "secrets").iterdir())
    files = [p for p in (*run_dir.rglob("*"), *(tmp_path / "site").rglob("*")) if p.is_file()]
    assert len(files) > 10
    assert [p for p in files if SECRET.encode() in p.read_bytes()] == []
    samples = run_napilab("report", str(run_dir), "--format", "text", check=True).stdout
    assert SECRET not in samples
    record = json.loads((run_dir / "raw" / "001" / "b" / "client.json").read_text())
    assert "API_TOKEN=<redacted>" in record["argv"] and "EF_POLL_USEC=100000" in record["argv"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    env = manifest["profile"]["document"]["workload"]["client"]["env"]
    assert env == {"API_TOKEN": "<redacted>", "EF_POLL_USEC": 100000}
    from napilab.harness.store.store import load_samples

    values = load_samples(run_dir).set_index("metric")["value"]
    assert values["token_length"] == len(SECRET) and values["poll"] == 100000


# -- item 12 -----------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs for the results, unmounted at teardown."""
    mount = tmp_path / "results"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "napilab-test",
                    str(mount)], check=True)
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], check=False).returncode:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path) -> Path:
    """Fill the file system to the last byte; the file to delete to free it."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        size = 65536
        while size:
            try:
                os.write(fd, b"\0" * size)
            except OSError:
                size //= 2
    finally:
        os.close(fd)
    return filler


def test_full_results_disk_is_an_error_and_resume_continues(
        testbed: tb.Testbed, tmp_path: Path, small_disk: Path,
        napilab_runs: NapilabRuns) -> None:
    """Fault: the results file system fills up while trial 2 of 3 runs. Expected: exit 1
    with one error naming the file and the --resume hint, no traceback; every knob
    restored, no lock or journal left; manifest `failed` with trial 2 failed (its
    error names the file); the report that cannot be written is said, with `napilab
    report RUN`. Once space is freed, --resume runs trials 2-3 (exit 0) and the report
    is written."""
    before = knobs(testbed)
    prof = profile(tmp_path, duration=2, repeat=3)
    args = ("run", str(prof), "-i", str(testbed.inventory_path), "-o", str(small_disk))
    run = napilab_runs.start(*args)
    run_dir = wait_trial(small_disk, 2, run)
    wait_ping(testbed, "b")
    filler = fill(small_disk)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 1, err
    assert "Traceback" not in err
    error = next(line for line in err.splitlines() if line.startswith("napilab: error:"))
    assert f"cannot write {run_dir}/" in error and "No space left on device" in error
    assert "--resume" in err
    assert "the report could not be written" in err and f"napilab report {run_dir}" in err
    assert knobs(testbed) == before and napilab_leftovers() == []
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    trials = manifest["trials"]
    assert [t["status"] for t in trials] == ["ok", "failed", "pending"]
    assert "No space left on device" in trials[1]["error"]
    filler.unlink()
    resumed = run_napilab(*args, "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert [t["status"] for t in manifest["trials"]] == ["ok"] * 3
    assert (run_dir / "report.html").exists() and (run_dir / "samples.parquet").exists()
    assert not (run_dir / "samples").exists() and not (run_dir / ".reserve").exists()
    assert knobs(testbed) == before and napilab_leftovers() == []


def test_a_results_disk_without_room_for_the_reserve_is_refused_before_any_trial(
        testbed: tb.Testbed, tmp_path: Path, small_disk: Path) -> None:
    """Fault: a results file system with less free space than the run's reserve (the
    room held for its final manifest). Before, the run started anyway and, when the disk
    filled, ended with its manifest still `running`. Now: with under 64 KiB free it is
    refused before any host is contacted; with exactly 64 KiB (enough for the check, not
    for the manifest and its reserve) the run directory's creation fails and the locks
    it took are given back. Either way exit 1, one line naming the directory or the
    reserve, no traceback, no run directory, every host as it was."""
    before = knobs(testbed)
    prof = profile(tmp_path, duration=1, repeat=1)
    args = ("run", str(prof), "-i", str(testbed.inventory_path), "-o", str(small_disk))
    filler = fill(small_disk)
    for free, words in ((40 * 1024, "bytes free on its file system"),
                        (64 * 1024, "for the run's final manifest")):
        os.truncate(filler, filler.stat().st_size - free)
        done = run_napilab(*args, timeout=120)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr and words in done.stderr, done.stderr
        error = [line for line in done.stderr.splitlines() if line.startswith("napilab:")]
        assert len(error) <= 2 and str(small_disk) in error[0], done.stderr
        assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]
        assert knobs(testbed) == before and napilab_leftovers() == []
        filler.unlink()
        filler = fill(small_disk)


# -- item 13 -----------------------------------------------------------------------------


def test_resume_on_a_changed_host_is_refused_or_recorded(testbed: tb.Testbed, tmp_path: Path,
                                                        napilab_runs: NapilabRuns) -> None:
    """Fault: the first part of a run was measured on another kernel of host b (the
    manifest's facts say 6.1.0-old). Expected: --resume refused, exit 2, naming the
    host and fact, nothing touched (manifest and knobs as they were);
    --allow-host-change continues (exit 0) and records it as a confounder the report
    shows."""
    before = knobs(testbed)
    prof = profile(tmp_path, duration=3, repeat=2)
    results = tmp_path / "results"
    args = ("run", str(prof), "-i", str(testbed.inventory_path), "-o", str(results),
            "--format", "json")
    run = napilab_runs.start(*args)
    run_dir = wait_trial(results, 2, run)
    wait_ping(testbed, "b")
    run.send_signal(2)
    assert run.wait(timeout=60) == 130
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["host_facts"]["b"]["tool_versions"]["ping"].startswith("ping from iputils")
    manifest["host_facts"]["b"]["kernel_release"] = "6.1.0-old"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    stored = (run_dir / "manifest.json").read_bytes()
    refused = run_napilab(*args, "--resume", str(run_dir))
    assert refused.returncode == 2, refused.stderr
    assert "b: kernel_release was '6.1.0-old' when the run started" in refused.stderr
    assert "--allow-host-change" in refused.stderr
    assert (run_dir / "manifest.json").read_bytes() == stored
    assert knobs(testbed) == before and napilab_leftovers() == []
    allowed = run_napilab(*args, "--resume", str(run_dir), "--allow-host-change")
    assert allowed.returncode == 0, allowed.stderr
    assert "host b is not as it was when the run started (kernel_release)" in allowed.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["hosts_changed"] == {
        "b": ["kernel_release"]}
    change = manifest["resume_host_changes"][0]
    assert change["changed"]["b"]["kernel_release"][0] == "6.1.0-old"
    report = json.loads((run_dir / "report.json").read_text())
    assert any(c.startswith("host b changed during the run (kernel_release")
               for c in report["confounders"]), report["confounders"]
    assert knobs(testbed) == before


# -- item 15 -----------------------------------------------------------------------------


def test_suite_runs_beside_a_napilab_testbed(testbed: tb.Testbed, tmp_path: Path) -> None:
    """Fault: someone's `napilab testbed up` (198.51.100.0/29) while the suite runs.
    Expected: the suite's testbed (its own /29) works beside it: a run there exits 0.
    The other testbed is brought up and down by this test, never one that was there."""
    theirs = tb.Testbed()
    if theirs.exists():
        pytest.skip("a `napilab testbed` is up: the suite is running beside it already")
    assert testbed.prefix.startswith(TESTBED_PREFIX) and testbed.network != theirs.network
    try:
        theirs.up(ssh=False)
        assert theirs.addresses_in_use() is not None and testbed.addresses_in_use() is not None
        run = run_napilab("run", str(profile(tmp_path, duration=1)), "-i",
                          str(testbed.inventory_path), "-o", str(tmp_path / "results"),
                          "--format", "")
        assert run.returncode == 0, run.stderr
    finally:
        theirs.down()
    assert not theirs.exists()
