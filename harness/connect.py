"""Opening one transport per host (the only place that picks an implementation)."""

from __future__ import annotations

from collections.abc import Iterable

from harness.inventory import Host
from harness.transport import Transport
from harness.transport_local import LocalTransport
from harness.transport_ssh import SSHTransport


def transport_for(host: Host) -> Transport:
    return LocalTransport(host) if host.transport == "local" else SSHTransport(host)


def connect(hosts: Iterable[Host]) -> dict[str, Transport]:
    """Transports for `hosts`, connected now so an unreachable host fails before any
    setting is changed anywhere."""
    transports: dict[str, Transport] = {}
    try:
        for host in hosts:
            transport = transport_for(host)
            transport.run(["true"], timeout=30)
            transports[host.name] = transport
    except BaseException:
        close(transports.values())
        raise
    return transports


def close(transports: Iterable[Transport]) -> None:
    for transport in transports:
        transport.close()
