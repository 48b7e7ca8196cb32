"""netperf (HewlettPackard/netperf): omni output selectors and the classic tables.

Formats (docs/formats.md section 5, read at netperf afc51ff, src/nettest_omni.c):
- `-k SEL,...` keyval: `NAME=value` per selector. napilab asks for this.
- `-o SEL,...` CSV: a header of human labels, NOT selector names (`Minimum Latency
  Microseconds`, `Throughput Units`: set_output_elt()'s four label lines joined by
  spaces), then the values. Global `-P 0` drops the header and the banner, so a
  headerless CSV is only readable when the selectors are known.
- `-O SEL,...` human columns: the same labels stacked on four lines above each column.
- the classic TCP_RR / TCP_STREAM tables (no omni selectors, or netperf < 2.5).
Latency selectors are microseconds (MIN/MAX/P50/P90/P99 `%d`, MEAN/STDDEV `%.2f`);
THROUGHPUT is in THROUGHPUT_UNITS (`Trans/s` for RR, `10^6bits/s` by default for
streams). netperf prints -1 for what it could not measure (UDP retransmissions, MSS,
confidence width without -i): absent, not a value.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from napilab.harness.errors import InputError
from napilab.runners.base import COUNT, PERCENT, US, ParseError, ToolFailed, Value, parse_float
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

TOOL = "netperf"

# selector -> (set_output_elt label words, metric, unit); unit None = string selector,
# unit "" = THROUGHPUT, whose unit is THROUGHPUT_UNITS.
SELECTORS: dict[str, tuple[str, str, str | None]] = {
    "THROUGHPUT": ("Throughput", "throughput", ""),
    "THROUGHPUT_UNITS": ("Throughput Units", "throughput_units", None),
    "MIN_LATENCY": ("Minimum Latency Microseconds", "latency_min", US),
    "MAX_LATENCY": ("Maximum Latency Microseconds", "latency_max", US),
    "P50_LATENCY": ("50th Percentile Latency Microseconds", "latency_p50", US),
    "P90_LATENCY": ("90th Percentile Latency Microseconds", "latency_p90", US),
    "P99_LATENCY": ("99th Percentile Latency Microseconds", "latency_p99", US),
    "MEAN_LATENCY": ("Mean Latency Microseconds", "latency_mean", US),
    "STDDEV_LATENCY": ("Stddev Latency Microseconds", "latency_stddev", US),
    "TRANSACTION_RATE": ("Transaction Rate Tran/s", "transaction_rate", "trans/s"),
    "RT_LATENCY": ("Round Trip Latency usec/tran", "rt_latency", US),
    "ELAPSED_TIME": ("Elapsed Time (sec)", "elapsed", "s"),
    "LOCAL_CPU_UTIL": ("Local CPU Util %", "cpu_local", PERCENT),
    "REMOTE_CPU_UTIL": ("Remote CPU Util %", "cpu_remote", PERCENT),
    "LOCAL_TRANSPORT_RETRANS": ("Local Transport Retransmissions", "local_retransmits", COUNT),
    "REMOTE_TRANSPORT_RETRANS": ("Remote Transport Retransmissions", "remote_retransmits",
                                 COUNT),
    "TRANSPORT_MSS": ("Transport MSS bytes", "transport_mss", "bytes"),
    "CONFIDENCE_ITERATION": ("Confidence Iterations Run", "confidence_iterations", COUNT),
    "THROUGHPUT_CONFID": ("Throughput Confidence Width (%)", "throughput_confidence_width",
                          PERCENT),
    "REQUEST_SIZE": ("Request Size Bytes", "request_size", "bytes"),
    "RESPONSE_SIZE": ("Response Size Bytes", "response_size", "bytes"),
    "DIRECTION": ("Direction", "direction", None),
    "PROTOCOL": ("Protocol", "protocol", None),
}
LABELS = {label: name for name, (label, _, _) in SELECTORS.items()}
_KEYVAL = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$", re.MULTILINE)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?\Z")


@dataclass(frozen=True)
class NetperfResult:
    style: str  # keyval, csv, human, classic
    fields: Mapping[str, str]  # selector (or unknown label) -> value as printed


def parse(text: str, selectors: Sequence[str] | None = None) -> NetperfResult:
    """Parse one netperf run's stdout; `selectors` reads a headerless (-P 0) CSV."""
    lines = [line.rstrip() for line in text.splitlines()]
    pairs = _KEYVAL.findall(text)
    if pairs:
        return NetperfResult("keyval", {key: value.strip() for key, value in pairs})
    for reader in (_csv_with_header, _human, _classic):
        result = reader(lines)
        if result is not None:
            return result
    if selectors:
        return _csv_values(lines, list(selectors))
    raise ParseError(TOOL, "no keyval, CSV header, column or classic table output",
                     text[-300:])


def _csv_with_header(lines: list[str]) -> NetperfResult | None:
    for index, line in enumerate(lines):
        labels = [label.strip() for label in line.split(",")]
        if not any(label in LABELS for label in labels) or any(
                _NUMBER.match(label) for label in labels):
            continue
        rest = [other for other in lines[index + 1:] if other.strip()]
        if not rest:
            raise ParseError(TOOL, "CSV header without values", line)
        row = [value.strip() for value in rest[0].split(",")]
        if len(row) != len(labels):
            raise ParseError(TOOL, f"{len(row)} CSV values for {len(labels)} columns", rest[0])
        return NetperfResult("csv", {LABELS.get(k, k): v for k, v in zip(labels, row,
                                                                          strict=True)})
    return None


def _csv_values(lines: list[str], selectors: list[str]) -> NetperfResult:
    rows = [line for line in lines if line.count(",") == len(selectors) - 1 and line.strip()
            and all(field.strip() for field in line.split(","))]
    if len(rows) != 1:
        raise ParseError(TOOL, f"{len(rows)} lines with {len(selectors)} CSV values, "
                         "expected one", "\n".join(lines[-5:]))
    row = [value.strip() for value in rows[0].split(",")]
    return NetperfResult("csv", dict(zip(selectors, row, strict=True)))


def _human(lines: list[str]) -> NetperfResult | None:
    """-O: values on the last line; label words stacked above, aligned on the columns."""
    content = [i for i, line in enumerate(lines) if line.strip()]
    if not content or content[-1] < 4:
        return None
    last = content[-1]
    tokens = list(re.finditer(r"\S+", lines[last]))
    starts = [token.start() for token in tokens]
    words: list[list[str]] = [[] for _ in tokens]
    for line in lines[last - 4:last]:
        for word in re.finditer(r"\S+", line):
            column = max((i for i, s in enumerate(starts) if s <= word.start()), default=None)
            if column is None:
                return None
            words[column].append(word[0])
    labels = [" ".join(column) for column in words]
    if not labels or not all(label in LABELS for label in labels):
        return None
    return NetperfResult("human", {LABELS[k]: t[0] for k, t in zip(labels, tokens,
                                                                  strict=True)})


def _classic(lines: list[str]) -> NetperfResult | None:
    """netperf's own TCP_RR/UDP_RR and TCP_STREAM tables (`-v 1`/`-v 2`)."""
    fields: dict[str, str] = {}
    for index, line in enumerate(lines):
        words = line.split()
        if words[:4] == ["Socket", "Size", "Request", "Resp."]:
            fields |= _rr_table(lines, index)
        elif words == ["Size", "Size", "Size", "Time", "Throughput"]:
            fields |= _stream_table(lines, index)
        elif "RoundTrip" in words:
            row = _numbers_after(lines, index, 8)
            if row is not None:
                fields |= {"RT_LATENCY": row[4], "TRANSACTION_RATE": row[5]}
    return NetperfResult("classic", fields) if fields else None


def _rr_table(lines: list[str], index: int) -> dict[str, str]:
    unit_line = next((ln for ln in lines[index:index + 4] if ln.startswith("bytes")), None)
    row = _numbers_after(lines, index, 6)
    if unit_line is None or row is None:
        raise ParseError(TOOL, "request/response table without its units or values",
                         "\n".join(lines[index:index + 8]))
    fields = {"REQUEST_SIZE": row[2], "RESPONSE_SIZE": row[3], "ELAPSED_TIME": row[4],
              "THROUGHPUT": row[5]}
    units = unit_line.split()
    if len(units) < 6:
        raise ParseError(TOOL, "request/response table units line is short", unit_line)
    if units[5] == "per":  # `per sec`: a transaction rate (`-f m` gives a bit rate)
        return fields | {"TRANSACTION_RATE": row[5], "THROUGHPUT_UNITS": "Trans/s"}
    return fields | {"THROUGHPUT_UNITS": _rate_unit(units[5])}


def _stream_table(lines: list[str], index: int) -> dict[str, str]:
    unit_line = lines[index + 1] if index + 1 < len(lines) else ""
    row = _numbers_after(lines, index, 5)
    if not unit_line.startswith("bytes") or row is None:
        raise ParseError(TOOL, "stream table without its units or values",
                         "\n".join(lines[index:index + 6]))
    return {"ELAPSED_TIME": row[3], "THROUGHPUT": row[4],
            "THROUGHPUT_UNITS": _rate_unit(unit_line.split()[-1])}


def _rate_unit(header: str) -> str:
    return header.removesuffix("ec")  # the table's `10^6bits/sec` is omni's `10^6bits/s`


def _numbers_after(lines: list[str], index: int, count: int) -> list[str] | None:
    """The first all-numeric line of at least `count` columns below a table header
    (with -c/-C the tables grow CPU and service-demand columns on the right)."""
    for line in lines[index + 1:index + 8]:
        words = line.split()
        if len(words) >= count and all(_NUMBER.match(w) for w in words):
            return words
    return None


def values(result: NetperfResult) -> list[Value]:
    fields = result.fields
    unit = fields.get("THROUGHPUT_UNITS", "unspecified")
    rows = []
    for name, (_, metric, metric_unit) in SELECTORS.items():
        text = fields.get(name)
        if text is None or metric_unit is None:
            continue
        number = parse_float(TOOL, text)
        if number == -1 and name not in ("THROUGHPUT", "TRANSACTION_RATE"):
            continue  # netperf's "not measured"
        rows.append(Value(metric, number, metric_unit or unit))
    if not rows:
        raise ParseError(TOOL, "no numeric selector napilab knows",
                         ", ".join(sorted(fields))[:200])
    return rows


# --- the tools -------------------------------------------------------------------------

PORT = 12865  # netserver's default control port
DEFAULT_SELECTORS = ("P50_LATENCY", "P90_LATENCY", "P99_LATENCY", "MEAN_LATENCY",
                     "MIN_LATENCY", "MAX_LATENCY", "STDDEV_LATENCY", "TRANSACTION_RATE",
                     "THROUGHPUT", "THROUGHPUT_UNITS", "ELAPSED_TIME")
# Test-specific options (after `--`); everything else is a global option. Global and
# test-specific letters overlap (-s, -S, -o, -O, -P mean other things globally), so
# the split is explicit; anything else goes in `test_args`.
TEST_OPTIONS = {
    "r": ArgSpec((str, int), "request,response sizes, e.g. '1,1'"),
    "b": ArgSpec(int, "transactions in flight (burst)"),
    "D": ArgSpec(bool, "TCP_NODELAY"),
    "m": ArgSpec((int, str), "send size"),
    "M": ArgSpec((int, str), "receive size"),
    "s": ArgSpec((int, str), "local socket buffer sizes"),
    "S": ArgSpec((int, str), "remote socket buffer sizes"),
    "k": ArgSpec(str, "keyval output selectors (replaces napilab's)"),
    "o": ArgSpec(str, "CSV output selectors (the header is then kept)"),
    "O": ArgSpec(str, "column output selectors (the header is then kept)"),
    "test_args": ArgSpec(str, "more test-specific options, as one shell-quoted string"),
}
GLOBAL_OPTIONS = {
    "T": ArgSpec(str, "CPU binding lcpu,rcpu"),
    "c": ArgSpec(bool, "measure local CPU"),
    "C": ArgSpec(bool, "measure remote CPU"),
    "f": ArgSpec(str, "throughput unit letter (k, m, g, K, M, G)"),
    "i": ArgSpec(str, "confidence iterations max,min"),
    "I": ArgSpec(str, "confidence level,width"),
    "j": ArgSpec(bool, "keep latency statistics"),
    "p": ArgSpec(int, f"netserver port, default {PORT} (both sides)"),
    "4": ArgSpec(bool, "IPv4"),
    "6": ArgSpec(bool, "IPv6"),
}


class NetperfTool:
    """`netperf -H TARGET -t TEST -l SECS -P 0 [-p PORT] [globals] -- -k SELECTORS
    [test options]` against `netserver -D -L BIND -p PORT` (-D: stay in the foreground,
    src/netserver.c; stopped with SIGTERM)."""

    server_args: Mapping[str, ArgSpec] = {
        "p": GLOBAL_OPTIONS["p"],
        "4": GLOBAL_OPTIONS["4"],
        "6": GLOBAL_OPTIONS["6"],
    }

    load: LoadAxis | None = None  # closed loop: no offered load
    # netserver forks a child per test (netserver.c), so clients run side by side
    clients: SeveralClients = SeveralClients(EACH)
    headline: tuple[str, ...] = ("latency_p50", "latency_p99", "transaction_rate")
    metrics: tuple[str, ...] = tuple(metric for _, metric, unit in SELECTORS.values()
                                     if unit is not None)
    operations: Mapping[str, tuple[str, ...]] = {"transaction": ("transaction_rate",),
                                                 "MB": ("throughput",)}
    parsers: Mapping[str, Parser] = {"netperf": lambda text: values(parse(text))}
    versions: Mapping[str, tuple[str, ...] | None] = {"netperf": ("netperf", "-V"),
                                                       "netserver": ("netserver", "-V")}

    def __init__(self, test: str) -> None:
        self.test = test
        self.name = f"netperf.{test}"
        self.client_args: Mapping[str, ArgSpec] = GLOBAL_OPTIONS | TEST_OPTIONS

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        outputs = [key for key in ("k", "o", "O") if key in client_args]
        if len(outputs) > 1:
            raise InputError(f"{self.name}: give one of k, o, O (netperf keeps the last)")
        style = outputs[0] if outputs else "k"
        selectors = str(client_args.get(style, ",".join(DEFAULT_SELECTORS)))
        port = str(server_args.get("p", client_args.get("p", PORT)))
        global_args = {k: v for k, v in client_args.items()
                       if k not in TEST_OPTIONS and k != "p"}
        test_args = {k: v for k, v in client_args.items()
                     if k in TEST_OPTIONS and k not in ("k", "o", "O", "test_args")}
        argv = ["netperf", "-H", ctx.target, "-t", self.test, "-l",
                str(max(1, math.ceil(ctx.duration)))]
        # -P 0 drops the banner, and with -o the CSV header that names the columns:
        # keep the header for the CSV and column styles, so parse() needs no selectors.
        argv += ["-P", "0"] if style == "k" else []
        argv += ["-p", port, *flags(global_args), "--", f"-{style}", selectors,
                 *flags(test_args), *shlex.split(str(client_args.get("test_args", "")))]
        server = {k: v for k, v in server_args.items() if k != "p"}
        return ToolCommands(
            client=argv,
            server=ServerCommand(["netserver", "-D", "-L", ctx.bind, "-p", port,
                                  *flags(server)],
                                 Readiness(port=int(port), protocol="tcp"),
                                 exits_by_itself=False, stop_signal="TERM"),
        )

    def parse(self, output: ToolOutput) -> ToolResult:
        client = output.client
        if client.exit_code == 127:
            raise ToolFailed(self.name, "netperf is not installed on the host", client.stderr)
        if client.exit_code != 0:
            raise ToolFailed(self.name, f"client exited {client.exit_code}",
                             client.stderr or client.stdout)
        try:
            rows = values(parse(client.stdout))
        except ParseError as error:
            raise ToolFailed(self.name, error.reason, client.stderr or client.stdout) from None
        return ToolResult(client=rows)

    def programs(self, side: str) -> tuple[str, ...]:
        return ("netperf",) if side == "client" else ("netserver",)


TESTS = ("TCP_RR", "UDP_RR", "TCP_CRR", "TCP_STREAM", "TCP_MAERTS", "UDP_STREAM")
