"""A mutilate ladder on the SSH testbed: mutilate from a (CPU 0) against Debian's
memcached on b (CPU 1) at 5k and 1M requests/s (2 s trials, 2 repetitions, RPS off and
RPS to CPU 1 on b). One mutilate connection reaches ~12k-17k req/s on this 2-CPU
machine, so the 1M rung is marked saturated; the 5k rung achieves its rate. mutilate is
not packaged (build leverich/mutilate, docs/formats.md 14) and memcached is Debian's:
without either the test is skipped. The local transport runs the mutilate found on
this PATH in each namespace (an sshd session's PATH may not hold a hand-built binary).
And mutilate's master on a with an agent on b: the agent started first, the master
enlisting it, the agent stopped after. Whatever happens, no memcached or mutilate is
left running in the namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab
from tests.conftest import comm, netns_pids

RUNGS = {"5k": 5_000.0, "1M": 1_000_000.0}
REPEAT = 2
PROFILE = f"""\
name: mutilate-ladder
hosts: {{client: {{host: a}}, server: {{host: b}}}}
workload:
  tool: mutilate
  duration: 2
  # 20%: a 2 s trial at 5k that stalls for a few hundred ms is not a saturated rung
  load: {{rates: [5k, 1M], tolerance: 20%, slo: 5000}}
  client: {{role: client, cpus: "0"}}
  server: {{role: server, cpus: "1", args: {{t: 1}}}}
collect: {{proc_stat: {{roles: [server]}}}}
variants:
  rps-off: {{setup: {{server: {{rps: {{"${{iface}}": none}}}}}}}}
  rps-remote: {{setup: {{server: {{rps: {{"${{iface}}": "1"}}}}}}}}
repeat: {REPEAT}
"""
PROGRAMS = ("mutilate", "memcached")

pytestmark = [
    pytest.mark.serial,  # its ladder's saturation is measured: alone on the CPUs
    pytest.mark.skipif(shutil.which("mutilate") is None,
                       reason="mutilate is not on PATH (not packaged: build "
                              "leverich/mutilate and add it to PATH)"),
    pytest.mark.skipif(shutil.which("memcached") is None,
                       reason="memcached is not installed (apt-get install memcached)"),
]


def running(bed: tb.Testbed) -> list[tuple[str, str, str]]:
    """(node, pid, name) of every memcached and mutilate in the testbed's namespaces."""
    return [(node, pid, name) for node in ("a", "b") for pid in netns_pids(bed, node)
            if (name := comm(pid)) in PROGRAMS and tb.alive(int(pid))]


@pytest.fixture(autouse=True)
def _none_left_running(testbed: tb.Testbed) -> Iterator[None]:
    """After the test, whatever it did: any memcached or mutilate of its runs still in a
    namespace is stopped (by pid: TERM, then KILL), and the test fails naming it."""
    yield
    left = running(testbed)
    for _, pid, _ in left:
        stop(int(pid))
    assert left == [], f"left running after the run: {left}"


def stop(pid: int) -> None:
    """TERM, and KILL after 3 s."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and tb.alive(pid):
        time.sleep(0.05)
    if tb.alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_mutilate_ladder_stores_latencies_achieved_qps_and_a_saturated_top_rung(
        testbed: tb.Testbed, tmp_path: Path) -> None:
    profile = tmp_path / "mutilate.yaml"
    profile.write_text(PROFILE)
    results = tmp_path / "results"
    proc = run_napilab("run", str(profile), "-i", str(testbed.inventory_path),
                       "--transport", "local", "-o", str(results), "--format",
                       "json,text", timeout=600)
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (results / "mutilate-ladder").iterdir()

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["load"]["achieved"] == ["qps"]
    assert [rate for _, rate in manifest["load"]["rungs"]] == list(RUNGS.values())
    for trial in manifest["trials"]:
        client = json.loads((run_dir / "raw" / trial["id"] / "a" / "client.json").read_text())
        rung = manifest["load"]["variants"][trial["variant"]]["rung"]
        assert client["argv"][-1] == f"--qps={int(RUNGS[rung])}", client["argv"]
        assert client["exit_code"] == 0

    samples = pd.read_parquet(run_dir / "samples.parquet")
    tool = samples[(samples["source"] == "mutilate") & samples["cpu"].isna()]
    wide = tool.pivot_table(index=["variant", "trial"], columns="metric", values="value")
    assert len(wide) == len(RUNGS) * 2 * REPEAT
    assert (wide["requests"] > 0).all()
    assert ((wide["latency_min"] > 0) & (wide["latency_min"] <= wide["latency_mean"])).all()
    assert (wide["latency_p90"] <= wide["latency_p99"]).all()
    rung = wide.index.get_level_values("variant").str.split("+").str[1]
    low, top = wide[rung == "5k"], wide[rung == "1M"]
    assert (low["qps"] > 0.8 * RUNGS["5k"]).all(), low["qps"]
    assert (top["qps"] < 0.5 * RUNGS["1M"]).all() and top["qps"].min() > low["qps"].max()

    curves = {c["variant"]: c for c in
              json.loads((run_dir / "report.json").read_text())["load"]["curves"]}
    assert set(curves) == {"rps-off", "rps-remote"}
    for curve in curves.values():
        first, last = curve["points"]
        assert (first["rung"], first["saturated"]) == ("5k", False)
        assert (last["rung"], last["saturated"], last["short"]) == ("1M", True, REPEAT)
        assert last["achieved"]["value"] < 0.5 * RUNGS["1M"]
        assert "latency_p99" in first["metrics"] and "latency_p99" in last["metrics"]
    assert f"SATURATED {REPEAT}/{REPEAT}" in (run_dir / "report.txt").read_text()


AGENTS_PROFILE = """\
name: mutilate-agents
hosts:
  server: {host: b}
  master: {host: a}
  agent1: {host: b}
workload:
  tool: mutilate
  duration: 3
  server: {role: server, cpus: "1", args: {t: 1}}
  clients:
    master: {cpus: "0", args: {qps: 4000, T: 1, c: 1, C: 1}}
    agent1: {cpus: "1", args: {T: 1}}
repeat: 2
"""


def test_a_master_and_its_agent_run_together_and_are_stopped(testbed: tb.Testbed,
                                                             tmp_path: Path) -> None:
    """mutilate's master on a enlists an agent on b (`mutilate -A`, started and waited
    for on its port first): the master's zmq handshake with the agent must succeed for
    it to run at all. Its aggregate qps is the result; the agent, which prints nothing,
    is stopped by napilab after the master and stored."""
    profile = tmp_path / "agents.yaml"
    profile.write_text(AGENTS_PROFILE)
    results = tmp_path / "results"
    proc = run_napilab("run", str(profile), "-i", str(testbed.inventory_path),
                       "--transport", "local", "-o", str(results), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (results / "mutilate-agents").iterdir()
    server = testbed.nodes[1].data_address  # b
    for trial in ("001", "002"):
        master = json.loads((run_dir / "raw" / trial / "a" / "client.json").read_text())
        agent = json.loads((run_dir / "raw" / trial / "b" / "client.json").read_text())
        assert master["exit_code"] == 0 and ["-a", server] == master["argv"][
            master["argv"].index("-a"):master["argv"].index("-a") + 2], master["argv"]
        assert agent["argv"][-5:] == ["-A", "-p", "5556", "-T", "1"], agent["argv"]
        assert agent["exit_code"] == -15  # stopped (SIGTERM) once the master was done
    samples = pd.read_parquet(run_dir / "samples.parquet")
    tool = samples[(samples["source"] == "mutilate") & samples["cpu"].isna()]
    assert set(tool["role"]) == {"master"}  # agents' outputs are stored, not parsed
    qps = tool[tool["metric"] == "qps"]["value"]
    assert len(qps) == 2 and ((qps > 0.8 * 4000) & (qps < 1.2 * 4000)).all(), qps
