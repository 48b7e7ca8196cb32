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
from dataclasses import dataclass

from napilab.runners.base import COUNT, ParseError, Value, parse_int

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
