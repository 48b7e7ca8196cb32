"""/proc/interrupts: device IRQs and arch interrupt lines (IPIs) per online CPU.

The header names one column per online CPU. Each row is `NAME:` then one count per CPU
and a free-form description (chip, hwirq, flow, actions; arch rows: a sentence such as
"Function call interrupts"). Spacing changed in 2024-2025 kernels, so rows are split on
whitespace, never on fixed columns. x86 `ERR`/`MIS` and arm64 `Err` carry one total;
every other row must have exactly one count per CPU and a description, or the file is
refused (a cut or widened line is not guessed at).
arm64 numbers its IPIs (`IPI1:`) differently across versions: arch rows are named by
their description ("Function call interrupts" -> `function_call_interrupts`), which is
the same on x86 (`CAL`) and arm64 (`IPI1`). Device IRQs are named `irq_<N>`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, ParseError, Value, parse_int
from napilab.runners.collectors.collector import HostInfo

TOOL = "interrupts"
_CPU = re.compile(r"CPU(\d+)")
_U32 = 1 << 32
# Rows the kernel prints as one total, not one count per CPU: x86 arch_show_interrupts
# (ERR, MIS), arm/arm64 (Err).
TOTALS = ("ERR", "MIS", "Err")


@dataclass(frozen=True)
class InterruptRow:
    name: str  # "38", "CAL", "IPI1", "ERR"
    counts: tuple[int, ...]  # one per CPU of the header; one total for ERR/MIS
    description: str

    @property
    def metric(self) -> str:
        if self.name.isdigit():
            return f"irq_{self.name}"
        words = re.findall(r"[a-z0-9]+", self.description.lower())
        return "_".join(words) if words else self.name.lower()

    @property
    def is_device(self) -> bool:
        return self.name.isdigit()


@dataclass(frozen=True)
class Interrupts:
    cpus: tuple[int, ...]
    rows: tuple[InterruptRow, ...]

    def row(self, name: str) -> InterruptRow | None:
        return next((r for r in self.rows if r.name == name), None)


def parse(text: str) -> Interrupts:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ParseError(TOOL, "empty file", text)
    header = lines[0].split()
    cpus = tuple(parse_int(TOOL, m[1]) for tok in header if (m := _CPU.fullmatch(tok)))
    if not cpus or len(cpus) != len(header):
        raise ParseError(TOOL, "first line is not a CPU header", lines[0])
    rows = [_row(line, len(cpus)) for line in lines[1:]]
    return Interrupts(cpus, tuple(rows))


def _row(line: str, ncpu: int) -> InterruptRow:
    """One row, exactly: as many counts as the header has CPUs, then a description;
    the single totals (TOTALS) one count and nothing else. Anything else is a cut or
    widened line, refused rather than read as another row (`CAL: 1030` under two CPUs
    is not a total, and a third count is not the start of a description)."""
    name, sep, rest = line.partition(":")
    name = name.strip()
    if not sep or not name or " " in name:
        raise ParseError(TOOL, "row does not start with 'NAME:'", line)
    tokens = rest.split()
    counts: list[int] = []
    for token in tokens:
        # isascii(): str.isdigit() is true for "²", which int() refuses.
        if not (token.isascii() and token.isdigit()):
            break
        counts.append(int(token))
    description = " ".join(tokens[len(counts):])
    if name in TOTALS:
        if len(counts) != 1 or description:
            raise ParseError(TOOL, f"row {name} is a single total; it has {len(counts)} "
                             f"counts{' and text' if description else ''}", line)
    elif len(counts) != ncpu:
        raise ParseError(TOOL, f"row {name} has {len(counts)} counts for {ncpu} CPUs", line)
    elif not description:
        raise ParseError(TOOL, f"row {name} ends after its counts: no description (cut?)",
                         line)
    return InterruptRow(name, tuple(counts), description)


def values(snapshot: Interrupts) -> list[Value]:
    out: list[Value] = []
    for row in snapshot.rows:
        if row.name not in TOTALS:
            out.extend(Value(row.metric, n, COUNT, cpu) for cpu, n in zip(snapshot.cpus, row.counts,
                                                                          strict=True))
        else:
            out.append(Value(row.metric, row.counts[0], COUNT))
    return out


def delta(before: Interrupts, after: Interrupts, *, irq_pattern: str | None = None) -> list[Value]:
    """Per-CPU increases of arch rows, and of device IRQs that match `irq_pattern`
    (a regex searched in the row's description) or, without a pattern, that moved.

    An IRQ that appeared or vanished during the trial is left out; counts are
    `unsigned int` in the kernel, so a decrease is a wrap.
    """
    pattern = re.compile(irq_pattern) if irq_pattern else None
    old_rows = {r.name: r for r in before.rows}
    old_index = {cpu: i for i, cpu in enumerate(before.cpus)}
    out: list[Value] = []
    for row in after.rows:
        old = old_rows.get(row.name)
        if old is None:
            continue
        if row.name in TOTALS:
            out.append(Value(row.metric, (row.counts[0] - old.counts[0]) % _U32, COUNT))
            continue
        diffs = []
        for cpu, n in zip(after.cpus, row.counts, strict=True):
            i = old_index.get(cpu)
            if i is not None and i < len(old.counts):
                diffs.append(Value(row.metric, (n - old.counts[i]) % _U32, COUNT, cpu))
        if row.is_device:
            if pattern is not None and not pattern.search(row.description):
                continue
            if pattern is None and not any(d.value for d in diffs):
                continue
        out.extend(diffs)
    return out


class InterruptsCollector:
    name = "interrupts"
    paths: tuple[str, ...] = ("/proc/interrupts",)
    options: Mapping[str, str] = {"irqs": "regex"}
    headline: tuple[str, ...] = ("function_call_interrupts", "rescheduling_interrupts")
    metrics: tuple[str, ...] = ("*",)  # irq_N and the architecture's named rows
    sections: Mapping[str, str] = {}
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "interrupts": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> Interrupts:
        return parse(files[self.paths[0]])

    def delta(self, before: Interrupts, after: Interrupts,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return delta(before, after, irq_pattern=options.get("irqs"))
