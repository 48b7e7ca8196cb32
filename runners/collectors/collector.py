"""Counter collectors: what one snapshot reads on a host, and the deltas between two.

All collectors of a host are read with one remote exec per snapshot, so a snapshot
costs one round trip however many collectors a profile enables. A collector names
files (`/proc/stat`) or sections made by a fixed command (`@dmesg`, `@napi_threads`,
`@kprobe_profile`); both come back under `==> NAME <==` headers. Deltas are computed
here, in Python, per CPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from napilab.runners.base import ParseError, Value
from napilab.runners.collectors import (
    dmesg,
    interrupts,
    kprobes,
    napi_threads,
    netstat,
    proc_stat,
    softirqs,
    softnet_stat,
)

UPTIME = "/proc/uptime"


@dataclass(frozen=True)
class HostInfo:
    """Facts a collector needs to interpret a host's files."""

    user_hz: int = 100
    online_cpus: tuple[int, ...] | None = None


Snapshot = TypeVar("Snapshot")


class Collector(Protocol[Snapshot]):
    name: str
    paths: tuple[str, ...]

    def parse(self, files: Mapping[str, str], host: HostInfo) -> Snapshot: ...

    def delta(self, before: Snapshot, after: Snapshot, options: Mapping[str, Any],
              host: HostInfo) -> list[Value]: ...


class SoftnetStatCollector:
    name = "softnet_stat"
    paths: tuple[str, ...] = ("/proc/net/softnet_stat",)

    def parse(self, files: Mapping[str, str], host: HostInfo) -> softnet_stat.SoftnetStat:
        online = list(host.online_cpus) if host.online_cpus is not None else None
        return softnet_stat.parse(files[self.paths[0]], online)

    def delta(self, before: softnet_stat.SoftnetStat, after: softnet_stat.SoftnetStat,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return softnet_stat.delta(before, after)


class InterruptsCollector:
    name = "interrupts"
    paths: tuple[str, ...] = ("/proc/interrupts",)

    def parse(self, files: Mapping[str, str], host: HostInfo) -> interrupts.Interrupts:
        return interrupts.parse(files[self.paths[0]])

    def delta(self, before: interrupts.Interrupts, after: interrupts.Interrupts,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return interrupts.delta(before, after, irq_pattern=options.get("irqs"))


class ProcStatCollector:
    name = "proc_stat"
    paths: tuple[str, ...] = ("/proc/stat",)

    def parse(self, files: Mapping[str, str], host: HostInfo) -> proc_stat.ProcStat:
        return proc_stat.parse(files[self.paths[0]])

    def delta(self, before: proc_stat.ProcStat, after: proc_stat.ProcStat,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return proc_stat.delta(before, after, user_hz=host.user_hz)


class SoftirqsCollector:
    """Options: `names: [NET_RX, NET_TX]` keeps those softirqs (default: all). Only
    online CPUs are reported when the host's online list is known: the file also has
    columns for possible-but-offline CPUs, which never move."""

    name = "softirqs"
    paths: tuple[str, ...] = ("/proc/softirqs",)

    def parse(self, files: Mapping[str, str], host: HostInfo) -> softirqs.Softirqs:
        return softirqs.parse(files[self.paths[0]])

    def delta(self, before: softirqs.Softirqs, after: softirqs.Softirqs,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        names = options.get("names")
        return softirqs.delta(before, after, names=list(names) if names is not None else None,
                              cpus=host.online_cpus)


class DmesgCollector:
    """Options: `patterns: {name: regex}`, each name a metric; `since: boot` counts every
    line since the host booted (a fresh boot per trial, as seed 001's letter counts),
    else (`trial`) the lines logged during the trial."""

    name = "dmesg"
    paths: tuple[str, ...] = ("@dmesg",)

    def parse(self, files: Mapping[str, str], host: HostInfo) -> dmesg.KernelLog:
        return dmesg.parse(files[self.paths[0]])

    def delta(self, before: dmesg.KernelLog, after: dmesg.KernelLog,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        if options.get("since") == "boot":
            return dmesg.counts(after, options.get("patterns") or {})
        return dmesg.delta(before, after, options.get("patterns") or {})


class NapiThreadsCollector:
    """Options: `match: REGEX` on the thread name (default: every napi/ and
    backlog_napi/ thread)."""

    name = "napi_threads"
    paths: tuple[str, ...] = ("@napi_threads",)

    def parse(self, files: Mapping[str, str], host: HostInfo) -> napi_threads.NapiThreads:
        return napi_threads.parse(files[self.paths[0]])

    def delta(self, before: napi_threads.NapiThreads, after: napi_threads.NapiThreads,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return napi_threads.delta(before, after, user_hz=host.user_hz,
                                  pattern=options.get("match"))


class KprobesCollector:
    """Options: `functions: [name, ...]`; the engine creates their kprobe events."""

    name = "kprobes"
    paths: tuple[str, ...] = ("@kprobe_profile",)

    def parse(self, files: Mapping[str, str], host: HostInfo) -> kprobes.KprobeProfile:
        return kprobes.parse(files[self.paths[0]])

    def delta(self, before: kprobes.KprobeProfile, after: kprobes.KprobeProfile,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        return kprobes.delta(before, after, list(options.get("functions") or []))


class NetstatCollector:
    """Both files of the kernel's SNMP counters as one snapshot, `Protocol.Field` each.
    Options: `names: [TcpExt.BusyPollRxPackets, Tcp]` keeps those fields, or every field
    of a protocol (default: all)."""

    name = "netstat"
    paths: tuple[str, ...] = ("/proc/net/netstat", "/proc/net/snmp")

    def parse(self, files: Mapping[str, str], host: HostInfo) -> netstat.Netstat:
        return netstat.merge(*(netstat.parse(files[path]) for path in self.paths))

    def delta(self, before: netstat.Netstat, after: netstat.Netstat,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        names = options.get("names")
        return netstat.delta(before, after, names=list(names) if names is not None else None)


COLLECTORS: dict[str, Collector[Any]] = {
    "softnet_stat": SoftnetStatCollector(),
    "interrupts": InterruptsCollector(),
    "proc_stat": ProcStatCollector(),
    "softirqs": SoftirqsCollector(),
    "dmesg": DmesgCollector(),
    "napi_threads": NapiThreadsCollector(),
    "kprobes": KprobesCollector(),
    "netstat": NetstatCollector(),
}


# The snapshot script: a fixed text; files and section names are its positional
# parameters, never part of it. A section prints its own `==> @name <==` header.
SNAPSHOT_SCRIPT = """for a do case "$a" in
@dmesg) echo "==> @dmesg <=="; dmesg;;
@napi_threads) echo "==> @napi_threads <=="
  for p in /proc/[0-9]*; do read -r c < "$p/comm" 2>/dev/null || continue
    case "$c" in napi/*|backlog_napi/*) cat "$p/stat" 2>/dev/null;; esac; done;;
@kprobe_profile) for f in /sys/kernel/tracing /sys/kernel/debug/tracing; do
  if [ -r "$f/kprobe_profile" ]; then echo "==> @kprobe_profile <=="
    cat "$f/kprobe_profile"; break; fi; done;;
*) tail -v -n +1 -- "$a";;
esac; done"""


def snapshot_argv(names: Iterable[str]) -> list[str]:
    """The one command that reads everything the named collectors need, plus uptime:
    plain `tail` when they read only files, the snapshot script otherwise."""
    paths = [UPTIME]
    for name in names:
        paths += [p for p in COLLECTORS[name].paths if p not in paths]
    if not any(p.startswith("@") for p in paths):
        return ["tail", "-v", "-n", "+1", "--", *paths]
    return ["sh", "-c", SNAPSHOT_SCRIPT, "napilab-snapshot", *paths]


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
