"""mutilate (leverich/mutilate): memcached's open-loop load generator, against memcached.

Format: docs/formats.md section 14 (read at leverich/mutilate d65c6ef, the last commit
of its master branch; captures from that commit). mutilate prints on stdout, unbuffered
(mutilate.cc:443), one table and a few totals (mutilate.cc:584-612):

    #type       avg     std     min     5th    10th    90th    95th    99th
    read       30.8    15.4     7.4    20.1    21.2    36.9    48.5    77.3
    update      0.0     0.0     0.0     0.0     0.0     0.0     0.0     0.0
    op_q        1.0     0.0     1.0     1.0     1.0     1.1     1.1     1.1

    Total QPS = 32369.6 (161848 / 5.0s)

    Misses = 0 (0.0%)
    Skipped TXs = 0 (0.0%)

    RX   40036456 bytes :    7.6 MB/s
    TX    5826564 bytes :    1.1 MB/s

Quirks handled here:
- no median: the columns are avg, std, min, 5th, 10th, 90th, 95th, 99th
  (ConnectionStats.h:125-129); the header is read, so a build printing other `Nth`
  columns gives those percentiles, and any other column is refused.
- a row of a sampler with no samples is all `0.0` (ConnectionStats.h:195-200): the
  `update` row of a run without sets, the `read` row of `-u 1`. Such a row is left out
  (a measured row's min is at least 1.0: it is a power of 1.1, the lower edge of the
  first non-empty bin of a log histogram, LogHistogramSampler.h:71-86).
- `op_q` is the connection's queue depth sampled at each send (Connection.cc:328); its
  percentiles are interpolated inside 10%-wide bins (1.1 at depth 1), so only its mean
  is kept (`queue_depth_mean`).
- `Misses = N (-nan%)` when no get was sent (`-u 1`: 0/0, mutilate.cc:601-602).
- errors are `FILE(LINE): message` lines on stderr and exit code 255 (`DIE`,
  log.h:16, log.cc:13): no server (`BEV_EVENT_ERROR: Connection refused`), a server gone
  (`Unexpected EOF from server.`); a bad option is gengetopt's line and exit code 1.
- its default inter-arrival distribution, `exponential` without a parameter,
  crashes (SIGSEGV) with today's glibc (Generator.cc:57-58: strtok_r(NULL, ..) with a
  NULL save pointer): napilab passes `-i exponential:1`, the same distribution (the
  parameter is replaced by the rate of --qps, Generator.h:116), and refuses a
  distribution written without its `:` parameters.

Agents (several client hosts, `workload.clients`): the first client is the master
(`mutilate -s SERVER -a AGENT... [--qps=N]`), the others agents (`mutilate -A -T N`), which
serve a ZeroMQ REP socket on the agent port (`-p`, 5556; mutilate.cc:156-160) until they
are killed: napilab starts them first, waits for the port, and stops them after the master.
The master hands each agent its options (server, qps, connections, depth, key and value
sizes: options_t, mutilate.cc:105-135); an agent reads only its own -T (threads),
-l (lambda_mul: its weight in the QPS share), --affinity and -B. The QPS the master
asks for is the aggregate over the master's and every agent's connections
(lambda_denom); the master adds the agents' counts (gets, sets, misses, bytes) to its
own at the end (finish_agent, mutilate.cc:287-299), so its `Total QPS` is everyone's,
while its latencies are its own connections' only (agents send no samples). -C, -Q, -D
set the master's own connections, QPS and depth (the measuring client of the paper's
setup).

Coordinated omission: a request is timed from the moment it was actually written, not
from its scheduled time (Connection.cc:142-156, 291, 326); when the server falls behind,
the late requests are sent back to back to catch up and the wait is never counted. Its
latencies under overload stay near the service time: only `qps` (achieved) below the
offered rate shows it. docs/formats.md 14.4.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from napilab.harness.errors import InputError
from napilab.runners.base import COUNT, US, ParseError, ToolFailed, Value, parse_float, parse_int
from napilab.runners.workloads.mutilate_agent import AGENT_ARGS, AGENT_PORT, agent_command
from napilab.runners.workloads.workload import (
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

TOOL = "mutilate"
PORT = 11211  # memcached's default -p, and mutilate's default port in -s HOST[:PORT]
IADIST = "exponential:1"  # mutilate's default `exponential`, written so it does not crash
ROWS = ("read", "update", "op_q")
_COLUMN = re.compile(r"(\d+(?:\.\d+)?)(?:st|nd|rd|th)")
_NAMED = {"avg": "mean", "std": "stddev", "min": "min", "max": "max"}
_NUMBER = r"(-?(?:\d+(?:\.\d+)?|nan|inf))"
_TOTAL = re.compile(r"Total QPS = ([\d.]+) \((\d+) / ([\d.]+)s\)")
_MISSES = re.compile(rf"Misses = (\d+) \({_NUMBER}%\)")
_SKIPPED = re.compile(rf"Skipped TXs = (\d+) \({_NUMBER}%\)")
_BYTES = re.compile(r"(RX|TX) +(\d+) bytes : +([\d.]+) MB/s")
# DIE()/W()/V() lines (log.cc:13), and gengetopt's `PROG: unrecognized option ...`.
_LOG = re.compile(r"[\w./-]+\.(?:cc|h)\(\d+\): .*|(?:\S*/)?mutilate: .*")
# What other modes print besides the one table napilab reads (mutilate.cc:559-561, 597,
# 615).
_OTHER_MODES = {"Peak QPS": "--search output (several runs); napilab reads one run",
                "Saving latency samples": "--save output; napilab does not run --save"}
_SCAN = "--scan output (one row per rate); napilab reads one run"


@dataclass(frozen=True)
class Stats:
    """One row of the table: column name (mean, stddev, min, p5, ...) -> value."""

    values: Mapping[str, float]


@dataclass(frozen=True)
class MutilateResult:
    columns: tuple[str, ...]
    rows: Mapping[str, Stats | None]  # None: the sampler had no samples (a row of 0.0)
    qps: float  # completed requests / measured seconds (gets + sets)
    requests: int
    elapsed: float  # seconds, as printed (%.1f)
    misses: int
    skipped: int
    rx_bytes: int
    tx_bytes: int


def _column(name: str) -> str:
    if name in _NAMED:
        return _NAMED[name]
    match = _COLUMN.fullmatch(name)
    if match is None:
        raise ParseError(TOOL, f"unknown column {name!r} in the table header", name)
    return f"p{float(match[1]):g}"


@dataclass
class _Lines:
    """What the lines of one output held, line by line."""

    columns: tuple[str, ...] | None = None
    rows: dict[str, Stats | None] = field(default_factory=dict)
    found: dict[str, re.Match[str]] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)

    def read(self, line: str) -> None:
        if _LOG.fullmatch(line):
            self.logs.append(line)
            return
        for start, reason in _OTHER_MODES.items():
            if line.startswith(start):
                raise ParseError(TOOL, reason, line)
        words = line.split()
        if words[0] == "#type":
            self.columns = _header(words, self.columns, line)
        elif words[0] in ROWS:
            self.rows[words[0]] = _row(words, self.columns, self.rows, line)
        else:
            self._total(line)

    def _total(self, line: str) -> None:
        for key, pattern in (("total", _TOTAL), ("misses", _MISSES),
                             ("skipped", _SKIPPED), ("bytes", _BYTES)):
            match = pattern.fullmatch(line)
            if match is not None:
                name = match[1] if key == "bytes" else key
                if name in self.found:
                    raise ParseError(TOOL, f"{name} printed twice: two runs in one output?",
                                     line)
                self.found[name] = match
                return
        raise ParseError(TOOL, "a line mutilate does not print", line)

    def missing(self) -> list[str]:
        return [what for what, there in (
            ("`#type avg std ...` table header", self.columns is not None),
            ("`read` row", "read" in self.rows),
            ("`Total QPS = ...` line", "total" in self.found),
            ("`Misses = ...` line", "misses" in self.found),
            ("`Skipped TXs = ...` line", "skipped" in self.found),
            ("`RX ... bytes` line", "RX" in self.found),
            ("`TX ... bytes` line", "TX" in self.found)) if not there]


def parse(text: str) -> MutilateResult:
    """One mutilate run's stdout (stderr's log lines may be mixed in: 2>&1)."""
    lines = _Lines()
    for raw in text.splitlines():
        if raw.strip():
            lines.read(raw.strip())
    missing = lines.missing()
    if missing:
        if lines.logs:  # DIE() writes its reason and exits before the table (log.h:16)
            raise ParseError(TOOL, f"mutilate: {lines.logs[-1]}", lines.logs[-1])
        raise ParseError(TOOL, f"no {missing[0]}: not mutilate output, or cut short",
                         text[-300:])
    assert lines.columns is not None
    found, rows = lines.found, lines.rows
    total = found["total"]
    qps, requests = parse_float(TOOL, total[1]), parse_int(TOOL, total[2])
    elapsed = parse_float(TOOL, total[3])
    if qps > 0 and abs(requests / qps - elapsed) > 0.05 + 1e-6 * elapsed:
        raise ParseError(TOOL, f"Total QPS {qps} is not {requests} requests over "
                         f"{elapsed} s", total[0])
    if requests == 0 or all(stats is None for name, stats in rows.items() if name != "op_q"):
        raise ParseError(TOOL, "no request completed in the measured time", total[0])
    misses = parse_int(TOOL, found["misses"][1])
    if misses > requests:
        raise ParseError(TOOL, f"{misses} misses of {requests} requests", found["misses"][0])
    return MutilateResult(
        columns=lines.columns, rows=rows, qps=qps, requests=requests, elapsed=elapsed,
        misses=misses, skipped=parse_int(TOOL, found["skipped"][1]),
        rx_bytes=parse_int(TOOL, found["RX"][2]), tx_bytes=parse_int(TOOL, found["TX"][2]))


def _header(words: list[str], columns: tuple[str, ...] | None, line: str) -> tuple[str, ...]:
    if words[-2:] == ["QPS", "target"]:
        raise ParseError(TOOL, _SCAN, line)
    if columns is not None:
        raise ParseError(TOOL, "two table headers: two runs in one output?", line)
    names = tuple(_column(word) for word in words[1:])
    if len(set(names)) != len(names) or "mean" not in names:
        raise ParseError(TOOL, "table header without avg or with a column twice", line)
    return names


def _row(words: list[str], columns: tuple[str, ...] | None,
         rows: Mapping[str, Stats | None], line: str) -> Stats | None:
    if columns is None:
        raise ParseError(TOOL, f"a {words[0]} row before the table header", line)
    if words[0] in rows:
        raise ParseError(TOOL, f"the {words[0]} row printed twice", line)
    if len(words) != len(columns) + 1:
        raise ParseError(TOOL, f"{len(words) - 1} values in the {words[0]} row for "
                         f"{len(columns)} columns: cut short?", line)
    numbers = [parse_float(TOOL, word) for word in words[1:]]
    if all(number == 0.0 for number in numbers):
        return None
    if any(number < 0 for number in numbers):
        raise ParseError(TOOL, f"a negative value in the {words[0]} row", line)
    return Stats(dict(zip(columns, numbers, strict=True)))


def values(result: MutilateResult) -> list[Value]:
    rows: list[Value] = []
    for tag, prefix in (("read", "latency"), ("update", "update_latency")):
        stats = result.rows.get(tag)
        if stats is not None:
            rows += [Value(f"{prefix}_{column}", number, US)
                     for column, number in stats.values.items()]
    queue = result.rows.get("op_q")
    if queue is not None:
        rows.append(Value("queue_depth_mean", queue.values["mean"], COUNT))
    rows += [Value("qps", result.qps, "req/s"),
             Value("requests", result.requests, COUNT),
             Value("elapsed", result.elapsed, "s"),
             Value("misses", result.misses, COUNT),
             Value("skipped_tx", result.skipped, COUNT),
             Value("rx_bytes", result.rx_bytes, "bytes"),
             Value("tx_bytes", result.tx_bytes, "bytes")]
    return rows


def _distribution(key: str, value: ArgValue) -> None:
    """A distribution argument (`-i`, `-K`, `-V`) mutilate can read without crashing: a
    number, a hard-coded `fb_*` one, or `NAME:PARAMS` (Generator.cc:34-77)."""
    text = str(value)
    if isinstance(value, int | float) or text.startswith("fb_") or ":" in text or \
            re.fullmatch(r"\d+(?:\.\d+)?", text):
        return
    raise InputError(f"{TOOL}: client argument {key}={text!r}: write the distribution "
                     f"with its parameters ({text}:...); mutilate at d65c6ef crashes on "
                     "a name without them (Generator.cc:58)")


# client options napilab writes itself (`q`: the profile writes `qps`; -a and -A from
# `workload.clients`), and those of modes it does not run: several runs (--search,
# --scan), no measured run (--loadonly), files on the client host (--save), -W.
_SET_BY_NAPILAB = frozenset({"s", "server", "t", "time", "q", "a", "agent", "A",
                             "agentmode"})
_UNSUPPORTED = frozenset({"search", "scan", "loadonly", "save", "W", "wait"})
# what only a master with agents reads (mutilate.cc:223-278)
_MASTER_ONLY = frozenset({"C", "Q", "D", "p", "l"})

class MutilateTool:
    """`mutilate -s TARGET:PORT -t SECS -i exponential:1 [flags] --qps=N` against
    `memcached -u nobody -l BIND -p PORT`, which runs until SIGTERM."""

    name = "mutilate"
    client_args: Mapping[str, ArgSpec] = {
        "qps": ArgSpec((int, float), "target QPS over all connections, spread as a Poisson "
                       "process per connection; 0 (the default) = peak: each connection "
                       "closed-loop at depth d"),
        "T": ArgSpec(int, "threads (default 1)"),
        "c": ArgSpec(int, "connections per thread (default 1)"),
        "d": ArgSpec(int, "requests in flight per connection (default 1)"),
        "u": ArgSpec((int, float), "ratio of sets to gets, 0..1 (default 0)"),
        "K": ArgSpec((int, str), "key size or distribution (default 30)"),
        "V": ArgSpec((int, str), "value size or distribution (default 200)"),
        "r": ArgSpec(int, "records loaded and requested (default 10000)"),
        "i": ArgSpec(str, f"inter-arrival distribution (default {IADIST}; its parameter "
                     "is replaced by the rate)"),
        "S": ArgSpec(bool, "skip sends more than 5 ms late (counted in skipped_tx)"),
        "moderate": ArgSpec(bool, "at least 250 us after a reply before the next send"),
        "noload": ArgSpec(bool, "skip loading the records (gets miss on a fresh server)"),
        "B": ArgSpec(bool, "blocking epoll (default: a busy-polling event loop)"),
        "no_nodelay": ArgSpec(bool, "leave Nagle on"),
        "w": ArgSpec(int, "seconds of load before the measured time"),
        "binary": ArgSpec(bool, "memcached's binary protocol"),
        "affinity": ArgSpec(bool, "pin threads to CPUs round-robin"),
        "C": ArgSpec(int, "with agents: the master's own connections per server "
                     "(measure_connections)"),
        "Q": ArgSpec(int, "with agents: the master's own QPS, taken out of qps "
                     "(measure_qps)"),
        "D": ArgSpec(int, "with agents: the master's own depth (measure_depth)"),
        "l": ArgSpec(int, "with agents: the master's weight in the QPS share (lambda_mul)"),
        "p": ArgSpec(int, f"with agents: the agents' port (default {AGENT_PORT}, every "
                     "agent gets the same)"),
    }
    server_args: Mapping[str, ArgSpec] = {
        "p": ArgSpec(int, f"port, default {PORT} (both sides)"),
        "t": ArgSpec(int, "memcached threads (default 4)"),
        "m": ArgSpec(int, "memory for items, MB (default 64)"),
        "c": ArgSpec(int, "maximum connections (default 1024)"),
        "R": ArgSpec(int, "requests per event per connection (default 20)"),
        # memcached 1.6's own flags (`memcached -h`), so a profile needs no shell wrapper
        "N": ArgSpec(int, "--napi_ids: NAPI ids the worker threads are picked by "
                     "(SO_INCOMING_NAPI_ID; memcached doc/napi_ids.txt)"),
        "b": ArgSpec(int, "--listen-backlog (default 1024)"),
        "o": ArgSpec(str, "--extended: comma-separated NAME=VALUE options "
                     "(e.g. hashpower=20,no_lru_crawler)"),
        "U": ArgSpec(int, "UDP port (default 0: off)"),
        "B": ArgSpec(str, "binding protocol: ascii, binary or auto", ("ascii", "binary",
                                                                      "auto")),
        "I": ArgSpec(str, "largest item size (e.g. 1m)"),
    }
    headline: tuple[str, ...] = ("latency_mean", "latency_p99", "qps")
    metrics: tuple[str, ...] = ("latency_*", "update_latency_*", "queue_depth_mean", "qps",
                                "requests", "elapsed", "misses", "skipped_tx", "rx_bytes",
                                "tx_bytes")
    operations: Mapping[str, tuple[str, ...]] = {"request": ("requests", "qps")}
    parsers: Mapping[str, Parser] = {"mutilate": lambda text: values(parse(text))}
    # `mutilate --version` prints gengetopt's `mutilate 0.1` at every commit
    # (cmdline.ggo:2): its path and sha256 say more.
    versions: Mapping[str, tuple[str, ...] | None] = {"mutilate": None,
                                                      "memcached": ("memcached", "-V")}
    load: LoadAxis | None = LoadAxis("qps", "req/s", 0, ("qps",), "latency_p99")
    clients: SeveralClients = SeveralClients("master", agent_args=AGENT_ARGS,
                                             agent=agent_command)

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        bad = sorted(set(client_args) & _SET_BY_NAPILAB)
        if bad:
            raise InputError(f"{self.name}: client arguments {bad} are set by napilab")
        bad = sorted(set(client_args) & _UNSUPPORTED)
        if bad:
            raise InputError(f"{self.name}: client arguments {bad} are not supported: "
                             "napilab runs one measured run against one server")
        bad = sorted(set(client_args) & _MASTER_ONLY) if not ctx.agents else []
        if bad:
            raise InputError(f"{self.name}: client arguments {bad} are a master's with "
                             "agents (workload.clients: the master first, then its agents)")
        bad = sorted(set(server_args) & {"l", "u", "d"})
        if bad:
            raise InputError(f"{self.name}: server arguments {bad} are set by napilab "
                             "(memcached -u nobody -l BIND -p PORT, in the foreground)")
        for key in ("i", "K", "V"):
            if key in client_args:
                _distribution(key, client_args[key])
        qps = client_args.get("qps", 0)
        if isinstance(qps, bool) or not (isinstance(qps, int) or (
                isinstance(qps, float) and qps.is_integer()) or (
                isinstance(qps, str) and qps.isdigit())) or float(qps) < 0:
            raise InputError(f"{self.name}: qps is a whole number of requests a second "
                             f"(0 = peak), got {qps!r}")
        port = str(server_args.get("p", PORT))
        rest = {k: v for k, v in client_args.items() if k not in ("qps", "i")}
        agents = [word for address in ctx.agents for word in ("-a", address)]
        argv = ["mutilate", "-s", f"{ctx.target}:{port}",
                "-t", str(max(1, math.ceil(ctx.duration))),
                "-i", str(client_args.get("i", IADIST)), *agents, *flags(rest),
                f"--qps={int(float(qps))}"]
        server = {k: v for k, v in server_args.items() if k != "p"}
        return ToolCommands(
            client=argv,
            server=ServerCommand(
                ["memcached", "-u", "nobody", "-l", ctx.bind, "-p", port, *flags(server)],
                Readiness(port=int(port), protocol="tcp"),
                exits_by_itself=False, stop_signal="TERM"),
        )

    def parse(self, output: ToolOutput) -> ToolResult:
        client = output.client
        if client.exit_code == 127:
            raise ToolFailed(self.name, "mutilate is not installed on the host", client.stderr)
        if client.exit_code in (139, -11):
            raise ToolFailed(self.name, f"client exited {client.exit_code} (SIGSEGV)",
                             client.stderr or client.stdout)
        if client.exit_code != 0:
            raise ToolFailed(self.name, f"client exited {client.exit_code}",
                             client.stderr or client.stdout)
        try:
            result = parse(client.stdout)
        except ParseError as error:
            raise ToolFailed(self.name, error.reason, client.stderr) from None
        # memcached prints nothing without -v; it is stopped by SIGTERM.
        return ToolResult(client=values(result))

    def programs(self, side: str) -> tuple[str, ...]:
        return ("mutilate",) if side == "client" else ("memcached",)
