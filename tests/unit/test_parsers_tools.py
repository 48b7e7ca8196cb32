"""Workload parsers and tools on the quirks the captures do not all show."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from napilab.runners.base import ParseError, ToolFailed
from napilab.runners.registry import TOOLS
from napilab.runners.workloads import iperf3, netperf, sockperf
from napilab.runners.workloads.neper import neper
from napilab.runners.workloads.neper import samples as neper_samples
from napilab.runners.workloads.workload import ProcessOutput, ToolOutput

DATA = Path(__file__).parents[1] / "data"
NEPER = DATA / "neper" / "1.1.0"
IPERF = DATA / "iperf3" / "3.12"
SOCKPERF = DATA / "sockperf" / "3.7"


def text(path: Path) -> str:
    return path.read_bytes().decode()


def metrics(rows: list[object]) -> dict[str, float]:
    return {row.metric: row.value for row in rows}  # type: ignore[attr-defined]


# --- neper ------------------------------------------------------------------------------

def test_neper_legacy_percentile_spelling_reads_as_99_9() -> None:
    legacy = text(NEPER / "tcp_rr_client.txt").replace("latency_p99.9=", "latency_p999=")
    got = metrics(neper.values(neper.parse(legacy)))
    assert got["latency_p99.9"] == 337.91
    assert neper.percentile_name(999) == "p99.9" and neper.percentile_name(9999) == "p99.99"


def test_neper_iostat_lines_repeat_t_and_are_kept_apart() -> None:
    base = text(NEPER / "tcp_rr_client.txt")
    lines = "t=1.0  TX: 10 ops, 10 bytes, 0.1 Mbps; RX: ...\nt=2.0  TX: 20 ops\n"
    got = neper.parse(base.replace("total_run_time=3\n", "total_run_time=3\n" + lines))
    assert got.iostat == ("1.0  TX: 10 ops, 10 bytes, 0.1 Mbps; RX: ...", "2.0  TX: 20 ops")
    assert got.report["num_transactions"] == 25642


def test_neper_two_reports_in_one_output_are_refused() -> None:
    base = text(NEPER / "tcp_rr_client.txt")
    with pytest.raises(ParseError, match="printed twice"):
        neper.parse(base + "num_transactions=1\n")


def test_neper_rr_server_reports_no_latency_and_crr_server_no_rate() -> None:
    server = metrics(neper.values(neper.parse(text(NEPER / "tcp_rr_server.txt"))))
    assert not [m for m in server if m.startswith("latency")]
    assert server["num_transactions"] == 27273
    crr = metrics(neper.values(neper.parse(text(NEPER / "tcp_crr_server.txt"))))
    assert "throughput" not in crr and "local_throughput" not in crr
    assert crr["remote_throughput"] == 4428


def test_neper_write_only_stream_client_has_only_the_readers_rate() -> None:
    got = metrics(neper.values(neper.parse(text(NEPER / "tcp_stream_client.txt"))))
    assert "throughput" not in got and "local_throughput" not in got
    assert got["remote_throughput"] == 18306761462


def test_neper_client_without_latency_is_a_failed_run() -> None:
    # A client output that stops before its latency keys (cut mid-report).
    cut = text(NEPER / "tcp_rr_client.txt").replace("latency_min", "x_latency_min")
    cut = "\n".join(ln for ln in cut.splitlines() if not ln.startswith("latency_"))
    with pytest.raises(ToolFailed, match="no transactions/latency"):
        TOOLS["neper.tcp_rr"].parse(ToolOutput(ProcessOutput(0, cut, "")))


def test_neper_all_samples_nan_and_flush_row() -> None:
    samples = neper_samples.parse(text(NEPER / "tcp_rr_client_all_samples.csv"))
    stddev = samples.column("latency_stddev")
    assert np.isnan(stddev[0])  # `-nan`: one sample in the first interval
    assert np.isnan(samples.column("latency_mean")[-1])  # the all-zero flush row
    assert samples.column("transactions")[-1] == 27272  # its counter is real
    rate = metrics(neper_samples.values(samples))["throughput"]
    assert rate == pytest.approx(9089.93, abs=0.01)  # neper's own `throughput=`


def test_neper_all_samples_stream_rate_matches_the_servers_report() -> None:
    samples = neper_samples.parse(text(NEPER / "tcp_stream_server_all_samples.csv"))
    got = metrics(neper_samples.values(samples))
    assert got["flows"] == 2
    assert got["throughput"] == pytest.approx(18306.76e6, rel=1e-6)  # throughput=18306.76


# --- iperf3 -----------------------------------------------------------------------------

def test_iperf3_json_stream_events_make_one_test() -> None:
    obj = json.loads(text(IPERF / "tcp_P2.json"))
    stream = "\n".join(json.dumps({"event": kind, "data": data}) for kind, data in
                       [("start", obj["start"]), ("interval", obj["intervals"][0]),
                        ("end", obj["end"])])
    assert metrics(iperf3.values(iperf3.parse(stream))) == metrics(
        iperf3.values(iperf3.parse(text(IPERF / "tcp_P2.json"))))


def test_iperf3_server_without_one_off_prints_one_object_per_test() -> None:
    first, second = text(IPERF / "server_tcp_P1.json"), text(IPERF / "server_tcp_P2.json")
    got = iperf3.parse(first + second)
    assert got.streams == 2  # the last test


def test_iperf3_3_14_error_exit_1_and_3_9_stderr_only() -> None:
    error_json = text(IPERF / "error_connrefused.json")
    with pytest.raises(ToolFailed, match="unable to connect"):
        TOOLS["iperf3"].parse(ToolOutput(ProcessOutput(1, error_json, "")))
    old = json.loads(error_json)
    del old["error"]
    with pytest.raises(ToolFailed, match="iperf3: error - unable to connect"):
        TOOLS["iperf3"].parse(ToolOutput(ProcessOutput(
            1, json.dumps(old), "iperf3: error - unable to connect to server\n")))
    with pytest.raises(ToolFailed, match="not installed"):
        TOOLS["iperf3"].parse(ToolOutput(ProcessOutput(127, "", "iperf3: not found")))


@pytest.mark.parametrize("case", ["udp_P2", "udp_b10M", "udp_b0", "udp_b20G", "server_udp_b0"])
def test_iperf3_udp_before_3_11_has_only_sum(case: str) -> None:
    # 3.10 and older print `sum` alone: bytes and bits/s of the sender, packets and loss
    # of the receiver. The 3.12 captures without sum_sent/sum_received stand for them.
    obj = json.loads(text(IPERF / f"{case}.json"))
    real = metrics(iperf3.values(iperf3.parse(json.dumps(obj))))
    assert obj["end"]["sum"]["bits_per_second"] == obj["end"]["sum_sent"]["bits_per_second"]
    del obj["end"]["sum_sent"], obj["end"]["sum_received"]
    got = metrics(iperf3.values(iperf3.parse(json.dumps(obj))))
    # the received rate is derived from the datagrams that arrived, not sum's sent rate
    assert got["throughput"] == pytest.approx(real["throughput"], rel=1e-3)  # the tail
    assert got.get("sender_throughput") == real.get("sender_throughput")  # none on a server
    for name in ("jitter", "lost_packets"):
        assert got[name] == real[name]
    without_blksize = json.loads(json.dumps(obj))
    del without_blksize["start"]["test_start"]["blksize"]
    assert "throughput" not in metrics(iperf3.values(iperf3.parse(json.dumps(without_blksize))))


# -b RATE (bits/s) of each capture; 0 is unlimited
UDP_RATES = {"udp_b10M": 10e6, "udp_b100M": 100e6, "udp_b1G": 1e9, "udp_b0": 0.0,
             "udp_b20G": 20e9, "udp_b200G": 200e9}


@pytest.mark.parametrize("case", sorted(UDP_RATES))
def test_iperf3_udp_at_a_bitrate_reads_what_was_sent_and_what_arrived(case: str) -> None:
    obj = json.loads(text(IPERF / f"{case}.json"))
    sent, received = obj["end"]["sum_sent"], obj["end"]["sum_received"]
    blksize = obj["start"]["test_start"]["blksize"]
    assert obj["start"]["test_start"]["target_bitrate"] == UDP_RATES[case]
    got = metrics(TOOLS["iperf3"].parse(ToolOutput(ProcessOutput(0, text(IPERF / f"{case}.json"),
                                                                 ""))).client)
    achieved = TOOLS["iperf3"].load.achieved[0]  # type: ignore[union-attr]
    assert got["sender_throughput"] == pytest.approx(sent["bytes"] * 8 / sent["seconds"],
                                                     rel=1e-6)
    # a rung's achieved load is what arrived (docs/load.md)
    assert got[achieved] == got["throughput"] == pytest.approx(
        received["bytes"] * 8 / received["seconds"], rel=1e-6)
    assert got["jitter"] == received["jitter_ms"] * 1000  # us
    # `packets` is the receiver's count (its highest sequence number): the datagrams that
    # arrived and the ones lost; the client's lost_percent is over the datagrams sent,
    # the few sent after the last one seen (the tail) are in neither count.
    assert got["packets"] - got["lost_packets"] == received["bytes"] / blksize
    assert 0 <= sent["packets"] - got["packets"] < 100
    assert got["lost_percent"] == pytest.approx(100 * got["lost_packets"] / sent["packets"])
    offered = UDP_RATES[case]
    if offered and offered <= 20e9:  # reached, to within one datagram of the 3 s
        assert got["sender_throughput"] == pytest.approx(
            offered, abs=blksize * 8 / 3 + offered * 1e-3)
    elif offered:  # 200G: the sender could not offer it (saturated rung)
        assert got["sender_throughput"] < 0.5 * offered
    if case in ("udp_b0", "udp_b20G", "udp_b200G"):
        assert got["lost_packets"] > 0 and got["throughput"] < got["sender_throughput"]


def test_iperf3_server_of_reverse_udp_test_did_not_receive() -> None:
    got = metrics(iperf3.values(iperf3.parse(text(IPERF / "server_udp_R_b100M.json"))))
    assert "throughput" not in got and "jitter" not in got
    assert got["sender_throughput"] == pytest.approx(99997386.28)


# --- sockperf ---------------------------------------------------------------------------

def test_sockperf_3_8_avg_line() -> None:
    line = "(std-dev=17.995, mean-ad=12.1, median-ad=3.2, siqr=3.8, cv=0.339, " \
           "std-error=0.149, 99.0% ci=[52.758, 53.526])"
    newer = text(SOCKPERF / "pp_udp.txt").replace("(std-dev=17.995)", line)
    assert sockperf.values(sockperf.parse(newer)) == sockperf.values(
        sockperf.parse(text(SOCKPERF / "pp_udp.txt")))


def test_sockperf_burst_summary_and_two_servers() -> None:
    base = text(SOCKPERF / "pp_udp.txt")
    burst = sockperf.parse(base.replace("Latency is", "Latency of burst of 10 messages is"))
    assert isinstance(burst, sockperf.LatencySummary) and burst.burst == 10
    two = base.replace("Server No: 0", "Server No: 0\nsockperf: ========= Printing "
                       "statistics for Server No: 1")
    with pytest.raises(ParseError, match="2 servers"):
        sockperf.parse(two)


# --mps of each under-load capture (sockperf prints it only in a --full-log file)
UL_RATES = {"ul-mps1000": 1000, "ul-mps10000": 10_000, "ul-mps100000": 100_000,
            "ul-mps100000-fl": 100_000, "ul-mps2000000-saturated": 2_000_000}


@pytest.mark.parametrize("case", [*sorted(UL_RATES), "ul-max", "ul_udp", "pp_udp"])
def test_sockperf_send_rate_is_the_valid_durations_sent_messages_over_its_run_time(
        case: str) -> None:
    raw = text(SOCKPERF / f"{case}.txt")
    summary = sockperf.parse(raw)
    assert isinstance(summary, sockperf.LatencySummary)
    assert summary.sent and summary.valid_run_time
    got = metrics(sockperf.values(summary))
    assert got["send_rate"] == summary.sent / summary.valid_run_time
    rows = {row.metric: row for row in TOOLS["sockperf.under-load"].parse(
        ToolOutput(ProcessOutput(0, raw, ""))).client}
    assert rows["send_rate"].unit == "msg/s"
    assert TOOLS["sockperf.under-load"].load.achieved == ("send_rate",)  # type: ignore[union-attr]
    offered = UL_RATES.get(case)
    too_high = "The requested message-per-second rate is too high" in raw
    if case == "ul-mps2000000-saturated":  # the sender fell short: a saturated rung
        assert got["send_rate"] < 0.5 * offered and too_high  # type: ignore[operator]
    elif offered:  # reached, to the millisecond RunTime is printed to
        assert got["send_rate"] == pytest.approx(offered, rel=1e-3) and not too_high


def test_sockperf_send_rate_needs_the_valid_duration_line() -> None:
    raw = text(SOCKPERF / "ul-mps10000.txt")
    cut = "".join(line for line in raw.splitlines(keepends=True)
                  if "[Valid Duration]" not in line)
    assert cut != raw
    got = metrics(sockperf.values(sockperf.parse(cut)))
    assert "send_rate" not in got and "sent_messages" not in got
    assert got["latency_p99"] == metrics(sockperf.values(sockperf.parse(raw)))["latency_p99"]
    # RunTime=0.000 (one observation): no rate rather than a division by zero
    one = sockperf.parse(text(SOCKPERF / "pp_udp_mps3_one_observation.txt"))
    assert isinstance(one, sockperf.LatencySummary) and one.valid_run_time == 0
    assert "send_rate" not in metrics(sockperf.values(one))
    # throughput mode prints its own rate, never send_rate
    assert "send_rate" not in metrics(sockperf.values(sockperf.parse(
        text(SOCKPERF / "tp_udp.txt"))))


def test_sockperf_tool_wants_the_summary_of_its_mode() -> None:
    out = ToolOutput(ProcessOutput(0, text(SOCKPERF / "tp_udp.txt"), ""))
    with pytest.raises(ToolFailed, match="no ping-pong summary"):
        TOOLS["sockperf.ping-pong"].parse(out)


@pytest.mark.parametrize("case", ["pp_udp", "ul_tcp", "pp_tcp_mps3000",
                                  "ul_udp_full_rtt_mps5000", "ul-mps100000-fl"])
def test_sockperf_full_log_agrees_with_the_summary_written_above_it(case: str) -> None:
    raw = (SOCKPERF / f"{case}_fulllog.csv").read_bytes()
    log = sockperf.parse_full_log(raw)
    summary = sockperf.parse(raw.decode())
    assert isinstance(summary, sockperf.LatencySummary)
    assert log.full_rtt == summary.full_rtt
    assert len(log.latencies_us) == summary.observations
    # The file rounds each sample to 3 decimals; the summary uses the raw times.
    assert log.latencies_us.mean() == pytest.approx(summary.mean, abs=0.002)
    assert log.latencies_us.max() == pytest.approx(summary.maximum, abs=0.002)
    assert log.latencies_us.min() == pytest.approx(summary.minimum, abs=0.002)


def test_sockperf_full_log_refuses_truncated_or_bad_rows() -> None:
    raw = (SOCKPERF / "ul_tcp_fulllog.csv").read_bytes()
    assert sockperf.parse_full_log(raw.decode()).latencies_us.tolist() == \
        sockperf.parse_full_log(raw).latencies_us.tolist()
    with pytest.raises(ParseError, match="truncated"):
        sockperf.parse_full_log(raw[: raw.rindex(b"-----------") - 40])
    with pytest.raises(ParseError, match="bad full-log row"):
        sockperf.parse_full_log(raw.replace(b"3, 2.452379396,", b"3, 2.452379396, 7,"))
    with pytest.raises(ParseError):
        sockperf.parse_full_log(raw.replace(b", 53.650\n", b", nan\n"))


def test_sockperf_full_log_is_fast() -> None:
    rows = "".join(f"{i}, {2 + i * 1e-4:.9f}, {2 + i * 1e-4 + 9e-5:.9f}, 45.{i % 1000:03d}\n"
                   for i in range(300_000))
    raw = ("packet, txTime(sec), rxTime(sec), latency(usec)\n" + rows
           + "------------------------------\n").encode()
    start = time.perf_counter()
    log = sockperf.parse_full_log(raw)
    elapsed = time.perf_counter() - start
    assert len(log.latencies_us) == 300_000 and log.latencies_us[1] == 45.001
    assert elapsed < 1.0  # ~0.03 s here; 10^7 rows: benchmarks/ingest.py


# --- netperf ----------------------------------------------------------------------------

def test_netperf_headerless_csv_needs_the_selectors() -> None:
    out = "1405.50,Trans/s,683,-1\n"
    with pytest.raises(ParseError):
        netperf.parse(out)
    got = netperf.parse(out, ["THROUGHPUT", "THROUGHPUT_UNITS", "P50_LATENCY",
                              "LOCAL_TRANSPORT_RETRANS"])
    assert metrics(netperf.values(got)) == {"throughput": 1405.5, "latency_p50": 683}


def test_netperf_classic_stream_table() -> None:
    out = ("MIGRATED TCP STREAM TEST from 0.0.0.0 (0.0.0.0) port 0 AF_INET to 192.0.2.2 () "
           "port 0 AF_INET\nRecv   Send    Send\nSocket Socket  Message  Elapsed\n"
           "Size   Size    Size     Time     Throughput\n"
           "bytes  bytes   bytes    secs.    10^6bits/sec\n\n"
           " 87380  16384  16384    10.00    9413.22\n")
    got = netperf.values(netperf.parse(out))
    assert [(v.metric, v.value, v.unit) for v in got] == [
        ("throughput", 9413.22, "10^6bits/s"), ("elapsed", 10.0, "s")]


def test_netperf_keyval_with_the_default_selectors() -> None:
    out = ("P50_LATENCY=52\nP90_LATENCY=60\nP99_LATENCY=95\nMEAN_LATENCY=54.31\n"
           "MIN_LATENCY=31\nMAX_LATENCY=2011\nSTDDEV_LATENCY=12.50\n"
           "TRANSACTION_RATE=18363.914\nTHROUGHPUT=18363.91\nTHROUGHPUT_UNITS=Trans/s\n"
           "ELAPSED_TIME=10.00\n")
    result = TOOLS["netperf.TCP_RR"].parse(ToolOutput(ProcessOutput(0, out, "")))
    got = {v.metric: (v.value, v.unit) for v in result.client}
    assert got["latency_p99"] == (95, "us") and got["throughput"] == (18363.91, "Trans/s")
    assert len(got) == 10  # THROUGHPUT_UNITS is the unit, not a value
    with pytest.raises(ToolFailed, match="netserver"):
        TOOLS["netperf.TCP_RR"].parse(ToolOutput(ProcessOutput(
            1, "", "establish control: are you sure there is a netserver listening on "
                   "192.0.2.2 at port 12865?")))
