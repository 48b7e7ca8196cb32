"""Running one trial's workload: server started, readiness-checked, client run, server
stopped and reaped, files fetched. Every process is wrapped in `timeout`, so nothing
outlives its trial even if napilab itself dies."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from napilab.harness.errors import HostError
from napilab.harness.interrupts import deferred_interrupts
from napilab.harness.profile.clients import Client, WorkloadCommands
from napilab.harness.profile.sections import ProcessSpec
from napilab.harness.transport.transport import CommandResult, Process, Transport
from napilab.runners.base import ToolFailed
from napilab.runners.workloads.workload import (
    ProcessOutput,
    Readiness,
    ServerCommand,
    ToolOutput,
)

SERVER_GRACE = 10.0  # seconds a self-exiting server gets after the client ended
STOP_GRACE = 5.0


def compose(argv: Sequence[str], process: ProcessSpec, limit: float | None,
            kill_after: float = STOP_GRACE) -> list[str]:
    """`timeout -k 5 LIMIT taskset -c CPUS WRAPPER... ARGV...` (parts present as set):
    timeout KILLs `kill_after` seconds after its first signal, napilab's stop included."""
    out: list[str] = []
    if limit is not None:
        out += ["timeout", "-k", _seconds(kill_after), _seconds(limit)]
    if process.cpus:
        out += ["taskset", "-c", process.cpus]
    return [*out, *process.wrapper, *argv]


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


@dataclass
class WorkloadRecord:
    """What ran, for the raw/ directory: each client (agents included) with its result."""

    clients: list[tuple[Client, CommandResult]] = field(default_factory=list)
    server: CommandResult | None = None
    readiness_checks: int = 0
    files: dict[str, str] = field(default_factory=dict)


def readiness_argv(ready: Readiness) -> list[str]:
    flag = "-Hlnt" if ready.protocol == "tcp" else "-Hlnu"
    return ["ss", flag, f"sport = :{ready.port}"]


def wait_ready(transport: Transport, proc: Process, ready: Readiness,
               record: WorkloadRecord, what: str = "server") -> None:
    deadline = time.monotonic() + ready.timeout
    pattern = re.compile(ready.log_pattern) if ready.log_pattern else None
    while True:
        code = proc.poll()
        if code is not None:
            out, err = proc.output()
            raise ToolFailed(what, f"exited {code} before it was ready", err or out)
        if pattern is not None and any(pattern.search(s) for s in proc.output()):
            return
        if ready.port is not None:
            record.readiness_checks += 1
            if transport.run(readiness_argv(ready), check=False).stdout.strip():
                return
        if pattern is None and ready.port is None:
            return
        if time.monotonic() > deadline:
            out, err = proc.output()
            raise ToolFailed(what, f"not ready after {ready.timeout:.0f}s", err or out)
        time.sleep(0.02)


def stop(proc: Process, server: ServerCommand) -> CommandResult:
    """Reap a server (or an agent): wait for one that exits by itself, else signal it;
    KILL as the last resort."""
    if server.exits_by_itself:
        try:
            return proc.wait(SERVER_GRACE)
        except HostError:
            pass
    proc.signal(server.stop_signal)
    try:
        return proc.wait(server.stop_grace)
    except HostError:
        proc.signal("KILL")
        return proc.wait(STOP_GRACE)


def run(commands: WorkloadCommands, *, server: ProcessSpec, server_host: str,
        transports: Mapping[str, Transport], timeout: float,
        record: WorkloadRecord, started: Callable[[], None] | None = None
        ) -> list[ToolOutput]:
    """Server started and ready, then each agent started and ready (a master tool's
    other clients), then every other client started at once and waited for; agents and
    server stopped after. One ToolOutput per client that ran the tool's client command,
    in the profile's order. `started` is called once every client runs."""
    proc: Process | None = None
    server_cmd = commands.server
    agents: list[tuple[Client, Process]] = []
    try:
        if server_cmd is not None:
            argv = compose(server_cmd.argv, server, limit=timeout + SERVER_GRACE,
                           kill_after=server_cmd.stop_grace)
            with deferred_interrupts():  # kept as it starts: `finally` stops it
                proc = transports[server_host].start(argv, env=server.env)
            wait_ready(transports[server_host], proc, server_cmd.ready, record)
        for agent in commands.agents:
            assert agent.agent is not None
            transport = transports[agent.host]
            with deferred_interrupts():
                agents.append((agent, transport.start(
                    compose(agent.agent.argv, agent.process, limit=timeout + SERVER_GRACE,
                            kill_after=agent.agent.stop_grace), env=agent.process.env)))
            wait_ready(transport, agents[-1][1], agent.agent.ready, record,
                       what=f"agent {agent.process.role}")
        results = _run_clients(commands.runners, transports, timeout, started)
        record.clients += zip(commands.runners, results, strict=True)
    finally:
        for agent, agent_proc in agents:
            assert agent.agent is not None
            record.clients.append((agent, stop(agent_proc, agent.agent)))
        if proc is not None and server_cmd is not None:
            record.server = stop(proc, server_cmd)
    outputs = [(client, result, _fetch(transports[client.host], client.commands.client_files,
                                       record))
               for client, result in zip(commands.runners, results, strict=True)]
    server_files = _fetch(transports[server_host], commands.first.commands.server_files,
                          record)
    server_out = None
    if record.server is not None:
        server_out = ProcessOutput(record.server.exit_code, record.server.stdout,
                                   record.server.stderr, server_files)
    return [ToolOutput(ProcessOutput(r.exit_code, r.stdout, r.stderr, files), server_out,
                       client.commands) for client, r, files in outputs]


def _run_clients(clients: Sequence[Client], transports: Mapping[str, Transport],
                 timeout: float, started_hook: Callable[[], None] | None = None
                 ) -> list[CommandResult]:
    """Start every client, then wait for each, in the background so that an interrupt
    (SIGINT, SIGTERM, an error here) stops them on their hosts too: closing an SSH channel
    does not kill its command."""
    started: list[Process] = []
    deadline = time.monotonic() + timeout + 15
    try:
        for client in clients:
            with deferred_interrupts():  # an interrupt inside start would lose the handle
                started.append(transports[client.host].start(
                    compose(client.commands.client, client.process, limit=timeout),
                    env=client.process.env))
        if started_hook is not None:
            started_hook()
        return [p.wait(max(0.1, deadline - time.monotonic())) for p in started]
    except BaseException:
        for p in started:
            if p.poll() is None:
                p.signal("TERM")
        for p in started:
            try:
                p.wait(STOP_GRACE)
            except HostError:
                p.signal("KILL")
        raise


def _fetch(transport: Transport, files: Mapping[str, str],
           record: WorkloadRecord) -> dict[str, str]:
    out = {}
    for name, path in files.items():
        result = transport.run(["cat", "--", path], check=False, timeout=300)
        if result.exit_code == 0:
            out[name] = result.stdout
            record.files[f"{transport.host.name}:{name}"] = path
        transport.run(["rm", "-f", "--", path], check=False)
    return out
