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
The `--all-samples` CSV is parsed by `runners.workloads.neper.samples`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from napilab.harness.errors import InputError
from napilab.runners.base import COUNT, US, ParseError, ToolFailed, Value, parse_float
from napilab.runners.workloads.neper.options import (
    CLIENT,
    MIRROR,
    OPTIONS,
    RESERVED,
    SAME,
    SERVER,
    SERVER_TOO,
)
from napilab.runners.workloads.workload import (
    ArgSpec,
    ArgValue,
    Context,
    LoadAxis,
    Parser,
    ProcessOutput,
    Readiness,
    ServerCommand,
    SeveralClients,
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


class NeperTool:
    """One neper binary. Server: `BIN --nolog -H BIND -l SECS [flags]`, ready when its
    control port listens, exits by itself after one test. Client: `BIN -c -H TARGET -l SECS
    --nolog [flags]`. Which client flag the server also gets is the OPTIONS table."""

    load: LoadAxis | None = None  # closed loop: no offered load
    clients: SeveralClients = SeveralClients(
        "", "a neper server waits for the clients its --num-clients names and reports "
            "them as one; napilab gives it one client")
    headline: tuple[str, ...] = ("latency_p50", "latency_p99", "throughput")
    metrics: tuple[str, ...] = ("num_transactions", *_LATENCY_STATS, "latency_p*",
                                "throughput", "local_throughput", "remote_throughput",
                                "correlation_coefficient", "utime", "stime", *_RUSAGE,
                                "maxrss", "snapshots", "flows")  # + neper.all_samples
    operations: Mapping[str, tuple[str, ...]] = {"transaction": ("num_transactions",),
                                                 "MB": ("throughput",)}
    parsers: Mapping[str, Parser] = {"neper": lambda text: values(parse(text)),
                                     "neper.all_samples": lambda text: _all_samples(text)}

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.name = f"neper.{binary}"
        # neper has no version flag: the binary on PATH and its sha256 stand for it
        self.versions: Mapping[str, tuple[str, ...] | None] = {binary: None}
        self.options = {option.long: option for option in OPTIONS[binary]}
        self._long = {o.short: o.long for o in OPTIONS[binary] if o.short}
        self.client_args: Mapping[str, ArgSpec] = self._specs(exclude=SERVER)
        self.server_args: Mapping[str, ArgSpec] = self._specs(exclude=CLIENT)

    def _specs(self, exclude: str) -> dict[str, ArgSpec]:
        specs = {}
        for option in self.options.values():
            if option.sides != exclude:
                text = f"{option.help} [{option.sides}: neper {option.source}]"
                specs[option.long] = ArgSpec(option.kind, text)
                if option.short:
                    specs[option.short] = ArgSpec(option.kind, f"-{option.short}: {text}")
        return specs

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        client, server = dict(client_args), dict(server_args)
        client_long = self._long_names(client, "client")
        server_long = self._long_names(server, "server")
        for long, key in list(client_long.items()):  # in the order the profile gives them
            option, there = self.options[long], server_long.get(long)
            if option.sides == SAME and there is not None and str(client[key]) != str(
                    server[there]):
                raise InputError(f"{self.name}: {long} is {client[key]!r} for the client and "
                                 f"{server[there]!r} for the server; neper needs one value "
                                 f"on both sides ({option.source})")
            if option.sides in (SAME, SERVER_TOO) and there is None:
                server[key] = client[key]  # written the way the user wrote it
                server_long[long] = key
            elif option.sides == MIRROR and client[key] is True \
                    and "enable-write" not in server_long:
                server["w" if key == "r" else "enable-write"] = True
        for long, key in list(server_long.items()):
            if self.options[long].sides == SAME and long not in client_long:
                client[key] = server[key]
                client_long[long] = key
        client_files = self._all_samples(client, client_long, "client", ctx)
        server_files = self._all_samples(server, server_long, "server", ctx)
        port = client.get(client_long.get("control-port", ""), CONTROL_PORT)
        seconds = _whole_seconds(ctx.duration)
        return ToolCommands(
            client=[self.binary, "-c", "-H", ctx.target, "-l", seconds, "--nolog",
                    *flags(client)],
            server=ServerCommand([self.binary, "--nolog", "-H", ctx.bind, "-l", seconds,
                                  *flags(server)],
                                 Readiness(port=int(str(port)), protocol="tcp"),
                                 exits_by_itself=True),
            client_files=client_files,
            server_files=server_files,
        )

    def _long_names(self, args: Mapping[str, ArgValue], side: str) -> dict[str, str]:
        """long option name -> the key the profile used (`F` or `num-flows`)."""
        names: dict[str, str] = {}
        for key in args:
            if key in RESERVED:
                raise InputError(f"{self.name}: {side} argument {key!r} is set by napilab "
                                 "(target, duration and logging come from the profile)")
            long = self._long.get(key, key)
            option = self.options.get(long)
            if option is None:
                raise InputError(f"{self.name}: {key!r} is not an option of {self.binary}")
            if option.sides == (CLIENT if side == "server" else SERVER):
                raise InputError(f"{self.name}: {key!r} is read by the {option.sides} only "
                                 f"(neper {option.source}); give it under {option.sides}.args")
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

    def programs(self, side: str) -> tuple[str, ...]:
        return (self.binary,)

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


def _all_samples(text: str) -> list[Value]:
    # Imported here: neper_samples is numpy through and through, and the CLI reads the
    # parsers' names for `napilab parse`'s choices on every start (benchmarks/startup.py).
    from napilab.runners.workloads.neper import samples as neper_samples

    return neper_samples.values(neper_samples.parse(text))


def _whole_seconds(duration: float) -> str:
    # neper's -l is an int; a fractional duration is rounded up, never down to 0.
    return str(max(1, math.ceil(duration)))
