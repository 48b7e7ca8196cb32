"""The pktgen tool: its commands, what it makes of the sender's and the receiver's
outputs (real captures from VM-testbed trials), and its receiver wrapper run for real
under GNU timeout with a stand-in receiver (no root, nothing on the network)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from napilab.harness.errors import InputError
from napilab.harness.hosts import facts
from napilab.runners.base import ToolFailed, Value
from napilab.runners.workloads import pktgen
from napilab.runners.workloads.workload import Context, ProcessOutput, ToolOutput

DATA = Path(__file__).parents[1] / "data"
CTX = Context(target="192.0.2.2", bind="192.0.2.2", duration=10, workdir="/tmp/w", trial="001")
TESTPMD = ["dpdk-testpmd", "-l", "0-1", "--vdev=net_af_xdp0,iface=data0,busy_budget=0", "--",
           "--forward-mode=rxonly", "--stats-period=1"]
RECEIVER = {"server_argv": TESTPMD, "metrics": "testpmd",
            "ready_pattern": "start packet forwarding"}


def test_the_client_sends_to_the_receivers_address_with_the_profiles_frames() -> None:
    tool = pktgen.PktgenTool()
    commands = tool.commands({"size": 128, "rate": 50000, "burst": 8, "threads": 2,
                              "dst_mac": "52:54:00:6E:01:AF"}, RECEIVER, CTX)
    assert commands.client[:2] == ["sh", "-c"] and commands.client[2] == pktgen.CLIENT_SCRIPT
    assert commands.client[3:] == ["napilab-pktgen", "10", "192.0.2.2", "52:54:00:6e:01:af",
                                   "128", "50000", "8", "0", "2", "", "9"]
    server = commands.server
    assert server is not None and server.stop_signal == "INT" and server.stop_grace == 30
    assert server.argv[:6] == ["sh", "-c", pktgen.RECEIVER_SCRIPT, "napilab-receiver", "INT",
                               "30"]
    assert server.argv[6:] == TESTPMD
    assert server.ready.log_pattern == "start packet forwarding" and server.ready.timeout == 120


@pytest.mark.parametrize(("client", "server", "message"), [
    ({"size": 59}, {}, "size 59: an integer from 60 to 9000"),
    ({"dst_mac": "ff:ff:ff:ff:ff"}, {}, "is not a MAC address"),
    ({"rate": True}, {}, "rate True"),
    ({"dev": "eth0; reboot"}, {}, "is not an interface name"),
    ({}, {"server_argv": TESTPMD, "ready_pattern": "x"}, "the receiver needs `metrics`"),
    ({}, {"server_argv": TESTPMD, "metrics": "testpmd"}, "needs `ready_pattern`"),
    ({}, {"server_argv": TESTPMD, "metrics": "nosuch", "ready_pattern": "x"},
     "no metrics preset 'nosuch'"),
    ({}, {"metrics": "testpmd"}, "server args without `server_argv`"),
    ({}, dict(RECEIVER, stop_signal="STOP"), "stop_signal 'STOP': one of"),
])
def test_bad_arguments_are_refused_before_any_host(client: dict[str, object],
                                                   server: dict[str, object],
                                                   message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace("[", r"\[")):
        pktgen.PktgenTool().commands(client, server, CTX)  # type: ignore[arg-type]


def _output(receiver: str, xsk: str) -> ToolOutput:
    tool = pktgen.PktgenTool()
    commands = tool.commands({}, RECEIVER, CTX)
    sent = (DATA / "pktgen/7.2.13-tcg-guest/one-thread-clone-burst32.txt").read_text()
    return ToolOutput(ProcessOutput(0, sent, ""),
                      ProcessOutput(0, (DATA / receiver).read_text(), (DATA / xsk).read_text()),
                      commands)


def test_delivered_rate_is_the_receivers_packets_over_the_senders_time() -> None:
    result = pktgen.PktgenTool().parse(_output(
        "testpmd/dpdk-22.11-af-xdp-tcg-guest/rxonly-1c-plain-sigint.txt",
        "pktgen/7.2.13-tcg-guest/xsk-testpmd-copy-mode.txt"))
    client = {v.metric: v.value for v in result.client}
    server = {v.metric: v.value for v in result.server}
    assert client["tx_packets"] == 942171 and client["tx_seconds"] == 10.070365
    # testpmd's forward statistics: 733652 packets in pktgen's 10.070365 s
    assert server["fwd_rx_packets"] == 733652
    assert server["delivered_pps"] == pytest.approx(733652 / 10.070365)
    assert server["delivered_ratio"] == pytest.approx(733652 / 942171)
    assert server["xsk_sockets"] == 1 and server["xsk_zerocopy"] == 0


def test_xdpsock_receivers_count_is_its_last_cumulative_rx() -> None:
    tool = pktgen.PktgenTool()
    receiver = dict(RECEIVER, metrics="xdpsock", server_argv=["xdpsock", "-r"])
    commands = tool.commands({}, receiver, CTX)
    sent = (DATA / "pktgen/7.2.13-tcg-guest/one-thread-clone-burst32.txt").read_text()
    got = (DATA / "xdpsock/bpf-examples-659ce29/rxdrop-one-socket-sigint.txt").read_text()
    result = tool.parse(ToolOutput(ProcessOutput(0, sent, ""), ProcessOutput(0, got, ""),
                                   commands))
    server = {v.metric: v.value for v in result.server}
    assert server["rx_packets"] == 854224
    assert server["delivered_pps"] == pytest.approx(854224 / 10.070365)
    assert "xsk_sockets" not in server  # no napilab-xsk block: nothing claimed


def test_delivered_needs_a_count_and_a_time() -> None:
    sent = [Value("tx_packets", 0, "count"), Value("tx_seconds", 0.0, "s")]
    assert pktgen.delivered([Value("rx_packets", 5, "packets")], sent) == [
        Value("delivered_pps", 0.0, "pps")]
    assert pktgen.delivered([Value("rx_pps", 5, "pps")], sent) == []


def test_a_failed_sender_or_receiver_fails_the_trial_with_its_words() -> None:
    tool = pktgen.PktgenTool()
    commands = tool.commands({}, RECEIVER, CTX)
    with pytest.raises(ToolFailed, match="the packet source exited 2"):
        tool.parse(ToolOutput(ProcessOutput(2, "", "pktgen: data0: 'clone_skb 1000': "
                                                   "ERROR: clone_skb is not supported"),
                              None, commands))
    sent = (DATA / "pktgen/7.2.13-tcg-guest/one-thread-clone-burst32.txt").read_text()
    with pytest.raises(ToolFailed, match="the receiver exited 1"):
        tool.parse(ToolOutput(ProcessOutput(0, sent, ""),
                              ProcessOutput(1, "", "EAL: Error - exiting with code: 1"),
                              commands))


def test_a_command_argvs_program_is_named_past_its_wrappers() -> None:
    assert facts.argv_program(["timeout", "-s", "INT", "${duration}", "xdpsock", "-r"]) == \
        "xdpsock"
    assert facts.argv_program(["taskset", "-c", "5", "/tmp/x/xdpsock"]) == "/tmp/x/xdpsock"
    assert facts.argv_program("timeout -k 5 10 env A=1 dpdk-testpmd -l 0") == "dpdk-testpmd"
    assert facts.argv_program(["${prog}", "-x"]) is None
    assert facts.argv_program(None) is None
    assert facts.workload_binaries("pktgen", "server", RECEIVER) == (
        "ss", "setsid", "dpdk-testpmd")


FAKE = """trap 'echo "got $1"; exit 0' INT
echo ready
while :; do sleep 0.05; done
"""
SLOW = """trap 'sleep 1; echo "got $1"; exit 0' INT
echo ready
while :; do sleep 0.05; done
"""
STUBBORN = """trap '' INT
echo ready
while :; do sleep 0.05; done
"""

needs = pytest.mark.skipif(not all(shutil.which(p) for p in ("timeout", "setsid", "ss", "ip")),
                           reason="needs coreutils timeout, util-linux setsid, iproute2")


def _wrapped(tmp_path: Path, body: str) -> tuple[subprocess.Popen[str], Path]:
    script = tmp_path / "receiver.sh"
    script.write_text(body)
    proc = subprocess.Popen(["timeout", "-k", "5", "30", "sh", "-c", pktgen.RECEIVER_SCRIPT,
                             "napilab-receiver", "INT", "5", "sh", str(script), "INT"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc, script


def _leftovers(script: Path) -> str:
    return subprocess.run(["pgrep", "-af", str(script)], capture_output=True,
                          text=True).stdout


@needs
def test_the_wrapper_lists_the_sockets_before_the_receiver_hears_the_stop(
        tmp_path: Path) -> None:
    """timeout sends its signal to its whole process group: the receiver, in its own
    session, hears it from the wrapper only, after `ss` has run."""
    proc, script = _wrapped(tmp_path, FAKE)
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
        subprocess.run(["pkill", "-KILL", "-f", str(script)], check=False)
    assert proc.returncode == 0
    assert out == "got INT\n"
    lines = err.splitlines()
    start = lines.index(pktgen.XSK_MARK)
    assert lines[start + 1].startswith(("State", "ss: ")) and pktgen.XSK_END in lines
    assert _leftovers(script) == ""


@needs
def test_a_receiver_that_ignores_the_stop_is_killed_before_timeouts_kill(
        tmp_path: Path) -> None:
    proc, script = _wrapped(tmp_path, STUBBORN)
    try:
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        took = time.monotonic() - started
    finally:
        proc.kill()
        subprocess.run(["pkill", "-KILL", "-f", str(script)], check=False)
    assert proc.returncode == 128 + signal.SIGKILL  # the receiver's status, passed on
    # the wrapper's KILL after GRACE - 1 = 4 s, not timeout's own at 5: it lived to print
    assert took > 3.5 and pktgen.XSK_END in err.splitlines()
    assert _leftovers(script) == ""


def test_af_xdp_programs_are_known_by_name_or_vdev() -> None:
    assert facts.af_xdp_program({"server_argv": ["xdpsock", "-i", "eth0"]}) == "xdpsock"
    assert facts.af_xdp_program({"argv": ["timeout", "-s", "INT", "20", "dpdk-testpmd",
                                          "--vdev=net_af_xdp0,iface=eth0"]}) == "dpdk-testpmd"
    assert facts.af_xdp_program({"argv": ["dpdk-testpmd", "--vdev=net_tap0"]}) is None
    assert facts.af_xdp_program({}) is None


PROFILE = """\
name: afxdp
hosts: {source: {host: a}, sut: {host: b}}
workload:
  tool: pktgen
  duration: 2
  client: {role: source}
  server:
    role: sut
    args: {server_argv: [xdpsock, -i, eth0, -r], metrics: xdpsock, ready_pattern: "sock0@"}
variants:
  plain: {}
  with-netperf:
    group: netperf
    workload: {tool: netperf.UDP_RR, client: {role: sut}, server: {role: source}}
"""


def test_a_run_is_refused_where_the_kernel_has_no_af_xdp(tmp_path: Path) -> None:
    from napilab.harness.engine.engine import af_xdp_problems
    from napilab.harness.inventory.inventory import load_inventory
    from napilab.harness.profile.plan import bind
    from napilab.harness.profile.profile import load_profile
    from napilab.harness.store.manifest import HostFacts

    (tmp_path / "p.yaml").write_text(PROFILE)
    (tmp_path / "i.yaml").write_text("hosts: {a: {address: 192.0.2.1}, b: {address: 192.0.2.2}}\n")
    plan = bind(load_profile(tmp_path / "p.yaml"), load_inventory(tmp_path / "i.yaml"))
    without = {"a": HostFacts(extra={"af_xdp": "yes"}), "b": HostFacts(extra={"af_xdp": "no"})}
    assert af_xdp_problems(plan, without) == [
        "b: variant plain runs xdpsock, which needs AF_XDP sockets, and the kernel has none "
        "(/proc/net/protocols lists no XDP: CONFIG_XDP_SOCKETS)"]
    assert af_xdp_problems(plan, {"a": HostFacts(), "b": HostFacts(extra={"af_xdp": "yes"})}) \
        == []
    assert af_xdp_problems(plan, {"b": HostFacts()}) == []  # not read: not refused


def test_af_xdp_is_read_from_the_kernels_protocol_list() -> None:
    # /proc/net/protocols of this machine (6.18.44), as read; the kernel registers AF_XDP as XDP
    real = (DATA.parent / "golden/protocols/6.18.44-host.txt").read_text()
    assert "\nXDP " in real and facts.af_xdp(real) == "yes"
    cut = "".join(line for line in real.splitlines(keepends=True) if not line.startswith("XDP"))
    assert facts.af_xdp(cut) == "no"
    assert facts.FILES["protocols"] == "/proc/net/protocols"


def test_the_netlink_hostscript_names_xdp_features_as_ynl_does() -> None:
    import runpy
    import struct

    script = runpy.run_path(str(Path(pktgen.__file__).parents[2] / "harness/knobs/kinds/"
                                "hostscripts/netdev_nl.py"))
    payload = (script["attr"](1, struct.pack("I", 3))
               + script["attr"](3, struct.pack("Q", 0b101011))
               + script["attr"](4, struct.pack("I", 1)))
    assert script["decode"](payload, script["DEV_ATTRS"]) == {
        "ifindex": 3, "xdp-features": ["basic", "redirect", "xsk-zerocopy", "rx-sg"],
        "xdp-zc-max-segs": 1}


@needs
def test_a_second_stop_signal_does_not_kill_the_wrapper(tmp_path: Path) -> None:
    """timeout signals the wrapper and then its process group: a second INT arriving
    while the wrapper's trap runs (seen once in 18 TCG trials, the XDP program and
    promiscuous mode left behind) must not end it before it has cleaned up."""
    proc, script = _wrapped(tmp_path, SLOW)
    try:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)  # the receiver takes 1 s to end
        wrapper = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                 text=True).stdout.split()
        assert len(wrapper) == 1
        subprocess.run(["kill", "-INT", wrapper[0]], check=True)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
        subprocess.run(["pkill", "-KILL", "-f", str(script)], check=False)
    assert proc.returncode == 0 and out == "got INT\n"
    assert pktgen.XSK_END in err.splitlines()
    assert _leftovers(script) == ""
