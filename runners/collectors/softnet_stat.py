"""/proc/net/softnet_stat: per-CPU backlog and RPS counters.

One line per online CPU, every field `%08x` (u32, wraps). The layout is decided by the
column count, not the kernel version (docs/formats.md section 6):
   9  processed dropped time_squeeze 0 0 0 0 0 cpu_collision          (before 2.6.35)
  10  ... + received_rps                                              (2.6.35 - 3.10)
  11  ... + flow_limit_count                                          (3.11 - 5.9)
  13  ... + backlog_len cpu_id                                        (5.10 - 6.3)
  15  ... + input_qlen process_qlen                                   (6.4+)
Column 9 reads 0 from 4.19 on ("was cpu_collision"). Every row of one file has the same
width (one kernel, one seq_printf): a row of another width is refused, not read with
fewer columns. Offline CPUs have no line, so
without the CPU id column the row index is mapped through the online CPU list.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, ParseError, Value, parse_int
from napilab.runners.collectors.collector import HostInfo

TOOL = "softnet_stat"

# Column (0-based) -> metric, and which are cumulative counters (vs instantaneous gauges).
COUNTERS = {0: "processed", 1: "dropped", 2: "time_squeeze", 8: "cpu_collision",
            9: "received_rps", 10: "flow_limit_count"}
GAUGES = {11: "backlog_len", 13: "input_qlen", 14: "process_qlen"}
_CPU_ID_COLUMN = 12
_KNOWN_WIDTHS = (9, 10, 11, 13, 15)
_U32 = 1 << 32
_HEX8 = re.compile(r"[0-9a-fA-F]{8}")


@dataclass(frozen=True)
class SoftnetRow:
    cpu: int
    counters: dict[str, int]
    gauges: dict[str, int]


@dataclass(frozen=True)
class SoftnetStat:
    rows: tuple[SoftnetRow, ...]


def parse(text: str, online_cpus: list[int] | None = None) -> SoftnetStat:
    """Parse the file; `online_cpus` maps row index to CPU when there is no CPU column."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    if not lines:
        raise ParseError(TOOL, "no rows", text)
    rows = []
    width = len(lines[0].split())
    for index, line in enumerate(lines):
        fields = line.split()
        if len(fields) not in _KNOWN_WIDTHS:
            raise ParseError(TOOL, f"{len(fields)} columns, expected one of {_KNOWN_WIDTHS}", line)
        if len(fields) != width:  # one kernel prints one layout: a cut or widened row
            raise ParseError(TOOL, f"row {index} has {len(fields)} columns, the first row "
                             f"{width}", line)
        numbers = [_hex(f, line) for f in fields]
        if len(numbers) > _CPU_ID_COLUMN:
            cpu = numbers[_CPU_ID_COLUMN]
        elif online_cpus is not None:
            if index >= len(online_cpus):
                raise ParseError(TOOL, f"row {index} but only {len(online_cpus)} CPUs online", line)
            cpu = online_cpus[index]
        else:
            cpu = index
        counters = {name: numbers[col] for col, name in COUNTERS.items() if col < len(numbers)}
        gauges = {name: numbers[col] for col, name in GAUGES.items() if col < len(numbers)}
        rows.append(SoftnetRow(cpu, counters, gauges))
    cpus = [r.cpu for r in rows]
    if len(set(cpus)) != len(cpus):
        raise ParseError(TOOL, f"CPU ids repeat: {cpus}", text)
    return SoftnetStat(tuple(rows))


def _hex(field: str, line: str) -> int:
    # int(x, 16) alone would also take "0x123456", "+1234567" and "0000_001".
    if not _HEX8.fullmatch(field):
        raise ParseError(TOOL, f"field {field!r} is not 8 hex digits", line)
    return parse_int(TOOL, field, base=16)


def values(snapshot: SoftnetStat) -> list[Value]:
    """Absolute values of one snapshot, per CPU."""
    return [Value(name, number, COUNT, row.cpu)
            for row in snapshot.rows
            for name, number in (row.counters | row.gauges).items()]


def delta(before: SoftnetStat, after: SoftnetStat) -> list[Value]:
    """Per-CPU counter increase (u32 wrap handled) and the gauges' final values.

    A CPU present in only one snapshot (hot-plugged during the trial) is left out.
    """
    previous = {row.cpu: row for row in before.rows}
    out: list[Value] = []
    for row in after.rows:
        old = previous.get(row.cpu)
        if old is None:
            continue
        for name, number in row.counters.items():
            if name in old.counters:
                out.append(Value(name, (number - old.counters[name]) % _U32, COUNT, row.cpu))
        out.extend(Value(name, number, COUNT, row.cpu) for name, number in row.gauges.items())
    return out


class SoftnetStatCollector:
    name = "softnet_stat"
    paths: tuple[str, ...] = ("/proc/net/softnet_stat",)
    options: Mapping[str, str] = {}
    headline: tuple[str, ...] = ("processed", "dropped", "time_squeeze", "received_rps")
    metrics: tuple[str, ...] = (*COUNTERS.values(), *GAUGES.values())
    sections: Mapping[str, str] = {}
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "softnet_stat": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> SoftnetStat:
        online = list(host.online_cpus) if host.online_cpus is not None else None
        return parse(files[self.paths[0]], online)

    def delta(self, before: SoftnetStat, after: SoftnetStat,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return delta(before, after)
