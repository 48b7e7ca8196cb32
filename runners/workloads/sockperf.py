"""sockperf (Mellanox/sockperf): ping-pong, under-load, throughput, server, --full-log.

Formats: docs/formats.md section 4 (read at sockperf 3.7 to 3.10, captures
from 3.7). Quirks handled here:
- ANSI colour codes are written even to files (`\\e[2;35m` ... `\\e[0m`); stripped first.
- the avg line is `avg-latency=X (std-dev=Y)` in 3.7 and gains `, mean-ad=...` etc. in
  3.8+; `avg-rtt=` with --full-rtt.
- values are one-way latency = RTT/2 unless --full-rtt: metrics are then named `rtt_*`
  instead of `latency_*`, so the two are never compared by mistake.
- exit code 0 even when the client could not connect (3.7 main() ends in exit(0)): the
  summary and percentile lines are required, an `ERROR:` line is reported as such.
- `No valid observations found` replaces the block when nothing was measured, and
  `No messages were received from the server. Is the server down?` when no reply came.
- a stray `Test end (interrupted by signal 2)` can appear mid-summary (under-load, 3.7).
- `send_rate` (msg/s) is the `[Valid Duration]` line's SentMessages / RunTime: the rate the
  client achieved, which a `load:` rung compares with its `--mps`. Under-load keeps a fixed
  send schedule (it catches up in bursts after a stall) but times each message from its
  actual send, so a stalled sender's delay is in no latency (docs/formats.md 4.5).
The --full-log CSV is parsed by `parse_full_log`, fast enough for 10^7 samples; it
imports numpy and pyarrow itself, so that importing this module (every `napilab`
start does, through runners.registry) costs neither.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from napilab.harness.errors import InputError
from napilab.runners.base import COUNT, US, ParseError, ToolFailed, Value, parse_float, parse_int
from napilab.runners.workloads.workload import (
    EACH,
    ArgSpec,
    ArgValue,
    Context,
    LoadAxis,
    Parser,
    Readiness,
    ServerCommand,
    SeveralClients,
    ToolCommands,
    ToolOutput,
    ToolResult,
    flags,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

TOOL = "sockperf"
PORT = 11111  # sockperf's default -p
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_AVG = re.compile(r"====> avg-(latency|rtt)=([\d.]+) \(std-dev=([\d.]+)")
_TOTAL = re.compile(r"\[Total Run\] RunTime=([\d.]+) sec; Warm up time=(\d+) msec; "
                    r"SentMessages=(\d+); ReceivedMessages=(\d+)")
_VALID = re.compile(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=(\d+); "
                    r"ReceivedMessages=(\d+)")
_DROPS = re.compile(r"# dropped messages = (\d+); # duplicated messages = (\d+); "
                    r"# out-of-order messages = (\d+)")
_SUMMARY = re.compile(r"Summary: (?:Latency|Round trip)(?: of burst of (\d+) messages)? is "
                      r"([\d.]+) usec")
_OBSERVATIONS = re.compile(r"Total (\d+) observations")
_POINT = re.compile(r"---> (?:<(MAX|MIN)> observation|percentile ([\d.]+)) =\s*([\d.]+)")
_ERROR = re.compile(r"ERROR: ?(.*)")
# Lines that replace the summary when a run measured nothing (3.7).
_NOTHING_MEASURED = ("No valid observations found", "No messages were received from the server")
_RATE = re.compile(r"Summary: Message Rate is (\d+) \[msg/sec\]")
_SENT = re.compile(r"Total of (\d+) messages sent in ([\d.]+) sec")
_BANDWIDTH = re.compile(r"Summary: BandWidth is ([\d.]+) MBps \(([\d.]+) Mbps\)")
_HANDLED = re.compile(r"Total (\d+) messages received and handled")
_SERVERS = re.compile(r"Printing statistics for Server No: (\d+)")
_LOG_HEADER = b"packet, txTime(sec), rxTime(sec), "
_LOG_END = b"\n------------------------------"


@dataclass(frozen=True)
class LatencySummary:
    """ping-pong / under-load client summary; times in microseconds."""

    full_rtt: bool
    mean: float
    std_dev: float
    minimum: float
    maximum: float
    percentiles: Mapping[float, float]
    observations: int
    burst: int | None
    valid_run_time: float | None
    sent: int | None  # in the valid duration
    received: int | None
    dropped: int | None
    duplicated: int | None
    out_of_order: int | None


@dataclass(frozen=True)
class ThroughputSummary:
    messages_sent: int | None
    run_time: float | None
    message_rate: float  # msg/s, client send rate
    bandwidth_mbps: float | None  # megabits/s


@dataclass(frozen=True)
class ServerSummary:
    messages_handled: int


SockperfResult = LatencySummary | ThroughputSummary | ServerSummary


def strip_colours(text: str) -> str:
    return _ANSI.sub("", text)


def parse(text: str) -> SockperfResult:
    clean = strip_colours(text)
    if _AVG.search(clean) or _POINT.search(clean):
        return _latency(clean)
    if _RATE.search(clean):
        return _throughput(clean)
    handled = _HANDLED.search(clean)
    if handled:
        return ServerSummary(parse_int(TOOL, handled[1]))
    for line in clean.splitlines():
        if any(failure in line for failure in _NOTHING_MEASURED):
            raise ParseError(TOOL, line.removeprefix("sockperf: ").strip(), line)
    error = _ERROR.search(clean)
    if error:
        raise ParseError(TOOL, f"sockperf: ERROR: {error[1].strip()}", error[0])
    raise ParseError(TOOL, "no sockperf summary (no avg/percentile, message rate or "
                     "messages handled line)", clean[-300:])


def _latency(text: str) -> LatencySummary:
    servers = set(_SERVERS.findall(text))
    if len(servers) > 1:
        raise ParseError(TOOL, f"statistics for {len(servers)} servers; napilab runs one",
                         text[:300])
    avg = _AVG.search(text)
    if avg is None:
        raise ParseError(TOOL, "no `====> avg-latency=` line", text[-300:])
    points: dict[str, float] = {}
    percentiles: dict[float, float] = {}
    for match in _POINT.finditer(text):
        key = match[1] or match[2]
        if key in points:
            raise ParseError(TOOL, f"{key} printed twice: two summaries in one output?",
                             match[0])
        points[key] = parse_float(TOOL, match[3])
        if match[2]:
            percentiles[parse_float(TOOL, match[2])] = points[key]
    if "MAX" not in points or "MIN" not in points or not percentiles:
        raise ParseError(TOOL, "no <MAX>/<MIN>/percentile lines", text[-300:])
    observations = _OBSERVATIONS.search(text)
    if observations is None:
        raise ParseError(TOOL, "no `Total N observations` line", text[-300:])
    summary = _SUMMARY.search(text)
    full_rtt = avg[1] == "rtt"
    if summary is not None and ("Round trip" in summary[0]) != full_rtt:
        raise ParseError(TOOL, "avg line and Summary line disagree on --full-rtt", summary[0])
    valid, drops = _VALID.search(text), _DROPS.search(text)
    return LatencySummary(
        full_rtt=full_rtt,
        mean=parse_float(TOOL, avg[2]),
        std_dev=parse_float(TOOL, avg[3]),
        minimum=points["MIN"],
        maximum=points["MAX"],
        percentiles=dict(sorted(percentiles.items())),
        observations=parse_int(TOOL, observations[1]),
        burst=parse_int(TOOL, summary[1]) if summary and summary[1] else None,
        valid_run_time=parse_float(TOOL, valid[1]) if valid else None,
        sent=parse_int(TOOL, valid[2]) if valid else None,
        received=parse_int(TOOL, valid[3]) if valid else None,
        dropped=parse_int(TOOL, drops[1]) if drops else None,
        duplicated=parse_int(TOOL, drops[2]) if drops else None,
        out_of_order=parse_int(TOOL, drops[3]) if drops else None,
    )


def _throughput(text: str) -> ThroughputSummary:
    rate = _RATE.search(text)
    assert rate is not None  # parse() checked
    sent, bandwidth = _SENT.search(text), _BANDWIDTH.search(text)
    return ThroughputSummary(
        messages_sent=parse_int(TOOL, sent[1]) if sent else None,
        run_time=parse_float(TOOL, sent[2]) if sent else None,
        message_rate=parse_float(TOOL, rate[1]),
        bandwidth_mbps=parse_float(TOOL, bandwidth[2]) if bandwidth else None,
    )


def percentile_name(percentile: float) -> str:
    return f"p{percentile:g}"  # 99.900 -> p99.9, as neper's keys


def values(result: SockperfResult) -> list[Value]:
    if isinstance(result, ServerSummary):
        return [Value("messages_handled", result.messages_handled, COUNT)]
    if isinstance(result, ThroughputSummary):
        rows = [Value("message_rate", result.message_rate, "msg/s")]
        if result.messages_sent is not None:
            rows.append(Value("messages_sent", result.messages_sent, COUNT))
        if result.bandwidth_mbps is not None:
            rows.append(Value("bandwidth", result.bandwidth_mbps, "Mbit/s"))
        return rows
    prefix = "rtt" if result.full_rtt else "latency"
    rows = [Value(f"{prefix}_mean", result.mean, US),
            Value(f"{prefix}_stddev", result.std_dev, US),
            Value(f"{prefix}_min", result.minimum, US),
            Value(f"{prefix}_max", result.maximum, US)]
    rows += [Value(f"{prefix}_{percentile_name(p)}", v, US)
             for p, v in result.percentiles.items()]
    rows.append(Value("observations", result.observations, COUNT))
    for name in ("sent", "received", "dropped", "duplicated", "out_of_order"):
        number = getattr(result, name)
        if number is not None:
            rows.append(Value(f"{name}_messages", number, COUNT))
    if result.sent is not None and result.valid_run_time:
        # what the client achieved of its --mps in the valid duration (a load rung)
        rows.append(Value("send_rate", result.sent / result.valid_run_time, "msg/s"))
    return rows


@dataclass(frozen=True)
class FullLog:
    full_rtt: bool  # last column `rtt(usec)` (--full-rtt) rather than `latency(usec)`
    latencies_us: npt.NDArray[np.float64]


def parse_full_log(data: bytes | str) -> FullLog:
    """The per-message column of a --full-log file: rows `%zu, %.9lf, %.9lf, %.3lf`
    between the `packet, txTime(sec), ...` header and the closing dashed line.

    pyarrow's CSV reader on the numeric block only (single-threaded: faster here and
    half the memory), one column kept; about 10 M rows/s and the file's size plus
    8 bytes a row of memory.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    header = raw.find(_LOG_HEADER)
    if header < 0:
        raise ParseError(TOOL, "no `packet, txTime(sec), rxTime(sec), ...` header", "")
    start = raw.find(b"\n", header)
    column = raw[header + len(_LOG_HEADER):start].strip()
    if start < 0 or column not in (b"latency(usec)", b"rtt(usec)"):
        raise ParseError(TOOL, "unknown last column in the full-log header",
                         raw[header:header + 100].decode("utf-8", "replace"))
    # The closing dashed line is the file's last one: search from the end, not over
    # the whole block (bytes.find over 10^7 lines costs 0.4 s).
    end = raw.rfind(_LOG_END)
    if end < start:
        raise ParseError(TOOL, "no closing dashed line after the samples: truncated file?",
                         raw[-200:].decode("utf-8", "replace"))
    block = memoryview(raw)[start + 1:end + 1]
    if not block.nbytes:
        raise ParseError(TOOL, "the full log has no samples", "")
    try:
        reader = pacsv.open_csv(
            pa.BufferReader(pa.py_buffer(block)),
            read_options=pacsv.ReadOptions(column_names=["packet", "tx", "rx", "value"],
                                           use_threads=False, block_size=4 << 20),
            convert_options=pacsv.ConvertOptions(include_columns=["value"],
                                                 column_types={"value": pa.float64()}),
        )
        parts = [_float64(batch.column(0)) for batch in reader]
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:  # malformed row
        raise ParseError(TOOL, f"bad full-log row: {error}", "") from None
    latencies = np.concatenate(parts) if parts else np.empty(0)
    if not len(latencies) or not np.isfinite(latencies).all():
        raise ParseError(TOOL, "empty or non-finite latency in the full log", "")
    return FullLog(column == b"rtt(usec)", latencies)


def _float64(column: pa.Array) -> npt.NDArray[np.float64]:
    """A view of a float64 column without nulls. Array.to_numpy() would do, but its
    first call imports pandas (0.3 s here)."""
    import numpy as np

    if column.null_count:
        raise ParseError(TOOL, "empty latency field in the full log", "")
    data = np.frombuffer(column.buffers()[1], dtype=np.float64)
    return data[column.offset:column.offset + len(column)]


def full_log_values(log: FullLog) -> list[Value]:
    """Statistics computed from the samples (numpy's linear percentiles: close to, not
    always equal to, sockperf's own, which it prints in the file's summary block)."""
    import numpy as np

    prefix = "rtt" if log.full_rtt else "latency"
    samples = log.latencies_us
    rows = [Value("samples", len(samples), COUNT),
            Value(f"{prefix}_mean", float(samples.mean()), US),
            Value(f"{prefix}_min", float(samples.min()), US),
            Value(f"{prefix}_max", float(samples.max()), US)]
    for p in (50.0, 90.0, 99.0, 99.9, 99.99):
        rows.append(Value(f"{prefix}_{percentile_name(p)}",
                          float(np.percentile(samples, p)), US))
    return rows


class SockperfTool:
    """`sockperf MODE -i TARGET -p PORT -t SECS [--tcp] [--full-log PATH] [flags]`
    against `sockperf server -i BIND -p PORT [--tcp]`, which runs until SIGINT."""

    # one server answers every client (it multiplexes its sockets: -F); each client
    # measures its own round trips
    clients: SeveralClients = SeveralClients(EACH)

    _shared: Mapping[str, ArgSpec] = {
        "tcp": ArgSpec(bool, "TCP instead of UDP (both sides)"),
        "p": ArgSpec(int, f"port, default {PORT} (both sides)"),
        "F": ArgSpec(str, "I/O multiplexing: epoll, poll, select, recvfrom, ..."),
        "nonblocked": ArgSpec(bool, "non-blocking sockets"),
    }
    server_args: Mapping[str, ArgSpec] = dict(_shared) | {
        "threads-num": ArgSpec(int, "server threads"),
    }

    headline: tuple[str, ...] = ("latency_p50", "latency_p99", "message_rate")
    metrics: tuple[str, ...] = ("messages_handled", "message_rate", "messages_sent",
                                "bandwidth", "latency_*", "rtt_*", "observations",
                                "samples", "*_messages", "send_rate")
    operations: Mapping[str, tuple[str, ...]] = {"message": ("sent", "messages_sent",
                                                             "message_rate")}
    parsers: Mapping[str, Parser] = {
        "sockperf": lambda text: values(parse(text)),
        "sockperf.full_log": lambda text: full_log_values(parse_full_log(text))}
    versions: Mapping[str, tuple[str, ...] | None] = {"sockperf": ("sockperf", "--version")}

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.name = f"sockperf.{mode}"
        # under-load sends `--mps` messages a second on its own schedule (open loop)
        self.load: LoadAxis | None = LoadAxis(
            "mps", "msg/s", "max", ("send_rate",), "latency_p99") \
            if mode == "under-load" else None
        self.client_args: Mapping[str, ArgSpec] = dict(self._shared) | {
            "mps": ArgSpec((int, str), "messages per second, or 'max'"),
            "m": ArgSpec(int, "message size (bytes)"),
            "msg-size": ArgSpec(int, "message size (bytes)"),
            "b": ArgSpec(int, "messages per burst"),
            "reply-every": ArgSpec(int, "server replies to 1 in N messages"),
            "full-rtt": ArgSpec(bool, "report round-trip times, not RTT/2"),
            "full-log": ArgSpec(bool, "per-message latencies, stored as latency/<trial>"),
            "pre-warmup-wait": ArgSpec(int, "seconds before warm-up"),
            "tcp-avoid-nodelay": ArgSpec(bool, "leave Nagle on"),
            "sender-affinity": ArgSpec(str, "CPU of the sending thread"),
            "receiver-affinity": ArgSpec(str, "CPU of the receiving thread"),
        }

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        for side, args in (("client", client_args), ("server", server_args)):
            bad = sorted(set(args) & {"i", "ip", "t", "time", "full-log-file"})
            if bad:
                raise InputError(f"{self.name}: {side} arguments {bad} are set by napilab")
        tcp = bool(client_args.get("tcp") or server_args.get("tcp"))
        port = str(server_args.get("p", client_args.get("p", PORT)))
        shared = ("tcp", "p", "full-log")
        client = {k: v for k, v in client_args.items() if k not in shared}
        server = {k: v for k, v in server_args.items() if k not in ("tcp", "p")}
        argv = ["sockperf", self.mode, "-i", ctx.target, "-p", port, "-t",
                str(max(1, math.ceil(ctx.duration)))]
        files = {}
        if tcp:
            argv.append("--tcp")
        if client_args.get("full-log"):
            files["full_log"] = f"{ctx.workdir}/{ctx.trial}-sockperf-full-log.csv"
            argv += ["--full-log", files["full_log"]]
        return ToolCommands(
            client=[*argv, *flags(client)],
            server=ServerCommand(
                ["sockperf", "server", "-i", ctx.bind, "-p", port,
                 *(["--tcp"] if tcp else []), *flags(server)],
                Readiness(port=int(port), protocol="tcp" if tcp else "udp"),
                exits_by_itself=False, stop_signal="INT"),
            client_files=files,
        )

    def parse(self, output: ToolOutput) -> ToolResult:
        client = output.client
        if client.exit_code == 127:
            raise ToolFailed(self.name, "sockperf is not installed on the host", client.stderr)
        if client.exit_code != 0:
            raise ToolFailed(self.name, f"client exited {client.exit_code}",
                             client.stderr or client.stdout)
        try:
            result = parse(client.stdout + "\n" + client.stderr)
        except ParseError as error:
            raise ToolFailed(self.name, error.reason, client.stderr) from None
        expected = ThroughputSummary if self.mode == "throughput" else LatencySummary
        if not isinstance(result, expected):
            raise ToolFailed(self.name, f"no {self.mode} summary in the client's output",
                             client.stdout)
        latencies = None
        if "full_log" in client.files:
            try:
                latencies = parse_full_log(client.files["full_log"]).latencies_us
            except ParseError as error:
                raise ToolFailed(self.name, f"full log: {error.reason}") from None
        server: list[Value] = []
        if output.server is not None:
            # Stopped by a signal: its closing line is a bonus, not a condition.
            try:
                server = values(parse(output.server.stdout))
            except ParseError:
                server = []
        return ToolResult(client=values(result), server=server, latencies_us=latencies)

    def programs(self, side: str) -> tuple[str, ...]:
        return ("sockperf",)


MODES = ("ping-pong", "under-load", "throughput")
