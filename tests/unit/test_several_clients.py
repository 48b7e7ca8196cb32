"""Several client hosts in one workload (`workload.clients`): the grammar (errors at the
user's line), each tool's rule (which take several clients, which refuse and why), the
commands built (mutilate's master with `-a` per agent, agents `mutilate -A`; sockperf
clients each with a file name of their own), the order the processes run in (agents
ready before the master, clients started together, agents stopped after), and the merge
rules of the results (each client's rows under its role and host, pooled latencies)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from napilab.harness.engine import workload_exec, workload_rows
from napilab.harness.inventory.inventory import Host, load_inventory
from napilab.harness.profile import clients
from napilab.harness.profile.plan import Plan, bind
from napilab.harness.profile.profile import Trial, load_profile
from napilab.harness.transport.transport import CommandResult
from napilab.runners.base import Value
from napilab.runners.registry import TOOLS
from napilab.runners.workloads.workload import (
    EACH,
    MASTER,
    Context,
    ToolResult,
    several_clients,
)
from tests.cli import run_cli

INVENTORY = """\
transport: local
hosts:
  a: {address: 127.0.0.1, data_address: 192.0.2.1, cpus: 2}
  b: {address: 127.0.0.1, data_address: 192.0.2.2, cpus: 2}
  c: {address: 127.0.0.1, data_address: 192.0.2.3, cpus: 2}
"""
MUTILATE = """\
name: agents
hosts:
  server: {host: b}
  master: {host: a}
  agent1: {host: c}
  agent2: {host: a}
workload:
  tool: mutilate
  duration: 2
  server: {role: server, args: {t: 2, N: 2, b: 2048, o: "hashpower=20"}}
  clients:
    master: {cpus: "0", args: {qps: 100000, C: 1, Q: 1000, c: 4}}
    agent1: {args: {T: 2}}
    agent2: {cpus: "1", args: {T: 1, affinity: true}}
variants:
  one: {}
"""
SOCKPERF = """\
name: pingers
hosts:
  server: {host: b}
  c1: {host: a}
  c2: {host: a}
workload:
  tool: sockperf.ping-pong
  duration: 2
  server: {role: server}
  clients:
    c1: {cpus: "0", args: {full-log: true, mps: 1000}}
    c2: {cpus: "1", args: {full-log: true, mps: 1000}}
variants:
  one: {}
"""
CTX = Context(target="192.0.2.2", bind="192.0.2.2", duration=2, workdir="/w", trial="001")


def _files(tmp_path: Path, profile: str) -> tuple[str, str]:
    (tmp_path / "p.yaml").write_text(profile)
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    return str(tmp_path / "p.yaml"), str(tmp_path / "inv.yaml")


def _plan(tmp_path: Path, profile: str) -> Plan:
    path, inventory = _files(tmp_path, profile)
    return bind(load_profile(path), load_inventory(inventory))


def _errors(tmp_path: Path, profile: str, capsys: pytest.CaptureFixture[str]) -> str:
    path, inventory = _files(tmp_path, profile)
    code, _, err = run_cli(capsys, "validate", path, "-i", inventory)
    assert code == 2, err
    assert "Traceback" not in err
    return err


def _line(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


# -- grammar ---------------------------------------------------------------------------

@pytest.mark.parametrize(("old", "new", "at", "message"), [
    ("    c2: {cpus", "    c3: {cpus", "    c3:",
     r"workload\.clients\.c3: no such role; roles are \['c1', 'c2', 'server'\]"),
    ("  server: {role: server}", "  server: {role: c1}", "  server: {role: c1}",
     r"workload\.server\.role: role 'c1' is both a client and the server"),
    ("  server: {role: server}\n", "", "  clients:",
     r"several clients need `server: \{role: \.\.\.\}`"),
    ("  server: {role: server}", "  client: {role: c1}\n  server: {role: server}",
     "  client: {role: c1}", r"write `client:` \(one client\) or `clients:` \(several\)"),
    ("    c2: {cpus: \"1\", args: {full-log: true, mps: 1000}}",
     "    c2: {cpus: \"1\", args: {mps: 1000, tcp: true}}", "    c2:",
     r"clients c1 and c2 need different servers"),
    ("    c2: {cpus: \"1\",", "    c2: {role: c2, cpus: \"1\",", "    c2:",
     r"workload\.clients\.c2\.role: unknown key; expected one of \['args', 'cpus', "),
    ("  duration: 2\n", "  duration: 2\n  load: [1000, 2000]\n", "  load:",
     r"a load ladder drives one client, and these are 2"),
    # a rate adds up over the clients, a percentile does not
    ("  one: {}\n", "  one: {}\nreport:\n  table:\n    - {source: sockperf, metric: "
     "message_rate}\n    - {source: sockperf, metric: latency_p99}\n    - {source: "
     "sockperf, metric: latency_p99, role: c1}\n", "metric: latency_p99}",
     r"report\.table\.1: sockperf latency_p99 is measured by each of the clients "
     r"\['c1', 'c2'\]: a row without `role` would add them up; name the `role`"),
])
def test_grammar_errors_at_the_users_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          old: str, new: str, at: str, message: str) -> None:
    assert old in SOCKPERF
    text = SOCKPERF.replace(old, new, 1)
    err = _errors(tmp_path, text, capsys)
    assert re.search(rf"p\.yaml:{_line(text, at)}:\d+: .*{message}", err), err
    assert err.count("napilab: error:") == 1, err


@pytest.mark.parametrize(("tool", "reason"), [
    ("iperf3", "an iperf3 server runs one test at a time"),
    ("neper.tcp_rr", "a neper server waits for the clients its --num-clients names"),
])
def test_tools_that_take_one_client_are_refused_with_the_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], tool: str, reason: str) -> None:
    text = SOCKPERF.replace("sockperf.ping-pong", tool).replace(
        "full-log: true, mps: 1000", "")
    err = _errors(tmp_path, text, capsys)
    assert f"p.yaml:{_line(text, '  clients:')}:" in err
    assert f"workload.clients: {tool} takes one client: {reason}" in err


def test_each_tool_says_how_it_takes_several_clients() -> None:
    rules = {name: several_clients(tool).merge for name, tool in TOOLS.items()}
    assert rules["mutilate"] == MASTER
    for name in ("ping", "sockperf.ping-pong", "sockperf.under-load", "netperf.TCP_RR",
                 "command"):
        assert rules[name] == EACH, name
    for name in ("iperf3", "neper.tcp_rr", "pktgen"):
        assert rules[name] == "" and several_clients(TOOLS[name]).why, name


def test_agent_and_master_arguments_are_checked_where_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = MUTILATE.replace("agent1: {args: {T: 2}}", "agent1: {args: {T: 2, c: 3}}")
    err = _errors(tmp_path, text, capsys)
    assert f"p.yaml:{_line(text, 'agent1: {args')}:" in err
    assert "workload.clients.agent1.args.c: unknown argument; expected one of " \
           "['B', 'T', 'affinity', 'l']" in err
    # a master's own connections (-C) mean nothing without agents
    alone = MUTILATE.replace("    agent1: {args: {T: 2}}\n", "").replace(
        "    agent2: {cpus: \"1\", args: {T: 1, affinity: true}}\n", "")
    err = _errors(tmp_path, alone, capsys)
    assert f"p.yaml:{_line(alone, 'master: {cpus')}:" in err
    assert "client arguments ['C', 'Q'] are a master's with agents" in err


def test_one_client_is_the_workload_it_always_was(tmp_path: Path) -> None:
    text = SOCKPERF.replace("  clients:\n    c1: {cpus: \"0\", args: {full-log: true, "
                            "mps: 1000}}\n", "  client: {role: c1, cpus: \"0\", args: "
                            "{full-log: true, mps: 1000}}\n  clients:\n").replace(
        "  clients:\n    c2: {cpus: \"1\", args: {full-log: true, mps: 1000}}\n", "")
    plan = _plan(tmp_path, text)
    spec = plan.profile.variants[0].workload
    assert spec.others == () and spec.clients == (spec.client,)
    built = clients.build(plan, spec, CTX)
    direct = TOOLS[spec.tool].commands(plan.process_args(spec.client), {}, CTX)
    assert built.merge == "" and len(built.clients) == 1
    assert built.first.commands == direct and built.first.name == "client"
    assert built.first.host == "a" and built.agents == ()


# -- commands --------------------------------------------------------------------------

def test_mutilate_master_enlists_each_agent_and_agents_run_in_agent_mode(
        tmp_path: Path) -> None:
    plan = _plan(tmp_path, MUTILATE)
    built = clients.build(plan, plan.profile.variants[0].workload, CTX)
    assert built.merge == MASTER
    master, agent1, agent2 = built.clients
    assert master.agent is None and built.runners == (master,)
    assert master.argv == ["mutilate", "-s", "192.0.2.2:11211", "-t", "2", "-i",
                           "exponential:1", "-a", "192.0.2.3", "-a", "192.0.2.1", "-C", "1",
                           "-Q", "1000", "-c", "4", "--qps=100000"]
    assert agent1.argv == ["mutilate", "-A", "-p", "5556", "-T", "2"]
    assert agent2.argv == ["mutilate", "-A", "-p", "5556", "-T", "1", "--affinity"]
    assert agent1.agent is not None and agent1.agent.ready.port == 5556
    assert (master.host, agent1.host, agent2.host) == ("a", "c", "a")
    # master and agent2 share host a: their raw files are named by role
    assert (master.name, agent1.name, agent2.name) == ("client-master", "client",
                                                       "client-agent2")
    server = built.server
    assert server is not None
    # memcached's own flags, no shell wrapper
    assert server.argv == ["memcached", "-u", "nobody", "-l", "192.0.2.2", "-p", "11211",
                           "-t", "2", "-N", "2", "-b", "2048", "-o", "hashpower=20"]


def test_the_agents_port_is_the_masters(tmp_path: Path) -> None:
    plan = _plan(tmp_path, MUTILATE.replace("c: 4}", "c: 4, p: 6000}"))
    built = clients.build(plan, plan.profile.variants[0].workload, CTX)
    assert built.first.argv[built.first.argv.index("-p") + 1] == "6000"
    assert all(a.argv[:4] == ["mutilate", "-A", "-p", "6000"] for a in built.agents)
    assert all(a.agent is not None and a.agent.ready.port == 6000 for a in built.agents)


def test_each_sockperf_client_writes_its_own_full_log(tmp_path: Path) -> None:
    plan = _plan(tmp_path, SOCKPERF)
    built = clients.build(plan, plan.profile.variants[0].workload, CTX)
    c1, c2 = built.runners
    assert c1.commands.client_files["full_log"] == "/w/001-sockperf-full-log.csv"
    assert c2.commands.client_files["full_log"] == "/w/001-c2-sockperf-full-log.csv"
    assert c1.commands.server == c2.commands.server and built.server is not None
    assert (c1.name, c2.name) == ("client-c1", "client-c2")


def test_plan_prints_agents_before_the_master(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path, inventory = _files(tmp_path, MUTILATE)
    code, out, _ = run_cli(capsys, "plan", path, "-i", inventory)
    assert code in (0, None)
    lines = [line.split(None, 2)[:2] for line in out.splitlines()
             if "mutilate" in line or "memcached" in line]
    assert lines == [["b", "server"], ["c", "agent"], ["a", "agent-agent2"],
                     ["a", "client-master"]]


# -- running: order ---------------------------------------------------------------------

class _Proc:
    def __init__(self, log: list[str], host: str, argv: Sequence[str]) -> None:
        self.log, self.host, self.argv = log, host, list(argv)
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.code

    def output(self) -> tuple[str, str]:
        return "", ""

    def signal(self, name: str) -> None:
        self.log.append(f"signal {name} {self.host} {self.argv[-1]}")
        self.code = 0

    def wait(self, timeout: float) -> CommandResult:
        self.log.append(f"wait {self.host} {self.argv[-1]}")
        return CommandResult(self.host, tuple(self.argv), 0, f"out of {self.host}", "",
                             time.time(), 0.0)


class _Transport:
    def __init__(self, name: str, log: list[str]) -> None:
        self.host = Host(name=name, transport="local")
        self.log = log

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              stdin_open: bool = False) -> _Proc:
        self.log.append(f"start {self.host.name} {argv[-1]}")
        return _Proc(self.log, self.host.name, argv)

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult:
        if argv[0] == "ss":
            self.log.append(f"ready {self.host.name} {argv[-1]}")
            return CommandResult(self.host.name, tuple(argv), 0, "LISTEN", "", 0.0, 0.0)
        assert argv[0] in ("cat", "rm"), argv
        return CommandResult(self.host.name, tuple(argv), 0, "", "", 0.0, 0.0)


def _exec(plan: Plan) -> tuple[list[str], workload_exec.WorkloadRecord, list[Any]]:
    spec = plan.profile.variants[0].workload
    log: list[str] = []
    transports: dict[str, Any] = {h: _Transport(h, log) for h in ("a", "b", "c")}
    record = workload_exec.WorkloadRecord()
    outputs = workload_exec.run(clients.build(plan, spec, CTX), server=spec.server,
                                server_host="b", transports=transports, timeout=30,
                                record=record)
    return log, record, outputs


def test_agents_are_ready_before_the_master_and_stopped_after(tmp_path: Path) -> None:
    log, record, outputs = _exec(_plan(tmp_path, MUTILATE))
    assert log == [
        "start b hashpower=20", "ready b sport = :11211",
        "start c 2", "ready c sport = :5556",
        "start a --affinity", "ready a sport = :5556",
        "start a --qps=100000", "wait a --qps=100000",
        "signal TERM c 2", "wait c 2", "signal TERM a --affinity", "wait a --affinity",
        "signal TERM b hashpower=20", "wait b hashpower=20"]
    assert [c.process.role for c, _ in record.clients] == ["master", "agent1", "agent2"]
    assert len(outputs) == 1 and outputs[0].client.stdout == "out of a"


def test_clients_start_together_and_each_output_is_kept(tmp_path: Path) -> None:
    log, record, outputs = _exec(_plan(tmp_path, SOCKPERF))
    starts = [i for i, line in enumerate(log) if line.startswith("start a")]
    waits = [i for i, line in enumerate(log) if line.startswith("wait a")]
    assert len(starts) == 2 and len(waits) == 2 and max(starts) < min(waits)
    assert [(c.process.role, c.name) for c, _ in record.clients] == [
        ("c1", "client-c1"), ("c2", "client-c2")]
    assert len(outputs) == 2 and outputs[0].server is outputs[1].server


# -- merge -----------------------------------------------------------------------------

def test_rows_stay_per_client_and_latencies_are_pooled(tmp_path: Path) -> None:
    plan = _plan(tmp_path, SOCKPERF)
    spec = plan.profile.variants[0].workload
    c1, c2 = spec.clients
    server = [Value("server_messages", 30, "count")]
    results = [
        (c1, ToolResult([Value("latency_p99", 40.0, "us"), Value("msg_rate", 1000, "msg/s")],
                        server, np.array([10.0, 20.0]))),
        (c2, ToolResult([Value("latency_p99", 80.0, "us"), Value("msg_rate", 900, "msg/s")],
                        server, np.array([30.0]))),
    ]
    rows, latencies = workload_rows.rows(plan, Trial(1, "one", 1), spec, results)
    got = {(r.role, r.host, r.metric): r.value for r in rows}
    assert got == {("c1", "a", "latency_p99"): 40.0, ("c1", "a", "msg_rate"): 1000.0,
                   ("c2", "a", "latency_p99"): 80.0, ("c2", "a", "msg_rate"): 900.0,
                   ("server", "b", "server_messages"): 30.0}  # the server's once
    assert sorted(latencies.tolist()) == [10.0, 20.0, 30.0]
    assert all(r.source == "sockperf" for r in rows)
