"""Counter collectors: what one snapshot reads on a host, and the deltas between two.

All collectors of a host are read with one remote exec per snapshot, so a snapshot
costs one round trip however many collectors a profile enables. A collector names
files (`/proc/stat`) or sections made by a fixed command (`@dmesg`, `@napi_threads`,
`@kprobe_profile`); both come back under `==> NAME <==` headers. Deltas are computed
here, in Python, per CPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from napilab.runners.base import ParseError, Value

UPTIME = "/proc/uptime"


@dataclass(frozen=True)
class HostInfo:
    """Facts a collector needs to interpret a host's files."""

    user_hz: int = 100
    online_cpus: tuple[int, ...] | None = None


Snapshot = TypeVar("Snapshot")


class Collector(Protocol[Snapshot]):
    """Everything napilab knows of a collector is its class; `runners.registry` lists
    them. `paths`: the files a snapshot reads, or `@sections` whose shell text is in
    `sections` (it prints its own `==> @name <==` header); `options`: the profile keys
    it takes under `collect.NAME` and their kind (regex, names, patterns, functions,
    since, fields: harness.profile.sections checks them); `headline`: the metrics the A/B
    table shows of it when a profile has no `report.table`; `parsers`: the names
    `napilab parse NAME FILE` reads its file by."""

    name: str
    paths: tuple[str, ...]
    options: Mapping[str, str]
    headline: tuple[str, ...]
    metrics: tuple[str, ...]  # fnmatch patterns of every name it produces; "*": any
    sections: Mapping[str, str]
    parsers: Mapping[str, Callable[[str], list[Value]]]

    def parse(self, files: Mapping[str, str], host: HostInfo) -> Snapshot: ...

    def delta(self, before: Snapshot, after: Snapshot, options: Mapping[str, Any],
              host: HostInfo) -> list[Value]: ...


PHASES = ("start", "stop")  # the snapshot before a window, and the one after it


def snapshot_script(collectors: Iterable[Collector[Any]]) -> str:
    """The snapshot script of these collectors: a fixed text (runners.registry builds it
    once from every collector); the phase (`start` before the window, `stop` after it:
    a section that counts during the window, perf_stat, reads `$phase`), then the
    section names, `--` and the files are its positional parameters, never part of it.
    A section prints its own `==> @name <==` header; the files are read by one `tail`
    after the sections (one exec, not one a file: 7 ms of a snapshot's 17 here)."""
    cases = "".join(f"{name}) {body};;\n" for c in collectors
                    for name, body in c.sections.items())
    return (f'phase=$1; shift\n{_RUNS}for a do shift; case "$a" in\n--) break;;\n{cases}'
            'esac; done\n[ $# -eq 0 ] || exec tail -v -n +1 -- "$@"')


# `runs PID`, for the sections that wait on a process they started (perf_stat, trace):
# it exists, is not a zombie and takes signals. A host whose init reaps nothing (a
# container's shell; virtme-ng's init running its script on the console) leaves an
# ended one a zombie, which `kill -0` alone takes for running. Shell builtins only: an
# exec costs 60-100 ms in a TCG guest, and the loops call it every 50-100 ms.
_RUNS = ('runs() { read -r st < "/proc/$1/stat" 2>/dev/null || return 1; st=${st##*) }\n'
         '  [ "${st%% *}" != Z ] && kill -0 "$1" 2>/dev/null; }\n')


def snapshot_argv(collectors: Iterable[Collector[Any]], script: str,
                  phase: str = "stop", words: Mapping[str, str] | None = None) -> list[str]:
    """The one command that reads everything `collectors` need, plus uptime: plain
    `tail` when they read only files, the snapshot `script` otherwise. `words`: a
    section's argv word when it is more than its name (trace's `@trace:PROGRAM`: data,
    never part of the script)."""
    assert phase in PHASES, phase
    paths = [UPTIME]
    for collector in collectors:
        paths += [p for p in collector.paths if p not in paths]
    sections = [(words or {}).get(p, p) for p in paths if p.startswith("@")]
    if not sections:
        return ["tail", "-v", "-n", "+1", "--", *paths]
    files = [p for p in paths if not p.startswith("@")]
    return ["sh", "-c", script, "napilab-snapshot", phase, *sections, "--", *files]


_HEADER = re.compile(r"^==> (.+) <==$", re.MULTILINE)


def split_tail(text: str) -> dict[str, str]:
    """Split `tail -v` output into {path: content}. tail separates files by a blank
    line before each header after the first; that line is not part of the content."""
    headers = list(_HEADER.finditer(text))
    if not headers or headers[0].start() != 0:
        raise ParseError("snapshot", "output does not start with a `==> path <==` header",
                         text[:200])
    files: dict[str, str] = {}
    for i, match in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = text[match.end() + 1 : end]
        if i + 1 < len(headers) and body.endswith("\n\n"):
            body = body[:-1]
        files[match[1]] = body
    return files


def uptime_seconds(files: Mapping[str, str]) -> float:
    text = files.get(UPTIME, "")
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        raise ParseError("snapshot", "bad /proc/uptime", text) from None


def totals(values: Iterable[Value], cpus: Iterable[int] | None) -> list[Value]:
    """One cpu-less row per per-CPU metric: the sum over `cpus` (all CPUs when None)."""
    selected = set(cpus) if cpus is not None else None
    sums: dict[tuple[str, str], float] = {}
    for v in values:
        if v.cpu is None or (selected is not None and v.cpu not in selected):
            continue
        sums[(v.metric, v.unit)] = sums.get((v.metric, v.unit), 0.0) + v.value
    return [Value(metric, total, unit) for (metric, unit), total in sums.items()]
