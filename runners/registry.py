"""Every workload tool and every collector napilab knows, by the name profiles and
`napilab parse` use. A tool or a collector is one class, which carries all napilab
knows of it (docs/design.md, "Extending"); adding one is its class and a line here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from napilab.runners.base import ParseError, Value
from napilab.runners.collectors import (
    collector,
    dmesg,
    ethtool_stats,
    interrupts,
    kprobes,
    napi_threads,
    netstat,
    perf_stat,
    proc_stat,
    qstats,
    softirqs,
    softnet_stat,
)
from napilab.runners.collectors.collector import Collector
from napilab.runners.collectors.trace import trace
from napilab.runners.workloads import (
    command,
    iperf3,
    mutilate,
    netperf,
    ping,
    pktgen,
    sockperf,
)
from napilab.runners.workloads.neper import neper
from napilab.runners.workloads.neper import options as neper_options
from napilab.runners.workloads.workload import WorkloadTool

T = TypeVar("T", WorkloadTool, Collector[Any])


def _by_name(*items: T) -> dict[str, T]:
    out: dict[str, T] = {}
    for item in items:
        name = item.name
        assert name not in out, f"two of {name!r}"
        out[name] = item
    return out


TOOLS: dict[str, WorkloadTool] = _by_name(
    ping.PingTool(),
    *(neper.NeperTool(binary) for binary in neper_options.BINARIES),
    iperf3.Iperf3Tool(),
    *(sockperf.SockperfTool(mode) for mode in sockperf.MODES),
    *(netperf.NetperfTool(test) for test in netperf.TESTS),
    command.CommandTool(),
    pktgen.PktgenTool(),
    mutilate.MutilateTool(),
)

# In this order: the snapshot script's sections follow it.
COLLECTORS: dict[str, Collector[Any]] = _by_name(
    softnet_stat.SoftnetStatCollector(),
    interrupts.InterruptsCollector(),
    proc_stat.ProcStatCollector(),
    softirqs.SoftirqsCollector(),
    dmesg.DmesgCollector(),
    napi_threads.NapiThreadsCollector(),
    kprobes.KprobesCollector(),
    netstat.NetstatCollector(),
    perf_stat.PerfStatCollector(),
    qstats.QstatsCollector(),
    ethtool_stats.EthtoolStatsCollector(),
    trace.TraceCollector(),
)


# `napilab parse NAME FILE`: text -> values (collectors give absolute per-CPU values);
# a workload tool's name parses its output too (`napilab parse neper.tcp_rr FILE`).
PARSERS: dict[str, Callable[[str], list[Value]]] = {
    name: parser for parsers in (*(t.parsers for t in TOOLS.values()),
                                 *(c.parsers for c in COLLECTORS.values()))
    for name, parser in parsers.items()}
PARSERS |= {name: PARSERS[name.split(".")[0]] for name in TOOLS
            if name not in PARSERS and name.split(".")[0] in PARSERS}


def snapshot_script() -> str:
    """The one script every snapshot with an `@section` runs: a fixed text, the sections
    of every registered collector."""
    return collector.snapshot_script(COLLECTORS.values())


def snapshot_argv(names: Iterable[str], phase: str = "stop",
                  options: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """The one command that reads what the named collectors need (and uptime);
    `phase`: `start` for the snapshot before a window, `stop` after it; `options`: each
    collector's profile options, for a section whose argv word carries data (trace)."""
    chosen = [COLLECTORS[name] for name in names]
    words = {c.paths[0]: c.word((options or {}).get(c.name, {}), phase)
             for c in chosen if hasattr(c, "word")}
    return collector.snapshot_argv(chosen, snapshot_script(), phase, words)


def snapshot_timeout(names: Iterable[str], phase: str) -> float:
    """How long a snapshot of these collectors may take: 60 s, or longer where one says
    (trace's bpftrace attaches its probes in the snapshot before the window)."""
    asked = [float(getattr(COLLECTORS[n], "seconds", {}).get(phase, 0)) for n in names]
    return max([60.0, *asked])


def snapshot_hostscript(names: Iterable[str]) -> str | None:
    """The host script a snapshot of these collectors sends on its stdin (a collector's
    optional `hostscript`, a file of harness/knobs/kinds/hostscripts/), or None."""
    found = {getattr(COLLECTORS[name], "hostscript", None) for name in names} - {None}
    assert len(found) <= 1, f"one snapshot has one stdin: {sorted(map(str, found))}"
    return next(iter(found), None)


def counting(names: Iterable[str]) -> list[str]:
    """The collectors among `names` that count through a window (perf_stat): started by
    its first snapshot, they must be stopped when a trial ends without its last."""
    return [n for n in names if getattr(COLLECTORS[n], "counts_during", False)]


def snapshot_phase(when: str) -> str:
    """The phase of a trial's snapshot by its name (`before`, `idle-after`, ...)."""
    return "start" if when.endswith("before") else "stop"


def headline(source: str) -> tuple[str, ...]:
    """A workload source's headline metrics (`neper` for neper.tcp_rr), or a
    collector's: what the A/B table shows, and for a workload what is judged, when a
    profile names nothing."""
    tool = next((t for name, t in TOOLS.items() if name.split(".")[0] == source), None)
    if tool is not None:
        return tuple(tool.headline)
    collector = COLLECTORS.get(source)
    return tuple(collector.headline) if collector is not None else ()


def metric_patterns(source: str) -> tuple[str, ...] | None:
    """The fnmatch patterns of every metric a workload source (`neper` for neper.tcp_rr,
    over all its tools) or a collector produces, from each class's `metrics`; None for
    a source napilab does not know."""
    found = [p for name, tool in TOOLS.items() if name.split(".")[0] == source
             for p in tool.metrics]
    if source in COLLECTORS:
        found += COLLECTORS[source].metrics
    return tuple(dict.fromkeys(found)) if found or source in COLLECTORS else None


def operations(source: str) -> dict[str, list[str]]:
    """A workload source's operations: name (transaction, message, packet, MB) -> the
    metrics that count it, over every tool of that source (neper.tcp_rr and
    neper.tcp_stream count different ones)."""
    out: dict[str, list[str]] = {}
    for name, tool in TOOLS.items():
        if name.split(".")[0] == source:
            for op, metrics in tool.operations.items():
                found = out.setdefault(op, [])
                found += [m for m in metrics if m not in found]
    return out


def programs() -> tuple[str, ...]:
    """Every program a workload tool runs, in the registry's order."""
    return tuple(dict.fromkeys(p for tool in TOOLS.values() for side in ("client", "server")
                               for p in tool.programs(side)))


def version_argv() -> dict[str, tuple[str, ...] | None]:
    """program -> the argv printing its version (None: none; its sha256 stands for it)."""
    return {p: argv for tool in TOOLS.values() for p, argv in tool.versions.items()}


def metrics_json(tool: str, values: Iterable[Value]) -> dict[str, Any]:
    """The `napilab parse TOOL FILE --json` document: {"tool", "metrics", "units"},
    per-CPU values named `metric.cpuN`. Two values with one name are a parser bug."""
    metrics: dict[str, float] = {}
    units: dict[str, str] = {}
    for value in values:
        name = value.metric if value.cpu is None else f"{value.metric}.cpu{value.cpu}"
        if name in metrics:
            raise ParseError(tool, f"two values named {name!r}")
        metrics[name] = value.value
        units[name] = value.unit
    return {"tool": tool, "metrics": metrics, "units": units}
