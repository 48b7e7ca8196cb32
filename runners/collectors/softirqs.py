"""/proc/softirqs: softirq raises per CPU (fs/proc/softirqs.c).

The header is 20 spaces and `CPU%-8d` per POSSIBLE CPU, while /proc/interrupts has one
column per ONLINE CPU: the two files can have different column counts on the same host
(docs/formats.md 7.2). Rows are `%12s:` then ` %10u` per CPU, cumulative `unsigned int`
counts (wrap at 2^32). Names: HI TIMER NET_TX NET_RX BLOCK IRQ_POLL TASKLET SCHED
HRTIMER RCU (IRQ_POLL was BLOCK_IOPOLL before 4.5); metrics are the names lowercased
(`net_rx`, `net_tx`, ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, ParseError, Value
from napilab.runners.collectors.collector import HostInfo

TOOL = "softirqs"
_CPU = re.compile(r"CPU(\d+)")
_NAME = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_U32 = 1 << 32


@dataclass(frozen=True)
class Softirqs:
    cpus: tuple[int, ...]  # possible CPUs, in header order
    counts: Mapping[str, tuple[int, ...]]  # NET_RX -> one count per CPU


def parse(text: str) -> Softirqs:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ParseError(TOOL, "empty file", text)
    header = lines[0].split()
    matches = [_CPU.fullmatch(token) for token in header]
    if not header or not all(matches):
        raise ParseError(TOOL, "first line is not a `CPU0 CPU1 ...` header", lines[0])
    cpus = tuple(int(m[1]) for m in matches if m)
    if len(set(cpus)) != len(cpus):
        raise ParseError(TOOL, "a CPU appears twice in the header", lines[0])
    counts: dict[str, tuple[int, ...]] = {}
    for line in lines[1:]:
        name, sep, rest = line.partition(":")
        name = name.strip()
        tokens = rest.split()
        if not sep or not _NAME.match(name):
            raise ParseError(TOOL, "row does not start with `NAME:`", line)
        if name in counts:
            raise ParseError(TOOL, f"{name} appears twice", line)
        if len(tokens) != len(cpus) or not all(t.isascii() and t.isdigit() for t in tokens):
            raise ParseError(TOOL, f"{name}: expected {len(cpus)} counts", line)
        counts[name] = tuple(int(t) for t in tokens)
    if not counts:
        raise ParseError(TOOL, "no softirq rows", text)
    return Softirqs(cpus, counts)


def values(snapshot: Softirqs) -> list[Value]:
    return [Value(name.lower(), n, COUNT, cpu)
            for name, row in snapshot.counts.items()
            for cpu, n in zip(snapshot.cpus, row, strict=True)]


def delta(before: Softirqs, after: Softirqs, *, names: Collection[str] | None = None,
          cpus: Collection[int] | None = None) -> list[Value]:
    """Per-CPU increases (u32 wrap handled) of the named softirqs (all when None) on
    `cpus` (all when None); a CPU or softirq present in only one snapshot is left out."""
    wanted = {n.upper() for n in names} if names is not None else None
    old_index = {cpu: i for i, cpu in enumerate(before.cpus)}
    out: list[Value] = []
    for name, row in after.counts.items():
        old = before.counts.get(name)
        if old is None or (wanted is not None and name not in wanted):
            continue
        for cpu, n in zip(after.cpus, row, strict=True):
            i = old_index.get(cpu)
            if i is None or (cpus is not None and cpu not in cpus):
                continue
            out.append(Value(name.lower(), (n - old[i]) % _U32, COUNT, cpu))
    return out


class SoftirqsCollector:
    """Options: `names: [NET_RX, NET_TX]` keeps those softirqs (default: all). Only
    online CPUs are reported when the host's online list is known: the file also has
    columns for possible-but-offline CPUs, which never move."""

    name = "softirqs"
    paths: tuple[str, ...] = ("/proc/softirqs",)
    options: Mapping[str, str] = {"names": "names"}
    headline: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ("*",)  # the kernel's softirq names, lower case
    sections: Mapping[str, str] = {}
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "softirqs": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> Softirqs:
        return parse(files[self.paths[0]])

    def delta(self, before: Softirqs, after: Softirqs,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        names = options.get("names")
        return delta(before, after, names=list(names) if names is not None else None,
                     cpus=host.online_cpus)
