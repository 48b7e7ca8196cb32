"""The perf_stat collector's section on this machine: started by the snapshot before a
window and stopped by the one after (real perf, root), and its refusals: perf not
installed, `kernel.perf_event_paranoid` for a user who is not root, a stop with nothing
started. The parser's goldens are under tests/data/perf_stat/."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from napilab.runners import registry
from napilab.runners.collectors import collector, perf_stat

PID = Path("/var/tmp/napilab/perf_stat.pid")
root = pytest.mark.skipif(os.geteuid() != 0, reason="counting every CPU needs root here")
with_perf = pytest.mark.skipif(shutil.which("perf") is None,
                               reason="perf is not installed (make test installs linux-perf)")


def _section(phase: str, env: dict[str, str] | None = None,
             user: list[str] | None = None) -> str:
    argv = [*(user or []), *registry.snapshot_argv(["perf_stat"], phase)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env,
                         check=True).stdout
    return collector.split_tail(out)[perf_stat.SECTION]


@root
@with_perf
def test_start_counts_until_stop_and_leaves_nothing() -> None:
    """One test, not two: the section's pid file is the host's, one per machine."""
    try:
        assert isinstance(perf_stat.read_section(_section("start")), perf_stat.Started)
        assert PID.exists()
        # a window of 1 s: perf may take a few hundred ms to start counting on a busy
        # machine (cpu-clock read 478 ms after a 0.5 s window under -n 2), and what is
        # checked is that it counts through the window (>= 500 ms), not its start-up
        time.sleep(1.0)
        found = perf_stat.read_section(_section("stop"))
        assert isinstance(found, perf_stat.PerfStat)
        clock = [v for (e, _), v in found.counts.items() if e == "cpu-clock"]
        assert len(clock) == os.cpu_count() and all(500 <= ms < 3000 for ms in clock)
        assert not PID.exists()
        assert subprocess.run(["pgrep", "-f", "perf stat -x, -a -A"]).returncode == 1
        # a perf a killed run left is stopped by the next run's first snapshot
        _section("start")
        left = int(PID.read_text())
        _section("start")
        assert _gone(left)
        assert isinstance(perf_stat.read_section(_section("stop")), perf_stat.PerfStat)
    finally:  # a failed assertion must not leave perf counting
        if PID.exists():
            _section("stop")


@root
@with_perf
def test_a_perf_slow_to_start_is_waited_for(tmp_path: Path) -> None:
    """A perf that takes a second to start (a TCG guest under load took seconds: a
    clean clone's run got "perf stat printed nothing it counted"): the snapshot before
    the window returns once perf has its events open, so a stop right after it still
    gets counts. Without the wait the stop's SIGINT reached a perf not counting yet (a
    background job of sh ignores it until perf's handler is in) and found no counts."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    slow = bin_dir / "perf"
    slow.write_text(f"#!/bin/sh\nsleep 1\nexec {shutil.which('perf')} \"$@\"\n")
    slow.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    try:
        start = time.monotonic()
        assert isinstance(perf_stat.read_section(_section("start", env=env)),
                          perf_stat.Started)
        assert time.monotonic() - start >= 1.0  # it waited for perf, not 0.2 s
        found = perf_stat.read_section(_section("stop"))
        assert isinstance(found, perf_stat.PerfStat) and found.counts
    finally:
        if PID.exists():
            _section("stop")
        subprocess.run(["pkill", "-INT", "-f", "perf stat -x, -a -A"], check=False)


def _gone(pid: int, seconds: float = 5.0) -> bool:
    """The process ended (or is a zombie its new parent has not reaped yet)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_without_perf_on_path_the_start_is_refused(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sh", "cat", "id", "kill", "rm", "sleep", "tail", "mkdir", "tr", "cut"):
        found = shutil.which(name)
        if found:
            (bin_dir / name).symlink_to(found)
    text = _section("start", env={"PATH": str(bin_dir), "LC_ALL": "C"})
    with pytest.raises(perf_stat.PerfRefused, match=re.escape(
            "perf is not installed (Debian: apt-get install linux-perf)")):
        perf_stat.read_section(text)


@root
@with_perf
def test_a_user_who_is_not_root_is_refused_by_perf_event_paranoid() -> None:
    level = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if level <= 0:
        pytest.skip(f"kernel.perf_event_paranoid is {level} here: nothing to refuse")
    text = _section("start", user=["setpriv", "--reuid=65534", "--regid=65534",
                                   "--clear-groups", "--"])
    with pytest.raises(perf_stat.PerfRefused) as refused:
        perf_stat.read_section(text)
    assert f"kernel.perf_event_paranoid is {level}" in str(refused.value)
    assert "CAP_PERFMON" in str(refused.value)


def test_a_stop_with_nothing_started_is_refused() -> None:
    with pytest.raises(perf_stat.PerfRefused, match="no perf stat was running"):
        perf_stat.read_section("refused: no perf stat was running (...)\n")
    with pytest.raises(Exception, match="no counts"):
        perf_stat.PerfStatCollector().delta(perf_stat.Started(), perf_stat.Started(), {},
                                            collector.HostInfo())


# The snapshots run under a parent that adopts the orphaned perf and never reaps it (a
# host whose PID 1 reaps nothing: a container's shell, virtme-ng's init running its
# script on the console): perf ends on SIGINT and stays a zombie.
UNREAPED = """\
import ctypes, subprocess, sys, time
from napilab.runners import registry
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
def section(phase):
    return subprocess.run(registry.snapshot_argv(["perf_stat"], phase), capture_output=True,
                          text=True, timeout=60, check=True).stdout
section("start")
time.sleep(0.5)
began = time.monotonic()
out = section("stop")
print(round(time.monotonic() - began, 2))
print(out)
"""


@root
@with_perf
def test_a_perf_left_a_zombie_is_seen_as_ended() -> None:
    """The stop waits for perf to end: a perf that ended but was not reaped has ended
    (waited for as running, it cost the stop its 5 s limit and more in a guest)."""
    try:
        done = subprocess.run([sys.executable, "-c", UNREAPED], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        took, out = done.stdout.split("\n", 1)
        assert float(took) < 3.0, took
        found = perf_stat.read_section(collector.split_tail(out)[perf_stat.SECTION])
        assert isinstance(found, perf_stat.PerfStat) and found.counts
    finally:
        if PID.exists():
            _section("stop")
        subprocess.run(["pkill", "-INT", "-f", "perf stat -x, -a -A"], check=False)
