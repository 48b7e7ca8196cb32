"""The A/B table: one line per metric, one cell per variant, from stored data only.

Lines come from the profile's `report.table` (the shape of a cover letter's table) or,
without one, from every run-level metric of the workload and the collectors' totals;
where the tool stored per-transaction latencies (`latency/<trial>.parquet`), pooled
percentile lines follow. A cell holds the per-repetition values of its variant; every
non-baseline variant is compared with the baseline, or with the first variant of its
comparison group (`group` in the profile; reports.ab.line_stats: relative change with a
CI, the primary lines' p Holm-adjusted across the table, verdict; others exploratory).
Across runs, reports.ab.cross_run builds the same table with label x variant columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from napilab.harness.errors import StorageError
from napilab.harness.stats import family as stats_family
from napilab.harness.stats.family import Workload
from napilab.harness.stats.pool import DEFAULT_PERCENTILES, pooled_percentiles
from napilab.harness.store.manifest import Manifest, traced_twins
from napilab.harness.store.store import LEGACY_SAMPLES, SAMPLES_DIR, load_manifest, load_samples
from napilab.reports.ab import cpu_cost, tradeoff
from napilab.reports.ab.cpu_cost import with_cpu_cost
from napilab.reports.ab.line_stats import with_stats
from napilab.reports.ab.model import Cell, Line, Table, format_number

__all__ = ["Cell", "Column", "Line", "RunData", "Spec", "Table",
           "build_table", "column", "format_number", "line_specs", "load_run", "table"]

POOLED_SOURCE = stats_family.POOLED_SOURCE  # `source` of pooled per-transaction lines


@dataclass(frozen=True)
class RunData:
    directory: Path
    manifest: Manifest
    samples: pd.DataFrame

    @property
    def variants(self) -> list[str]:
        """Variants judged, in profile order (baseline first), as the manifest lists
        trials: the A/B table's, compare's and check's; traced twins are `twins`."""
        twins = self.twins
        return [v for v in self.ran if v not in twins]

    @property
    def ran(self) -> list[str]:
        """Every variant with trials, traced twins included."""
        seen: dict[str, None] = {}
        for trial in sorted(self.manifest.trials, key=lambda t: t.variant != self.baseline):
            seen.setdefault(trial.variant, None)
        return [v for v in self.manifest.variants or list(seen) if v in seen]

    @property
    def twins(self) -> dict[str, str]:
        """The trace collector's traced twins that ran: twin -> its variant; their trials
        are the breakdown's and the overhead's (reports.trace), never a verdict's."""
        ran = set(self.ran)
        return {t: v for t, v in traced_twins(self.manifest).items() if t in ran}

    @property
    def baseline(self) -> str:
        return self.manifest.baseline

    @property
    def comparisons(self) -> tuple[tuple[str, str], ...]:
        """(baseline, variant) pairs among the variants that ran: the manifest's (each
        variant with its comparison group's first), else every variant with the baseline
        (runs recorded before comparison groups)."""
        ran = self.variants  # twins left out: never compared
        recorded = self.manifest.comparisons
        if recorded is None:
            return tuple((self.baseline, v) for v in ran if v != self.baseline)
        return tuple((str(base), str(v)) for base, v in recorded if base in ran and v in ran)

    @property
    def workload_source(self) -> str | None:
        return self.manifest.workload_source or None

    @property
    def workload(self) -> Workload | None:
        return self.manifest.workload

    @property
    def policies(self) -> dict[str, Any]:
        return dict(self.manifest.metrics)

    def latency_files(self, variant: str) -> list[tuple[int, Path]]:
        """(trial index, path) of the stored per-transaction latencies of `variant`."""
        out = []
        for trial in self.manifest.trials:
            path = self.directory / "latency" / f"{trial.id}.parquet"
            if trial.variant == variant and trial.status == "ok" and path.exists():
                out.append((trial.index, path))
        return out


def load_run(directory: str | Path) -> RunData:
    """A stored run; a damaged samples file, or none where trials completed, is a
    StorageError naming the file (never a traceback or a silent all-`-` report)."""
    directory = Path(directory)
    manifest = load_manifest(directory)
    samples = with_cpu_cost(load_samples(directory), manifest)
    done = sum(1 for t in manifest.trials if t.status == "ok")
    if done and not len(samples):
        raise StorageError(f"{directory}: {done} trial(s) completed but no samples are "
                           f"stored ({LEGACY_SAMPLES} and {SAMPLES_DIR}/ are missing or "
                           "empty)", hint="the run directory is damaged: restore it from a "
                                          "copy, or run the profile again")
    return RunData(directory, manifest, samples)


class Spec(NamedTuple):
    label: str
    source: str
    metric: str
    role: str | None


@dataclass(frozen=True)
class Column:
    """One column of the table: a variant of a run, under the name the table shows."""

    name: str
    frame: pd.DataFrame  # the variant's run-level rows (cpu null)
    latency: tuple[tuple[int, Path], ...]  # (trial index, latency parquet), trial order


def column(run: RunData, variant: str, name: str | None = None) -> Column:
    frame = _totals(run.samples)
    if len(frame):
        frame = frame[frame["variant"] == variant]
    return Column(name or variant, frame, tuple(run.latency_files(variant)))


def report_columns(manifest: Manifest) -> list[tuple[str, list[str]]]:
    """The profile's `report.columns` (name, its variants), [] without."""
    found = manifest.profile.document.get("report", {}).get("columns") or {}
    return [(str(name), [members] if isinstance(members, str) else [str(m) for m in members])
            for name, members in found.items()]


def column_of(manifest: Manifest) -> dict[str, str]:
    """variant -> the column that shows it (itself without `report.columns`)."""
    return {v: name for name, members in report_columns(manifest) for v in members}


def joined_column(run: RunData, name: str, members: Sequence[str]) -> Column:
    """One column of several variants: each (source, metric, role) from the first of
    them that measured it (a cover letter's column per kernel over two workloads)."""
    parts = [column(run, v) for v in members if v in run.variants]
    taken: set[tuple[str, str, str]] = set()
    frames = []
    for part in parts:
        if not len(part.frame):
            continue
        keys = list(zip(part.frame["source"], part.frame["metric"], part.frame["role"],
                        strict=True))
        fresh = [k not in taken for k in keys]
        frames.append(part.frame[fresh])
        taken.update(keys)
    frame = pd.concat(frames) if frames else (parts[0].frame if parts else pd.DataFrame())
    latency = next((p.latency for p in parts if p.latency), ())
    return Column(name, frame, latency)


def _budgets(run: RunData) -> dict[str, dict[str, float]]:
    """The variants' cores budgets: the manifest's, else (runs recorded before it kept
    them) the profile's variants as written."""
    if run.manifest.budgets is not None:
        return run.manifest.budgets
    return tradeoff.budgets(run.manifest.profile.document, run.variants)


def table(run: RunData) -> Table:
    joined = report_columns(run.manifest)
    if joined:
        columns = [joined_column(run, name, members) for name, members in joined]
        first = columns[0].name
        pairs = tuple((first, c.name) for c in columns[1:])
        stated = _budgets(run)
        budgets = {name: next((stated[m] for m in members if m in stated), None)
                   for name, members in joined}
        return build_table(line_specs(run), columns, pairs, run.policies, first,
                           workload=run.workload,
                           budgets={n: b for n, b in budgets.items() if b},
                           notes=cpu_cost.notes(run.samples))
    columns = [column(run, v) for v in run.variants]
    return build_table(line_specs(run), columns, run.comparisons, run.policies, run.baseline,
                       workload=run.workload, budgets=_budgets(run),
                       notes=cpu_cost.notes(run.samples))


def build_table(specs: Sequence[Spec], columns: Sequence[Column],
                pairs: Sequence[tuple[str, str]], policies: Mapping[str, Any],
                baseline: str, *, stats: bool = True, workload: Workload | None = None,
                budgets: Mapping[str, dict[str, float]] | None = None,
                notes: Sequence[str] = ()) -> Table:
    """The table of `specs` over `columns`; with `stats`, each pair compared (the primary
    lines as a Holm family, see harness.stats.family; `workload`'s headline metrics are
    primary when the profile names none)."""
    indexed = [_ColumnIndex.of(col.frame) for col in columns]
    lines = [_line(columns, indexed, spec) for spec in specs] + pooled_lines(columns)
    family = 0
    if stats:
        lines, family = with_stats(lines, pairs, policies, workload=workload)
    return Table([c.name for c in columns], baseline, lines, tuple(pairs), "holm", family,
                 dict(budgets or {}), tuple(notes))


def _totals(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["cpu"].isna()] if len(frame) else frame


def line_specs(run: RunData) -> list[Spec]:
    """The profile's `report.table`, else the workload's rows and the collectors'
    headlines; then the CPU cost lines (reports.ab.cpu_cost) the table does not name."""
    rows = run.manifest.profile.document.get("report", {}).get("table")
    if rows:
        specs = [Spec(r.get("label") or f"{r['source']} {r['metric']}", r["source"],
                      r["metric"], r.get("role")) for r in rows]
    else:
        specs = _default_specs(run)
    return specs + cost_specs(run.samples, specs)


# The CPU cost lines in the order a reader weighs them; but for busy cores, a line below
# STATE_FLOOR in every trial is left out (nice, iowait and steal mostly are, and the
# NAPI kthreads where none ran). Labels fit the 26
# columns of the text report's statistics, with the role when several roles have them.
COST_LABELS = {"busy_cores": "busy cores", "busy_cores_workload": "busy: workload CPUs",
               "busy_cores_irq": "busy: IRQ/NAPI CPUs", "busy_cores_other": "busy: other CPUs",
               "napi_thread_cores": "NAPI kthread cores",
               **{f"cores_{s}": f"cores in {s}" for s in cpu_cost.STATES}, "ipc": "IPC"}
STATE_FLOOR = 0.005


def cost_specs(samples: pd.DataFrame, taken: Sequence[Spec]) -> list[Spec]:
    frame = _totals(samples)
    if not len(frame):
        return []
    frame = frame[frame["source"] == cpu_cost.SOURCE]
    named = {(s.source, s.metric, s.role) for s in taken}
    found: dict[tuple[str, str], bool] = {}
    for metric, role, value in zip(frame["metric"], frame["role"], frame["value"],
                                   strict=True):
        key = (str(metric), str(role))
        found[key] = found.get(key, False) or abs(value) >= STATE_FLOOR
    several = len({role for _, role in found}) > 1
    order = [*COST_LABELS, *sorted({m for m, _ in found if m.startswith("cpu_us_per_")}),
             *sorted({m for m, _ in found if m.startswith("cycles_per_")})]
    specs = []
    for metric in order:
        for (m, role), nonzero in found.items():
            if m != metric or (cpu_cost.SOURCE, m, role) in named:
                continue
            if m != "busy_cores" and not nonzero:  # a state, a CPU set or kthread never busy
                continue
            label = COST_LABELS.get(m) or ("cycles/" + m.removeprefix("cycles_per_")
                                           if m.startswith("cycles_per_") else
                                           "CPU-us/" + m.removeprefix("cpu_us_per_"))
            specs.append(Spec(f"{label} ({role})" if several else label, cpu_cost.SOURCE, m,
                              role))
    return specs


def _default_specs(run: RunData) -> list[Spec]:
    frame = _totals(run.samples)
    workload = run.manifest.workload_source
    specs: list[Spec] = []
    if len(frame):
        for key, _ in frame.groupby(["source", "metric", "role"], sort=False):
            source, metric, role = (str(k) for k in key)
            wanted = source == workload or metric in run.manifest.headline(source)
            if wanted:
                specs.append(Spec(f"{metric} ({role})" if source == workload else
                                  f"{source} {metric} ({role})", source, metric, role))
    return specs


class _ColumnIndex(NamedTuple):
    """A column's values summed per (source, metric, role, trial), and the first unit of
    each (source, metric, role) and (source, metric): grouped once per column, so a
    table of 30 lines x 50 variants filters no frame 1,500 times."""

    sums: pd.Series
    units: dict[tuple[str, ...], str]

    @classmethod
    def of(cls, frame: pd.DataFrame) -> _ColumnIndex:
        if not len(frame):
            return cls(pd.Series(dtype="float64"), {})
        # min_count=1: a repetition without the value (NaN) stays NaN, not a 0 that
        # would be compared as a measurement
        sums = frame.groupby(["source", "metric", "role", "trial"], sort=True)["value"].sum(
            min_count=1)
        units: dict[tuple[str, ...], str] = {}
        for source, metric, role, unit in zip(frame["source"], frame["metric"], frame["role"],
                                              frame["unit"], strict=True):
            units.setdefault((source, metric, role), str(unit))
            units.setdefault((source, metric), str(unit))
        return cls(sums, units)

    def per_trial(self, spec: Spec) -> pd.Series:
        """One value per trial (a metric of several hosts of one role is summed; without
        a role, of every role), in trial order."""
        key = (spec.source, spec.metric) if spec.role is None else \
            (spec.source, spec.metric, spec.role)
        if self.sums.empty:
            return pd.Series(dtype="float64")
        try:
            found = self.sums.loc[key]
        except KeyError:
            return pd.Series(dtype="float64")
        if spec.role is None:
            found = found.groupby(level="trial").sum(min_count=1)
        ordered: pd.Series = found.sort_index()
        return ordered


def _line(columns: Sequence[Column], indexed: Sequence[_ColumnIndex], spec: Spec) -> Line:
    cells = {}
    unit = ""
    key = (spec.source, spec.metric) if spec.role is None else \
        (spec.source, spec.metric, spec.role)
    for col, index in zip(columns, indexed, strict=True):
        if not unit:
            unit = index.units.get(key, "")
        # One value per trial, in execution order: the drift test reads the order.
        per_trial = index.per_trial(spec)
        cells[col.name] = Cell(tuple(float(v) for v in per_trial.to_numpy()),
                               tuple(int(t) for t in per_trial.index))
    return Line(spec.label, spec.source, spec.metric, spec.role, unit, cells)


def pooled_lines(columns: Sequence[Column],
                 percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[Line]:
    """One line per percentile of the per-transaction latencies pooled over repetitions
    (cluster-bootstrap CI per column); cells hold the per-repetition percentiles, which
    are what the comparison tests (one value per repetition, like every other line)."""
    if not any(c.latency for c in columns):
        return []
    per_column = {}
    for seed, col in enumerate(columns):
        if col.latency:
            reps = [pd.read_parquet(path, columns=["latency_us"])["latency_us"].to_numpy()
                    for _, path in col.latency]
            # a seed per column: the replicates of two columns must be independent for
            # the CI of their ratio (harness.stats.pool.pooled_change)
            per_column[col.name] = (pooled_percentiles(reps, percentiles, seed=seed),
                                    tuple(i for i, _ in col.latency))
    lines = []
    for k, q in enumerate(percentiles):
        cells = {}
        for col in columns:
            if col.name not in per_column:
                cells[col.name] = Cell(())
                continue
            pooled, trials = per_column[col.name]
            row = pooled.percentiles[k]
            cells[col.name] = Cell(row.per_repetition, trials, pooled=row)
        lines.append(Line(f"latency p{q:g} (pooled)", POOLED_SOURCE, f"latency_p{q:g}", None,
                          "us", cells))
    return lines
