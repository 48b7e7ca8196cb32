"""A NIC's queues as `napilab hosts check` shows them: each rx/tx queue with its NAPI
instance (netdev netlink queue-get, 6.8+) and its IRQ (the NAPI's `irq` attribute when
the driver reports it, else the device IRQ named after the queue: virtio-net's
`virtioN-input.Q` / `-output.Q`, or `...-rx-Q`, `...-tx-Q`, `...-TxRx-Q`), and the
channel counts `ethtool -l` reports."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from napilab.harness.errors import NapilabError
from napilab.harness.hosts.session import HostSession
from napilab.harness.knobs.kinds import irq_affinity
from napilab.harness.knobs.kinds.napi import NapiBackend

_QUEUE_IRQ = {"rx": r"(?:input|rx|TxRx|txrx|combined)[-._]?{n}$",
              "tx": r"(?:output|tx|TxRx|txrx|combined)[-._]?{n}$"}


@dataclass(frozen=True)
class Queue:
    kind: str  # "rx" or "tx"
    index: int
    napi_id: int | None
    irq: str | None
    irq_name: str | None

    def to_json(self) -> dict[str, Any]:
        return {"queue": f"{self.kind}-{self.index}", "napi_id": self.napi_id,
                "irq": int(self.irq) if self.irq else None, "irq_name": self.irq_name}


def device_queues(session: HostSession, iface: str) -> tuple[list[Queue], list[str]]:
    """The queues of `iface` and notes on what could not be read (a kernel without
    netdev netlink, a virtual device without IRQs)."""
    notes: list[str] = []
    listing = session.transport.run(["ls", "--", f"/sys/class/net/{iface}/queues"],
                                    check=False)
    names = sorted(listing.stdout.split(), key=_order)
    try:
        irqs = irq_affinity.irqs(session, iface, "")
    except NapilabError as exc:
        irqs = []
        notes.append(exc.message.partition(": ")[2] or exc.message)
    by_number = dict(irqs)
    napis: dict[tuple[str, int], int] = {}
    napi_irq: dict[int, str] = {}
    try:
        ifindex = session.transport.run(["cat", "--", f"/sys/class/net/{iface}/ifindex"])
        backend = session.backend(NapiBackend)
        for q in backend.napi_get(ifindex.stdout.strip(), "queue-get"):
            if "napi-id" in q:
                napis[(str(q.get("type")), int(str(q["id"])))] = int(str(q["napi-id"]))
        for napi in backend.napi_get(ifindex.stdout.strip()):
            if "irq" in napi:
                napi_irq[int(str(napi["id"]))] = str(napi["irq"])
    except NapilabError as exc:
        notes.append(f"NAPI ids unavailable: {exc.message}")
    out = []
    for name in names:
        kind, _, index = name.partition("-")
        if kind not in ("rx", "tx") or not index.isdigit():
            continue
        napi_id = napis.get((kind, int(index)))
        irq = napi_irq.get(napi_id) if napi_id is not None else None
        if irq is None:
            pattern = re.compile(_QUEUE_IRQ[kind].format(n=int(index)))
            irq = next((n for n, desc in irqs if pattern.search(desc)), None)
        out.append(Queue(kind, int(index), napi_id, irq, _irq_name(by_number.get(irq or ""))))
    return out, notes


def channels(session: HostSession, iface: str) -> dict[str, str]:
    """`ethtool -l`: {"max combined": "2", "combined": "2", ...}, {} when unsupported."""
    result = session.transport.run(["ethtool", "-l", iface], check=False)
    out: dict[str, str] = {}
    section = ""
    for line in result.stdout.splitlines():
        if line.startswith("Pre-set maximums"):
            section = "max "
        elif line.startswith("Current hardware settings"):
            section = ""
        key, sep, value = line.partition(":")
        if sep and value.strip() and value.strip() != "n/a" and key.strip() in (
                "RX", "TX", "Other", "Combined"):
            out[section + key.strip().lower()] = value.strip()
    return out if result.exit_code == 0 else {}


def _irq_name(description: str | None) -> str | None:
    return description.split()[-1] if description else None


def _order(name: str) -> tuple[str, int]:
    kind, _, index = name.partition("-")
    return (kind, int(index) if index.isdigit() else -1)
