"""The mutilate tool: the commands it builds (mutilate against memcached), the arguments it
refuses, what it reads from real captures (tests/data/mutilate/d65c6ef/, see
tests/data/README.md) and what it refuses: cut output, other modes, failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.errors import InputError
from napilab.runners.base import ParseError, ToolFailed
from napilab.runners.registry import PARSERS, TOOLS, metrics_json
from napilab.runners.workloads import mutilate
from napilab.runners.workloads.workload import Context, ProcessOutput, ToolOutput

DATA = Path(__file__).parents[1] / "data" / "mutilate" / "d65c6ef"
CTX = Context(target="192.0.2.2", bind="192.0.2.1", duration=9.5, workdir="/tmp/w",
              trial="t001")
TOOL = mutilate.MutilateTool()


def _text(case: str) -> str:
    return (DATA / case).read_bytes().decode()


def _run(stdout: str, exit_code: int = 0, stderr: str = "") -> ToolOutput:
    return ToolOutput(ProcessOutput(exit_code, stdout, stderr))


def test_it_is_registered_with_its_load_axis_and_programs() -> None:
    assert TOOLS["mutilate"] is not None and "mutilate" in PARSERS
    tool = TOOLS["mutilate"]
    assert tool.load is not None
    assert (tool.load.arg, tool.load.unit, tool.load.maximum) == ("qps", "req/s", 0)
    assert tool.load.achieved == ("qps",) and tool.load.latency == "latency_p99"
    assert tool.programs("client") == ("mutilate",)
    assert tool.programs("server") == ("memcached",)
    assert tool.versions == {"mutilate": None, "memcached": ("memcached", "-V")}
    assert tool.operations == {"request": ("requests", "qps")}


def test_the_default_command_loads_memcached_and_runs_at_peak() -> None:
    commands = TOOL.commands({}, {}, CTX)
    assert commands.client == ["mutilate", "-s", "192.0.2.2:11211", "-t", "10",
                               "-i", "exponential:1", "--qps=0"]
    server = commands.server
    assert server is not None
    assert server.argv == ["memcached", "-u", "nobody", "-l", "192.0.2.1", "-p", "11211"]
    assert server.ready.port == 11211 and server.ready.protocol == "tcp"
    assert server.stop_signal == "TERM" and not server.exits_by_itself
    assert "--noload" not in commands.client  # the load phase fills memcached first


def test_profile_args_go_to_their_side() -> None:
    commands = TOOL.commands(
        {"qps": 50000.0, "T": 2, "c": 4, "d": 1, "u": 0.1, "V": "fb_value", "S": True,
         "noload": False, "i": "pareto:0,16,0.15", "no_nodelay": True},
        {"p": 11300, "t": 2, "m": 256}, CTX)
    assert commands.client == ["mutilate", "-s", "192.0.2.2:11300", "-t", "10",
                               "-i", "pareto:0,16,0.15", "-T", "2", "-c", "4", "-d", "1",
                               "-u", "0.1", "-V", "fb_value", "-S", "--no_nodelay",
                               "--qps=50000"]
    assert commands.server is not None
    assert commands.server.argv == ["memcached", "-u", "nobody", "-l", "192.0.2.1",
                                    "-p", "11300", "-t", "2", "-m", "256"]
    assert commands.server.ready.port == 11300


@pytest.mark.parametrize(("client", "server", "message"), [
    ({"s": "10.0.0.1"}, {}, r"client arguments \['s'\] are set by napilab"),
    ({"t": 3, "time": 3}, {}, r"\['t', 'time'\] are set by napilab"),
    ({"q": 1000}, {}, r"\['q'\] are set by napilab"),
    ({"agent": "h2"}, {}, r"\['agent'\] are set by napilab"),
    ({"C": 1}, {}, r"\['C'\] are a master's with agents"),
    ({"scan": "1:2:1"}, {}, "not supported"),
    ({"loadonly": True}, {}, "not supported"),
    ({}, {"l": "0.0.0.0"}, r"server arguments \['l'\] are set by napilab"),
    ({}, {"d": True}, "in the foreground"),
    ({"qps": 1500.5}, {}, "qps is a whole number"),
    ({"qps": -1}, {}, "qps is a whole number"),
    ({"qps": True}, {}, "qps is a whole number"),
    ({"i": "exponential"}, {}, "crashes on a name without them"),
    ({"K": "normal"}, {}, "client argument K='normal'"),
])
def test_arguments_napilab_sets_or_cannot_read_are_refused(
        client: dict[str, object], server: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        TOOL.commands(client, server, CTX)  # type: ignore[arg-type]


def test_a_rung_of_the_load_ladder_is_written_as_qps() -> None:
    assert TOOL.commands({"qps": 20000}, {}, CTX).client[-1] == "--qps=20000"
    assert TOOL.commands({"qps": "20000"}, {}, CTX).client[-1] == "--qps=20000"
    assert TOOL.commands({"K": 30, "V": "200", "i": "fb_ia"}, {}, CTX).client[5:7] == \
        ["-i", "fb_ia"]


def test_the_peak_capture_reads_exactly() -> None:
    result = mutilate.parse(_text("peak.txt"))
    assert result.columns == ("mean", "stddev", "min", "p5", "p10", "p90", "p95", "p99")
    assert result.rows["update"] is None  # all 0.0: no sets
    values = metrics_json("mutilate", mutilate.values(result))["metrics"]
    assert values == {
        "latency_mean": 30.8, "latency_stddev": 15.4, "latency_min": 7.4,
        "latency_p5": 20.1, "latency_p10": 21.2, "latency_p90": 36.9, "latency_p95": 48.5,
        "latency_p99": 77.3, "queue_depth_mean": 1.0, "qps": 32369.6, "requests": 161848,
        "elapsed": 5.0, "misses": 0, "skipped_tx": 0, "rx_bytes": 40036456,
        "tx_bytes": 5826564}


@pytest.mark.parametrize(("case", "offered", "achieved", "p99"), [
    ("q1000.txt", 1000, 980.0, 180.5),
    ("q10000.txt", 10000, 9976.4, 94.9),
    ("q50000.txt", 50000, 28396.4, 85.0),
    ("q500000_saturated.txt", 500000, 28527.4, 84.1),
    ("q500000_skip.txt", 500000, 28868.9, 80.0),
    ("q10000_server_stopped_1s.txt", 10000, 9976.4, 206.2),
])
def test_each_rate_capture_gives_its_achieved_rate_and_p99(
        case: str, offered: int, achieved: float, p99: float) -> None:
    result = TOOL.parse(_run(_text(case)))
    values = {v.metric: v for v in result.client}
    assert values["qps"].value == achieved and values["qps"].unit == "req/s"
    assert values["latency_p99"].value == p99 and values["latency_p99"].unit == "us"
    assert result.server == [] and result.latencies_us is None


def test_saturation_shows_in_the_rate_not_in_the_latency() -> None:
    """Coordinated omission, as captured: offered 500k req/s, achieved 28.5k, and the p99
    is the peak run's (requests are timed from their actual send)."""
    peak = mutilate.parse(_text("peak.txt"))
    saturated = mutilate.parse(_text("q500000_saturated.txt"))
    assert saturated.qps < 0.1 * 500000
    peak_read, saturated_read = peak.rows["read"], saturated.rows["read"]
    assert peak_read is not None and saturated_read is not None
    assert saturated_read.values["p99"] < 1.2 * peak_read.values["p99"]
    skipped = mutilate.parse(_text("q500000_skip.txt"))
    assert skipped.skipped + skipped.requests == pytest.approx(500000 * 5, rel=0.01)


def test_update_rows_and_a_run_of_sets_only() -> None:
    mixed = {v.metric: v.value for v in mutilate.values(mutilate.parse(
        _text("q10000_u10pct.txt")))}
    assert mixed["update_latency_p99"] == 95.5 and mixed["latency_p99"] == 96.3
    sets = {v.metric: v.value for v in mutilate.values(mutilate.parse(_text("q1000_u1.txt")))}
    assert "latency_p99" not in sets and sets["update_latency_p99"] == 115.5
    assert sets["misses"] == 0  # `Misses = 0 (-nan%)`
    misses = mutilate.parse(_text("noload_fresh_misses.txt"))
    assert misses.misses == misses.requests == 2957


def test_pipelined_connections_queue_depth() -> None:
    values = {v.metric: v.value for v in mutilate.values(mutilate.parse(
        _text("peak_c4_d4_T2.txt")))}
    assert values["queue_depth_mean"] == 4.0 and values["qps"] == 166397.0


def _cut(text: str, marker: str) -> str:
    return text[:text.index(marker)]


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda t: "", "no `#type avg std ...` table header"),
    (lambda t: _cut(t, "read"), "no `read` row"),
    (lambda t: _cut(t, "Total QPS"), "no `Total QPS = ...` line"),
    (lambda t: _cut(t, "RX "), "no `RX ... bytes` line"),
    (lambda t: _cut(t, "TX ") + "TX    58", "a line mutilate does not print"),
    (lambda t: _cut(t, " 77.3"), "7 values in the read row for 8 columns"),
    (lambda t: t + t, "two table headers"),
    (lambda t: t.replace("99th", "99.9th"), ""),  # another percentile: read, not refused
    (lambda t: t.replace("99th", "max99"), "unknown column 'max99'"),
    (lambda t: t.replace("read ", "reads"), "a line mutilate does not print"),
    (lambda t: t.replace("161848 /", "61848 /"), "is not 61848 requests over 5.0 s"),
    (lambda t: t.replace("Total QPS", "Peak QPS  = 1.0\nTotal QPS"), "--search output"),
    (lambda t: t.replace("99th", "99th     QPS   target"), "--scan output"),
    (lambda t: "Connection.cc(277): BEV_EVENT_ERROR: Connection refused\n",
     "mutilate: Connection.cc(277): BEV_EVENT_ERROR: Connection refused"),
    (lambda t: _cut(t, "Misses") + "Connection.cc(280): Unexpected EOF from server.\n",
     "Unexpected EOF from server."),
])
def test_cut_or_foreign_output_is_refused(edit: object, reason: str) -> None:
    text = edit(_text("peak.txt"))  # type: ignore[operator]
    if not reason:
        assert mutilate.parse(text).rows["read"] is not None
        return
    with pytest.raises(ParseError) as info:
        mutilate.parse(text)
    assert reason in info.value.reason


def test_a_run_that_completed_nothing_is_refused() -> None:
    text = _text("peak.txt").replace(
        "read       30.8    15.4     7.4    20.1    21.2    36.9    48.5    77.3",
        "read        0.0     0.0     0.0     0.0     0.0     0.0     0.0     0.0").replace(
        "32369.6 (161848 / 5.0s)", "0.0 (0 / 5.0s)")
    with pytest.raises(ParseError, match="no request completed"):
        mutilate.parse(text)


@pytest.mark.parametrize(("exit_code", "stdout", "stderr", "message"), [
    (127, "", "sh: 1: mutilate: not found", "mutilate is not installed on the host"),
    (255, "", "Connection.cc(277): BEV_EVENT_ERROR: Connection refused",
     "client exited 255: Connection.cc(277): BEV_EVENT_ERROR: Connection refused"),
    (1, "", "mutilate: unrecognized option '--bogus'", "client exited 1"),
    (-11, "", "", "client exited -11 (SIGSEGV)"),
    (0, "", "", "no `#type avg std ...` table header"),
    (0, "#type       avg     std\n", "", "no `read` row"),
])
def test_failed_runs_are_tool_failures(exit_code: int, stdout: str, stderr: str,
                                       message: str) -> None:
    with pytest.raises(ToolFailed) as info:
        TOOL.parse(_run(stdout, exit_code, stderr))
    assert message in str(info.value)


def test_a_nonzero_exit_fails_even_with_a_table() -> None:
    with pytest.raises(ToolFailed, match="client exited 2"):
        TOOL.parse(_run(_text("peak.txt"), 2))
