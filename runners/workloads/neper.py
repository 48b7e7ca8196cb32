"""neper (google/neper): tcp_rr, udp_rr, tcp_crr, tcp_stream, udp_stream.

stdout is `key=value` lines in three parts (docs/formats.md section 1, read
at neper 1.1.0, ea5890f): `VERSION=` and the option dump; `total_run_time=` (or
`total_transactions=`); after the run, rusage, the workload report and
`local_throughput`/`remote_throughput`. Latencies are SECONDS (`%.9f`); napilab reports
microseconds. Quirks handled here:
- `--iostat-ms` repeats the key `t=`; kept in order, never in the key map.
- the suicide timer (`-s`) prints the bare line `timeout handler` and exits 255.
- percentile keys follow `-p` through `%g`: `latency_p99.9`, `latency_p99.99`; neper
  before 8b2f9e1 (2024-01) spelled the legacy `-p 999` the same way, and a key
  `latency_p999` is read as 99.9 too.
- the RR server prints `latency_*=0` ("rr server has no meaningful latency") and no
  percentiles; tcp_crr's server keeps no statistics at all; in a stream test only the
  reading side prints `throughput`. A side that computed no rate sends 0 as the peer's
  `remote_throughput`: those zeros are "not measured" and left out.
The `--all-samples` CSV is parsed by `runners.workloads.neper_samples`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from harness.errors import InputError
from runners.base import COUNT, US, ParseError, ToolFailed, Value, parse_float
from runners.workloads.workload import (
    ArgSpec,
    ArgValue,
    Context,
    ProcessOutput,
    Readiness,
    ServerCommand,
    ToolCommands,
    ToolOutput,
    ToolResult,
    flags,
)

TOOL = "neper"
CONTROL_PORT = 12866  # neper's default -C
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_PERCENTILE_KEY = re.compile(r"latency_p(\d+(?:\.\d+)?)\Z")
_RUN_MARKERS = ("total_run_time", "total_transactions")
_LATENCY_STATS = ("latency_min", "latency_mean", "latency_max", "latency_stddev")
_RUSAGE = ("minflt", "majflt", "nvcsw", "nivcsw")
_LEGACY = {999.0: 99.9, 9999.0: 99.99}  # `-p 999` before neper 8b2f9e1 (2024-01)


@dataclass(frozen=True)
class NeperResult:
    """One neper process's stdout. `report` holds every numeric key printed after the
    run, as printed (latencies in seconds)."""

    version: str
    binary_family: str  # "rr" (tcp_rr, udp_rr, tcp_crr) or "stream"
    client: bool
    options: Mapping[str, str]
    report: Mapping[str, float]
    throughput_units: str | None
    iostat: tuple[str, ...]


def percentile_name(percentile: float) -> str:
    """`p99.9` for 99.9, as neper's `%g`; the legacy 999/9999 mean 99.9/99.99."""
    return f"p{_LEGACY.get(percentile, percentile):g}"


def parse(text: str) -> NeperResult:
    """Parse one neper process's stdout (client or server)."""
    options: dict[str, str] = {}
    report: dict[str, str] = {}
    iostat: list[str] = []
    section = options
    timed_out = False
    for line in text.splitlines():
        line = line.strip()
        if line == "timeout handler":
            timed_out = True
            continue
        key, sep, value = line.partition("=")
        if not sep or not _KEY.match(key):
            continue  # not neper's (a wrapper's banner, say): neper prints key=value only
        if key == "t":
            iostat.append(value)
            continue
        if key in section:
            raise ParseError(TOOL, f"key {key!r} printed twice: two runs in one output?", line)
        section[key] = value
        if key in _RUN_MARKERS:
            section = report
    if "VERSION" not in options:
        raise ParseError(TOOL, "no VERSION= line: not neper output", text[:200])
    if section is options:
        raise ParseError(TOOL, "no total_run_time= line: neper stopped before the run",
                         text[-200:])
    if timed_out and not report:
        raise ParseError(TOOL, "the suicide timer fired (`timeout handler`) before a report",
                         text[-200:])
    if "local_throughput" not in report or "remote_throughput" not in report:
        raise ParseError(TOOL, "no local_throughput/remote_throughput: the run ended before "
                         "neper printed its results", text[-300:])
    units = report.pop("throughput_units", None)
    numbers = {key: parse_float(TOOL, value) for key, value in report.items()}
    stream = "enable_read" in options or units is not None
    return NeperResult(
        version=options["VERSION"],
        binary_family="stream" if stream else "rr",
        client=options.get("client") == "1",
        options=options,
        report=numbers,
        throughput_units=units,
        iostat=tuple(iostat),
    )


def values(result: NeperResult) -> list[Value]:
    """Result rows; what a side did not measure is left out (see the module docstring)."""
    report = result.report
    rr = result.binary_family == "rr"
    rate_unit = "trans/s" if rr else (result.throughput_units or "unknown")
    peer_unit = "trans/s" if rr else "bits/s"  # local/remote_throughput: %lld of local_rate
    rows: list[Value] = []
    if rr and "num_transactions" in report:
        rows.append(Value("num_transactions", report["num_transactions"], COUNT))
    if rr and result.client and "latency_mean" in report:
        rows += [Value(name, _us(report[name]), US) for name in _LATENCY_STATS
                 if name in report]
        rows += _percentiles(report)
    if "throughput" in report:
        rows.append(Value("throughput", report["throughput"], rate_unit))
        rows.append(Value("local_throughput", report["local_throughput"], peer_unit))
        if "correlation_coefficient" in report:
            rows.append(Value("correlation_coefficient", report["correlation_coefficient"],
                              "ratio"))
    if report["remote_throughput"] != 0:
        rows.append(Value("remote_throughput", report["remote_throughput"], peer_unit))
    rows += _rusage(report)
    return rows


def _us(seconds: float) -> float:
    # neper prints %.9f seconds: nanosecond resolution, so 3 decimals of us are exact.
    return round(seconds * 1e6, 3)


def _percentiles(report: Mapping[str, float]) -> list[Value]:
    found: dict[float, Value] = {}
    for key, number in report.items():
        match = _PERCENTILE_KEY.match(key)
        if match is None:
            continue
        percentile = _LEGACY.get(float(match[1]), float(match[1]))
        if not 0 <= percentile <= 100:
            raise ParseError(TOOL, f"percentile {match[1]} is not within 0..100", key)
        found[percentile] = Value(f"latency_{percentile_name(percentile)}", _us(number), US)
    return [found[p] for p in sorted(found)]


def _rusage(report: Mapping[str, float]) -> list[Value]:
    rows = []
    for name in ("utime", "stime"):
        start, end = report.get(f"{name}_start"), report.get(f"{name}_end")
        if start is not None and end is not None:
            rows.append(Value(name, round(end - start, 6), "s"))
    for name in _RUSAGE:
        start, end = report.get(f"{name}_start"), report.get(f"{name}_end")
        if start is not None and end is not None:
            rows.append(Value(name, end - start, COUNT))
    if "maxrss_end" in report:
        rows.append(Value("maxrss", report["maxrss_end"], "KiB"))
    return rows


# --- the tools -------------------------------------------------------------------------

# (short flag, long flag, kind, help) shared by every binary; `c`, `H`, `l`, `nolog` are
# napilab's. Long flags are neper's option names with `-` for `_` (getopt_long).
_COMMON: tuple[tuple[str, str, type | tuple[type, ...], str], ...] = (
    ("F", "num-flows", int, "total number of flows (copied to the server unless set there)"),
    ("T", "num-threads", int, "number of threads"),
    ("C", "control-port", (int, str), f"control port, default {CONTROL_PORT} (both sides)"),
    ("P", "port", (int, str), "data port, default 12867 (both sides)"),
    ("A", "all-samples", (bool, str), "per-interval CSV; true: a file under the run's workdir"),
    ("s", "suicide-length", int, "exit after this many seconds whatever happens"),
    ("U", "pin-cpu", bool, "pin threads to CPU cores"),
    ("I", "interval", (int, float), "seconds per sample"),
    ("m", "max-pacing-rate", (int, str), "SO_MAX_PACING_RATE"),
    ("M", "mark", int, "SO_MARK"),
    ("L", "local-hosts", str, "local addresses to bind"),
    ("4", "ipv4", bool, "AF_INET only"),
    ("6", "ipv6", bool, "AF_INET6 only"),
    ("", "num-clients", int, "clients the server waits for"),
    ("", "nonblocking", bool, "non-blocking syscalls"),
    ("", "busywait", int, "epoll busy wait (ns)"),
    ("", "iostat-ms", int, "print `t=` io stats every N ms"),
    ("", "wait-start", int, "seconds before data flows start"),
    ("", "source-port", int, "first source port"),
    ("", "time-wait", bool, "close gracefully (TIME_WAIT)"),
    ("", "freebind", bool, "IP_FREEBIND"),
    ("", "logtostderr", bool, "log to stderr"),
)
_RR: tuple[tuple[str, str, type | tuple[type, ...], str], ...] = (
    ("Q", "request-size", int, "request bytes"),
    ("R", "response-size", int, "response bytes"),
    ("p", "percentiles", (str, int, float), "latency percentiles, e.g. '50,90,99,99.9'"),
    ("B", "buffer-size", int, "bytes per read()/send()"),
    ("D", "delay", (int, str), "delay between sends"),
    ("", "noburst", (int, str), "noburst interval (tcp_rr)"),
    ("", "async-connect", bool, "non-blocking connect"),
)
_STREAM: tuple[tuple[str, str, type | tuple[type, ...], str], ...] = (
    ("B", "buffer-size", int, "bytes per read/write"),
    ("D", "delay", int, "ns between sends"),
    ("r", "enable-read", bool, "read from flows"),
    ("w", "enable-write", bool, "write to flows"),
    ("E", "edge-trigger", bool, "edge-triggered epoll"),
    ("Z", "zerocopy", bool, "MSG_ZEROCOPY"),
    ("z", "rx-zerocopy", bool, "TCP RX zerocopy (tcp_stream)"),
    ("", "enable-tcp-maerts", bool, "server writes, client reads (tcp_stream)"),
    ("", "split-bidir", bool, "separate tx/rx sockets (tcp_stream)"),
    ("", "skip-rx-copy", bool, "skip the payload copy on receive (tcp_stream)"),
    ("", "throughput-opt", str, "throughput unit, e.g. Mb, Gb"),
)
_RESERVED = {"c", "client", "H", "host", "l", "test-length", "nolog", "n", "dry-run"}
# Options both sides must agree on (docs/formats.md 1.6: the server must know -F, and the
# ports are where the client connects).
_SHARED = ("num-flows", "control-port", "port")


def _arg_specs(table: tuple[tuple[str, str, type | tuple[type, ...], str], ...]
               ) -> dict[str, ArgSpec]:
    specs = {}
    for short, long, kind, text in table:
        specs[long] = ArgSpec(kind, text)
        if short:
            specs[short] = ArgSpec(kind, f"-{short}: {text}")
    return specs


class NeperTool:
    """One neper binary. Server: `BIN --nolog -H BIND [flags]`, ready when its control
    port listens, exits by itself after one test. Client: `BIN -c -H TARGET -l SECS
    --nolog [flags]`."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.name = f"neper.{binary}"
        self.family = "stream" if binary.endswith("stream") else "rr"
        table = _COMMON + (_STREAM if self.family == "stream" else _RR)
        self.client_args: Mapping[str, ArgSpec] = _arg_specs(table)
        self.server_args: Mapping[str, ArgSpec] = self.client_args
        self._long = {short: long for short, long, _, _ in table if short}

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        client, server = dict(client_args), dict(server_args)
        client_long = self._long_names(client, "client")
        server_long = self._long_names(server, "server")
        for key in _SHARED:  # written the way the user wrote it on the other side
            if key in client_long and key not in server_long:
                server[client_long[key]] = client[client_long[key]]
            elif key in server_long and key not in client_long:
                client[server_long[key]] = server[server_long[key]]
        client_files = self._all_samples(client, client_long, "client", ctx)
        server_files = self._all_samples(server, server_long, "server", ctx)
        port = server.get(server_long.get("control-port", ""),
                          client.get(client_long.get("control-port", ""), CONTROL_PORT))
        return ToolCommands(
            client=[self.binary, "-c", "-H", ctx.target, "-l", _whole_seconds(ctx.duration),
                    "--nolog", *flags(client)],
            server=ServerCommand([self.binary, "--nolog", "-H", ctx.bind, *flags(server)],
                                 Readiness(port=int(str(port)), protocol="tcp"),
                                 exits_by_itself=True),
            client_files=client_files,
            server_files=server_files,
        )

    def _long_names(self, args: Mapping[str, ArgValue], side: str) -> dict[str, str]:
        """long option name -> the key the profile used (`F` or `num-flows`)."""
        names: dict[str, str] = {}
        for key in args:
            if key in _RESERVED:
                raise InputError(f"{self.name}: {side} argument {key!r} is set by napilab "
                                 "(target, duration and logging come from the profile)")
            long = self._long.get(key, key)
            if long in names:
                raise InputError(f"{self.name}: {side} arguments give {long!r} twice")
            names[long] = key
        return names

    def _all_samples(self, args: dict[str, ArgValue], names: Mapping[str, str], side: str,
                     ctx: Context) -> dict[str, str]:
        """`A: true` -> a CSV under the workdir, fetched after the run. Always written
        `--all-samples=PATH`: neper refuses `-A PATH` (an optional argument)."""
        key = names.get("all-samples")
        if key is None:
            return {}
        value = args.pop(key)
        if value is False:
            return {}
        path = (f"{ctx.workdir}/{ctx.trial}-{self.binary}-{side}-samples.csv"
                if value is True else str(value))
        args["all-samples"] = path
        return {"all_samples": path}

    def parse(self, output: ToolOutput) -> ToolResult:
        client = self._side(output.client, "client")
        if client.binary_family == "rr" and not all(
                key in client.report for key in ("num_transactions", "latency_mean",
                                                 "throughput")):
            raise ToolFailed(self.name, "the client report has no transactions/latency",
                             output.client.stderr)
        if (client.binary_family == "stream" and "throughput" not in client.report
                and client.report["remote_throughput"] == 0):
            raise ToolFailed(self.name, "neither side measured a throughput",
                             output.client.stderr)
        server = self._side(output.server, "server") if output.server is not None else None
        return ToolResult(client=values(client), server=values(server) if server else [])

    def _side(self, process: ProcessOutput, side: str) -> NeperResult:
        if process.exit_code == 127:
            raise ToolFailed(self.name, f"neper's {self.binary} is not installed on the host",
                             process.stderr)
        if process.exit_code != 0:
            raise ToolFailed(self.name, f"{side} exited {process.exit_code}",
                             process.stderr or process.stdout)
        try:
            return parse(process.stdout)
        except ParseError as error:
            raise ToolFailed(self.name, f"{side}: {error.reason}",
                             process.stderr or process.stdout) from None


def _whole_seconds(duration: float) -> str:
    # neper's -l is an int; a fractional duration is rounded up, never down to 0.
    return str(max(1, math.ceil(duration)))


BINARIES = ("tcp_rr", "udp_rr", "tcp_crr", "tcp_stream", "udp_stream")
