"""How napilab runs commands on a host: one protocol, a local and an SSH implementation.

Commands are argv lists everywhere. The final command line for a host (env, sudo,
`ip netns exec`) is built by `command_line()`, which `napilab plan` uses too, so the
plan shows exactly what runs. SSH quotes once, with `shlex.join`, at its boundary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from napilab.harness.errors import CommandError, InputError
from napilab.harness.inventory.inventory import Host

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SIGNALS = ("TERM", "INT", "KILL", "HUP")


@dataclass(frozen=True)
class CommandResult:
    host: str
    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    start: float  # time.time() when the command started
    duration: float  # seconds

    def check(self, *, hint: str = "") -> CommandResult:
        if self.exit_code != 0:
            if self.argv[:2] == ("sudo", "-n") and "password is required" in self.stderr:
                hint = ("napilab runs `sudo -n` for `become: sudo` and never types a "
                        "password: allow this user passwordless sudo for napilab's commands, "
                        "or connect as root")
            raise CommandError(self.host, self.argv, self.exit_code, self.stderr, hint=hint)
        return self


class Process(Protocol):
    """A command started in the background (a workload server)."""

    argv: tuple[str, ...]

    def poll(self) -> int | None: ...

    def output(self) -> tuple[str, str]:
        """stdout and stderr received so far."""
        ...

    def signal(self, name: str) -> None: ...

    def wait(self, timeout: float) -> CommandResult:
        """Wait for exit (raising HostError after `timeout`) and return everything."""
        ...


class Transport(Protocol):
    host: Host

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult: ...

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              stdin_open: bool = False) -> Process:
        """`stdin_open`: the command's stdin stays open (it reads nothing) until the
        process is signalled or the connection ends, when it sees end of file: a holder
        that must not outlive its controller (harness.knobs.kinds.cpu.cpu_dma_latency)
        waits on it."""
        ...

    def read_file(self, path: str) -> str: ...

    def write_file(self, path: str, data: str) -> None: ...

    def close(self) -> None: ...


def env_argv(env: Mapping[str, str] | None) -> list[str]:
    """`env LC_ALL=C K=V ...`: every command runs in the C locale so output parses."""
    pairs = {"LC_ALL": "C", **(env or {})}
    for name in pairs:
        if not _ENV_NAME.fullmatch(name):
            raise InputError(f"environment variable name {name!r} is not valid")
    return ["env", *(f"{k}={v}" for k, v in pairs.items())]


def command_line(host: Host, argv: Sequence[str], env: Mapping[str, str] | None = None,
                 *, transport: str | None = None) -> list[str]:
    """The argv that really runs for `argv` on `host` over `transport` (default: the
    host's), prefixes included: `ip netns exec` locally, `sudo -n` when `become: sudo`."""
    final = [*env_argv(env), *argv]
    if host.become == "sudo":
        final = ["sudo", "-n", "--", *final]
    if (transport or host.transport) == "local" and host.netns:
        final = ["ip", "netns", "exec", host.netns, *final]
    return final
