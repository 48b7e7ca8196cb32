"""Metric names a profile writes (`metrics:`, `report.table`, `tune.goal`) against what
its workload tools and collectors produce: each class declares its names (`metrics`,
fnmatch patterns: runners.registry.metric_patterns), so `latency_p99` is checked
against neper's `latency_p*` and a misspelt `rtt_avgg` gets a did-you-mean at its line.

A name is `metric` (any source's) or `source.metric`. Names the kernel or the profile
gives (interrupts' rows, netstat's fields, the command tool's metrics: a `*` pattern)
cannot be known before a run: `source.metric` of such a source is accepted, and so is a
bare name in a profile with such a source. The CPU cost napilab derives (`cpu.*`,
reports.ab.cpu_cost) and pooled rows are not checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Any

from napilab.harness.errors import Location
from napilab.harness.grammar.schema import Checker, join, suggest
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.runners.registry import headline, metric_patterns

UNCHECKED = ("cpu", "pooled")  # derived from proc_stat by the report; pooled rows
# The CPU cost's names, which reports.ab.cpu_cost derives (harness never imports reports;
# tests/unit/test_profile_grammar.py checks these against its docstring)
CPU_COST = ("busy_cores", "busy_cores_*", "cores_*", "napi_thread_cores", "cpu_us_per_*", "ipc",
            "cycles_per_*")
IDLE = ".idle"  # a collector's rows measured with no load (workload.idle)


class Produced:
    """What the sources of a profile's variants produce."""

    def __init__(self, workloads: Iterable[str], collectors: Iterable[str]) -> None:
        self.workloads = sorted(set(workloads))
        self.sources = self.workloads + sorted(set(collectors) - set(self.workloads))
        self.patterns = {s: metric_patterns(s) or () for s in self.sources}
        self.open_workload = any("*" in self.patterns[s] for s in self.workloads)

    def names(self, sources: Iterable[str]) -> list[str]:
        """The literal names (and headlines) of SOURCES, for a did-you-mean."""
        found = [p for s in sources for p in (*self.patterns[s], *headline(s))
                 if not any(c in p for c in "*?[")]
        return list(dict.fromkeys(found))

    def produces(self, source: str, metric: str, *, literal_only: bool = False) -> bool:
        return any(fnmatchcase(metric, p) for p in (*self.patterns[source], *headline(source))
                   if not ((literal_only and p == "*") or (literal_only and p == "*.*")))

    def problem(self, name: str) -> str | None:
        """Why NAME (`metric` or `source.metric`, `@role` taken off) is produced by no
        source of the profile, or None."""
        for source in sorted([*self.sources, *UNCHECKED], key=len, reverse=True):
            base = source
            for candidate in (f"{source}{IDLE}", source):
                if name.startswith(f"{candidate}."):
                    metric = name[len(candidate) + 1:]
                    if base in UNCHECKED or self.produces(base, metric):
                        return None
                    return (f"{base} produces no {metric!r}"
                            f"{suggest(metric, self.names([base]))}")
        source = name.partition(".")[0]
        if metric_patterns(source) is not None and source not in self.sources:
            return (f"{source} is not a tool or collector of this profile (it has "
                    f"{', '.join(self.sources)})")
        if self.open_workload or any(self.produces(s, name, literal_only=True)
                                     for s in self.sources) \
                or any(fnmatchcase(name, p) for p in CPU_COST):
            return None
        if any("*" in self.patterns[s] or "*.*" in self.patterns[s] for s in self.sources):
            return None  # a counter the kernel names (softirqs' net_rx, an irq row)
        return (f"no tool or collector of this profile ({', '.join(self.sources)}) produces "
                f"{name!r}{suggest(name, self.names(self.sources))}")


def check_metric_names(check: Checker, document: Node, produced: Produced) -> None:
    """Every metric name of `metrics:`, `report.table` and `tune.goal`, at its line."""
    metrics = document.get("metrics")
    if isinstance(metrics, Node):
        for name in metrics:
            _check(check, produced, name, metrics.key_locations.get(name),
                   join("metrics", name))
    report = document.get("report")
    table = report.get("table") if isinstance(report, Node) else None
    for i, row in enumerate(table if isinstance(table, Seq) else ()):
        if not (isinstance(row, Node) and isinstance(row.get("source"), str)
                and isinstance(row.get("metric"), str)):
            continue
        source = row["source"].removesuffix(IDLE)
        known = [*produced.sources, *UNCHECKED]
        if source not in known:
            check.error(row.where("source"), join(join("report.table", i), "source"),
                        f"{row['source']!r} is not a tool or collector of this profile; "
                        f"expected one of {known}{suggest(source, known)}")
        else:
            _check(check, produced, f"{row['source']}.{row['metric']}", row.where("metric"),
                   join(join("report.table", i), "metric"))
    tune = document.get("tune")
    goal = tune.get("goal") if isinstance(tune, Node) else None
    if isinstance(goal, Node):
        for key, names in _goal_names(goal):
            for name in names:
                _check(check, produced, name.partition("@")[0], goal.where(key),
                       join("tune.goal", key))


def _goal_names(goal: Node) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for key in ("minimise", "maximise"):
        if isinstance(goal.get(key), str):
            out.append((key, [goal[key]]))
    if isinstance(goal.get("front"), Seq):
        out.append(("front", [n for n in goal["front"] if isinstance(n, str)]))
    if isinstance(goal.get("subject_to"), Node):
        out.append(("subject_to", list(goal["subject_to"])))
    return out


def _check(check: Checker, produced: Produced, name: str, where: Location | None,
           path: str) -> None:
    if (why := produced.problem(name)) is not None:
        check.error(where, path, why)


def sources_of(variants: Iterable[Any]) -> Produced:
    """The workload sources and collectors of the profile's variants."""
    variants = list(variants)
    return Produced((v.workload.source for v in variants),
                    (c.name for v in variants for c in v.collect))
