"""Who is who across crashes, renames and reboots.

A host is the machine behind its inventory name: `/etc/machine-id` (its boot_id when
it has none) and the network namespace sshd or `ip netns exec` runs in. Locks and
journals are keyed by that, so one machine reached under two inventory names is one
machine, a renamed host still finds its journals, and the two namespaces of the local
testbed (one machine, two network stacks) are two hosts. The boot_id tells a journal
written before a reboot: PIDs and NAPI ids in it no longer mean the same objects.

The controller (the machine running napilab) is recorded the same way, with the PID
and its start time, so that a lock or journal left by a dead run is told from a live
one even when the PID was reused, and a lock of another controller is never judged
from here.
"""

from __future__ import annotations

import hashlib
import os
import socket
import weakref
from dataclasses import dataclass
from typing import Any

from napilab.harness.errors import HostError
from napilab.harness.hosts.host_records import Holder
from napilab.harness.transport.transport import Transport

MACHINE_ID = "/etc/machine-id"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# One exec, four lines: machine-id (empty when absent), boot_id, the network namespace,
# and PID 1's (empty when it cannot be read).
IDENTITY_ARGV = ["sh", "-c", f"cat {MACHINE_ID} 2>/dev/null || echo; cat {BOOT_ID}; "
                 "readlink /proc/self/ns/net; readlink /proc/1/ns/net 2>/dev/null || echo",
                 "napilab-identity"]


@dataclass(frozen=True)
class HostIdentity:
    machine_id: str  # "" when the host has no /etc/machine-id
    boot_id: str
    netns: str  # e.g. "net:[4026531833]"
    initial: bool = False  # it is PID 1's namespace

    @property
    def key(self) -> str:
        """The machine and network namespace, as a file-name-safe token. PID 1's
        namespace is `net:init`: its inode number differs between kernel versions
        (4026531840 on 6.1, 4026531833 on 6.18 and 7.2), and a host booted into another
        kernel is the same machine."""
        return _key(self.machine_id or self.boot_id, "net:init" if self.initial else self.netns)

    @property
    def keys(self) -> tuple[str, ...]:
        """The key, and the one napilab versions before the `net:init` rule wrote."""
        return (self.key, _key(self.machine_id or self.boot_id, self.netns))

    def record(self) -> dict[str, str]:
        """What journals and locks store about the host."""
        return {"machine": self.key, "machine_id": self.machine_id, "boot_id": self.boot_id,
                "netns": self.netns}


def _key(machine: str, netns: str) -> str:
    return hashlib.sha256(f"{machine}\0{netns}".encode()).hexdigest()[:16]


_CACHE: weakref.WeakKeyDictionary[Any, HostIdentity] = weakref.WeakKeyDictionary()


def of(transport: Transport) -> HostIdentity:
    """The host's identity, read once per transport."""
    known = _CACHE.get(transport)
    if known is not None:
        return known
    result = transport.run(IDENTITY_ARGV, check=False)
    lines = [line.strip() for line in result.stdout.splitlines()]
    if result.exit_code != 0 or len(lines) < 3 or not lines[1]:
        raise HostError(f"{transport.host.name}: cannot read its machine-id, boot_id and "
                        f"network namespace: {result.stderr.strip() or result.stdout[:200]!r}")
    identity = HostIdentity(lines[0], lines[1], lines[2],
                            initial=len(lines) > 3 and lines[3] == lines[2])
    _CACHE[transport] = identity
    return identity


def forget(transport: Transport) -> None:
    """Read the identity again next time (the host was booted: a new boot_id)."""
    _CACHE.pop(transport, None)


# -- the controller --------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def pid_start(pid: int) -> int | None:
    """The start time of `pid` in clock ticks since boot (/proc/PID/stat field 22), or
    None if it does not run. Two processes with one PID have different start times. A
    zombie does not run: a controller killed with its replicas' processes (harness.cli.
    fleet) leaves them unreaped until PID 1 gets to it, seconds in a container."""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat.rpartition(")")[2].split()
    if fields[:1] == ["Z"]:
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def controller() -> dict[str, Any]:
    """This process on this machine, as locks and journals record it."""
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return {"controller": socket.gethostname(), "controller_machine_id": _read(MACHINE_ID),
            "controller_boot_id": _read(BOOT_ID), "controller_pidns": pidns,
            "pid": os.getpid(), "pid_start": pid_start(os.getpid())}


ALIVE, DEAD, UNKNOWN = "alive", "dead", "unknown"


def holder_state(holder: Holder) -> str:
    """Whether the process a lock or journal names still runs: `alive`, `dead`, or
    `unknown` when it ran on another controller (or in another PID namespace), where
    nothing can be judged from here."""
    here = controller()
    machine = holder.controller_machine_id
    if machine is not None:
        if machine != here["controller_machine_id"] or (
                machine == "" and holder.controller != here["controller"]):
            return UNKNOWN
        if holder.controller_boot_id != here["controller_boot_id"]:
            return DEAD  # the controller rebooted since
        if (holder.controller_pidns or "") != here["controller_pidns"]:
            return UNKNOWN
    elif holder.controller != here["controller"]:
        return UNKNOWN  # written by an older napilab: only the host name to go by
    pid = holder.pid
    if pid is None:
        return DEAD
    started = pid_start(pid)
    if started is None:
        return DEAD
    if holder.pid_start is not None and holder.pid_start != started:
        return DEAD  # the PID was reused by another process
    return ALIVE
