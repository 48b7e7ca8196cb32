"""ping (iputils and busybox): flood and interval modes.

Summary formats (docs/formats.md section 3):
  iputils  `N packets transmitted, N received[, +N duplicates][, +N corrupted][, +N errors],
            L% packet loss, time Tms` then `rtt min/avg/max/mdev = a/b/c/d ms[, pipe P]
            [, ipg/ewma g/e ms]`. Loss was an integer before s20180629, `%g` since.
  busybox  `N packets transmitted, N packets received, [N duplicates, ]L% packet loss` then
            `round-trip min/avg/max = a/b/c ms` (no mdev, no time).
Flood mode without -q writes `.` and backspaces to stdout; only the summary is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from napilab.runners.base import (
    COUNT,
    MS,
    PERCENT,
    US,
    ParseError,
    ToolFailed,
    Value,
    parse_float,
    parse_int,
)
from napilab.runners.workloads.workload import (
    EACH,
    ArgSpec,
    ArgValue,
    Context,
    LoadAxis,
    Parser,
    SeveralClients,
    ToolCommands,
    ToolOutput,
    ToolResult,
)

TOOL = "ping"

_COUNTS = re.compile(
    r"^(?P<tx>\d+) packets transmitted, (?P<rx>\d+) (?:packets )?received"
    r"(?P<extra>(?:, \+?\d+ (?:duplicates|corrupted|errors))*)"
    r"(?:, (?P<loss>[\d.]+)% packet loss)?(?:, time (?P<time>\d+)ms)?\s*$",
    re.MULTILINE,
)
_EXTRA = re.compile(r"\+?(\d+) (duplicates|corrupted|errors)")
_RTT = re.compile(
    r"^(?:rtt|round-trip) min/avg/max(?P<mdev>/mdev)? = "
    r"(?P<values>[\d.]+/[\d.]+/[\d.]+(?:/[\d.]+)?) ms",
    re.MULTILINE,
)
_PIPE = re.compile(r"pipe (\d+)")
_IPG = re.compile(r"ipg/ewma ([\d.]+)/([\d.]+) ms")


@dataclass(frozen=True)
class PingSummary:
    """ping's closing statistics; times in microseconds."""

    transmitted: int
    received: int
    duplicates: int
    corrupted: int
    errors: int
    loss_percent: float
    time_ms: int | None
    rtt_min: float | None
    rtt_avg: float | None
    rtt_max: float | None
    rtt_mdev: float | None
    pipe: int | None
    ipg: float | None
    ewma: float | None


def parse(text: str) -> PingSummary:
    """Parse ping's output (stdout, or stdout and stderr together)."""
    counts = _COUNTS.search(text)
    if counts is None:
        raise ParseError(TOOL, "no 'packets transmitted' summary line", text[-300:])
    extras = {name: parse_int(TOOL, n) for n, name in _EXTRA.findall(counts["extra"])}
    transmitted = parse_int(TOOL, counts["tx"])
    received = parse_int(TOOL, counts["rx"])
    if counts["loss"] is not None:
        loss = parse_float(TOOL, counts["loss"])
    elif transmitted == 0:
        loss = 0.0
    else:
        raise ParseError(TOOL, "summary line has no packet loss", counts[0])
    rest = text[counts.end() :]
    rtt_min = rtt_avg = rtt_max = rtt_mdev = None
    rtt = _RTT.search(rest)
    if rtt is not None:
        numbers = [parse_float(TOOL, v) * 1000.0 for v in rtt["values"].split("/")]
        if len(numbers) != (4 if rtt["mdev"] else 3):
            raise ParseError(TOOL, "rtt line has the wrong number of values", rtt[0])
        rtt_min, rtt_avg, rtt_max = numbers[:3]
        rtt_mdev = numbers[3] if rtt["mdev"] else None
    summary_tail = rest.split("\n", 2)[1] if "\n" in rest else ""
    pipe = _PIPE.search(summary_tail)
    ipg = _IPG.search(summary_tail)
    return PingSummary(
        transmitted=transmitted,
        received=received,
        duplicates=extras.get("duplicates", 0),
        corrupted=extras.get("corrupted", 0),
        errors=extras.get("errors", 0),
        loss_percent=loss,
        time_ms=parse_int(TOOL, counts["time"]) if counts["time"] else None,
        rtt_min=rtt_min,
        rtt_avg=rtt_avg,
        rtt_max=rtt_max,
        rtt_mdev=rtt_mdev,
        pipe=parse_int(TOOL, pipe[1]) if pipe else None,
        ipg=parse_float(TOOL, ipg[1]) * 1000.0 if ipg else None,
        ewma=parse_float(TOOL, ipg[2]) * 1000.0 if ipg else None,
    )


def values(summary: PingSummary) -> list[Value]:
    """The summary as result rows; absent fields are left out, never zero."""
    rows = [
        Value("transmitted", summary.transmitted, COUNT),
        Value("received", summary.received, COUNT),
        Value("duplicates", summary.duplicates, COUNT),
        Value("errors", summary.errors, COUNT),
        Value("loss", summary.loss_percent, PERCENT),
    ]
    if summary.time_ms is not None:
        rows.append(Value("time", summary.time_ms, MS))
        if summary.time_ms > 0:
            rows.append(Value("received_per_second", summary.received / summary.time_ms * 1e3,
                              "packets/s"))
    for name in ("rtt_min", "rtt_avg", "rtt_max", "rtt_mdev", "ipg", "ewma"):
        number = getattr(summary, name)
        if number is not None:
            rows.append(Value(name, number, US))
    return rows


def flood_argv(target: str, *, preload: int | None = None, size: int | None = None,
               interval: float | None = None, count: int | None = None,
               deadline: float | None = None, quiet: bool = True) -> list[str]:
    """ping's argv: flood (-f) unless an interval is given; -n, and -q by default."""
    argv = ["ping", "-n"]
    if interval is None:
        argv.append("-f")
    else:
        argv += ["-i", _fmt(interval)]
    if quiet:
        argv.append("-q")
    if preload is not None:
        argv += ["-l", str(preload)]
    if size is not None:
        argv += ["-s", str(size)]
    if count is not None:
        argv += ["-c", str(count)]
    if deadline is not None:
        argv += ["-w", _fmt(deadline)]
    argv.append(target)
    return argv


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else repr(float(number))


class PingTool:
    """`ping -f -q -w DURATION TARGET` from the client role; no server process.

    Exit codes (iputils): 0 replies received, 1 none (or -w deadline not met), 2 error.
    """

    name = "ping"
    load: LoadAxis | None = None  # closed loop: no offered load
    # several pingers of one peer: each prints its own RTTs
    clients: SeveralClients = SeveralClients(EACH)
    headline: tuple[str, ...] = ("rtt_avg", "received_per_second")
    metrics: tuple[str, ...] = ("transmitted", "received", "duplicates", "errors", "loss",
                                "time", "received_per_second", "rtt_min", "rtt_avg",
                                "rtt_max", "rtt_mdev", "ipg", "ewma")
    operations: Mapping[str, tuple[str, ...]] = {"packet": ("transmitted",)}
    parsers: Mapping[str, Parser] = {"ping": lambda text: values(parse(text))}
    versions: Mapping[str, tuple[str, ...] | None] = {"ping": ("ping", "-V")}
    client_args: Mapping[str, ArgSpec] = {
        "interval": ArgSpec((int, float), "seconds between requests (-i); flood (-f) when unset"),
        "preload": ArgSpec(int, "requests sent before waiting for replies (-l)"),
        "size": ArgSpec(int, "payload bytes (-s)"),
    }
    server_args: Mapping[str, ArgSpec] = {}

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        interval = client_args.get("interval")
        preload = client_args.get("preload")
        size = client_args.get("size")
        argv = flood_argv(
            ctx.target,
            interval=float(interval) if interval is not None else None,
            preload=int(preload) if preload is not None else None,
            size=int(size) if size is not None else None,
            deadline=ctx.duration,
        )
        return ToolCommands(client=argv)

    def parse(self, output: ToolOutput) -> ToolResult:
        client = output.client
        if client.exit_code not in (0, 1):
            raise ToolFailed(TOOL, f"exit code {client.exit_code}", client.stderr or client.stdout)
        try:
            summary = parse(client.stdout)
        except ParseError:  # ping refused its arguments (exit 1, a message, no summary)
            raise ToolFailed(TOOL, f"exit code {client.exit_code}, no summary",
                             client.stderr or client.stdout) from None
        if summary.received == 0:
            raise ToolFailed(TOOL, f"no reply to {summary.transmitted} requests", client.stderr)
        return ToolResult(client=values(summary))

    def programs(self, side: str) -> tuple[str, ...]:
        return ("ping",) if side == "client" else ()
