"""/proc/stat: per-CPU time (user ... guest_nice) in USER_HZ ticks, and context switches.

`cpu  user nice system idle iowait irq softirq steal guest guest_nice` then `cpuN ...`
for each online CPU. Kernels before 2.6.33 print fewer fields (4, 7, 8 or 9); absent
fields are absent, not zero. Every cpuN line has as many fields as the `cpu` line, and
the cpu lines are followed by `intr` (fs/proc/stat.c show_stat): a cut or widened line,
or a file that ends among the cpu lines, is refused. `guest`/`guest_nice` are already
included in `user`/`nice`.
Times are reported in milliseconds using the host's USER_HZ (`getconf CLK_TCK`). The
`irq` field is hard-IRQ time, named `hardirq` here as in the seeds' tables; it stays 0
on kernels built without CONFIG_IRQ_TIME_ACCOUNTING.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, MS, ParseError, Value, parse_int
from napilab.runners.collectors.collector import HostInfo

TOOL = "proc_stat"
FIELDS = ("user", "nice", "system", "idle", "iowait", "hardirq", "softirq", "steal", "guest",
          "guest_nice")


@dataclass(frozen=True)
class CpuTimes:
    cpu: int | None  # None for the aggregate "cpu" line
    ticks: dict[str, int]


@dataclass(frozen=True)
class ProcStat:
    cpus: tuple[CpuTimes, ...]
    total: CpuTimes
    ctxt: int | None
    intr: int | None


def parse(text: str) -> ProcStat:
    total: CpuTimes | None = None
    cpus: list[CpuTimes] = []
    ctxt = intr = None
    last_cpu_line = ""
    after_cpu_lines = False
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        key = fields[0]
        if key.startswith("cpu"):
            times = _cpu_line(fields, line)
            if times.cpu is None:
                total = times
            elif total is None:
                raise ParseError(TOOL, "a cpuN line before the aggregate 'cpu' line", line)
            elif len(times.ticks) != len(total.ticks):
                raise ParseError(TOOL, f"{fields[0]} has {len(times.ticks)} time fields, the "
                                 f"'cpu' line {len(total.ticks)}: a cut or widened line", line)
            else:
                cpus.append(times)
            last_cpu_line, after_cpu_lines = line, False
            continue
        after_cpu_lines = True
        if key == "ctxt" and len(fields) == 2:
            ctxt = parse_int(TOOL, fields[1])
        elif key == "intr" and len(fields) >= 2:
            intr = parse_int(TOOL, fields[1])
    if total is None:
        raise ParseError(TOOL, "no aggregate 'cpu' line", text[:200])
    if not after_cpu_lines:  # show_stat() prints `intr` after them: the file was cut
        raise ParseError(TOOL, "the file ends in its cpu lines (cut?)", last_cpu_line)
    return ProcStat(tuple(cpus), total, ctxt, intr)


def _cpu_line(fields: list[str], line: str) -> CpuTimes:
    label = fields[0]
    if label == "cpu":
        cpu = None
    elif label[3:].isascii() and label[3:].isdigit():  # "cpu²" is not a CPU
        cpu = int(label[3:])
    else:
        raise ParseError(TOOL, f"unknown cpu label {label!r}", line)
    numbers = fields[1:]
    if not 4 <= len(numbers) <= len(FIELDS):
        raise ParseError(TOOL, f"{len(numbers)} time fields, expected 4 to {len(FIELDS)}", line)
    return CpuTimes(cpu, {name: parse_int(TOOL, n) for name, n in zip(FIELDS, numbers,
                                                                       strict=False)})


def _ms(ticks: int, user_hz: int) -> float:
    return ticks * 1000.0 / user_hz


def values(snapshot: ProcStat, *, user_hz: int = 100) -> list[Value]:
    out = [Value(name, _ms(t, user_hz), MS, row.cpu)
           for row in snapshot.cpus for name, t in row.ticks.items()]
    out += [Value(name, _ms(t, user_hz), MS) for name, t in snapshot.total.ticks.items()]
    if snapshot.ctxt is not None:
        out.append(Value("ctxt", snapshot.ctxt, COUNT))
    if snapshot.intr is not None:
        out.append(Value("intr", snapshot.intr, COUNT))
    return out


def delta(before: ProcStat, after: ProcStat, *, user_hz: int = 100) -> list[Value]:
    """Per-CPU time spent in each state during the trial, in ms, plus context switches.

    The aggregate line is not repeated here: totals over a CPU selection are derived by
    the caller from the per-CPU rows.
    """
    old = {row.cpu: row for row in before.cpus}
    out: list[Value] = []
    for row in after.cpus:
        prev = old.get(row.cpu)
        if prev is None:
            continue
        for name, ticks in row.ticks.items():
            if name in prev.ticks:
                out.append(Value(name, _ms(max(ticks - prev.ticks[name], 0), user_hz), MS, row.cpu))
    if before.ctxt is not None and after.ctxt is not None:
        out.append(Value("ctxt", after.ctxt - before.ctxt, COUNT))
    return out


class ProcStatCollector:
    name = "proc_stat"
    paths: tuple[str, ...] = ("/proc/stat",)
    options: Mapping[str, str] = {}
    headline: tuple[str, ...] = ("hardirq", "softirq")
    metrics: tuple[str, ...] = (*FIELDS, "ctxt", "intr")
    sections: Mapping[str, str] = {}
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "proc_stat": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> ProcStat:
        return parse(files[self.paths[0]])

    def delta(self, before: ProcStat, after: ProcStat,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return delta(before, after, user_hz=host.user_hz)
