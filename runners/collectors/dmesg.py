"""Kernel log lines matching named patterns, counted over a trial.

`dmesg` prints `[ seconds.micros] message`. A snapshot keeps every timestamped line;
the delta counts, per pattern, the lines logged after the last line of the first
snapshot (by timestamp, so a ring buffer that wrapped during the trial still counts
only new lines). Seed 001 counts `WARNING:.*do_softirq_post_smp_call_flush` this way:
one per WARN header, not per stack frame.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, ParseError, Value
from napilab.runners.collectors.collector import HostInfo

TOOL = "dmesg"
_LINE = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")


@dataclass(frozen=True)
class KernelLog:
    lines: tuple[tuple[float, str], ...]  # (timestamp seconds, message), in log order

    @property
    def last(self) -> float:
        return self.lines[-1][0] if self.lines else -1.0


def parse(text: str) -> KernelLog:
    """Lines without a timestamp (continuations, an empty log) are skipped; output
    with no timestamped line at all and text in it is not dmesg output."""
    lines = []
    for raw in text.splitlines():
        match = _LINE.match(raw)
        if match:
            lines.append((float(match[1]), match[2]))
    if not lines and text.strip() and "dmesg:" in text:
        raise ParseError(TOOL, "dmesg failed", text[:200])
    return KernelLog(tuple(lines))


def counts(log: KernelLog, patterns: Mapping[str, str], *, after: float = -1.0) -> list[Value]:
    out = []
    for name, pattern in patterns.items():
        regex = re.compile(pattern)
        hits = sum(1 for stamp, message in log.lines if stamp > after and regex.search(message))
        out.append(Value(name, hits, COUNT))
    return out


def delta(before: KernelLog, after: KernelLog, patterns: Mapping[str, str]) -> list[Value]:
    return counts(after, patterns, after=before.last)


def values(log: KernelLog) -> list[Value]:
    return [Value("lines", len(log.lines), COUNT)]


class DmesgCollector:
    """Options: `patterns: {name: regex}`, each name a metric; `since: boot` counts every
    line since the host booted (a fresh boot per trial, as seed 001's letter counts),
    else (`trial`) the lines logged during the trial."""

    name = "dmesg"
    paths: tuple[str, ...] = ("@dmesg",)
    options: Mapping[str, str] = {"patterns": "patterns", "since": "since"}
    headline: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ("*",)  # the names of its `patterns`
    # The snapshot before a window keeps only the log's last timestamped line: the
    # delta needs no more of it (`since: boot` counts the snapshot after alone), and a
    # host's whole log (134 KB, 2,043 lines here) was read, sent and parsed twice a
    # trial. A log with no timestamped line is sent as it is (an error says why).
    sections: Mapping[str, str] = {"@dmesg": """echo "==> @dmesg <=="
  if [ "$phase" = start ]; then dmesg 2>&1 | awk '/^\\[/ {l = $0; next} {o = o $0 "\\n"}
    END {if (l != "") print l; else printf "%s", o}'
  else dmesg; fi"""}
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "dmesg": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> KernelLog:
        return parse(files[self.paths[0]])

    def delta(self, before: KernelLog, after: KernelLog,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        if options.get("since") == "boot":
            return counts(after, options.get("patterns") or {})
        return delta(before, after, options.get("patterns") or {})
