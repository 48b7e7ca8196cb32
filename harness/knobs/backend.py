"""How knob items are read and written on a host. A backend is one mechanism (files,
per-NAPI netlink, ethtool, thread scheduling, a service, kprobe events); kinds name the
backend their items use. A backend belongs to one host session (harness.hosts.session):
it is created with the connection and dropped with it, so what it learns about the host
(which netlink client it has, where tracefs is) never leaks to another host or run.

Every backend builds its commands in one place (`read_argvs`, `write_command`) and runs
exactly those; `napilab plan` shows them from an instance made by `planned()`, whose
host-only facts are placeholders (`<tracefs>`) and which runs nothing.

An item's `key` is its address within the backend, e.g. for files the path
(/sys/class/net/eth0/gro_flush_timeout).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Self

from napilab.harness.errors import CommandError, HostError
from napilab.runners.collectors.collector import split_tail

if TYPE_CHECKING:
    from napilab.harness.transport.transport import Transport


class Gone(HostError):
    """The object no longer exists (a thread exited, a NAPI instance went away): there
    is nothing left to restore."""


class Unavailable(HostError):
    """The kernel cannot do this at all (no such function to probe): the item reads back
    as the value it has, and that is a result, not a failure."""


@dataclass(frozen=True)
class Command:
    """One command a backend runs: argv, and what it gets on stdin (file writes)."""

    argv: list[str]
    stdin: str | None = None


class Backend:
    name: ClassVar[str]
    # napilab's fixed shell scripts among this backend's commands: `napilab plan` shows
    # them by name and prints each once.
    scripts: ClassVar[dict[str, str]] = {}
    # Keys name objects numbered per boot (PIDs, NAPI ids): after a reboot a journal
    # entry of the earlier boot names another object, and `napilab restore` skips it.
    per_boot: ClassVar[bool] = False
    # What the backend sets outlives a reboot (only the kernel a host boots does): after
    # a reboot, `napilab restore` replays only such entries of a journal.
    survives_reboot: ClassVar[bool] = False

    def __init__(self, transport: Transport | None) -> None:
        self._transport = transport

    @classmethod
    def planned(cls) -> Self:
        """An instance for `napilab plan`: the same commands, none run."""
        return cls(None)

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            raise HostError(f"the {self.name} backend of `napilab plan` runs no command")
        return self._transport

    @property
    def host(self) -> str:
        return self.transport.host.name

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        """The commands `read` runs for `keys`."""
        raise NotImplementedError

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        raise NotImplementedError

    def write_command(self, key: str, value: str) -> Command:
        """The command that writes `value`."""
        raise NotImplementedError

    def write(self, key: str, value: str) -> None:
        command = self.write_command(key, value)
        try:
            self.transport.run(command.argv, stdin=command.stdin)
        except CommandError as exc:
            raise HostError(reason(exc)) from None


def reason(exc: CommandError) -> str:
    """The kernel's or the tool's reason from a failed command's last stderr line."""
    lines = [ln for ln in exc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1].rpartition(": ")[2] if lines else f"exit {exc.returncode}"


def tail_argv(paths: Sequence[str]) -> list[str]:
    """One command that prints every file under a `==> PATH <==` header."""
    return ["tail", "-v", "-n", "+1", "--", *paths]


def read_present(transport: Transport, paths: Sequence[str]) -> tuple[dict[str, str], str]:
    """The content of the paths that exist (one exec), and tail's complaints."""
    result = transport.run(tail_argv(paths), check=False)
    files = split_tail(result.stdout) if result.stdout.startswith("==> ") else {}
    return files, result.stderr


def read_files(transport: Transport, paths: Sequence[str]) -> dict[str, str]:
    """Every path's content in one exec; a missing path is an error naming it."""
    files, stderr = read_present(transport, paths)
    missing = [p for p in paths if p not in files]
    if missing:
        hint = "is the interface or knob present on this host and kernel?"
        if any(p.startswith("/proc/sys/net/core/") for p in missing):
            hint = ("sysctls such as net.core.busy_poll, busy_read and skb_defer_max exist "
                    "only in the initial network namespace, not inside a container or "
                    "testbed namespace")
        raise HostError(f"{transport.host.name}: cannot read {', '.join(missing)}: "
                        f"{stderr.strip()}", hint=hint)
    return {p: files[p].strip() for p in paths}


class FileBackend(Backend):
    """Files in sysfs and procfs: read many in one exec, write one at a time (`tee`)."""

    name = "file"

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [tail_argv(keys)]

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        return read_files(self.transport, keys)

    def write_command(self, key: str, value: str) -> Command:
        return Command(["tee", "--", key], value)

    def write(self, key: str, value: str) -> None:
        try:
            self.transport.write_file(key, value + "\n")
        except CommandError as exc:
            raise HostError(reason(exc)) from None
