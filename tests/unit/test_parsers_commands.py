"""Command building: the exact argv, readiness and fetched files of every tool."""

from __future__ import annotations

import re
from typing import Any

import pytest

from napilab.harness.errors import InputError
from napilab.runners.registry import TOOLS
from napilab.runners.workloads.workload import Context, Readiness, ServerCommand

CTX = Context(target="192.0.2.2", bind="192.0.2.1", duration=10, workdir="/run/napilab",
              trial="t003")


def commands(tool: str, client: dict[str, Any], server: dict[str, Any] | None = None,
             ctx: Context = CTX) -> Any:
    return TOOLS[tool].commands(client, server or {}, ctx)


def test_neper_tcp_rr_seed_000_server_gets_the_sizes_flows_and_length() -> None:
    # The server sizes its side of the exchange from its own flags (rr.c:161-173): without
    # -Q/-R it answers 1-byte requests with 1-byte responses and the client never completes
    # a transaction. -T and -p stay the client's (each side's threads; server has no latency).
    got = commands("neper.tcp_rr", {"Q": 200, "R": 400, "T": 1, "F": 50,
                                    "p": "50,90,99,999"})
    assert got.client == ["tcp_rr", "-c", "-H", "192.0.2.2", "-l", "10", "--nolog",
                          "-Q", "200", "-R", "400", "-T", "1", "-F", "50",
                          "-p", "50,90,99,999"]
    assert got.server == ServerCommand(["tcp_rr", "--nolog", "-H", "192.0.2.1", "-l", "10",
                                        "-Q", "200", "-R", "400", "-F", "50"],
                                       Readiness(port=12866, protocol="tcp"),
                                       exits_by_itself=True)
    assert got.client_files == {} and got.server_files == {}


def test_neper_ports_are_shared_and_readiness_follows_the_control_port() -> None:
    got = commands("neper.udp_rr", {"num-flows": 2}, {"C": 22866, "P": 22867})
    assert got.client == ["udp_rr", "-c", "-H", "192.0.2.2", "-l", "10", "--nolog",
                          "--num-flows=2", "-C", "22866", "-P", "22867"]
    assert got.server is not None
    assert got.server.argv == ["udp_rr", "--nolog", "-H", "192.0.2.1", "-l", "10",
                               "-C", "22866", "-P", "22867", "--num-flows=2"]
    assert got.server.ready.port == 22866


def test_neper_server_keeps_its_own_value_of_what_it_reads_for_itself() -> None:
    got = commands("neper.tcp_rr", {"B": 4096, "m": "1G", "num-ports": 2, "t": 50,
                                    "D": "10us"}, {"B": 1024, "T": 2})
    assert got.server is not None
    assert got.server.argv[6:] == ["-B", "1024", "-T", "2", "-m", "1G", "--num-ports=2"]


def test_neper_stream_maerts_buffer_and_a_reading_client() -> None:
    got = commands("neper.tcp_stream", {"B": 65536, "M": True, "D": 1000})
    assert got.server is not None
    assert got.server.argv[6:] == ["-B", "65536", "-M", "-D", "1000"]
    bidir = commands("neper.tcp_stream", {"r": True, "w": True})
    assert bidir.server is not None and bidir.server.argv[6:] == ["-w"]


def test_neper_all_samples_is_attached_to_its_flag_and_fetched() -> None:
    got = commands("neper.tcp_stream", {"A": True, "r": True, "w": True},
                   {"all-samples": True})
    path = "/run/napilab/t003-tcp_stream-client-samples.csv"
    assert got.client == ["tcp_stream", "-c", "-H", "192.0.2.2", "-l", "10", "--nolog",
                          "-r", "-w", f"--all-samples={path}"]
    assert got.client_files == {"all_samples": path}
    assert got.server_files == {
        "all_samples": "/run/napilab/t003-tcp_stream-server-samples.csv"}


def test_neper_fractional_duration_rounds_up() -> None:
    ctx = Context("192.0.2.2", "192.0.2.1", 2.5, "/w", "t")
    got = commands("neper.tcp_crr", {}, ctx=ctx)
    assert got.client[:7] == ["tcp_crr", "-c", "-H", "192.0.2.2", "-l", "3", "--nolog"]
    assert got.server.argv == ["tcp_crr", "--nolog", "-H", "192.0.2.1", "-l", "3"]


@pytest.mark.parametrize("args", [{"l": 5}, {"H": "x"}, {"c": True}, {"nolog": True},
                                  {"logtostderr": True}])
def test_neper_refuses_what_napilab_sets(args: dict[str, Any]) -> None:
    with pytest.raises(InputError, match="set by napilab"):
        commands("neper.tcp_rr", args)


def test_neper_refuses_a_flag_given_short_and_long() -> None:
    with pytest.raises(InputError, match="num-flows"):
        commands("neper.tcp_rr", {"F": 2, "num-flows": 3})


@pytest.mark.parametrize(("tool", "client", "server", "match"), [
    ("neper.tcp_rr", {"Q": 200}, {"Q": 100}, "one value on both sides"),
    ("neper.tcp_rr", {}, {"p": "50,99"}, "read by the client only"),
    ("neper.tcp_rr", {}, {"wait-start": 1}, "read by the client only"),
    ("neper.tcp_rr", {"num-clients": 2}, {}, "read by the server only"),
    ("neper.tcp_crr", {"D": 10}, {}, "not an option of tcp_crr"),
    ("neper.udp_stream", {"r": True}, {}, "not an option of udp_stream"),
])
def test_neper_refuses_what_the_other_side_or_binary_cannot_take(
        tool: str, client: dict[str, Any], server: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        commands(tool, client, server)


def test_neper_option_table_covers_every_binary_and_cites_the_source() -> None:
    from napilab.runners.workloads.neper import options as neper
    for binary, options in neper.OPTIONS.items():
        shorts = [o.short for o in options if o.short]
        assert len(shorts) == len(set(shorts)), binary
        assert len({o.long for o in options}) == len(options), binary
        for option in options:
            assert option.sides in (neper.SAME, neper.SERVER_TOO, neper.EACH, neper.CLIENT,
                                    neper.SERVER, neper.MIRROR)
            assert re.fullmatch(r"[a-z_]+\.c:[0-9,-]+", option.source), option


def test_iperf3_client_and_one_off_server() -> None:
    got = commands("iperf3", {"u": True, "b": "200M", "P": 2, "R": True}, {"p": 25201})
    assert got.client == ["iperf3", "-c", "192.0.2.2", "-p", "25201", "-t", "10", "-J",
                          "-u", "-b", "200M", "-P", "2", "-R"]
    assert got.server == ServerCommand(
        ["iperf3", "-s", "-1", "-J", "-B", "192.0.2.1", "-p", "25201"],
        Readiness(port=25201, protocol="tcp"), exits_by_itself=True)


def test_iperf3_default_port_and_reserved_flags() -> None:
    got = commands("iperf3", {"get-server-output": True})
    assert got.client == ["iperf3", "-c", "192.0.2.2", "-p", "5201", "-t", "10", "-J",
                          "--get-server-output"]
    with pytest.raises(InputError):
        commands("iperf3", {"t": 5})


def test_sockperf_ping_pong_tcp_with_full_log() -> None:
    got = commands("sockperf.ping-pong", {"tcp": True, "full-log": True, "mps": 10000,
                                          "m": 64}, {"p": 21111})
    log = "/run/napilab/t003-sockperf-full-log.csv"
    assert got.client == ["sockperf", "ping-pong", "-i", "192.0.2.2", "-p", "21111", "-t",
                          "10", "--tcp", "--full-log", log, "--mps=10000", "-m", "64"]
    assert got.client_files == {"full_log": log}
    assert got.server == ServerCommand(
        ["sockperf", "server", "-i", "192.0.2.1", "-p", "21111", "--tcp"],
        Readiness(port=21111, protocol="tcp"), exits_by_itself=False, stop_signal="INT")


def test_sockperf_under_load_udp_waits_for_a_udp_port() -> None:
    got = commands("sockperf.under-load", {"mps": 5000, "full-rtt": True})
    assert got.client == ["sockperf", "under-load", "-i", "192.0.2.2", "-p", "11111", "-t",
                          "10", "--mps=5000", "--full-rtt"]
    assert got.server.ready == Readiness(port=11111, protocol="udp")
    assert got.client_files == {}


def test_sockperf_throughput_and_reserved_flags() -> None:
    got = commands("sockperf.throughput", {"m": 1400})
    assert got.client == ["sockperf", "throughput", "-i", "192.0.2.2", "-p", "11111", "-t",
                          "10", "-m", "1400"]
    with pytest.raises(InputError):
        commands("sockperf.ping-pong", {"i": "10.0.0.1"})


def test_netperf_tcp_rr_asks_keyval_latency_selectors() -> None:
    got = commands("netperf.TCP_RR", {"r": "1,1", "T": "2,3"})
    assert got.client == [
        "netperf", "-H", "192.0.2.2", "-t", "TCP_RR", "-l", "10", "-P", "0", "-p", "12865",
        "-T", "2,3", "--", "-k",
        "P50_LATENCY,P90_LATENCY,P99_LATENCY,MEAN_LATENCY,MIN_LATENCY,MAX_LATENCY,"
        "STDDEV_LATENCY,TRANSACTION_RATE,THROUGHPUT,THROUGHPUT_UNITS,ELAPSED_TIME",
        "-r", "1,1"]
    assert got.server == ServerCommand(["netserver", "-D", "-L", "192.0.2.1", "-p", "12865"],
                                       Readiness(port=12865, protocol="tcp"),
                                       exits_by_itself=False, stop_signal="TERM")


def test_netperf_csv_override_keeps_the_header_and_test_args_pass_through() -> None:
    got = commands("netperf.TCP_STREAM", {"o": "THROUGHPUT,THROUGHPUT_UNITS",
                                          "test_args": "-m 64K -M 64K"}, {"p": 12900})
    assert got.client == ["netperf", "-H", "192.0.2.2", "-t", "TCP_STREAM", "-l", "10",
                          "-p", "12900", "--", "-o", "THROUGHPUT,THROUGHPUT_UNITS",
                          "-m", "64K", "-M", "64K"]
    assert got.server.argv[-2:] == ["-p", "12900"]
    with pytest.raises(InputError, match="one of k, o, O"):
        commands("netperf.TCP_RR", {"k": "THROUGHPUT", "o": "THROUGHPUT"})


def test_command_tool_placeholders_and_server_readiness() -> None:
    got = commands("command", {
        "argv": ["xdpsock", "-i", "eth0", "-r", "-z", "--duration=${duration}",
                 "--peer=${target}"],
        "metrics": "xdpsock"}, {
        "server_argv": "pktgen --bind ${bind} --log ${workdir}/${trial}.log",
        "ready_pattern": "ready", "stop_signal": "INT"})
    assert got.client == ["xdpsock", "-i", "eth0", "-r", "-z", "--duration=10",
                          "--peer=192.0.2.2"]
    assert got.server == ServerCommand(
        ["pktgen", "--bind", "192.0.2.1", "--log", "/run/napilab/t003.log"],
        Readiness(port=None, protocol="tcp", log_pattern="ready"), stop_signal="INT")


@pytest.mark.parametrize(("client", "server", "message"), [
    ({}, {}, "argv` is required"),
    ({"argv": []}, {}, "is empty"),
    ({"argv": ["x"], "metrics": {"m": {"regex": "(", "unit": "u"}}}, {}, "bad regex"),
    ({"argv": ["x"], "metrics": {"m": {"regex": "(\\d+)"}}}, {}, "`unit` is required"),
    ({"argv": ["x"], "metrics": {"m": {"regex": "a", "json_path": "b", "unit": "u"}}}, {},
     "exactly one"),
    ({"argv": ["x"], "metrics": {"m": {"regex": "(\\d+)", "unit": "u",
                                       "aggregate": "median"}}}, {}, "aggregate"),
    ({"argv": ["x"], "metrics": "nosuch"}, {}, "preset"),
    ({"argv": ["x"]}, {"server_argv": ["y"]}, "ready_port or ready_pattern"),
])
def test_command_tool_refuses_bad_configuration(client: dict[str, Any],
                                                server: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        commands("command", client, server)


def test_ping_flood_with_deadline() -> None:
    assert commands("ping", {"preload": 3}).client == [
        "ping", "-n", "-f", "-q", "-l", "3", "-w", "10", "192.0.2.2"]


def test_every_tool_builds_a_command_with_no_arguments() -> None:
    for name, tool in TOOLS.items():
        client = {"argv": ["true"]} if name == "command" else {}
        got = tool.commands(client, {}, CTX)
        assert got.client and all(isinstance(a, str) for a in got.client), name


def test_ungroup_is_the_one_thousands_separator_rule() -> None:
    """runners.base.ungroup, used by xdpsock (unsigned integers) and the command tool
    (signed, with decimals)."""
    from napilab.runners.base import ungroup

    assert [ungroup(t) for t in ("1,234,567", "-1,234.5", "+12,345", "1234", "0.5")] == [
        "1234567", "-1234.5", "+12345", "1234", "0.5"]
    assert [ungroup(t) for t in ("1,23", "12,345,67", "1,234e5", ",123", "1,,234", "")] == [
        None] * 6
    assert [ungroup(t, integer=True) for t in ("9,876,543", "42", "-1,234", "1,234.5")] == [
        "9876543", "42", None, None]
