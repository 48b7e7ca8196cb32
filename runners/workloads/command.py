"""The generic `command` tool: any program, metrics read from its output by regex or
JSON path. Profiles use it for xdpsock, dpdk-testpmd and in-house tools.

A metric is `name: {regex | json_path, unit, scale, aggregate, stream, optional}`:
- `regex` (searched line by line, `^`/`$` anchor lines) captures the number in the
  group `value` (or group 1, or the whole match). Thousands separators are allowed
  ("20,797,350" from xdpsock's `%'lu`); any other comma is refused, not guessed.
- `json_path` (`end.sum.bits_per_second`, list indices as numbers) reads the stream as
  one JSON document.
- `aggregate` over all matches: first, last (default), min, max, mean, sum; `last: false`
  means first. `scale` multiplies, `stream` is stdout (default) or stderr.
- a required metric that never matches fails the trial, naming metric and pattern; an
  `optional: true` one is left out (absent, never 0).
Arguments may use `${target}`, `${bind}`, `${duration}`, `${workdir}`, `${trial}`.
`metrics` may also name a preset: `xdpsock` or `testpmd`, read by runners.workloads.xdpsock
and .testpmd (sockets and ports summed, cut output refused).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from napilab.harness.errors import InputError
from napilab.runners.base import ParseError, ToolFailed, Value, fill, parse_float, ungroup
from napilab.runners.workloads import testpmd, xdpsock
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
)

TOOL = "command"
AGGREGATES = ("first", "last", "min", "max", "mean", "sum")
_KEYS = {"regex", "json_path", "unit", "scale", "aggregate", "last", "stream", "optional"}


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str
    regex: re.Pattern[str] | None = None
    json_path: tuple[str, ...] | None = None
    scale: float = 1.0
    aggregate: str = "last"
    stream: str = "stdout"
    optional: bool = False

    @property
    def source(self) -> str:
        if self.regex is not None:
            return f"pattern {self.regex.pattern!r}"
        return f"json_path {'.'.join(self.json_path or ())!r}"


@dataclass(frozen=True)
class Measured:
    name: str
    value: float
    unit: str
    matches: int


# Outputs that regexes cannot read exactly (per-socket and per-port blocks to sum, totals
# to check) have their own parsers; `metrics: xdpsock` or `metrics: testpmd` uses them.
PRESETS: dict[str, Callable[[str], list[Value]]] = {
    "xdpsock": lambda text: xdpsock.values(xdpsock.parse(text)),
    "testpmd": lambda text: testpmd.values(testpmd.parse(text)),
}


def metric_specs(config: object) -> tuple[MetricSpec, ...]:
    """Validate a profile's `metrics` (a mapping, or a preset's name: no specs)."""
    if isinstance(config, str):
        if config not in PRESETS:
            raise InputError(f"command: no metrics preset {config!r}; presets are "
                             f"{sorted(PRESETS)}")
        return ()
    if not isinstance(config, Mapping):
        raise InputError("command: `metrics` must map metric names to {regex|json_path, unit}")
    return tuple(_spec(str(name), body) for name, body in config.items())


def _spec(name: str, body: object) -> MetricSpec:
    where = f"command: metric {name!r}"
    if not isinstance(body, Mapping):
        raise InputError(f"{where}: expected a mapping with regex or json_path, and unit")
    unknown = sorted(set(body) - _KEYS)
    if unknown:
        raise InputError(f"{where}: unknown keys {unknown}; expected some of {sorted(_KEYS)}")
    if ("regex" in body) == ("json_path" in body):
        raise InputError(f"{where}: give exactly one of regex and json_path")
    if not isinstance(body.get("unit"), str) or not body["unit"]:
        raise InputError(f"{where}: `unit` is required (e.g. pps, us, bits/s)")
    aggregate = body.get("aggregate", "last" if body.get("last", True) else "first")
    if aggregate not in AGGREGATES:
        raise InputError(f"{where}: aggregate {aggregate!r} is not one of {AGGREGATES}")
    stream = body.get("stream", "stdout")
    if stream not in ("stdout", "stderr"):
        raise InputError(f"{where}: stream must be stdout or stderr")
    scale = body.get("scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise InputError(f"{where}: scale must be a number")
    regex = None
    if "regex" in body:
        try:
            regex = re.compile(str(body["regex"]), re.MULTILINE)
        except re.error as error:
            raise InputError(f"{where}: bad regex {body['regex']!r}: {error}") from None
    path = tuple(str(body["json_path"]).split(".")) if "json_path" in body else None
    return MetricSpec(name, body["unit"], regex, path, float(scale), str(aggregate),
                      str(stream), bool(body.get("optional", False)))


def parse(text: str, specs: Sequence[MetricSpec], *, stderr: str = "") -> tuple[Measured, ...]:
    """Every metric of `specs` read from the command's output."""
    streams = {"stdout": text, "stderr": stderr}
    measured = []
    for spec in specs:
        numbers = (_regex_numbers(spec, streams[spec.stream]) if spec.regex is not None
                   else _json_numbers(spec, streams[spec.stream]))
        if not numbers:
            if spec.optional:
                continue
            raise ParseError(TOOL, f"metric {spec.name!r}: {spec.source} matched nothing "
                             f"in {spec.stream}", streams[spec.stream][-300:])
        measured.append(Measured(spec.name, _aggregate(numbers, spec.aggregate) * spec.scale,
                                 spec.unit, len(numbers)))
    if specs and not measured:
        raise ParseError(TOOL, "none of the metrics matched: "
                         + ", ".join(f"{s.name} ({s.source})" for s in specs)[:300], text[-300:])
    return tuple(measured)


def _regex_numbers(spec: MetricSpec, text: str) -> list[float]:
    assert spec.regex is not None
    numbers = []
    for match in spec.regex.finditer(text):
        if "value" in spec.regex.groupindex:
            token = match["value"]
        else:
            token = match[1] if spec.regex.groups else match[0]
        if token is None:
            continue
        token = token.strip()
        if "," in token:
            plain = ungroup(token)
            if plain is None:
                raise ParseError(TOOL, f"metric {spec.name!r}: {token!r} is not a number "
                                 "with thousands separators", match[0])
            token = plain
        numbers.append(parse_float(TOOL, token))
    return numbers


def _json_numbers(spec: MetricSpec, text: str) -> list[float]:
    try:
        node: Any = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise ParseError(TOOL, f"metric {spec.name!r}: output is not one JSON document",
                         text[:200]) from None
    for part in spec.json_path or ():
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdecimal() and int(part) < len(node):
            node = node[int(part)]
        else:
            return []
    if isinstance(node, bool) or not isinstance(node, int | float):
        raise ParseError(TOOL, f"metric {spec.name!r}: {spec.source} is not a number",
                         repr(node)[:100])
    return [parse_float(TOOL, repr(node))]


def _aggregate(numbers: list[float], how: str) -> float:
    if how == "first":
        return numbers[0]
    if how == "last":
        return numbers[-1]
    if how == "min":
        return min(numbers)
    if how == "max":
        return max(numbers)
    if how == "sum":
        return sum(numbers)
    return sum(numbers) / len(numbers)


def values(measured: Sequence[Measured]) -> list[Value]:
    return [Value(m.name, m.value, m.unit) for m in measured]


def measure(stdout: str, stderr: str, preset: str | None,
            specs: Sequence[MetricSpec]) -> list[Value]:
    """A command's values: its preset's parser, else the profile's metric specs."""
    if preset is not None:
        return PRESETS[preset](stdout)
    return values(parse(stdout, specs, stderr=stderr))


class CommandTool:
    """Client `argv`; optional server `server_argv` with readiness (`ready_port` and/or
    `ready_pattern`), stopped with `stop_signal` unless `exits_by_itself`.

    The WorkloadTool contract hands parse() only the output, not the arguments, so
    commands() keeps the validated metric specs for the parse() of the same trial.
    """

    name = "command"
    headline: tuple[str, ...] = ()  # its metrics are the profile's: `metrics:` names them
    metrics: tuple[str, ...] = ("*",)  # named by its args (regexes or a preset)
    # what the presets count (xdpsock, testpmd); a command's own metrics count nothing
    operations: Mapping[str, tuple[str, ...]] = {
        "packet": ("rx_packets", "fwd_rx_packets", "rx_pps", "rx_pps_mean")}
    # its presets' parsers: `napilab parse xdpsock FILE`
    parsers: Mapping[str, Parser] = dict(PRESETS)
    versions: Mapping[str, tuple[str, ...] | None] = {}
    # the profile writes `${rate}` in argv; `load.unit` and `load.achieved` say the rest
    load: LoadAxis | None = LoadAxis(None, "", None, ())
    # each client runs the argv and its metrics are read from its own output
    clients: SeveralClients = SeveralClients(EACH)
    client_args: Mapping[str, ArgSpec] = {
        "argv": ArgSpec((list, str), "the command: a list, or a shell-quoted string"),
        "metrics": ArgSpec((dict, str), "name -> {regex|json_path, unit, ...}, or a preset"),
        "exit_codes": ArgSpec((list, int), "exit codes that mean success (default 0)"),
    }
    server_args: Mapping[str, ArgSpec] = {
        "server_argv": ArgSpec((list, str), "a server to start first"),
        "ready_port": ArgSpec(int, "the server is ready when this port listens"),
        "ready_protocol": ArgSpec(str, "tcp or udp", ("tcp", "udp")),
        "ready_pattern": ArgSpec(str, "... or when its output matches this regex"),
        "ready_timeout": ArgSpec((int, float), "seconds to wait for readiness (10)"),
        "stop_signal": ArgSpec(str, "signal that stops the server (TERM)"),
        "exits_by_itself": ArgSpec(bool, "the server ends on its own after the test"),
    }

    def __init__(self) -> None:
        self._specs: tuple[MetricSpec, ...] = ()
        self._preset: str | None = None
        self._program = "the command"
        self._exit_codes: tuple[int, ...] = (0,)

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        args: Mapping[str, object] = client_args
        sargs: Mapping[str, object] = server_args
        if "argv" not in args:
            raise InputError("command: client `argv` is required")
        argv = split_argv(args["argv"], "argv", ctx)
        specs = metric_specs(args["metrics"]) if "metrics" in args else ()
        metrics = args.get("metrics")
        preset = metrics if isinstance(metrics, str) else None
        self._specs, self._preset, self._program = specs, preset, argv[0]
        raw_codes = args.get("exit_codes", 0)
        codes = [c for c in (raw_codes if isinstance(raw_codes, list) else [raw_codes])
                 if isinstance(c, int) and not isinstance(c, bool)]
        if len(codes) != (len(raw_codes) if isinstance(raw_codes, list) else 1):
            raise InputError("command: `exit_codes` must be integers")
        self._exit_codes = tuple(codes)
        context = {"specs": specs, "preset": preset, "program": argv[0],
                   "exit_codes": tuple(codes)}
        server = None
        if "server_argv" in sargs:
            port, pattern = sargs.get("ready_port"), sargs.get("ready_pattern")
            if port is None and pattern is None:
                raise InputError("command: server_argv needs ready_port or ready_pattern")
            ready = Readiness(port=int(str(port)) if port is not None else None,
                              protocol=str(sargs.get("ready_protocol", "tcp")),
                              log_pattern=str(pattern) if pattern is not None else None,
                              timeout=float(str(sargs.get("ready_timeout", 10.0))))
            server = ServerCommand(split_argv(sargs["server_argv"], "server_argv", ctx), ready,
                                   exits_by_itself=bool(sargs.get("exits_by_itself", False)),
                                   stop_signal=str(sargs.get("stop_signal", "TERM")))
        return ToolCommands(client=argv, server=server, context=context)

    def parse(self, output: ToolOutput) -> ToolResult:
        """Reads the metric definitions from the commands that ran (`output.commands`);
        the values kept from the last commands() call are only a fallback."""
        context = output.commands.context if output.commands is not None else {}
        specs = context.get("specs", self._specs)
        program = context.get("program", self._program)
        exit_codes = context.get("exit_codes", self._exit_codes)
        client = output.client
        if client.exit_code == 127:
            raise ToolFailed(TOOL, f"{program} is not installed on the host", client.stderr)
        if client.exit_code not in exit_codes:
            raise ToolFailed(TOOL, f"{program} exited {client.exit_code}",
                             client.stderr or client.stdout)
        preset = context.get("preset", self._preset)
        try:
            return ToolResult(client=measure(client.stdout, client.stderr, preset, specs))
        except ParseError as error:
            raise ToolFailed(TOOL, error.reason, client.stderr) from None

    def programs(self, side: str) -> tuple[str, ...]:
        return ()  # it runs anything: nothing is known of it


def split_argv(raw: object, key: str, ctx: Context) -> list[str]:
    if isinstance(raw, str):
        parts = shlex.split(raw)
    elif isinstance(raw, list) and all(isinstance(p, str | int | float) for p in raw):
        parts = [str(p) for p in raw]
    else:
        raise InputError(f"command: `{key}` must be a list of strings or a string")
    if not parts:
        raise InputError(f"command: `{key}` is empty")
    duration = str(int(ctx.duration)) if float(ctx.duration).is_integer() else str(ctx.duration)
    known = {"target": ctx.target, "bind": ctx.bind, "duration": duration,
             "workdir": ctx.workdir, "trial": ctx.trial}
    return [fill(part, known) for part in parts]

