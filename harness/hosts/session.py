"""A host session: one host's connection and what napilab learns about the host while
it is connected (which netlink client it has, where tracefs is), kept in the knob
backends it creates on first use. Sessions are opened with the connections and closed
with them, so nothing learnt about a host outlives its connection or leaks to another
host, run or thread."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from napilab.harness.inventory.inventory import Host
from napilab.harness.knobs.backend import Backend
from napilab.harness.transport import connect as connection
from napilab.harness.transport.transport import Transport

B = TypeVar("B", bound=Backend)
T = TypeVar("T")


class HostSession:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._backends: dict[type[Backend], Backend] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.transport.host.name

    def backend(self, cls: type[B]) -> B:
        with self._lock:
            if cls not in self._backends:
                self._backends[cls] = cls(self.transport)
            backend = self._backends[cls]
        assert isinstance(backend, cls)
        return backend

    def rebooted(self) -> None:
        """The host was booted: what its backends and its identity learnt is of the
        previous boot (tracefs, NAPI ids, the boot_id locks and journals record)."""
        from napilab.harness.hosts import identity

        with self._lock:
            self._backends.clear()
        identity.forget(self.transport)

    def close(self) -> None:
        self._backends.clear()
        self.transport.close()


class HostLookup:
    """The host lookups of one apply (queues, NAPI ids, IRQs, thread PIDs), each asked
    once: the next apply asks again, since a trial's settings may change them."""

    def __init__(self, session: HostSession) -> None:
        self.session = session
        self._found: dict[tuple[Any, ...], Any] = {}

    @property
    def name(self) -> str:
        return self.session.name

    def find(self, fn: Callable[..., T], *args: str, plan: T) -> T:
        key = (fn, *args)
        if key not in self._found:
            self._found[key] = fn(self.session, *args)
        found: T = self._found[key]
        return found


def open_session(host: Host) -> HostSession:
    """A session on one host, its transport opened lazily (`napilab restore`)."""
    return HostSession(connection.transport_for(host))


def open_sessions(hosts: Iterable[Host]) -> dict[str, HostSession]:
    """Sessions on `hosts`, connected now (all at once): an unreachable host fails
    before any setting is changed anywhere."""
    return {name: HostSession(t) for name, t in connection.connect(hosts).items()}


def close_sessions(sessions: Iterable[HostSession]) -> None:
    for session in sessions:
        session.close()
