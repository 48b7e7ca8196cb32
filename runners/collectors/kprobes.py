"""Hit counts of kernel functions through kprobe events (tracefs `kprobe_profile`).

napilab creates one event per function for the trial (`p:napilab_<function> <function>`
in kprobe_events, then enables it), reads `kprobe_profile` before and after the load,
and removes the events afterwards; creation goes through the settings journal, so a
crashed run's probes are removed by `napilab restore`. A function the kernel cannot
probe (absent in this build: seed 001's kick_defer_list_purge on the baseline kernel)
is reported as absent, never as 0 hits.

kprobe_profile lines: `  EVENT_NAME   HITS   MISSES` (whitespace-aligned).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, ParseError, Value, parse_int
from napilab.runners.collectors.collector import HostInfo

TOOL = "kprobes"
PREFIX = "napilab_"
_FUNCTION = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,100}")


def event_name(function: str) -> str:
    """kprobe event names allow [A-Za-z0-9_]; '.' (e.g. `foo.cold`) becomes '_'."""
    return PREFIX + function.replace(".", "_")


def valid_function(name: str) -> bool:
    return bool(_FUNCTION.fullmatch(name))


@dataclass(frozen=True)
class KprobeProfile:
    hits: dict[str, int]  # event name -> hits
    misses: dict[str, int]


def parse(text: str) -> KprobeProfile:
    hits: dict[str, int] = {}
    misses: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3:
            raise ParseError(TOOL, "expected `EVENT HITS MISSES`", line)
        hits[fields[0]] = parse_int(TOOL, fields[1])
        misses[fields[0]] = parse_int(TOOL, fields[2])
    return KprobeProfile(hits, misses)


def delta(before: KprobeProfile, after: KprobeProfile, functions: list[str]) -> list[Value]:
    """Hits per function during the trial; a function without an event is left out
    (absent), and its absence is recorded by the engine from the settings."""
    out = []
    for function in functions:
        name = event_name(function)
        if name in after.hits and name in before.hits:
            out.append(Value(function, after.hits[name] - before.hits[name], COUNT))
    return out


def values(profile: KprobeProfile) -> list[Value]:
    return [Value(name, hits, COUNT) for name, hits in profile.hits.items()]


class KprobesCollector:
    """Options: `functions: [name, ...]`; the engine creates their kprobe events."""

    name = "kprobes"
    paths: tuple[str, ...] = ("@kprobe_profile",)
    options: Mapping[str, str] = {"functions": "functions"}
    headline: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ("*",)  # one per kernel function probed
    # tracefs where it is mounted, else under debugfs; no header when neither has it
    sections: Mapping[str, str] = {"@kprobe_profile": """\
for f in /sys/kernel/tracing /sys/kernel/debug/tracing; do
  if [ -r "$f/kprobe_profile" ]; then echo "==> @kprobe_profile <=="
    cat "$f/kprobe_profile"; break; fi; done"""}
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "kprobes": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> KprobeProfile:
        return parse(files[self.paths[0]])

    def delta(self, before: KprobeProfile, after: KprobeProfile,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return delta(before, after, list(options.get("functions") or []))
