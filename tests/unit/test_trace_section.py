"""The trace collector's section on this machine (real bpftrace, root): started by the
snapshot before a window and stopped by the one after, a tracer a killed run left
stopped by the next start and by `napilab restore`'s tracers.stop_left, and the
refusal when bpftrace is missing. A stage whose probe this kernel lacks is absent."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from napilab.harness.hosts import tracers
from napilab.harness.inventory.inventory import Host
from napilab.harness.transport.local import LocalTransport
from napilab.runners import registry
from napilab.runners.collectors import collector
from napilab.runners.collectors.trace import trace

STAGES = ["softirq_raise", "net_rx_action", "csd_latency", "napi_poll"]
NS = "".join(c for c in os.readlink("/proc/self/ns/net") if c.isdigit())
PID = Path(f"/var/tmp/napilab/trace-{NS}.pid")


def _section(phase: str, env: dict[str, str] | None = None) -> str:
    argv = registry.snapshot_argv(["trace"], phase, {"trace": {"stages": STAGES}})
    out = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env,
                         check=True).stdout
    return collector.split_tail(out)[trace.SECTION]


def _gone(pid: int) -> bool:
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists() or \
                Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return True
        time.sleep(0.1)
    return False


@pytest.mark.usefixtures("tracefs")
def test_traces_the_window_and_leaves_nothing() -> None:
    """One test: the section's pid file is the machine's (its network namespace)."""
    host = LocalTransport(Host(name="here", transport="local"))
    try:
        started = trace.read_section(_section("start"))
        assert isinstance(started, trace.Started)
        kprobes = Path("/sys/kernel/tracing/kprobe_events").exists()
        assert ("napi_poll" in started.absent) is not kprobes
        assert tracers.running(host)[0] == int(PID.read_text())
        subprocess.run(["ping", "-f", "-c", "3000", "-q", "127.0.0.1"], check=True,
                       capture_output=True, timeout=30)
        found = trace.read_section(_section("stop"))
        assert isinstance(found, trace.Trace)
        assert found.stage("net_rx_action").total > 0
        assert set(found.stages) | set(found.absent) == set(STAGES)
        assert not PID.exists() and tracers.running(host)[0] is None
        # a tracer a killed run left: stopped by the next start, and by restore's step
        _section("start")
        left = int(PID.read_text())
        _section("start")
        assert _gone(left)
        line = tracers.stop_left(host)
        assert line is not None and "stopped the tracer" in line
        assert not PID.exists() and tracers.stop_left(host) is None
    finally:  # a failed assertion must not leave bpftrace attached
        if PID.exists():
            _section("stop")
    left = subprocess.run(["pgrep", "-x", "bpftrace"], capture_output=True, text=True).stdout
    assert all(_gone(int(pid)) for pid in left.split())  # zombies this machine reaps late


@pytest.mark.usefixtures("tracefs")
def test_refused_without_bpftrace() -> None:
    env = {**os.environ, "PATH": "/nonexistent"}
    argv = registry.snapshot_argv(["trace"], "start", {"trace": {"stages": STAGES}})
    argv[0] = "/bin/sh"
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30).stdout
    text = collector.split_tail(out)[trace.SECTION]
    with pytest.raises(trace.TraceRefused, match="bpftrace is not installed"):
        trace.read_section(text)
    assert not PID.exists()
