"""Running one trial's workload: server started, readiness-checked, client run, server
stopped and reaped, files fetched. Every process is wrapped in `timeout`, so nothing
outlives its trial even if napilab itself dies."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from napilab.harness.errors import HostError
from napilab.harness.profile.sections import ProcessSpec
from napilab.harness.transport.transport import CommandResult, Process, Transport
from napilab.runners.base import ToolFailed
from napilab.runners.workloads.workload import (
    ProcessOutput,
    Readiness,
    ServerCommand,
    ToolCommands,
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
    """What ran, for the raw/ directory."""

    client: CommandResult | None = None
    server: CommandResult | None = None
    readiness_checks: int = 0
    files: dict[str, str] = field(default_factory=dict)


def readiness_argv(ready: Readiness) -> list[str]:
    flag = "-Hlnt" if ready.protocol == "tcp" else "-Hlnu"
    return ["ss", flag, f"sport = :{ready.port}"]


def wait_ready(transport: Transport, proc: Process, ready: Readiness,
               record: WorkloadRecord) -> None:
    deadline = time.monotonic() + ready.timeout
    pattern = re.compile(ready.log_pattern) if ready.log_pattern else None
    while True:
        code = proc.poll()
        if code is not None:
            out, err = proc.output()
            raise ToolFailed("server", f"exited {code} before it was ready", err or out)
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
            raise ToolFailed("server", f"not ready after {ready.timeout:.0f}s", err or out)
        time.sleep(0.02)


def stop(proc: Process, server: ServerCommand) -> CommandResult:
    """Reap a server: wait for one that exits by itself, else signal it; KILL as the
    last resort."""
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


def run(commands: ToolCommands, *, client: ProcessSpec, server: ProcessSpec,
        client_transport: Transport, server_transport: Transport, timeout: float,
        record: WorkloadRecord) -> ToolOutput:
    proc: Process | None = None
    server_cmd = commands.server
    try:
        if server_cmd is not None:
            argv = compose(server_cmd.argv, server, limit=timeout + SERVER_GRACE,
                           kill_after=server_cmd.stop_grace)
            proc = server_transport.start(argv, env=server.env)
            wait_ready(server_transport, proc, server_cmd.ready, record)
        result = _run_client(client_transport, compose(commands.client, client, limit=timeout),
                             client.env, timeout + 15)
        record.client = result
    finally:
        if proc is not None and server_cmd is not None:
            record.server = stop(proc, server_cmd)
    client_files = _fetch(client_transport, commands.client_files, record)
    server_files = _fetch(server_transport, commands.server_files, record)
    server_out = None
    if record.server is not None:
        server_out = ProcessOutput(record.server.exit_code, record.server.stdout,
                                   record.server.stderr, server_files)
    return ToolOutput(ProcessOutput(result.exit_code, result.stdout, result.stderr, client_files),
                      server_out, commands)


def _run_client(transport: Transport, argv: list[str], env: Mapping[str, str],
                wait: float) -> CommandResult:
    """Run the client in the background so that an interrupt (SIGINT, SIGTERM, an error
    here) stops it on the host too: closing an SSH channel does not kill its command."""
    proc = transport.start(argv, env=env)
    try:
        return proc.wait(wait)
    except BaseException:
        proc.signal("TERM")
        try:
            proc.wait(STOP_GRACE)
        except HostError:
            proc.signal("KILL")
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
