"""`napilab plan` opens with a summary: the SSH endpoint ssh_config resolves each host to,
and what each variant changes per host against the variant it is compared with;
`--summary` prints only that."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.engine.plan_summary import Change, summarize
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
SEED_000 = ROOT / "profiles" / "seed-000-threaded-busypoll.yaml"
EXAMPLE_INVENTORY = ROOT / "profiles" / "inventory.example.yaml"


@pytest.fixture(autouse=True)
def _no_ssh_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # this machine's ~/.ssh/config unread


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, _ = run_cli(capsys, "plan", *args)
    assert code == 0
    return out


def test_seed_000_summary(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, str(SEED_000), "-i", str(EXAMPLE_INVENTORY), "--summary")
    assert out.splitlines() == [
        "profile seed-000-threaded-busypoll: 4 variant(s) x 5 = 20 trial(s), order "
        "interleaved, estimated 318s",
        "traced twins (collect.trace.traced: twins): sysctl-busypoll+traced, "
        "threaded-busypoll+traced: each variant runs again with the tracer, beside it in "
        "every repetition, so the run has twice the trials; verdicts come from the "
        "untraced trials, the traced ones give the per-stage breakdown and the tracer's "
        "overhead",
        "hosts (as ssh_config resolves them):",
        "  sut      ssh root@198.51.100.10:22",
        "  peer     ssh lab@198.51.100.11:22, become sudo",
        "every variant sets:",
        "  sut      + ethtool eth0/channels/combined = 1",
        "  sut      + irq_affinity eth0 = 2",
        "variants (each against the variant it is compared with):",
        "  sysctl-busypoll (baseline): busy_poll/busy_read 400 us, napi_defer_hard_irqs 2, "
        "gro_flush_timeout 15000",
        "    sut      + sysctl net.core.busy_poll = 400",
        "    sut      + sysctl net.core.busy_read = 400",
        "    sut      + netdev eth0/napi_defer_hard_irqs = 2",
        "    sut      + netdev eth0/gro_flush_timeout = 15000",
        "  sysctl-busypoll+traced (sysctl-busypoll with the trace collector, not compared): "
        "busy_poll/busy_read 400 us, napi_defer_hard_irqs 2, gro_flush_timeout 15000",
        "    sut      + collect trace = on",
        "  threaded-busypoll against sysctl-busypoll: NAPI threaded busy-poll, kthread on "
        "CPU 2, SCHED_FIFO 50",
        "    sut      + napi eth0 queue 0/threaded = busy-poll",
        "    sut      + napi_threads eth0 queue 0/cpus = 2",
        "    sut      + napi_threads eth0 queue 0/policy = fifo:50",
        "    sut      - sysctl net.core.busy_poll (was 400; the host keeps its own value)",
        "    sut      - sysctl net.core.busy_read (was 400; the host keeps its own value)",
        "    sut      - netdev eth0/napi_defer_hard_irqs (was 2; the host keeps its own value)",
        "    sut      - netdev eth0/gro_flush_timeout (was 15000; the host keeps its own value)",
        "  threaded-busypoll+traced (threaded-busypoll with the trace collector, not "
        "compared): NAPI threaded busy-poll, kthread on CPU 2, SCHED_FIFO 50",
        "    sut      + collect trace = on",
    ]
    full = _plan(capsys, str(SEED_000), "-i", str(EXAMPLE_INVENTORY))
    assert full.startswith(out + "trials:\ntrial 001: sysctl-busypoll rep 1\n")
    assert len(full.splitlines()) > 10 * len(out.splitlines())


def test_summary_json_has_no_steps(capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_plan(capsys, str(SEED_000), "-i", str(EXAMPLE_INVENTORY), "--summary",
                           "--json"))
    assert "steps" not in doc
    assert doc["summary"]["endpoints"]["sut"] == {
        "transport": "ssh", "alias": "198.51.100.10", "hostname": "198.51.100.10",
        "port": 22, "user": "root"}
    threaded = next(v for v in doc["summary"]["variants"] if v["name"] == "threaded-busypoll")
    assert threaded["against"] == "sysctl-busypoll"
    assert {"host": "sut", "what": "napi eth0 queue 0/threaded", "old": None,
            "new": "busy-poll"} in threaded["changes"]
    full = json.loads(_plan(capsys, str(SEED_000), "-i", str(EXAMPLE_INVENTORY), "--json"))
    assert full["summary"] == doc["summary"] and len(full["steps"]) == 20  # twins: 2 x 5


def test_endpoints_as_ssh_config_resolves_them(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host lab-sut\n  HostName 198.51.100.20\n  Port 2222\n  User bench\n"
                      "  ProxyJump gw1,ops@gw2:2200\n"
                      "Host gw1\n  HostName 198.51.100.30\n  User jumper\n"
                      "Host lab-peer\n  HostName 198.51.100.21\n  User bench\n"
                      "  ProxyCommand nc -X connect -x 198.51.100.40:3128 %h %p\n")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(f"ssh_config: {config}\nhosts:\n"
                         "  sut: {address: lab-sut, iface: eth0, cpus: 16}\n"
                         "  peer: {address: lab-peer, user: root, port: 22, iface: eth0}\n")
    out = _plan(capsys, str(SEED_000), "-i", str(inventory), "--summary").splitlines()
    hosts = out.index("hosts (as ssh_config resolves them):") + 1
    assert out[hosts:hosts + 2] == [
        "  sut      ssh bench@198.51.100.20:2222 (ssh_config Host lab-sut) via ProxyJump "
        "jumper@198.51.100.30:22 -> ops@gw2:2200",
        "  peer     ssh root@198.51.100.21:22 (ssh_config Host lab-peer) via ProxyCommand "
        "'nc -X connect -x 198.51.100.40:3128 198.51.100.21 22'"]  # %h %p as paramiko fills them


def test_local_hosts_and_workload_changes(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, str(ROOT / "profiles" / "seed-001-backlog-napi.yaml"), "-i",
                str(EXAMPLE_INVENTORY), "--summary").splitlines()
    assert out[1] == "compared: local, norps with rps"
    assert out[3:5] == ["  sender   local", "  receiver local, netns bn"]
    norps = out[out.index("  norps against rps: RPS off") + 1]
    assert norps == "    receiver ~ rps bn0r/rx-*: 1 -> none"
    assert "    all      ~ workload tool: ping -> iperf3" in out
    assert "    sender   + workload client.args.P = 4" in out


def test_group_leaders_and_argv_words() -> None:
    """The first variant of a group is shown against the baseline; the variants of the
    group against it; an argv shows only the words that differ."""
    plan = bind(load_profile(ROOT / "profiles" / "seed-002-prefer-busypoll.yaml"),
                load_inventory(EXAMPLE_INVENTORY))
    _, variants = summarize(plan)
    against = {v.name: v.against for v in variants}
    assert against["udp-rr"] is None and against["xdpsock"] == "udp-rr"
    assert against["xdpsock-budget-8"] == "xdpsock"
    two_c = next(v for v in variants if v.name == "xdpsock-2c")
    texts = [c.text() for c in two_c.changes]
    assert texts == ["~ workload client.cpus: 5 -> 4",
                     "~ workload client.args.argv: -q 5 -> -q 20"]
    budget = next(v for v in variants if v.name == "xdpsock-budget-8")
    assert "~ workload client.args.argv: + -B -b 8" in [c.text() for c in budget.changes]


def test_change_texts() -> None:
    assert Change("h", "sysctl net.core.busy_read", None, "20").text() == \
        "+ sysctl net.core.busy_read = 20"
    assert Change("h", "workload client.args.o", "x", None).text() == \
        "- workload client.args.o (was x)"
    assert Change("h", "workload client.args.argv", ("a", "--b=1", "c"),
                  ("a", "--b=2", "c", "-d")).text() == \
        "~ workload client.args.argv: --b=1 -> --b=2; + -d"
