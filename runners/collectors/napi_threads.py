"""NAPI kernel threads (napi/IFACE-ID, backlog_napi/N): where they ran, how they are
scheduled, and the CPU time they used during a trial: the cost side of threaded NAPI
and threaded busy polling.

A snapshot is one `/proc/PID/stat` line per thread. Fields after the `(comm)`:
state(3) ... utime(14) stime(15) ... processor(39) rt_priority(40) policy(41),
numbered as in proc(5); times are in USER_HZ ticks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, MS, ParseError, Value, parse_int
from napilab.runners.collectors.collector import HostInfo

TOOL = "napi_threads"
_STAT = re.compile(r"^(\d+) \((.*)\) (.*)$")
POLICIES = {0: "other", 1: "fifo", 2: "rr", 3: "batch", 5: "idle", 6: "deadline"}


@dataclass(frozen=True)
class Thread:
    pid: int
    comm: str
    ticks: int  # utime + stime
    cpu: int  # last CPU it ran on
    rt_priority: int
    policy: str


@dataclass(frozen=True)
class NapiThreads:
    threads: tuple[Thread, ...]


def parse(text: str) -> NapiThreads:
    threads = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _STAT.match(line.strip())
        if match is None:
            raise ParseError(TOOL, "not a /proc/PID/stat line", line)
        rest = match[3].split()
        if len(rest) < 39:
            raise ParseError(TOOL, f"{len(rest) + 2} stat fields, expected at least 41", line)
        # rest[0] is field 3 (state): field n is rest[n - 3]
        utime, stime = parse_int(TOOL, rest[11]), parse_int(TOOL, rest[12])
        threads.append(Thread(
            pid=parse_int(TOOL, match[1]), comm=match[2], ticks=utime + stime,
            cpu=parse_int(TOOL, rest[36]), rt_priority=parse_int(TOOL, rest[37]),
            policy=POLICIES.get(parse_int(TOOL, rest[38]), "unknown")))
    return NapiThreads(tuple(threads))


def _select(snapshot: NapiThreads, pattern: str | None) -> list[Thread]:
    regex = re.compile(pattern) if pattern else None
    return [t for t in snapshot.threads if regex is None or regex.search(t.comm)]


def values(snapshot: NapiThreads, *, pattern: str | None = None) -> list[Value]:
    threads = _select(snapshot, pattern)
    out = [Value("threads", len(threads), COUNT)]
    out += [Value("threads_realtime", sum(1 for t in threads if t.policy in ("fifo", "rr")),
                  COUNT)]
    return out


def delta(before: NapiThreads, after: NapiThreads, *, user_hz: int = 100,
          pattern: str | None = None) -> list[Value]:
    """CPU time of the threads alive at both snapshots, per CPU they last ran on (the
    total, cpu-less, is collectors.totals'; 0 ms, cpu-less, when no thread ran), plus
    how many there were and how many ran real-time."""
    old = {t.pid: t for t in _select(before, pattern)}
    per_cpu: dict[int, float] = {}
    for thread in _select(after, pattern):
        previous = old.get(thread.pid)
        if previous is None or previous.comm != thread.comm:
            continue
        spent = max(thread.ticks - previous.ticks, 0) * 1000.0 / user_hz
        per_cpu[thread.cpu] = per_cpu.get(thread.cpu, 0.0) + spent
    out = [Value("cpu_time", ms, MS, cpu) for cpu, ms in sorted(per_cpu.items())]
    if not out:  # no such thread: it cost nothing (a cost from 0 is a change, not n/a)
        out = [Value("cpu_time", 0.0, MS)]
    return out + values(after, pattern=pattern)


class NapiThreadsCollector:
    """Options: `match: REGEX` on the thread name (default: every napi/ and
    backlog_napi/ thread)."""

    name = "napi_threads"
    paths: tuple[str, ...] = ("@napi_threads",)
    options: Mapping[str, str] = {"match": "regex"}
    headline: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ("threads", "threads_realtime", "cpu_time")
    # the snapshot script's section: each thread's stat line
    sections: Mapping[str, str] = {"@napi_threads": """echo "==> @napi_threads <=="
  for p in /proc/[0-9]*; do read -r c < "$p/comm" 2>/dev/null || continue
    case "$c" in napi/*|backlog_napi/*) cat "$p/stat" 2>/dev/null;; esac; done"""}
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "napi_threads": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> NapiThreads:
        return parse(files[self.paths[0]])

    def delta(self, before: NapiThreads, after: NapiThreads,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return delta(before, after, user_hz=host.user_hz,
                     pattern=options.get("match"))
