"""Opening one transport per host (the only place that picks an implementation)."""

from __future__ import annotations

from collections.abc import Iterable

from napilab.harness.inventory.inventory import Host
from napilab.harness.transport.local import LocalTransport
from napilab.harness.transport.ssh import SSHTransport
from napilab.harness.transport.transport import Transport


def transport_for(host: Host) -> Transport:
    return LocalTransport(host) if host.transport == "local" else SSHTransport(host)


def connect(hosts: Iterable[Host]) -> dict[str, Transport]:
    """Transports for `hosts`, connected now (all at once) so an unreachable host fails
    before any setting is changed anywhere."""
    from concurrent.futures import ThreadPoolExecutor

    transports = {host.name: transport_for(host) for host in hosts}
    try:
        with ThreadPoolExecutor(max_workers=max(1, len(transports))) as pool:
            for future in [pool.submit(t.run, ["true"], timeout=30)
                           for t in transports.values()]:
                future.result()
    except BaseException:
        close(transports.values())
        raise
    return transports


def close(transports: Iterable[Transport]) -> None:
    for transport in transports:
        transport.close()
