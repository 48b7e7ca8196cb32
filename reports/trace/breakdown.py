"""Where the microseconds went: the trace collector's stages of the receive path per
comparison of a run (issue 39, item 3; docs/trace.md).

Per comparison (baseline A, variant B) of the profile, from the traced trials: the
twins `A+traced` and `B+traced` (`collect: trace: {traced: twins}`, the default), or A
and B themselves when every trial is traced. Per role traced and per stage present in
either arm: A's and B's p50 and p99 (the median over repetitions of each trial's
value), the change of each with its 95% CI across repetitions, the events per CPU
where the CPUs differ (a stage with events in B and none in A is "new in B"), and the
stages a host's kernel lacks with the probe it lacks (read from the stored snapshots,
where the collector says so: such a stage has no row at all).

A change is in the stage's own unit (us, or packets for the *_work stages) and comes
from harness.stats.compare.evidence on the absolute scale: Welch's t on the raw values
below 10 repetitions per arm (the difference of means and Welch's interval), the
Hodges-Lehmann shift with its Moses interval from 10 (reports.ab's rule for counters),
so the estimate is always inside its interval; format_number rounds monotonically, so
the printed estimate stays inside the printed interval. A stage "moved" when its CI
excludes 0.

The attribution sets the stages that moved beside the end-to-end change of the
untraced variants' first primary metric with a time unit (the workload's latency):
stages overlap (irq_to_softirq contains softirq_raise's wait) and some count per
event rather than per packet, so their sum is shown as a sum, never as a
decomposition, and the line says when it exceeds or falls short of the end-to-end
change.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from napilab.harness.stats.compare import MetricSamples, evidence
from napilab.harness.stats.stats import StatsError
from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Table
from napilab.runners.base import ParseError
from napilab.runners.collectors.collector import split_tail
from napilab.runners.collectors.trace import program
from napilab.runners.collectors.trace.histogram import Histogram, merge
from napilab.runners.collectors.trace.trace import SECTION, Trace, parse

SOURCE = "trace"
SNAPSHOT = "snapshot-after.out"
TIME_UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
_TAIL = re.compile(r"p9\d|max|tail")
Hist = Histogram  # for reports.plots.stages, which imports no runners module


def twin_of(run: RunData, variant: str) -> str | None:
    """The variant whose trials traced `variant`: its twin (RunData.twins, the
    manifest's record; `V+traced`), or V itself when its own trials carry the trace
    collector (`traced: all`); None when neither has trace rows."""
    traced = _traced_variants(run)
    twins = [t for t, v in run.twins.items() if v == variant]
    for name in (*twins, variant):
        if name in traced:
            return name
    return None


def is_twin(run: RunData, variant: str) -> bool:
    """A traced twin (RunData.twins): never a side of a comparison of its own."""
    return variant in run.twins


def _traced_variants(run: RunData) -> set[str]:
    frame = run.samples
    if not len(frame) or "source" not in frame:
        return set()
    return {str(v) for v in frame.loc[frame["source"] == SOURCE, "variant"].unique()}


def has_trace(run: RunData) -> bool:
    return bool(_traced_variants(run))


@dataclass(frozen=True)
class Change:
    """B - A of one stage statistic across repetitions, in the stage's unit."""

    estimate: float
    low: float
    high: float
    method: str

    @property
    def moved(self) -> bool:
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class CpuCounts:
    cpu: int
    a: float  # median events per trial on this CPU
    b: float


@dataclass(frozen=True)
class KeyCounts:
    """A stage's events on one key (an IRQ, a NAPI, a cross-CPU call's function), the
    median per traced trial of each arm: listed where one arm has none (or 20x fewer),
    so a queue whose IRQ-to-softirq path a setting removed (threaded busy poll) is
    named."""

    key: str  # `IRQ 48 virtio10-input.3`, `NAPI 8197 data0`, `rps_trigger_softirq`
    a: float
    b: float


@dataclass(frozen=True)
class StageRow:
    """One stage of one traced role in one comparison."""

    role: str
    stage: str
    unit: str  # us | packets
    a_p50: float | None
    b_p50: float | None
    a_p99: float | None
    b_p99: float | None
    a_events: float | None  # median events per trial; None: the stage is absent there
    b_events: float | None
    p50: Change | None
    p99: Change | None
    cpus: tuple[CpuCounts, ...] = ()  # only where a CPU has events in one arm only

    @property
    def status(self) -> str:
        """both | new in B | gone in B | absent in A | absent in B | no events."""
        if self.a_events is None:
            return "absent in A"
        if self.b_events is None:
            return "absent in B"
        if self.a_events == 0 and self.b_events > 0:
            return "new in B"
        if self.b_events == 0 and self.a_events > 0:
            return "gone in B"
        return "no events" if self.a_events == self.b_events == 0 else "both"


@dataclass(frozen=True)
class Attribution:
    """The end-to-end change beside the stages that moved."""

    metric: str  # the end-to-end metric's key (`ping.rtt_avg`)
    quantile: str  # p50 | p99: the stage statistic set beside it
    change: Change | None  # end to end, in us; None without a latency metric
    moved: tuple[tuple[str, Change], ...]  # (stage, its change) of the time stages
    total: float  # their sum

    @property
    def relation(self) -> str:
        """exceeds | falls short | matches | opposite | no end-to-end | none moved."""
        if not self.moved:
            return "none moved"
        if self.change is None:
            return "no end-to-end"
        e2e = self.change.estimate
        if e2e * self.total < 0:
            return "opposite"
        if abs(self.total) > abs(e2e) * 1.1:
            return "exceeds"
        if abs(self.total) < abs(e2e) * 0.9:
            return "falls short"
        return "matches"


@dataclass(frozen=True)
class Breakdown:
    baseline: str
    variant: str
    traced: tuple[str, str]  # the variants whose trials were traced (A's, B's)
    reps: tuple[int, int]  # traced repetitions of each
    hosts: Mapping[str, str]  # role -> host
    stages: tuple[StageRow, ...]
    absent: Mapping[tuple[str, str], Mapping[str, str]]  # (role, stage) -> variant: probe
    attribution: Mapping[str, Attribution]  # role -> its attribution
    hists: Mapping[tuple[str, str, str], Histogram] = field(default_factory=dict)
    # (traced variant, role, stage) -> the stage merged over trials and CPUs (ns|packets)
    notes: tuple[str, ...] = ()
    keys: Mapping[tuple[str, str], tuple[KeyCounts, ...]] = field(default_factory=dict)
    # (role, stage) -> its IRQs, NAPIs or functions with events in one arm only


def _median(values: Sequence[float]) -> float | None:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else None


def change(a: Sequence[float], b: Sequence[float]) -> Change | None:
    """B - A with its 95% CI (module doc); None when an arm has no value."""
    xa = [v for v in a if math.isfinite(v)]
    xb = [v for v in b if math.isfinite(v)]
    if not xa or not xb:
        return None
    try:
        found = evidence(MetricSamples(xa, xb, "lower"), absolute=True)
    except StatsError:
        return None
    low, high = found.ci
    if math.isnan(low) or math.isnan(high):
        low, high = -math.inf, math.inf
    return Change(found.change, low, high, found.test_name)


def _trace_rows(run: RunData) -> pd.DataFrame:
    frame = run.samples
    rows = frame[frame["source"] == SOURCE]
    return rows.assign(stage=rows["metric"].str.rsplit("_", n=1).str[0],
                       stat=rows["metric"].str.rsplit("_", n=1).str[1])


def _per_trial(rows: pd.DataFrame, variant: str, role: str, stage: str,
               stat: str) -> list[float]:
    sel = rows[(rows["variant"] == variant) & (rows["role"] == role)
               & (rows["stage"] == stage) & (rows["stat"] == stat)]
    if stat == "count":
        return [float(v) for v in sel.groupby("trial")["value"].sum()]
    sel = sel[sel["cpu"].isna()]
    return [float(v) for v in sel.sort_values("trial")["value"]]


def lopsided(a: float, b: float) -> bool:
    """Events in one arm only, or 20 times as many there and 100 or more (RPS's softirq
    on its target CPU, where the arm without it still has a few stray events)."""
    low, high = sorted((a, b))
    return (low > 0) != (high > 0) or (high >= 100 and high >= 20 * low)


def _cpu_counts(rows: pd.DataFrame, a: str, b: str, role: str, stage: str
                ) -> tuple[CpuCounts, ...]:
    sel = rows[(rows["role"] == role) & (rows["stage"] == stage) & (rows["stat"] == "count")
               & rows["cpu"].notna()]
    out = []
    medians: dict[str, dict[int, float]] = {}
    for variant in (a, b):
        mine = sel[sel["variant"] == variant]
        trials = mine["trial"].nunique() or 1
        per = mine.groupby("cpu")["value"].apply(list)
        # a trial without a row on a CPU had no event there: 0, not missing
        medians[variant] = {int(float(str(c))): float(np.median(v + [0.0] * (trials - len(v))))
                            for c, v in per.items()}
    for cpu in sorted(set(medians[a]) | set(medians[b])):
        ca, cb = medians[a].get(cpu, 0.0), medians[b].get(cpu, 0.0)
        if lopsided(ca, cb):
            out.append(CpuCounts(cpu, ca, cb))
    return tuple(out)


def snapshots(run: RunData, variant: str) -> dict[tuple[int, str], Trace | str]:
    """(trial index, host) -> the tracer's record in the stored snapshot after the
    workload, or why it cannot be read (a damaged file is a note, never a crash)."""
    out: dict[tuple[int, str], Trace | str] = {}
    for trial in run.manifest.trials:
        if trial.variant != variant or trial.status != "ok":
            continue
        base = Path(run.directory) / "raw" / trial.id
        if not base.is_dir():
            continue
        for host_dir in sorted(base.iterdir()):
            path = host_dir / SNAPSHOT
            if not path.is_file():
                continue
            try:
                files = split_tail(path.read_text(errors="replace"))
                if SECTION in files:
                    out[(trial.index, host_dir.name)] = parse(files[SECTION])
            except ParseError as exc:
                out[(trial.index, host_dir.name)] = f"trial {trial.id} on {host_dir.name}: {exc}"
    return out


def _hosts(rows: pd.DataFrame) -> dict[str, str]:
    pairs = rows[["role", "host"]].drop_duplicates()
    return {str(r): str(h) for r, h in zip(pairs["role"], pairs["host"], strict=True)}


def end_to_end(table: Table, a: str, b: str,
               workload: str | None) -> tuple[str, Change | None]:
    """The first primary line of the workload (`workload`: its source, ping, neper)
    with a time unit (else its first such line) as (its key, B - A in us); ("", None)
    without one. A collector's time (CPU time in softirq, a kthread's run time) is a
    cost, never the end-to-end latency."""
    timed = [ln for ln in table.lines if ln.unit in TIME_UNITS and workload is not None
             and ln.source.split(".")[0] == workload.split(".")[0]]
    chosen = next((ln for ln in timed if ln.primary), timed[0] if timed else None)
    if chosen is None or a not in chosen.cells or b not in chosen.cells:
        return "", None
    scale = TIME_UNITS[chosen.unit]
    found = change([v * scale for v in chosen.cells[a].values],
                   [v * scale for v in chosen.cells[b].values])
    return chosen.key, found


def breakdown(run: RunData, table: Table, base: str, other: str,
              traces: Mapping[str, Mapping[tuple[int, str], Trace | str]] | None = None
              ) -> Breakdown | None:
    """One comparison's breakdown; None when either arm has no traced trials."""
    ta, tb = twin_of(run, base), twin_of(run, other)
    if ta is None or tb is None:
        return None
    rows = _trace_rows(run)
    rows = rows[rows["variant"].isin([ta, tb])]
    hosts = _hosts(rows)
    traces = traces or {}
    found = {v: traces[v] if v in traces else snapshots(run, v) for v in (ta, tb)}
    notes = [t for v in (ta, tb) for t in found[v].values() if isinstance(t, str)]
    role_of = {h: r for r, h in hosts.items()}
    absent: dict[tuple[str, str], dict[str, str]] = {}
    hists: dict[tuple[str, str, str], list[Histogram]] = {}
    for variant in (ta, tb):
        for (_, host), trace in found[variant].items():
            if isinstance(trace, str):
                continue
            role = role_of.get(host, host)
            for stage, probe in trace.absent.items():
                absent.setdefault((role, stage), {})[variant] = probe
            for stage in trace.stages:
                hists.setdefault((variant, role, stage), []).append(trace.stage(stage))
    keys = _key_counts(found, (ta, tb), role_of)
    every = program.stages()
    out: list[StageRow] = []
    for role in sorted(set(rows["role"])):
        mine = rows[rows["role"] == role]
        for stage in (s for s in every if s in set(mine["stage"])):
            out.append(_stage_row(mine, ta, tb, role, stage, every[stage].unit))
    reps = tuple(int(rows.loc[rows["variant"] == v, "trial"].nunique()) for v in (ta, tb))
    key, e2e = end_to_end(table, base, other, run.workload_source)
    attribution = {role: _attribution(key, e2e, [s for s in out if s.role == role])
                   for role in sorted(set(rows["role"]))}
    return Breakdown(base, other, (ta, tb), (reps[0], reps[1]), hosts, tuple(out),
                     absent, attribution,
                     {k: merge(v) for k, v in hists.items()}, tuple(notes), keys)


def _key_label(stage: str, key: int, trace: Trace) -> str:
    kind = program.stages()[stage].key
    name = trace.names.get((stage, key), "")
    if kind == "irq":
        return f"IRQ {key} {name}".rstrip()
    if kind == "napi":
        return f"NAPI {key} {name}".rstrip()
    return name or hex(key)


def _key_counts(found: Mapping[str, Mapping[tuple[int, str], Trace | str]],
                traced: tuple[str, str], role_of: Mapping[str, str]
                ) -> dict[tuple[str, str], tuple[KeyCounts, ...]]:
    """Per (role, stage) of a keyed stage: the keys with events in one arm only."""
    per: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    trials: dict[tuple[str, str], int] = {}
    for variant in traced:
        for (_, host), trace in found[variant].items():
            if isinstance(trace, str):
                continue
            role = role_of.get(host, host)
            trials[(variant, role)] = trials.get((variant, role), 0) + 1
            counts: dict[tuple[str, str], float] = {}
            for (stage, _, key), hist in trace.hists.items():
                if program.stages()[stage].key == "none":
                    continue
                label = _key_label(stage, key, trace)
                counts[(stage, label)] = counts.get((stage, label), 0) + hist.total
            for (stage, label), n in counts.items():
                per.setdefault((role, stage, label), {}).setdefault(variant, []).append(n)
    out: dict[tuple[str, str], list[KeyCounts]] = {}
    for (role, stage, label), by in sorted(per.items()):
        med = []
        for variant in traced:
            got = by.get(variant, [])
            got = got + [0.0] * (trials.get((variant, role), 0) - len(got))
            med.append(float(np.median(got)) if got else 0.0)
        if lopsided(med[0], med[1]) and max(med) >= 10:
            out.setdefault((role, stage), []).append(KeyCounts(label, med[0], med[1]))
    return {k: tuple(v) for k, v in out.items()}


def _stage_row(rows: pd.DataFrame, ta: str, tb: str, role: str, stage: str,
               unit: str) -> StageRow:
    def values(variant: str, stat: str) -> list[float]:
        return _per_trial(rows, variant, role, stage, stat)

    counts = {v: values(v, "count") for v in (ta, tb)}
    events = {v: _median(c) for v, c in counts.items()}
    return StageRow(
        role, stage, "us" if unit == "ns" else "packets",
        _median(values(ta, "p50")), _median(values(tb, "p50")),
        _median(values(ta, "p99")), _median(values(tb, "p99")),
        events[ta], events[tb],
        change(values(ta, "p50"), values(tb, "p50")),
        change(values(ta, "p99"), values(tb, "p99")),
        _cpu_counts(rows, ta, tb, role, stage))


def quantile_for(metric: str) -> str:
    """The stage statistic an end-to-end metric is set beside: p99 for a tail (p99,
    p99.9, max), p50 for a middle (p50, mean, avg)."""
    return "p99" if _TAIL.search(metric.rsplit(".", 1)[-1]) else "p50"


def _attribution(key: str, e2e: Change | None, rows: Sequence[StageRow]) -> Attribution:
    quantile = quantile_for(key) if key else "p99"
    moved = [(s.stage, c) for s in rows if s.unit == "us"
             and (c := s.p50 if quantile == "p50" else s.p99) is not None and c.moved]
    return Attribution(key, quantile, e2e, tuple(moved), sum(c.estimate for _, c in moved))


def breakdowns(run: RunData, table: Table) -> list[Breakdown]:
    """Every comparison of the profile between untraced variants (a twin is never a
    side of its own), each with its traced trials; [] for a run without trace rows."""
    if not has_trace(run):
        return []
    cache: dict[str, Mapping[tuple[int, str], Trace | str]] = {}
    out = []
    for base, other in run.comparisons:
        if is_twin(run, base) or is_twin(run, other):
            continue
        for v in (twin_of(run, base), twin_of(run, other)):
            if v is not None and v not in cache:
                cache[v] = snapshots(run, v)
        found = breakdown(run, table, base, other, cache)
        if found is not None:
            out.append(found)
    return out
