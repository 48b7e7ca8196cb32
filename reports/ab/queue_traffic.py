"""Where the traffic went: which queues carried each variant's received packets on each
host, and the per-queue settings that missed it (pure; samples and settings rows in).
The packets by queue are the qstats collector's per-queue `IFACE.rx_packets.qN` (netdev
netlink, 6.8+, a driver that reports them); where a variant has none for an interface,
the ethtool_stats collector's of the same name (`ethtool -S`, the driver's own counters:
vmxnet3, ixgbe, veth... count per queue there and not in qstats). Per-queue IRQ counts
are not used: a vector that serves an rx and a tx queue (vmxnet3's rxtx-N) counts both.

A per-queue setting (an IRQ's CPUs, a NAPI's threaded mode or kthread, RPS of one rx
queue) only acts on the traffic that queue carries. A variant whose per-queue settings
name queues that together received less than MISSED_SHARE of the host's packets
measured something else than it set: that is a confounder, said in every report.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pandas as pd

MISSED_SHARE = 0.10
_PER_QUEUE_METRIC = re.compile(r"(?P<iface>[^.]+)\.rx_packets\.q(?P<queue>\d+)")
# the queue a setting row's target names: `queue 3 irq 52 (...)` (irq_affinity),
# `data0/queue-3/napi-8197/threaded` (napi), `napi/data0-8197/queue-3/cpus`
# (napi_threads), `data0/rx-3` (rps, rps_flow_cnt)
_TARGET_QUEUE = re.compile(r"(?:^queue (\d+) |/queue-(\d+)/|/rx-(\d+)$)")
RX_KINDS = ("irq_affinity", "napi", "napi_threads", "rps", "rps_flow_cnt")


class SettingLike(Protocol):
    """A settings row as the reports hold it (reports.formats.run_facts.SettingRow)."""

    @property
    def variant(self) -> str: ...

    @property
    def host(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def target(self) -> str: ...


@dataclass(frozen=True)
class QueueTraffic:
    """One variant's received packets on one host's interface, by queue index, summed
    over its trials."""

    variant: str
    host: str
    iface: str
    packets: dict[int, float]
    source: str = "qstats"  # or ethtool_stats

    @property
    def total(self) -> float:
        return sum(self.packets.values())

    def share(self, queues: Iterable[int]) -> float:
        return sum(self.packets.get(q, 0.0) for q in queues) / self.total if self.total else 0.0

    def text(self) -> str:
        """`q0 99.6%, q1 0.4%`, busiest first (queues that received nothing left out)."""
        busy = sorted((p, q) for q, p in self.packets.items() if p > 0)
        return ", ".join(f"q{q} {p / self.total:.1%}" for p, q in reversed(busy))


SOURCES = ("qstats", "ethtool_stats")  # in this order: the first that has an interface's


def traffic(samples: pd.DataFrame) -> list[QueueTraffic]:
    """Per variant, host and interface: received packets by queue (qstats rows, else
    ethtool_stats rows)."""
    if samples.empty:
        return []
    rows = samples[samples["source"].isin(SOURCES)
                   & samples["metric"].str.contains(r"\.rx_packets\.q\d+$", regex=True)]
    found: dict[tuple[str, str, str], dict[str, dict[int, float]]] = {}
    sums = rows.groupby(["variant", "host", "source", "metric"])["value"].sum()
    for key, value in sums.items():
        variant, host, source, metric = (str(k) for k in key)  # type: ignore[attr-defined]
        match = _PER_QUEUE_METRIC.fullmatch(metric)
        if match:
            by_source = found.setdefault((variant, host, match["iface"]), {})
            by_source.setdefault(source, {})[int(match["queue"])] = float(value)
    out = []
    for (variant, host, iface), by_source in found.items():
        source = next(s for s in SOURCES if s in by_source)
        out.append(QueueTraffic(variant, host, iface, dict(sorted(by_source[source].items())),
                                source))
    return out


def targeted(settings: Sequence[SettingLike]) -> dict[tuple[str, str, str], set[int]]:
    """(variant, host, kind) -> the rx queue indexes that kind's per-queue settings name."""
    out: dict[tuple[str, str, str], set[int]] = {}
    for row in settings:
        if row.kind not in RX_KINDS:
            continue
        match = _TARGET_QUEUE.search(row.target)
        if match:
            queue = int(next(g for g in match.groups() if g is not None))
            out.setdefault((row.variant, row.host, row.kind), set()).add(queue)
    return out


def carried(samples: pd.DataFrame) -> list[str]:
    """One line per variant and host: which queues received its traffic."""
    return [f"{t.variant}: {t.host} {t.iface} received {t.total:.0f} packets, "
            f"by queue {t.text()}" + ("" if t.source == "qstats" else " (ethtool -S)")
            for t in traffic(samples) if t.total > 0]


def missed(samples: pd.DataFrame, settings: Sequence[SettingLike]) -> list[str]:
    """Variants whose per-queue settings of a kind name queues that carried under
    MISSED_SHARE of the host's received packets (the busiest interface's, where it has
    several)."""
    by_host: dict[tuple[str, str], QueueTraffic] = {}
    for found in traffic(samples):
        key = (found.variant, found.host)
        if key not in by_host or found.total > by_host[key].total:
            by_host[key] = found
    out = []
    for (variant, host, kind), queues in sorted(targeted(settings).items()):
        seen = by_host.get((variant, host))
        if seen is None or seen.total <= 0:
            continue
        found = seen
        share = found.share(queues)
        if share < MISSED_SHARE:
            named = ", ".join(str(q) for q in sorted(queues))
            out.append(f"variant {variant} sets {kind} on queue(s) {named} of {host} "
                       f"{found.iface}, which received {share:.1%} of its packets (by "
                       f"queue: {found.text()}): the setting may have missed the traffic "
                       f"(under {MISSED_SHARE:.0%}); steer the flow (ethtool rss or "
                       "ntuple) or set the queues that carry it")
    return out
