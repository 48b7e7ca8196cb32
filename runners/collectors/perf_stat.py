"""perf stat: cycles, instructions, context switches and CPU migrations per CPU over a
trial, counted by Debian's linux-perf (`perf stat -x, -a -A`).

Unlike the other collectors, perf counts *during* the trial: the snapshot before the
workload starts `perf stat -x, -a -A -e EVENTS --timeout 900000 -o FILE` in the
background on the host (its PID and output under /var/tmp/napilab, napilab's only
directory there), and the snapshot after stops it with SIGINT and prints the file, so
the counts cover exactly the snapshot window. The timeout ends a perf that a killed run
left behind after 15 minutes; the next start stops any it finds first.

Output (perf-stat(1), "CSV FORMAT", with `-A`): comment lines (`# started on ...`) and
one line per CPU and event, `CPU<n>,<value>,<unit>,<event>,<run time>,<percentage>,
<metric value>,<metric unit>`. `<not supported>` (no PMU: most VMs, TCG guests, this
project's machine) and `<not counted>` leave the event out; a line of another shape, a
CPU label that is not `CPU<n>`, or a value that is not a number is refused.

Refusals are said at the start, naming the cause: perf not installed (Debian:
linux-perf), `kernel.perf_event_paranoid` above 0 for a user who is not root (counting
all CPUs needs it at 0 or below, or CAP_PERFMON), or perf exiting at once (its stderr).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from napilab.harness.errors import NapilabError
from napilab.runners.base import COUNT, MS, ParseError, Value, parse_float
from napilab.runners.collectors.collector import HostInfo

TOOL = "perf_stat"
SECTION = "@perf_stat"
EVENTS = ("cycles", "instructions", "context-switches", "cpu-migrations", "cpu-clock")
HARDWARE = ("cycles", "instructions")
TIMEOUT_MS = 900_000
STARTED = "started"
_ABSENT = ("<not supported>", "<not counted>")
_UNITS = {"msec": MS, "": COUNT}


class PerfRefused(NapilabError):
    """perf cannot count on this host: the reason names what to change."""


@dataclass(frozen=True)
class PerfStat:
    """Counts per (event, cpu) over the window; `absent`: events perf could not count."""

    counts: Mapping[tuple[str, int], float] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)
    absent: tuple[str, ...] = ()


@dataclass(frozen=True)
class Started:
    """The snapshot before the workload: perf was started."""


def metric(event: str) -> str:
    return event.replace("-", "_")


def parse(text: str) -> PerfStat:
    counts: dict[tuple[str, int], float] = {}
    units: dict[str, str] = {}
    absent: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) != 8:
            raise ParseError(TOOL, f"{len(fields)} fields, expected 8 (CPU, value, unit, "
                             "event, run time, percentage, metric, metric unit): a cut or "
                             "widened line, or perf stat run without -A", line)
        label, value, unit, event = fields[:4]
        if not (label.startswith("CPU") and label[3:].isascii() and label[3:].isdigit()):
            raise ParseError(TOOL, f"CPU label {label!r}, expected CPU<n>", line)
        if value in _ABSENT:
            if event not in absent:
                absent.append(event)
            continue
        if unit not in _UNITS:
            raise ParseError(TOOL, f"unit {unit!r} of {event}, expected msec or none", line)
        number = parse_float(TOOL, value)
        if not math.isfinite(number) or number < 0:
            raise ParseError(TOOL, f"{event} value {value!r}", line)
        key = (event, int(label[3:]))
        if key in counts:
            raise ParseError(TOOL, f"{event} twice for {label}", line)
        counts[key] = number
        units[event] = _UNITS[unit]
    if not counts and not absent:
        raise ParseError(TOOL, "no counter line (perf stat printed nothing it counted)",
                         text[:200])
    return PerfStat(counts, units, tuple(absent))


def values(snapshot: PerfStat) -> list[Value]:
    """Per-CPU counts, and `hardware_events`: how many of cycles and instructions perf
    counted (0: no PMU, software events only)."""
    out = [Value(metric(event), number, snapshot.units[event], cpu)
           for (event, cpu), number in sorted(snapshot.counts.items())]
    counted = {event for event, _ in snapshot.counts}
    out.append(Value("hardware_events", sum(1 for e in HARDWARE if e in counted), COUNT))
    return out


def read_section(text: str, *, host: str = "the host") -> PerfStat | Started:
    """A snapshot's @perf_stat section: `started`, a refusal, or the counts."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if first.startswith("refused: "):
        raise PerfRefused(f"perf_stat on {host}: {first.removeprefix('refused: ')}",
                          hint="remove perf_stat from the profile's collect:, or fix the "
                               "host as the message says")
    if first == STARTED:
        return Started()
    return parse(text)


_SCRIPT = f"""echo "==> {SECTION} <=="
  d=/var/tmp/napilab; p=$d/perf_stat.pid; o=$d/perf_stat.csv; e=$d/perf_stat.err
  if [ -f "$p" ]; then old=$(cat "$p"); rm -f "$p"; else old=; fi
  if [ "$phase" = start ]; then
    [ -n "$old" ] && kill -INT "$old" 2>/dev/null
    if ! command -v perf >/dev/null 2>&1; then
      echo "refused: perf is not installed (Debian: apt-get install linux-perf)"
    elif [ "$(id -u)" != 0 ] && [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -gt 0 ]; then
      echo "refused: kernel.perf_event_paranoid is $(cat /proc/sys/kernel/perf_event_paranoid);\
 counting every CPU as a user who is not root needs it at 0 or below (sysctl\
 kernel.perf_event_paranoid=0), or CAP_PERFMON"
    else
      mkdir -p -m 0700 "$d"; rm -f "$o" "$e"
      perf stat -x, -a -A -e {",".join(EVENTS)} --timeout {TIMEOUT_MS} -o "$o" \\
        </dev/null >/dev/null 2>"$e" &
      pid=$!; echo "$pid" > "$p"; n=0
      while [ $n -lt 150 ] && runs "$pid" &&
        ! ls -l "/proc/$pid/fd" 2>/dev/null | grep -q 'perf_event'; do
        sleep 0.1; n=$((n+1)); done
      if runs "$pid"; then echo {STARTED}
      else rm -f "$p"
        echo "refused: perf stat exited at once: $(tr '\\n' ' ' < "$e" | cut -c1-300)"
      fi
    fi
  elif [ -n "$old" ]; then
    kill -INT "$old" 2>/dev/null; n=0
    while runs "$old" && [ $n -lt 50 ]; do sleep 0.1; n=$((n+1)); done
    cat "$o" 2>/dev/null; rm -f "$o" "$e"
  else echo "refused: no perf stat was running (the snapshot before the workload did not\
 start one)"; fi"""


class PerfStatCollector:
    """Options: none; `cpus:` (every collector's) selects the CPUs of its totals, e.g.
    the workload's."""

    name = "perf_stat"
    paths: tuple[str, ...] = (SECTION,)
    options: Mapping[str, str] = {}
    headline: tuple[str, ...] = ("cycles", "instructions", "context_switches", "cpu_migrations")
    metrics: tuple[str, ...] = (*(metric(event) for event in EVENTS), "hardware_events")
    sections: Mapping[str, str] = {SECTION: _SCRIPT}
    counts_during = True  # started by a window's first snapshot: a failed trial stops it
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "perf_stat": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> PerfStat | Started:
        return read_section(files[SECTION])

    def delta(self, before: PerfStat | Started, after: PerfStat | Started,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        """perf counted over the window: the snapshot after holds the counts."""
        if not isinstance(after, PerfStat):
            raise ParseError(TOOL, "the snapshot after the workload holds no counts")
        return values(after)
