"""The contract between the engine and a workload tool module.

A tool builds argv lists from the profile's per-role `args` and the trial context, and
parses what the commands printed. The engine owns everything around the argv: `env`,
`taskset` pinning, `wrapper` (e.g. `onload -v --profile=latency`), time limits, server
readiness, starting, stopping and reaping, fetching files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from napilab.runners.base import Value

ArgValue = str | int | float | bool


@dataclass(frozen=True)
class ArgSpec:
    """One argument a tool accepts in a profile's `args`."""

    kind: type | tuple[type, ...]
    help: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Context:
    """What the engine knows when it builds a trial's commands."""

    target: str  # data-plane address of the server role (or of the peer, for ping)
    bind: str  # data-plane address the server role listens on
    duration: float  # seconds of measured load
    workdir: str  # per-run directory on the hosts for files the tool writes
    trial: str  # trial id, usable in file names (with several clients, one per client)
    # With several clients (`workload.clients`): how many there are, and for a tool whose
    # first client is the master, the data-plane addresses of the others, its agents.
    clients: int = 1
    agents: tuple[str, ...] = ()


@dataclass(frozen=True)
class Readiness:
    """How the engine knows a server is ready: a listening port or a line it prints."""

    port: int | None = None
    protocol: str = "tcp"  # tcp | udp
    log_pattern: str | None = None
    timeout: float = 10.0


@dataclass(frozen=True)
class ServerCommand:
    argv: list[str]
    ready: Readiness
    # Servers that exit on their own after one test (neper, iperf3 -1) are waited for;
    # the others (sockperf, netserver) are stopped with SIGTERM/SIGINT.
    exits_by_itself: bool = False
    stop_signal: str = "TERM"
    # seconds it may take to end once signalled before it is killed (an AF_XDP receiver
    # under TCG takes longer than most servers to tear its sockets down)
    stop_grace: float = 5.0


@dataclass(frozen=True)
class ToolCommands:
    client: list[str]
    server: ServerCommand | None = None
    # name -> path on the host, fetched after the run and handed to parse() in `files`.
    client_files: Mapping[str, str] = field(default_factory=dict)
    server_files: Mapping[str, str] = field(default_factory=dict)
    # What parse() needs to know of the arguments (e.g. the command tool's metric
    # definitions); handed back in ToolOutput.commands so a tool keeps no state.
    context: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProcessOutput:
    exit_code: int
    stdout: str
    stderr: str
    files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolOutput:
    client: ProcessOutput
    server: ProcessOutput | None = None
    commands: ToolCommands | None = None  # what ran: the commands() result


@dataclass(frozen=True)
class ToolResult:
    """Values per side, and per-transaction latencies in microseconds when the tool
    wrote them (stored as latency/<trial>.parquet)."""

    client: list[Value]
    server: list[Value] = field(default_factory=list)
    latencies_us: Any = None  # numpy.ndarray of float64, or None


Parser = Callable[[str], list[Value]]

EACH = "each"
MASTER = "master"


@dataclass(frozen=True)
class SeveralClients:
    """How a tool runs with several client roles (a profile's `workload.clients`),
    started together against the one server.

    `merge` says whose output is the result:
    - `each`: every client runs the tool's client command and reports; its rows keep
      its role and host (never averaged with the others': percentiles of two clients
      are not a percentile of both); per-transaction latencies, where the tool writes
      them, are pooled into the trial's one latency file.
    - `master`: the first client is the master, the others its agents, started (and
      readiness-checked on `agent_port`) before it and stopped after it; the master
      reports for all (mutilate's agents send their counts to the master), the agents'
      outputs are stored only. `commands()` gets the agents' addresses in
      `Context.agents`; `agent(args, ctx)` builds an agent's command from the
      `agent_args` it accepts.
    - `""`: one client only; `why` says why.
    """

    merge: str
    why: str = ""
    agent_args: Mapping[str, ArgSpec] = field(default_factory=dict)
    agent: Callable[[Mapping[str, ArgValue], Mapping[str, ArgValue], Context],
                    ServerCommand] | None = None


ONE_CLIENT = SeveralClients("", "the tool does not say how several of its clients "
                                "would share a server")


def several_clients(tool: object) -> SeveralClients:
    """A tool's `clients` (ONE_CLIENT for a tool that does not say)."""
    found = getattr(tool, "clients", None)
    return found if isinstance(found, SeveralClients) else ONE_CLIENT


@dataclass(frozen=True)
class LoadAxis:
    """How an open-loop tool takes a rung of a profile's `load:` ladder and reports the
    load it achieved (harness.profile.load, reports.load.curves).

    `arg`: the client argument a rung's rate is written to (None: the profile writes
    `${rate}` where it goes, as the command tool does); `unit`: what the rate counts
    ("msg/s", "req/s", "bits/s", "pkt/s"); `maximum`: what `arg` takes for the rung
    `max` (as fast as the tool can); `achieved`: the metrics holding the rate the tool
    achieved, in `unit`, the first found first; `latency`: the metric the knee and the SLO
    capacity read by default (None: the profile names one).
    """

    arg: str | None
    unit: str
    maximum: ArgValue | None
    achieved: tuple[str, ...]
    latency: str | None = None


class WorkloadTool(Protocol):
    """Everything napilab knows of a tool is here; `runners.registry` lists the tools.

    `headline`: the metrics judged (and shown) when a profile names none: the tool's
    latency percentiles and its rate, recorded in the manifest (reports read them there).
    `operations`: what one unit of the tool's work is (transaction, message, packet, MB)
    -> the metrics that count it, the first the tool printed counts (a count, a rate, or
    a bit rate for MB): CPU cost per
    operation is derived from it (reports.ab.cpu_cost).
    `parsers`: the names `napilab parse NAME FILE` reads this tool's output by.
    `programs(side)`: what the client or server side runs, for `hosts check` and for
    the versions the manifest records; `versions`: the argv that prints a program's
    version (None: it has none, its path and sha256 stand for it). `clients`: how
    several client roles run against one server, and whose output is the result.
    """

    name: str
    client_args: Mapping[str, ArgSpec]
    server_args: Mapping[str, ArgSpec]
    headline: tuple[str, ...]
    metrics: tuple[str, ...]  # fnmatch patterns of every name it produces; "*": any
    operations: Mapping[str, tuple[str, ...]]
    parsers: Mapping[str, Parser]
    versions: Mapping[str, tuple[str, ...] | None]
    load: LoadAxis | None
    clients: SeveralClients

    def programs(self, side: str) -> tuple[str, ...]: ...

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands: ...

    def parse(self, output: ToolOutput) -> ToolResult: ...


def flags(args: Mapping[str, ArgValue]) -> list[str]:
    """Render `args` as command-line flags, in the order given.

    One-letter keys become `-X value`, longer keys `--key=value`; `true` gives the bare
    flag and `false` leaves it out.
    """
    argv: list[str] = []
    for key, value in args.items():
        flag = f"-{key}" if len(key) == 1 else f"--{key}"
        if value is True:
            argv.append(flag)
        elif value is False:
            continue
        elif len(key) == 1:
            argv += [flag, _text(value)]
        else:
            argv.append(f"{flag}={_text(value)}")
    return argv


def _text(value: ArgValue) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
