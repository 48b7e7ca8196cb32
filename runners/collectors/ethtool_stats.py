"""`ethtool -S IFACE`: a driver's own statistics, per queue where the driver counts so.

As a collector (`ethtool_stats`), a snapshot runs `ethtool -S` on every interface of
the host but lo (`ifaces` keeps some: the data NIC), each under its own header
`==> @ethtool_stats:IFACE <==` with ethtool's exit status after it; metrics are
`IFACE.<metric>` (`data0.rx_packets.q0`). An interface whose driver has no statistics
(exit 94, `no stats available`: lo, a tap) gives no rows; any other failure, or an
output this parser refuses, fails the trial.

ethtool prints `NIC statistics:` then one `     NAME: VALUE` line per statistic (five
spaces, the driver's string of at most 31 characters, `%llu`; ethtool.c do_gstats),
docs/formats.md section 11. A driver without statistics makes ethtool print `no stats
available` on stderr and exit 94, with nothing on stdout: refused, as is a line of
another shape, a value that is not an unsigned 64-bit integer, a name given twice
(which value is which cannot be told) and an output whose last line has no newline.

Per-queue statistics carry the queue in the driver's name, spelt three ways in the
captures of tests/data/ethtool_stats; each becomes `<direction>_<name>.q<N>`, the name
the driver gives its total of the same counter when it has one:
  rx_queue_0_packets -> rx_packets.q0        veth, ifb, igc
  rx0_packets, tx0_kicks -> rx_packets.q0, tx_kicks.q0   mlx5, virtio_net 6.10+
  ch0_events -> ch_events.q0                 mlx5's channels (a queue pair and its IRQ)
Every other statistic keeps the driver's name (`rx_prio0_bytes`, `rx_64_bytes_phy`,
`peer_ifindex`, i40e's `tx-0.tx_packets`, for which no capture was at hand). All are
counts; veth's `peer_ifindex` is the one GAUGES entry (an ifindex, not a counter).

vmxnet3 spells its queues a fourth way (tests/data/ethtool_stats/7.2.13-tcg-guest): a
`Tx Queue#: N` or `Rx Queue#: N` line, then that queue's statistics, whose driver
strings begin with spaces (ethtool prints them after its own five), deeper for the parts
of a total (`drv dropped rx total`, then `err`, `fcs`); the first string without
leading spaces (`tx timeout count`) ends the queues. Each becomes
`<direction>_<words>.q<N>`, the words without the direction's own (`ucast pkts rx` in
Rx Queue#: 1 -> rx_ucast_pkts.q1), a part of a total after the total's words
(rx_drv_dropped_total_err.q0; Tx's `giant hdr` is both a part and a statistic of its
own); other deeper strings (the `xdp` ones under `rx buf alloc fail`) keep their own.
vmxnet3 counts received packets by cast, so napilab adds `rx_packets.qN`, their sum
(ucast + mcast + bcast pkts rx), the name the other drivers give it: where the traffic
went reads the same on every driver.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, ParseError, Value
from napilab.runners.collectors.collector import HostInfo

TOOL = "ethtool_stats"
HEADER = "NIC statistics:"
GAUGES = frozenset({"peer_ifindex"})
_U64 = 1 << 64
_LINE = re.compile(r" {5}(?P<name>\S.*?|(?P<indent> +)\S.*?): (?P<value>[0-9]+)\Z")
_SECTION = re.compile(r"(?P<dir>Rx|Tx) Queue#")
_CASTS = ("rx_ucast_pkts", "rx_mcast_pkts", "rx_bcast_pkts")
# (direction or ch)(queue)(rest): the three per-queue spellings of the module docstring.
_QUEUE = (re.compile(r"(?P<dir>rx|tx)_queue_(?P<queue>[0-9]+)_(?P<rest>\w+)\Z"),
          re.compile(r"(?P<dir>rx|tx|ch)(?P<queue>[0-9]+)_(?P<rest>\w+)\Z"))


@dataclass(frozen=True)
class Stat:
    name: str  # as the driver spells it: "rx_queue_0_xdp_packets"
    metric: str  # "rx_xdp_packets.q0"
    queue: int | None
    value: int


@dataclass(frozen=True)
class EthtoolStats:
    stats: tuple[Stat, ...]

    def by_metric(self) -> Mapping[str, Stat]:
        return {stat.metric: stat for stat in self.stats}


def metric_of(name: str) -> tuple[str, int | None]:
    """The driver's statistic name as napilab's metric, and its queue (None: not per
    queue)."""
    for pattern in _QUEUE:
        match = pattern.fullmatch(name)
        if match:
            queue = int(match["queue"])
            return f"{match['dir']}_{match['rest']}.q{queue}", queue
    return name, None


def parse(text: str) -> EthtoolStats:
    lines = text.splitlines()
    if not lines or lines[0] != HEADER:
        raise ParseError(TOOL, f"the output does not start with {HEADER!r}", text[:200])
    if not text.endswith("\n"):
        raise ParseError(TOOL, "the last line has no newline: the output was cut", lines[-1])
    stats: list[Stat] = []
    seen: dict[str, str] = {}
    section = _Section()
    for line in lines[1:]:
        match = _LINE.fullmatch(line)
        if match is None:
            raise ParseError(TOOL, "not a `     name: value` line with an unsigned count",
                             line)
        name, value = match["name"], int(match["value"])
        if value >= _U64:
            raise ParseError(TOOL, f"{name}: {value} does not fit 64 bits", line)
        header = _SECTION.fullmatch(name)
        if header:  # vmxnet3: the statistics after it are this queue's
            section = _Section(header["dir"].lower(), value)
            continue
        if match["indent"] is None:
            section = _Section()
            metric, queue = metric_of(name)
        elif section.queue is None:
            raise ParseError(TOOL, "a statistic that begins with spaces outside a "
                             "`Rx Queue#`/`Tx Queue#` section", line)
        else:
            metric, queue = section.metric_of(name), section.queue
        if metric in seen:
            raise ParseError(TOOL, f"{name!r} and {seen[metric]!r} are both {metric}"
                             if seen[metric] != name else f"{name!r} appears twice", line)
        seen[metric] = name
        stats.append(Stat(name, metric, queue, value))
    if not stats:
        raise ParseError(TOOL, f"no statistics after {HEADER!r} (cut?)", text)
    return EthtoolStats(tuple(stats) + _received_by_cast(stats))


class _Section:
    """Where a vmxnet3 statistic belongs: its queue (None outside a `Queue#` section)
    and the totals it is a part of (indentation, words), outermost first."""

    def __init__(self, direction: str = "", queue: int | None = None) -> None:
        self.direction, self.queue = direction, queue
        self.parents: list[tuple[int, list[str]]] = []

    def metric_of(self, name: str) -> str:
        indent = len(name) - len(name.lstrip(" "))
        words = [w for w in name.split() if w.lower() != self.direction]
        while self.parents and self.parents[-1][0] >= indent:
            self.parents.pop()
        parent = self.parents[-1][1] if self.parents else []
        full = [*parent, *words] if parent[-1:] == ["total"] else words
        self.parents.append((indent, full))
        return f"{self.direction}_{'_'.join(full)}.q{self.queue}"


def _received_by_cast(stats: list[Stat]) -> tuple[Stat, ...]:
    """`rx_packets.qN` for a queue counted only by cast (vmxnet3): their sum."""
    out = []
    by_metric = {stat.metric: stat for stat in stats}
    for queue in sorted({s.queue for s in stats if s.queue is not None}):
        parts = [by_metric[f"{cast}.q{queue}"] for cast in _CASTS
                 if f"{cast}.q{queue}" in by_metric]
        if f"rx_packets.q{queue}" in by_metric or len(parts) < len(_CASTS):
            continue
        out.append(Stat("+".join(p.name.strip() for p in parts), f"rx_packets.q{queue}",
                        queue, sum(p.value for p in parts)))
    return tuple(out)


def values(snapshot: EthtoolStats) -> list[Value]:
    return [Value(stat.metric, stat.value, COUNT) for stat in snapshot.stats]


def delta(before: EthtoolStats, after: EthtoolStats) -> list[Value]:
    """Each counter's increase and each gauge's value after. A statistic only one
    snapshot has (the queue count changed) is left out, and so is one that went down:
    drivers zero some counters when their queues are set up again (`ethtool -L`)."""
    old = before.by_metric()
    out: list[Value] = []
    for stat in after.stats:
        if stat.name in GAUGES:
            out.append(Value(stat.metric, stat.value, COUNT))
            continue
        previous = old.get(stat.metric)
        if previous is not None and stat.value >= previous.value:
            out.append(Value(stat.metric, stat.value - previous.value, COUNT))
    return out


SECTION = "@ethtool_stats"
NO_STATS = 94  # ethtool's exit status for a driver without statistics (ENOTSUP path)
_SCRIPT = f"""echo "==> {SECTION} <=="; ls /sys/class/net
  for n in /sys/class/net/*; do i=${{n##*/}}; [ "$i" = lo ] && continue
    echo "==> {SECTION}:$i <=="; ethtool -S "$i" 2>&1; echo "exit $?"; done"""


@dataclass(frozen=True)
class HostStats:
    """Each interface's statistics (None: its driver has none)."""

    ifaces: Mapping[str, EthtoolStats | None]


def read_sections(files: Mapping[str, str], ifaces: list[str] | None = None) -> HostStats:
    found: dict[str, EthtoolStats | None] = {}
    for key, text in files.items():
        if not key.startswith(SECTION + ":"):
            continue
        iface = key[len(SECTION) + 1:]
        if ifaces and iface not in ifaces:
            continue
        body, _, status = text.rstrip("\n").rpartition("\n")
        if not status.startswith("exit ") or not status[5:].isdigit():
            raise ParseError(TOOL, f"{iface}: no exit status after ethtool -S (cut?)",
                             text[-200:])
        code = int(status[5:])
        if code == NO_STATS:
            found[iface] = None
        elif code != 0:
            raise ParseError(TOOL, f"ethtool -S {iface} exited {code}", body)
        else:
            found[iface] = parse(body + "\n")
    return HostStats(found)


class EthtoolStatsCollector:
    """Options: `ifaces`: the interfaces to read (default every one but lo)."""

    name = "ethtool_stats"
    paths: tuple[str, ...] = (SECTION,)
    options: Mapping[str, str] = {"ifaces": "names"}
    headline: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ("*",)  # the driver's `ethtool -S` names
    sections: Mapping[str, str] = {SECTION: _SCRIPT}
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "ethtool_stats": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> HostStats:
        return read_sections(files)

    def delta(self, before: HostStats, after: HostStats, options: Mapping[str, Any],
              host: HostInfo) -> list[Value]:
        wanted = options.get("ifaces")
        out: list[Value] = []
        for iface, stats in sorted(after.ifaces.items()):
            old = before.ifaces.get(iface)
            if stats is None or old is None or (wanted and iface not in wanted):
                continue
            out += [Value(f"{iface}.{v.metric}", v.value, v.unit) for v in delta(old, stats)]
        return out
