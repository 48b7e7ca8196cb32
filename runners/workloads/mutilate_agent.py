"""mutilate's agents: the load generators on other client hosts a master enlists.

`mutilate -A -p PORT` serves a ZeroMQ REP socket on the agent port (5556 by default) and
runs every test a master sends it until it is killed (agent(), mutilate.cc:156-220 at
leverich/mutilate d65c6ef). It reads only its own -T (threads), -l (lambda_mul, its weight
in the QPS share), --affinity and -B; the master hands it everything else (options_t:
server, qps, connections, depth, key and value sizes). docs/formats.md 14.
"""

from __future__ import annotations

from collections.abc import Mapping

from napilab.harness.errors import InputError
from napilab.runners.workloads.workload import (
    ArgSpec,
    ArgValue,
    Context,
    Readiness,
    ServerCommand,
    flags,
)

AGENT_PORT = 5556  # mutilate's default -p (agent_port, cmdline.ggo)

AGENT_ARGS: Mapping[str, ArgSpec] = {
    "T": ArgSpec(int, "the agent's threads (default 1); each opens the master's -c "
                 "connections"),
    "l": ArgSpec(int, "lambda_mul: the agent's weight in the QPS share (default 1)"),
    "affinity": ArgSpec(bool, "pin the agent's threads to CPUs round-robin"),
    "B": ArgSpec(bool, "blocking epoll in the agent"),
}


def _port(args: Mapping[str, ArgValue]) -> int:
    return int(args.get("p", AGENT_PORT))


def agent_command(agent_args: Mapping[str, ArgValue], master_args: Mapping[str, ArgValue],
                  ctx: Context) -> ServerCommand:
    """`mutilate -A -p PORT [-T N] [-l N] [--affinity] [-B]`: serves the master's runs until
    it is killed (agent(), mutilate.cc:156)."""
    bad = sorted(set(agent_args) - set(AGENT_ARGS))
    if bad:
        raise InputError(f"mutilate: agent arguments {bad} are not an agent's: it reads "
                         f"{sorted(AGENT_ARGS)}; the master hands it the rest")
    port = _port(master_args)
    return ServerCommand(["mutilate", "-A", "-p", str(port), *flags(agent_args)],
                         Readiness(port=port, protocol="tcp"), exits_by_itself=False,
                         stop_signal="TERM")
