"""Real workloads between the testbed's namespaces over SSH, with counters, stored and
reported: iperf3 (server started, readiness-checked, reaped), sockperf ping-pong with
its per-message full log stored as latency/<trial>.parquet, and a ping flood; perf
stat counting on the server host during each (started and stopped by the snapshots,
nothing left running), and the CPU cost derived from proc_stat."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from napilab.harness.lab import netns as tb
from napilab.harness.store.store import load_samples
from napilab.reports.ab.compare import load_run
from tests.cli import run_napilab
from tests.conftest import argv, comm, netns_pids
from tests.integration.test_faults import wait_no_workload

PROFILE = """\
name: workloads
hosts:
  client: {host: a}
  server: {host: b}
workload:
  tool: ping
  duration: 2
  client: {role: client, cpus: "0"}
  server: {role: server}
collect:
  softnet_stat: {roles: [server]}
  softirqs: {roles: [server], names: [NET_RX, NET_TX]}
  proc_stat: {roles: [server]}
  interrupts: {roles: [server]}
  napi_threads: {roles: [server]}
  perf_stat: {roles: [server], cpus: "1"}
variants:
  ping: {}
  iperf3:
    group: iperf3  # a tool of its own: compared with nothing, not with ping
    workload:
      tool: iperf3
      duration: 2
      client: {role: client, cpus: "0", args: {P: 2}}
      server: {role: server, cpus: "1"}
  sockperf:
    group: sockperf
    workload:
      tool: sockperf.ping-pong
      duration: 2
      client: {role: client, cpus: "0", args: {full-log: true, mps: 10000}}
      server: {role: server, cpus: "1"}
repeat: 1
"""


@pytest.mark.serial
def test_iperf3_sockperf_and_ping_between_namespaces(testbed: tb.Testbed,
                                                     tmp_path: Path) -> None:
    wait_no_workload(testbed)
    profile = tmp_path / "workloads.yaml"
    profile.write_text(PROFILE)
    proc = run_napilab("run", str(profile), "-i", str(testbed.inventory_path),
                       "-o", str(tmp_path / "r"), "--format", "html,text")
    assert proc.returncode == 0, proc.stderr
    run_dir = next((tmp_path / "r" / "workloads").iterdir())
    samples = load_samples(run_dir)
    totals = samples[samples["cpu"].isna()].set_index(["variant", "source", "metric",
                                                       "role"])["value"]
    assert totals[("iperf3", "iperf3", "throughput", "client")] > 1e8  # bits/s over veth
    assert totals[("iperf3", "softirqs", "net_rx", "server")] > 0
    assert totals[("sockperf", "sockperf", "latency_p99", "client")] > 0
    assert totals[("sockperf", "sockperf", "latency_p50", "client")] <= totals[
        ("sockperf", "sockperf", "latency_p99", "client")]
    assert totals[("ping", "ping", "received", "client")] > 100
    latencies = pd.read_parquet(run_dir / "latency" / "003.parquet")
    assert list(latencies.columns) == ["latency_us"] and len(latencies) > 1000
    assert latencies["latency_us"].median() > 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    server = json.loads((run_dir / "raw" / "002" / "b" / "server.json").read_text())
    assert "iperf3" in server["argv"] and server["exit_code"] == 0  # exited by itself
    assert manifest["status"] == "complete"
    versions = {h: f["tool_versions"] for h, f in manifest["host_facts"].items()}
    assert versions["a"]["ping"].startswith("ping from iputils")  # the client side only
    assert "ping" not in versions["b"]
    for host in ("a", "b"):
        assert versions[host]["iperf3"].startswith("iperf 3.")
        assert versions[host]["sockperf"].startswith("sockperf, version 3.")
    # perf counted during every trial on CPU 1 (the collector's cpus: its totals)
    assert totals[("iperf3", "perf_stat", "context_switches", "server")] > 0
    assert totals[("ping", "perf_stat", "cpu_clock", "server")] > 1000  # ms: > 1 s of 2 s+
    per_cpu = samples[(samples["source"] == "perf_stat") & samples["cpu"].notna()]
    assert set(per_cpu["cpu"]) == set(range(os.cpu_count() or 1))  # -a -A: every CPU
    assert not Path("/var/tmp/napilab/perf_stat.pid").exists()
    cost = load_run(run_dir).samples
    busy = cost[(cost["source"] == "cpu") & (cost["metric"] == "busy_cores")]
    assert len(busy) == 3 and (busy["value"] > 0).all()
    packets = cost[cost["metric"] == "cpu_us_per_packet"]["value"]
    assert len(packets) == 1 and packets.iloc[0] > 0  # ping's transmitted packets
    comms = {comm(p) for p in netns_pids(testbed, "b")} - {""}  # "": exited meanwhile
    assert comms <= {"sshd"}, f"left running: {comms}"
    assert "sockperf" in (run_dir / "report.html").read_text()


FAILING = """\
name: failing-with-perf
hosts:
  client: {host: a}
  server: {host: b}
workload:
  tool: command
  duration: 1
  client:
    role: client
    args: {argv: [sh, -c, "sleep 0.5; exit 3"], metrics: {x: {regex: "x=(\\\\d+)", unit: count}}}
  server: {role: server}
collect:
  perf_stat: {roles: [server]}
variants:
  only: {}
repeat: 1
"""


def test_a_failed_trial_stops_perf_stat(testbed: tb.Testbed, tmp_path: Path) -> None:
    """perf stat started by the snapshot before the workload is stopped when the trial
    fails before the snapshot after: nothing keeps counting, nothing is left behind."""
    wait_no_workload(testbed)
    profile = tmp_path / "failing.yaml"
    profile.write_text(FAILING)
    proc = run_napilab("run", str(profile), "-i", str(testbed.inventory_path),
                       "-o", str(tmp_path / "r"), "--format", "", timeout=120)
    assert proc.returncode == 1 and "exited 3" in proc.stderr, proc.stderr
    run_dir = next((tmp_path / "r" / "failing-with-perf").iterdir())
    assert "started" in (run_dir / "raw" / "001" / "b" / "snapshot-before.out").read_text()
    # on this testbed's hosts (another worker's testbed may be counting right now)
    counting = [pid for node in ("a", "b") for pid in netns_pids(testbed, node)
                if "perf stat -x, -a -A" in " ".join(argv(pid))]
    assert counting == []
    assert not Path("/var/tmp/napilab/perf_stat.pid").exists()
