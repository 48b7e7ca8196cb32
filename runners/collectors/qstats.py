"""Netdev queue statistics over netlink (`qstats-get`, Linux 6.8+): per device and queue,
the counters a driver reports through its netdev_stat_ops (virtio_net, mlx5, bnxt,
gve, ...): rx/tx packets and bytes, allocation failures, hardware drops, checksum and
HW-GRO/GSO counts, tx stops and wakes.

The snapshot dumps every device's queues (`scope: queue`) with `ynl --family netdev
--dump qstats-get --output-json` where the host has ynl, else with napilab's own
netlink client (harness/knobs/kinds/hostscripts/netdev_nl.py, sent on the snapshot's
stdin to the host's python3; it prints what ynl prints), then names each ifindex
(`ifindex N NAME` from /sys/class/net). Metrics are `IFACE.<counter>.q<N>` with the
counter's netlink name in snake case (`data0.rx_packets.q0`, `data0.tx_stop.q1`; an
attribute a newer kernel added reads `attr_N`) and their sum over the device's queues,
`IFACE.<counter>`. A kernel without the netdev family or without qstats-get (6.1), or
a driver without queue stats (veth, lo), gives no rows: `queues` counts what was
reported. Counters are u64; one lower after than before (a queue reconfigured during
the trial: the kernel's per-queue counts restart) is left out.

Page-pool statistics (`page-pool-stats-get`, kernels built with CONFIG_PAGE_POOL_STATS:
Debian's 6.1 is not, and neither is this machine's 6.18) come in the same section, a
second reply line: per pool `IFACE.page_pool.<counter>.pp<ID>` (alloc_fast, alloc_slow,
recycle_ring, ...), summed per device `IFACE.page_pool.<counter>`, `page_pools` the
number of pools; a kernel without them says so (`Operation not supported`) and gives
none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, HOST_PYTHON, ParseError, Value
from napilab.runners.collectors.collector import HostInfo

TOOL = "qstats"
SECTION = "@qstats"
HOSTSCRIPT = "netdev_nl.py"  # the engine sends it on the snapshot's stdin
_IFINDEX = re.compile(r"^ifindex (\d+) (\S+)$")
_KEYS = ("ifindex", "queue-type", "queue-id")
# What the kernel answers when it has no such family or operation: no rows, not a fault
_ABSENT = ("no netdev netlink family", "Operation not supported", "(errno 95)",
           "(errno 2)", "Unknown family", "not supported")


POOL = "pp"  # the queue type of a page pool in QueueStats' keys


@dataclass(frozen=True)
class QueueStats:
    """(iface, queue type rx/tx or POOL, queue or pool id) -> counter -> value."""

    queues: Mapping[tuple[str, str, int], Mapping[str, int]]
    absent: str = ""  # why the kernel reported nothing (no family, no operation)
    pools_absent: str = ""  # why no page-pool statistics


def parse(text: str) -> QueueStats:
    names: dict[int, str] = {}
    body: list[str] = []
    for line in (ln for ln in text.splitlines() if ln.strip()):
        match = _IFINDEX.match(line)
        if match:
            names[int(match[1])] = match[2]
        else:
            body.append(line)
    if not names:
        raise ParseError(TOOL, "no `ifindex N NAME` line: the section was cut", text[:200])
    if not body:
        raise ParseError(TOOL, "no qstats-get reply", text[:200])
    if len(body) > 2:
        raise ParseError(TOOL, f"{len(body)} reply lines, expected qstats-get's and "
                         "page-pool-stats-get's", text[:200])
    queues: dict[tuple[str, str, int], dict[str, int]] = {}
    entries, absent = _reply(body[0], "qstats-get")
    for entry in entries:
        key, counters = _entry(entry, names)
        if key in queues:
            raise ParseError(TOOL, f"{key[0]} {key[1]} queue {key[2]} twice", json.dumps(entry))
        queues[key] = counters
    pools, pools_absent = _reply(body[1], "page-pool-stats-get") if len(body) > 1 else (
        [], "not read")
    for entry in pools:
        key, counters = _pool(entry, names)
        if key in queues:
            raise ParseError(TOOL, f"page pool {key[2]} twice", json.dumps(entry))
        queues[key] = counters
    return QueueStats(queues, absent, pools_absent)


def _reply(line: str, op: str) -> tuple[list[Any], str]:
    """One operation's reply: its entries, or none and why (a kernel without it)."""
    if line.startswith("netlink:") or not line.lstrip().startswith(("[", "{")):
        if any(word in line for word in _ABSENT):
            return [], line.strip()
        raise ParseError(TOOL, f"{op} failed", line)
    try:
        entries = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ParseError(TOOL, f"not JSON ({exc.msg})", line) from None
    if not isinstance(entries, list):
        raise ParseError(TOOL, f"a {op} dump is a JSON list", line)
    return entries, ""


def _pool(entry: Any, names: Mapping[int, str]) -> tuple[tuple[str, str, int], dict[str, int]]:
    """One page pool's statistics: (iface, POOL, id) and its counters."""
    info = entry.get("info") if isinstance(entry, dict) else None
    if not isinstance(info, dict) or "id" not in info:
        raise ParseError(TOOL, "a page pool without info.id", json.dumps(entry))
    # a pool outlives its device (ifindex 0 or absent): "detached"
    iface = names.get(info.get("ifindex", 0), "detached")
    counters = {}
    for name, value in entry.items():
        if name == "info":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParseError(TOOL, f"{name} is {value!r}, not a counter", json.dumps(entry))
        counters["page_pool." + name.replace("-", "_")] = value
    return (iface, POOL, int(info["id"])), counters


def _entry(entry: Any, names: Mapping[int, str]) -> tuple[tuple[str, str, int], dict[str, int]]:
    """One queue of the dump: its key and counters, or a ParseError."""
    if not isinstance(entry, dict) or any(k not in entry for k in _KEYS):
        raise ParseError(TOOL, f"an entry without {', '.join(_KEYS)}", json.dumps(entry))
    iface = names.get(entry["ifindex"])
    if iface is None:
        raise ParseError(TOOL, f"ifindex {entry['ifindex']} has no name", json.dumps(entry))
    if entry["queue-type"] not in ("rx", "tx"):
        raise ParseError(TOOL, f"queue-type {entry['queue-type']!r}", json.dumps(entry))
    counters = {}
    for name, value in entry.items():
        if name in (*_KEYS, "scope"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParseError(TOOL, f"{name} is {value!r}, not a counter", json.dumps(entry))
        counters[name.replace("-", "_")] = value
    return (iface, str(entry["queue-type"]), int(entry["queue-id"])), counters


def _metric(iface: str, counter: str, queue: int | None = None, kind: str = "rx") -> str:
    tag = POOL if kind == POOL else "q"
    return f"{iface}.{counter}" + (f".{tag}{queue}" if queue is not None else "")


def values(snapshot: QueueStats, ifaces: list[str] | None = None) -> list[Value]:
    return _rows({k: c for k, c in snapshot.queues.items() if not ifaces or k[0] in ifaces})


def delta(before: QueueStats, after: QueueStats, ifaces: list[str] | None = None) -> list[Value]:
    """Each queue's counter increases (a decrease, a queue reconfigured: left out), and
    their sums per device."""
    grown = {key: {counter: value - old[counter] for counter, value in counters.items()
                   if counter in old and value >= old[counter]}
             for key, counters in after.queues.items()
             if (old := before.queues.get(key)) is not None and (not ifaces or key[0] in ifaces)}
    return _rows(grown)


def _rows(queues: Mapping[tuple[str, str, int], Mapping[str, int]]) -> list[Value]:
    """Each queue's and pool's counters, their sums per device, and how many there are."""
    out: list[Value] = []
    totals: dict[tuple[str, str], int] = {}
    for (iface, kind, queue), counters in sorted(queues.items()):
        for counter, value in counters.items():
            out.append(Value(_metric(iface, counter, queue, kind), value, COUNT))
            totals[(iface, counter)] = totals.get((iface, counter), 0) + value
    out += [Value(_metric(i, c), v, COUNT) for (i, c), v in totals.items()]
    pools = sum(1 for k in queues if k[1] == POOL)
    out.append(Value("queues", len(queues) - pools, COUNT))
    return out + ([Value("page_pools", pools, COUNT)] if pools else [])


_SCRIPT = f"""echo "==> {SECTION} <=="
  if command -v ynl >/dev/null 2>&1; then
    ynl --family netdev --dump qstats-get --json '{{"scope": "queue"}}' --output-json 2>&1 |
      tr -d '\\n'; echo
    ynl --family netdev --dump page-pool-stats-get --output-json 2>&1 | tr -d '\\n'; echo
  elif command -v python3 >/dev/null 2>&1; then
    {' '.join(HOST_PYTHON)} - qstats-get page-pool-stats-get 2>&1
  else echo "netlink: neither ynl nor python3 on this host"; fi
  for f in /sys/class/net/*/ifindex; do n=${{f%/ifindex}}; echo "ifindex $(cat "$f") ${{n##*/}}"
  done"""


class QstatsCollector:
    """Options: `ifaces`: the interfaces to keep (default every one that reports)."""

    name = "qstats"
    paths: tuple[str, ...] = (SECTION,)
    options: Mapping[str, str] = {"ifaces": "names"}
    headline: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ("*",)  # IFACE.counter, as the kernel names them
    sections: Mapping[str, str] = {SECTION: _SCRIPT}
    hostscript = HOSTSCRIPT
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "qstats": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> QueueStats:
        return parse(files[SECTION])

    def delta(self, before: QueueStats, after: QueueStats,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        wanted = options.get("ifaces")
        return delta(before, after, list(wanted) if wanted else None)
