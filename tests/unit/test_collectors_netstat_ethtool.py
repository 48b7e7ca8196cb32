"""/proc/net/netstat and /proc/net/snmp (the kernel's quirks, deltas of real captures,
the collector on this machine's files, the profile's `names`, the A/B table's default
lines) and `ethtool -S` (per-queue names, deltas). Every captured file is also checked
against its `.expected.json` by test_parsers_golden.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from napilab.harness.profile.profile import load_profile
from napilab.reports.ab.compare import load_run, table
from napilab.runners import registry
from napilab.runners.base import ParseError, Value
from napilab.runners.collectors import collector, ethtool_stats, netstat
from napilab.runners.collectors.collector import HostInfo
from napilab.runners.collectors.netstat import NetstatCollector
from tests.synthetic_runs import store_run

DATA = Path(__file__).parents[1] / "data"
NETSTAT = DATA / "netstat" / "6.18.44-fc-v1045"
ETHTOOL = DATA / "ethtool_stats"
HOST = HostInfo()


def read(path: Path) -> str:
    return path.read_bytes().decode()


def snapshot(when: str) -> netstat.Netstat:
    """The collector's snapshot of both files captured before or after one ping of 3
    echoes and one TCP connection over 127.0.0.1."""
    return NetstatCollector().parse({
        "/proc/net/netstat": read(NETSTAT / f"{when}_ping_tcp_netstat.txt"),
        "/proc/net/snmp": read(NETSTAT / f"{when}_ping_tcp_snmp.txt")}, HOST)


# --- /proc/net/netstat and /proc/net/snmp ------------------------------------------------

def test_netstat_delta_around_a_real_ping_and_tcp_connection() -> None:
    before, after = snapshot("before"), snapshot("after")
    assert before.protocols == ("TcpExt", "IpExt", "MPTcpExt", "Ip", "Icmp", "IcmpMsg", "Tcp",
                                "Udp", "UdpLite")
    values = NetstatCollector().delta(before, after, {}, HOST)
    got = {v.metric: v for v in values}
    assert len(got) == len(values) == len(after.values)  # every field, once: none went down
    assert (got["Icmp.OutEchos"].value, got["Icmp.InEchoReps"].value) == (3, 3)
    assert got["IcmpMsg.InType8"].value == 8 - 5
    # The kernel prints an ICMP type once its count is not 0: these two were 0 before.
    assert "IcmpMsg.InType0" not in before.values and "IcmpMsg.OutType8" not in before.values
    assert (got["IcmpMsg.InType0"].value, got["IcmpMsg.OutType8"].value) == (3, 3)
    assert (got["Tcp.ActiveOpens"].value, got["Tcp.PassiveOpens"].value) == (1, 1)
    assert got["Tcp.InSegs"].value == 363470 - 363386
    assert got["TcpExt.BusyPollRxPackets"].value == 0 and got["Tcp.RetransSegs"].value == 0
    assert got["IpExt.InOctets"].value == 21072
    # Gauges are their value after the trial, never a difference (MaxConn - MaxConn = 0).
    assert got["Tcp.MaxConn"] == Value("Tcp.MaxConn", -1, "count")
    assert got["Tcp.RtoMin"] == Value("Tcp.RtoMin", 200, "ms")
    assert got["Tcp.RtoMax"] == Value("Tcp.RtoMax", 120000, "ms")
    assert (got["Tcp.CurrEstab"].value, got["Ip.Forwarding"].value,
            got["Ip.DefaultTTL"].value, got["MPTcpExt.MPCurrEstab"].value) == (2, 2, 64, 0)
    assert all(v.cpu is None for v in values)


def test_netstat_names_keep_a_protocol_or_one_field() -> None:
    before, after = snapshot("before"), snapshot("after")
    tcp = read(NETSTAT / "after_ping_tcp_snmp.txt").split("\nTcp: ")[1].split()
    values = NetstatCollector().delta(before, after, {"names": ["TcpExt.BusyPollRxPackets",
                                                                "Tcp", "Udp.NoSuchField"]}, HOST)
    assert [v.metric for v in values] == ["TcpExt.BusyPollRxPackets"] + [f"Tcp.{f}" for f in tcp]


def test_netstat_a_counter_that_went_down_is_left_out() -> None:
    """Snapshots swapped: every counter that moved went down (a 32-bit kernel's
    unsigned long wrapping looks so); those are absent, never negative or guessed."""
    later, earlier = snapshot("before"), snapshot("after")
    got = {v.metric: v.value for v in netstat.delta(earlier, later)}
    assert "Tcp.ActiveOpens" not in got and "Icmp.OutEchos" not in got
    assert "IcmpMsg.InType0" not in got  # not in the "after" snapshot at all
    assert got["Tcp.RetransSegs"] == 0 and got["Tcp.CurrEstab"] == 2 and got["Tcp.MaxConn"] == -1
    assert min(got.values()) == -1  # MaxConn, the one negative value: a gauge


def test_netstat_icmpmsg_comes_in_pairs_of_16_types() -> None:
    """icmpmsg_put() ends a pair of lines after 16 types: 17 types make two pairs, and
    a namespace that saw no ICMP prints no IcmpMsg line at all."""
    types = [f"InType{t}" for t in range(17)]
    text = (f"IcmpMsg: {' '.join(types[:16])}\nIcmpMsg: {' 1' * 16}\n"
            f"IcmpMsg: {types[16]}\nIcmpMsg: 7\n")
    snap = netstat.parse(text)
    assert snap.protocols == ("IcmpMsg",) and len(snap.values) == 17
    assert snap.values["IcmpMsg.InType16"] == 7
    without = netstat.parse("Icmp: InMsgs\nIcmp: 0\n")
    assert netstat.delta(without, snap) == [Value(f"IcmpMsg.{t}", 1 if i < 16 else 7, "count")
                                            for i, t in enumerate(types)]


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty file"),
    ("TcpExt: A B\nIpExt: 1 2\n", "the line after the TcpExt header is not its values"),
    ("TcpExt: 1 2\nTcpExt: 1 2\n", "expected a TcpExt header of field names"),
    ("TcpExt:\nTcpExt:\n", "expected a TcpExt header of field names"),
    ("TcpExt: A A\nTcpExt: 1 2\n", "TcpExt.A appears twice"),
    ("TcpExt: A\nTcpExt: 1\nTcpExt: B\nTcpExt: 2\n", "TcpExt appears twice"),
    ("TcpExt A\nTcpExt 1\n", "does not start with `Protocol:`"),
    ("Tcp: MaxConn\nTcp: --1\n", "Tcp.MaxConn is '--1', not an integer"),
    ("Tcp: RetransSegs\nTcp: +8\n", "not an unsigned integer"),
    ("Tcp: RetransSegs\nTcp: ٣\n", "not an unsigned integer"),  # int() would take it
])
def test_netstat_refuses(text: str, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        netstat.parse(text)
    assert reason in info.value.reason


def test_netstat_one_protocol_in_both_files_is_refused() -> None:
    files = {"/proc/net/netstat": read(NETSTAT / "before_ping_tcp_netstat.txt"),
             "/proc/net/snmp": read(NETSTAT / "before_ping_tcp_netstat.txt")}
    with pytest.raises(ParseError, match="in two files"):
        NetstatCollector().parse(files, HOST)


def test_netstat_collector_reads_this_machine_in_one_snapshot() -> None:
    argv = registry.snapshot_argv(["netstat"])
    assert argv == ["tail", "-v", "-n", "+1", "--", "/proc/uptime", "/proc/net/netstat",
                    "/proc/net/snmp"]
    snaps = []
    for _ in range(2):
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        snaps.append(NetstatCollector().parse(collector.split_tail(out), HOST))
    values = NetstatCollector().delta(snaps[0], snaps[1], {}, HOST)
    assert len(values) == len(snaps[1].values)
    assert {"TcpExt.BusyPollRxPackets", "TcpExt.TCPTimeouts", "Tcp.RetransSegs"} <= {
        v.metric for v in values}
    assert all(v.value >= 0 for v in values if v.metric not in netstat.GAUGES)


def test_profile_names_netstat_fields(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("""\
name: netstat
hosts: {client: {host: a}, server: {host: b}}
workload: {tool: ping, duration: 2, client: {role: client}, server: {role: server}}
collect:
  netstat: {roles: [server], names: [TcpExt.BusyPollRxPackets, Tcp, IcmpMsg.OutType0]}
""")
    spec = load_profile(path).variants[0].collect[0]
    assert (spec.name, spec.roles) == ("netstat", ("server",))
    assert spec.options == {"names": ["TcpExt.BusyPollRxPackets", "Tcp", "IcmpMsg.OutType0"]}


# --- ethtool -S --------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "metric", "queue"), [
    ("rx_queue_0_xdp_packets", "rx_xdp_packets.q0", 0),  # veth
    ("tx_queue_3_bytes", "tx_bytes.q3", 3),  # igc, ifb
    ("rx0_packets", "rx_packets.q0", 0),  # mlx5, virtio_net 6.10+
    ("tx0_tx_timeouts", "tx_tx_timeouts.q0", 0),  # virtio_net 6.18: total tx_tx_timeouts
    ("rx12_xdp_tx_xmit", "rx_xdp_tx_xmit.q12", 12),
    ("ch0_events", "ch_events.q0", 0),  # mlx5 channels
    ("rx_prio0_bytes", "rx_prio0_bytes", None),  # a priority, not a queue
    ("rx_64_bytes_phy", "rx_64_bytes_phy", None),
    ("rx_queue_0", "rx_queue_0", None),
    ("peer_ifindex", "peer_ifindex", None),
])
def test_ethtool_queue_names(name: str, metric: str, queue: int | None) -> None:
    assert ethtool_stats.metric_of(name) == (metric, queue)


def test_ethtool_per_queue_metrics_match_the_drivers_totals() -> None:
    """virtio_net 6.10+ prints each total (`rx_hw_drops`) and per queue (`rx0_hw_drops`):
    the per-queue metric is the total's name with `.q0`."""
    stats = ethtool_stats.parse(read(ETHTOOL / "lore" / "virtio_net_device_stats.txt"))
    totals = {s.metric: s.value for s in stats.stats if s.queue is None}
    queues = {s.metric.removesuffix(".q0"): s.value for s in stats.stats if s.queue == 0}
    assert totals == queues and len(totals) == 36  # one queue pair: equal


def test_ethtool_delta_of_two_real_snapshots() -> None:
    kernel = ETHTOOL / "6.18.44-fc-v1045"
    before = ethtool_stats.parse(read(kernel / "virtio_net_eth0_before.txt"))
    after = ethtool_stats.parse(read(kernel / "virtio_net_eth0_after.txt"))
    moved = [v for v in ethtool_stats.delta(before, after) if v.value]
    assert moved == [Value("tx_kicks", 2, "count"), Value("tx_kicks.q0", 2, "count")]
    assert len(ethtool_stats.delta(before, after)) == 20
    assert [v.metric for v in ethtool_stats.delta(after, before)] == [
        s.metric for s in before.stats if s.metric not in ("tx_kicks", "tx_kicks.q0")]
    veth = ethtool_stats.parse(read(kernel / "veth.txt"))
    assert ethtool_stats.delta(veth, veth)[0] == Value("peer_ifindex", 3, "count")  # gauge


def test_ethtool_refuses_a_value_over_64_bits_and_a_name_twice() -> None:
    with pytest.raises(ParseError, match="does not fit 64 bits"):
        ethtool_stats.parse(f"NIC statistics:\n     rx_packets: {1 << 64}\n")
    with pytest.raises(ParseError, match="appears twice"):
        ethtool_stats.parse("NIC statistics:\n     rx_packets: 1\n     rx_packets: 2\n")
    with pytest.raises(ParseError, match="no statistics"):
        ethtool_stats.parse("NIC statistics:\n")
    assert ethtool_stats.parse("NIC statistics:\n     0: rx_ucast_pkts: 5\n").stats[0].name == \
        "0: rx_ucast_pkts"  # a driver's name may hold `: ` (qede)


def test_netstat_headline_counters_are_default_lines_of_the_ab_table(tmp_path: Path) -> None:
    counts = {"off": [0.0, 0, 0], "on": [5000.0, 5200, 4900]}
    run = store_run(tmp_path, {"ping.rtt_avg": {"off": [30.0, 31, 32], "on": [20.0, 21, 22]},
                               **{f"netstat.{m}": counts for m in (
                                   "TcpExt.BusyPollRxPackets", "Tcp.RetransSegs",
                                   "TcpExt.TCPTimeouts", "Tcp.InSegs")}},
                    units={"ping.rtt_avg": "us"} | {f"netstat.{m}": "count" for m in (
                        "TcpExt.BusyPollRxPackets", "Tcp.RetransSegs", "TcpExt.TCPTimeouts",
                        "Tcp.InSegs")})
    labels = [line.label for line in table(load_run(run)).lines]
    assert labels == ["rtt_avg (sender)", "netstat TcpExt.BusyPollRxPackets (sender)",
                      "netstat Tcp.RetransSegs (sender)", "netstat TcpExt.TCPTimeouts (sender)"]


def _sections(**outputs: tuple[str, int]) -> dict[str, str]:
    """A snapshot's files as the ethtool_stats section prints them: per interface its
    `ethtool -S` output (the captures) and `exit N`."""
    return {ethtool_stats.SECTION: "\n".join(outputs) + "\n",
            **{f"{ethtool_stats.SECTION}:{i}": f"{text}exit {code}\n"
               for i, (text, code) in outputs.items()}}


def test_ethtool_collector_reads_each_interface_and_skips_drivers_without_stats() -> None:
    kernel = ETHTOOL / "6.18.44-fc-v1045"
    tap = read(kernel / "lo_no_stats_2to1.txt")  # `no stats available`, exit 94
    before = ethtool_stats.EthtoolStatsCollector().parse(_sections(
        eth0=(read(kernel / "virtio_net_eth0_before.txt"), 0), tap0=(tap, 94)), HOST)
    after = ethtool_stats.EthtoolStatsCollector().parse(_sections(
        eth0=(read(kernel / "virtio_net_eth0_after.txt"), 0), tap0=(tap, 94)), HOST)
    assert after.ifaces["tap0"] is None
    rows = ethtool_stats.EthtoolStatsCollector().delta(before, after, {}, HOST)
    assert [v for v in rows if v.value] == [Value("eth0.tx_kicks", 2, "count"),
                                            Value("eth0.tx_kicks.q0", 2, "count")]
    assert ethtool_stats.EthtoolStatsCollector().delta(before, after, {"ifaces": ["x"]},
                                                       HOST) == []


def test_ethtool_collector_refuses_a_failure_or_a_cut_section() -> None:
    with pytest.raises(ParseError, match="ethtool -S eth0 exited 75"):
        ethtool_stats.read_sections(_sections(eth0=("Cannot get stats strings\n", 75)))
    with pytest.raises(ParseError, match="eth0: no exit status"):
        ethtool_stats.read_sections({f"{ethtool_stats.SECTION}:eth0": "NIC statistics:\n"})


def test_ethtool_collector_reads_this_machine() -> None:
    if subprocess.run(["sh", "-c", "command -v ethtool"], capture_output=True).returncode:
        pytest.skip("ethtool is not installed (make test installs it)")
    out = subprocess.run(registry.snapshot_argv(["ethtool_stats"], "start"),
                         capture_output=True, text=True, check=True).stdout
    found = ethtool_stats.read_sections(collector.split_tail(out)).ifaces
    assert "lo" not in found and found  # every interface but lo, each read or absent


def test_ethtool_vmxnet3_queue_sections() -> None:
    """vmxnet3 (captured in a VM testbed guest, 2 queue pairs, around 300 pings from
    guest a): `Rx Queue#: N` sections of indented statistics, parts of a total after
    it; received packets counted by cast, summed into rx_packets.qN."""
    kernel = ETHTOOL / "7.2.13-tcg-guest"
    before = ethtool_stats.parse(read(kernel / "vmxnet3_data0_before.txt"))
    after = ethtool_stats.parse(read(kernel / "vmxnet3_data0_after.txt"))
    stats = after.by_metric()
    assert stats["rx_ucast_pkts.q0"].value == 300 and stats["rx_bcast_pkts.q0"].value == 1
    assert stats["rx_packets.q0"].value == 301 and stats["rx_packets.q1"].value == 0
    assert stats["rx_packets.q0"].name == "ucast pkts rx+mcast pkts rx+bcast pkts rx"
    assert stats["tx_ucast_pkts.q1"].value == 301  # the replies left on tx queue 1
    assert stats["rx_drv_dropped_total_fcs.q1"].queue == 1
    assert "tx_drv_dropped_total_giant_hdr.q0" in stats and "tx_giant_hdr.q0" in stats
    assert "rx_xdp_drops.q0" in stats and "tx timeout count" in stats
    moved = {v.metric: v.value for v in ethtool_stats.delta(before, after) if v.value}
    assert moved["rx_packets.q0"] == 301 and "rx_packets.q1" not in moved
    with pytest.raises(ParseError, match="outside a `Rx Queue#`"):
        ethtool_stats.parse("NIC statistics:\n       ucast pkts rx: 1\n")
    with pytest.raises(ParseError, match="appears twice"):
        ethtool_stats.parse("NIC statistics:\n     Rx Queue#: 0\n       ucast pkts rx: 1\n"
                            "     Rx Queue#: 0\n       ucast pkts rx: 2\n")
