"""/proc/softirqs (parse, delta, collector), softnet_stat layouts by width, the generic
command tool's metric extraction, and the registry's --json document."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.runners.base import ParseError, ToolFailed, Value
from napilab.runners.collectors import softirqs, softnet_stat
from napilab.runners.collectors.collector import HostInfo
from napilab.runners.collectors.softirqs import SoftirqsCollector
from napilab.runners.registry import PARSERS, TOOLS, metrics_json
from napilab.runners.workloads import command
from napilab.runners.workloads.workload import Context, ProcessOutput, ToolOutput

DATA = Path(__file__).parents[1] / "data"
KERNEL = "6.18.44-fc-v669"
CTX = Context("192.0.2.2", "192.0.2.1", 10, "/w", "t1")


def read(relative: str) -> str:
    return (DATA / relative).read_bytes().decode()


# --- softirqs ---------------------------------------------------------------------------

def test_softirqs_delta_around_a_real_ping_flood() -> None:
    before = softirqs.parse(read(f"softirqs/{KERNEL}/before_ping_flood_1s.txt"))
    after = softirqs.parse(read(f"softirqs/{KERNEL}/after_ping_flood_1s.txt"))
    got = {(v.metric, v.cpu): v.value for v in softirqs.delta(before, after)}
    assert got[("net_rx", 0)] == 9299789 - 8941999
    assert got[("net_rx", 1)] == 546160 - 541059
    assert got[("hi", 0)] == 0
    only = softirqs.delta(before, after, names=["net_rx"], cpus=[1])
    assert only == [Value("net_rx", 5101, "count", 1)]


def test_softirqs_possible_cpus_wrap_and_the_collector_keeps_online_ones() -> None:
    header = " " * 20 + "".join(f"CPU{i:<8d}" for i in range(4)) + "\n"
    before = softirqs.parse(header + "      NET_RX: 4294967290 1 2 3\n        RCU: 1 1 1 1\n")
    after = softirqs.parse(header + "      NET_RX: 4 1 2 3\n        RCU: 2 2 2 2\n")
    assert before.cpus == (0, 1, 2, 3)
    assert softirqs.delta(before, after, names=["NET_RX"])[0] == Value("net_rx", 10, "count", 0)
    collector = SoftirqsCollector()
    host = HostInfo(online_cpus=(0, 1))  # /proc/interrupts would show 2 columns
    snap_a = collector.parse({"/proc/softirqs": header + "      NET_RX: 1 1 1 1\n"}, host)
    snap_b = collector.parse({"/proc/softirqs": header + "      NET_RX: 5 6 7 8\n"}, host)
    assert collector.delta(snap_a, snap_b, {}, host) == [
        Value("net_rx", 4, "count", 0), Value("net_rx", 5, "count", 1)]
    assert collector.name == "softirqs" and collector.paths == ("/proc/softirqs",)


@pytest.mark.parametrize("bad", [
    "", "CPU0 CPU1\n  NET_RX: 1\n", "CPU0\n  NET_RX: 1\n  NET_RX: 2\n", "CPU0\n  net: 1\n",
    "CPU0 CPU0\n  HI: 1 1\n", "CPU0\n", "CPU0\n  HI: -1\n",
])
def test_softirqs_refuses_malformed_files(bad: str) -> None:
    with pytest.raises(ParseError):
        softirqs.parse(bad)


# --- softnet_stat layouts, one width at a time (others' parser) --------------------------

def test_softnet_stat_each_kernel_layout() -> None:
    mixed = read("softnet_stat/procfs/mixed_13_13_11_9_10_cols.txt").splitlines()
    widths = {len(line.split()): line for line in mixed}
    assert sorted(widths) == [9, 10, 11, 13]
    row13 = softnet_stat.parse(widths[13]).rows[0]
    assert row13.cpu == 1 and row13.gauges == {"backlog_len": 0xdc}  # col 13 is the CPU
    row10 = softnet_stat.parse(widths[10]).rows[0]
    assert row10.counters["received_rps"] == 0x10 and "flow_limit_count" not in row10.counters
    row9 = softnet_stat.parse(widths[9]).rows[0]
    assert set(row9.counters) == {"processed", "dropped", "time_squeeze", "cpu_collision"}
    row15 = softnet_stat.parse(read(f"softnet_stat/{KERNEL}/vm_2cpu_15cols.txt")).rows[1]
    assert row15.cpu == 1 and set(row15.gauges) == {"backlog_len", "input_qlen",
                                                    "process_qlen"}
    # Without the CPU column the row index goes through the online CPU list.
    assert [r.cpu for r in softnet_stat.parse(widths[11] + "\n" + widths[11].replace(
        "00015c73", "00015c74"), online_cpus=[0, 3]).rows] == [0, 3]


@pytest.mark.parametrize("field", ["0x123456", "+1234567", "0000_001", "0000000g"])
def test_softnet_stat_fields_are_exactly_eight_hex_digits(field: str) -> None:
    with pytest.raises(ParseError, match="8 hex digits"):
        softnet_stat.parse(" ".join([field] + ["00000000"] * 9))


def test_softnet_stat_delta_around_a_real_ping_flood() -> None:
    before = softnet_stat.parse(read(f"softnet_stat/{KERNEL}/before_ping_flood_1s.txt"))
    after = softnet_stat.parse(read(f"softnet_stat/{KERNEL}/after_ping_flood_1s.txt"))
    processed = {v.cpu: v.value for v in softnet_stat.delta(before, after)
                 if v.metric == "processed"}
    assert processed[0] > 100_000  # loopback: the flood's packets went through NET_RX


# --- command ------------------------------------------------------------------------------

def specs(**metrics: dict[str, object]) -> tuple[command.MetricSpec, ...]:
    return command.metric_specs(metrics)


def test_command_regex_thousands_separators_and_aggregates() -> None:
    out = "rx  1,000 pps\nrx  3,000 pps\nrx  2,000 pps\n"
    for how, value in [("first", 1000), ("last", 2000), ("min", 1000), ("max", 3000),
                       ("mean", 2000), ("sum", 6000)]:
        got = command.parse(out, specs(rx={"regex": r"rx\s+(?P<value>[\d,]+)",
                                           "unit": "pps", "aggregate": how}))
        assert got[0].value == value and got[0].matches == 3, how
    got = command.parse(out, specs(rx={"regex": r"rx\s+([\d,]+)", "unit": "Mpps",
                                       "scale": 1e-6, "last": False}))
    assert got[0].value == pytest.approx(0.001)


def test_command_refuses_a_comma_that_is_not_a_thousands_separator() -> None:
    with pytest.raises(ParseError, match="thousands"):
        command.parse("rate 1,5\n", specs(r={"regex": r"rate ([\d,]+)", "unit": "x"}))


def test_command_json_path_stderr_and_optional() -> None:
    doc = '{"end": {"sum": {"bits_per_second": 9.5e9}}, "intervals": [{"n": 3}]}'
    got = command.parse("", specs(
        bps={"json_path": "end.sum.bits_per_second", "unit": "bits/s", "stream": "stderr"},
        n={"json_path": "intervals.0.n", "unit": "count", "stream": "stderr"},
        gone={"json_path": "end.nothing", "unit": "count", "stream": "stderr",
              "optional": True}), stderr=doc)
    assert [(m.name, m.value) for m in got] == [("bps", 9.5e9), ("n", 3)]
    with pytest.raises(ParseError, match="not one JSON document"):
        command.parse("x", specs(bps={"json_path": "a", "unit": "u"}))


def test_command_tool_failure_names_the_metric_and_its_pattern() -> None:
    tool = TOOLS["command"]
    tool.commands({"argv": ["testpmd"], "metrics": {
        "rx_pps": {"regex": r"Rx-pps:\s+(\d+)", "unit": "pps"}}}, {}, CTX)
    with pytest.raises(ToolFailed) as info:
        tool.parse(ToolOutput(ProcessOutput(0, "Port statistics\n", "")))
    assert "'rx_pps'" in str(info.value) and "Rx-pps" in str(info.value)
    with pytest.raises(ToolFailed, match="testpmd is not installed"):
        tool.parse(ToolOutput(ProcessOutput(127, "", "sh: testpmd: not found")))
    with pytest.raises(ToolFailed, match="exited 2"):
        tool.parse(ToolOutput(ProcessOutput(2, "Rx-pps: 5\n", "")))
    tool.commands({"argv": "testpmd", "metrics": "testpmd", "exit_codes": [0, 2]}, {}, CTX)
    block = ("  #### NIC statistics for port 0 ####\n  RX-packets: 9  TX-packets: 0\n"
             "  Rx-pps: 5\n  ####\n")
    assert Value("rx_pps", 5, "packets/s") in tool.parse(
        ToolOutput(ProcessOutput(2, block, ""))).client
    with pytest.raises(ToolFailed, match="no closing line"):
        tool.parse(ToolOutput(ProcessOutput(0, block[:-7], "")))


# --- registry -----------------------------------------------------------------------------

def test_every_tool_name_parses_with_its_tools_parser() -> None:
    for name in TOOLS:
        if name != "command":
            assert name in PARSERS, name


def test_metrics_json_names_per_cpu_values_and_refuses_duplicates() -> None:
    doc = metrics_json("x", [Value("a", 1, "count"), Value("b", 2, "us", 3)])
    assert doc == {"tool": "x", "metrics": {"a": 1, "b.cpu3": 2},
                   "units": {"a": "count", "b.cpu3": "us"}}
    with pytest.raises(ParseError, match="two values"):
        metrics_json("x", [Value("a", 1, "count"), Value("a", 2, "count")])
