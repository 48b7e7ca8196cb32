"""A trial's workload commands, client by client: what the run starts, `napilab plan`
prints and `napilab validate` builds once to let the tool check its arguments.

One client (`workload.client`) is the tool's `commands()` as it always was. Several
(`workload.clients`) follow the tool's `SeveralClients` (runners.workloads.workload):
- `each`: `commands()` once per client with that client's args, all against the one
  server the first client's commands name (a client whose commands name another server
  is refused: one server serves them all); each client gets a `Context.trial` of its
  own, so files the tool writes on a host (sockperf's full log) never collide when two
  clients share a host.
- `master`: the first client's `commands()` with the others' data-plane addresses in
  `Context.agents` (mutilate `-a HOST`), and `agent()` for each of the others, run like
  a server on its client host: started and readiness-checked before the master, stopped
  after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from napilab.harness.errors import InputError, NapilabError
from napilab.harness.inventory.inventory import Host
from napilab.harness.profile.sections import ProcessSpec, WorkloadSpec
from napilab.runners.registry import TOOLS
from napilab.runners.workloads.workload import (
    EACH,
    MASTER,
    Context,
    ServerCommand,
    ToolCommands,
    several_clients,
)


class Plan(Protocol):
    """What of a bound plan (harness.profile.plan.Plan) the commands need."""

    def host_of(self, role: str) -> Host: ...

    def process_args(self, process: ProcessSpec) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Client:
    """One client process of a trial: its profile spec, its host, its commands (for an
    agent, the master's, whose `client` argv it does not run) and, for an agent, the
    command it runs as a service; `name` is its raw files' (raw/<trial>/<host>/NAME.out):
    `client`, or `client-<role>` where two clients share a host."""

    process: ProcessSpec
    host: str
    commands: ToolCommands
    name: str = "client"
    agent: ServerCommand | None = None

    @property
    def argv(self) -> list[str]:
        return self.agent.argv if self.agent is not None else self.commands.client


@dataclass(frozen=True)
class WorkloadCommands:
    """Every process of a trial's workload; `merge` is the tool's rule ("" for one client,
    `each`, `master`)."""

    clients: tuple[Client, ...]
    merge: str = ""

    @property
    def first(self) -> Client:
        return self.clients[0]

    @property
    def server(self) -> ServerCommand | None:
        return self.first.commands.server

    @property
    def agents(self) -> tuple[Client, ...]:
        return tuple(c for c in self.clients if c.agent is not None)

    @property
    def runners(self) -> tuple[Client, ...]:
        """The clients that run the tool's client command (not the agents)."""
        return tuple(c for c in self.clients if c.agent is None)


def build(plan: Plan, spec: WorkloadSpec, ctx: Context,
          errors: list[tuple[ProcessSpec, NapilabError]] | None = None) -> WorkloadCommands:
    """The workload's commands for one trial. With `errors`, a client whose arguments the
    tool refuses is recorded there (and left out) instead of raised."""
    tool = TOOLS[spec.tool]
    server_args = plan.process_args(spec.server)
    if not spec.others:
        return WorkloadCommands((Client(spec.client, plan.host_of(spec.client.role).name,
                                        tool.commands(plan.process_args(spec.client),
                                                      server_args, ctx)),))
    rule = several_clients(tool)
    hosts = [plan.host_of(p.role).name for p in spec.clients]
    names = [f"client-{p.role}" if hosts.count(h) > 1 else "client"
             for p, h in zip(spec.clients, hosts, strict=True)]
    out: list[Client] = []

    def attempt(process: ProcessSpec, make: Any) -> None:
        try:
            out.append(make())
        except NapilabError as exc:
            if errors is None:
                raise
            errors.append((process, exc))

    if rule.merge == MASTER and rule.agent is not None:
        agent = rule.agent
        master_args = plan.process_args(spec.client)
        agents = tuple(plan.host_of(p.role).target_address for p in spec.others)
        master = replace(ctx, clients=len(spec.clients), agents=agents)
        attempt(spec.client, lambda: Client(spec.client, hosts[0], tool.commands(
            master_args, server_args, master), names[0]))
        if not out:
            return WorkloadCommands((), rule.merge)
        for process, host, name in zip(spec.others, hosts[1:], names[1:], strict=True):
            attempt(process, lambda p=process, h=host, n=name: Client(
                p, h, out[0].commands, n, agent(plan.process_args(p), master_args, master)))
        return WorkloadCommands(tuple(out), rule.merge)
    if rule.merge != EACH:
        raise InputError(f"{spec.tool} takes one client: {rule.why}")
    for i, (process, host, name) in enumerate(zip(spec.clients, hosts, names, strict=True)):
        own = replace(ctx, clients=len(spec.clients),
                      trial=ctx.trial if i == 0 else f"{ctx.trial}-{process.role}")
        attempt(process, lambda p=process, h=host, n=name, c=own: Client(
            p, h, tool.commands(plan.process_args(p), server_args, c), n))
    _one_server(spec, out, errors)
    return WorkloadCommands(tuple(out), rule.merge)


def _one_server(spec: WorkloadSpec, clients: list[Client],
                errors: list[tuple[ProcessSpec, NapilabError]] | None) -> None:
    """Every client's commands name the first one's server."""
    if not clients:
        return
    first = clients[0]
    for other in clients[1:]:
        if _argv(other.commands.server) != _argv(first.commands.server):
            exc = InputError(
                f"{spec.tool}: clients {first.process.role} and {other.process.role} need "
                f"different servers ({_argv(first.commands.server)} and "
                f"{_argv(other.commands.server)}): one server serves every client, so "
                "give them the arguments the server reads alike")
            if errors is None:
                raise exc
            errors.append((other.process, exc))


def _argv(server: ServerCommand | None) -> list[str] | None:
    return None if server is None else server.argv
