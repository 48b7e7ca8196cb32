"""Trends across the runs of one profile (`napilab history RESULTS --profile NAME`):
one row per run (time, run id, status, kernel) with the median over repetitions of
each chosen metric per variant.

The medians come from one DuckDB query over every run's sample files (read_parquet
over the list of files, union_by_name: runs written by older napilab versions may lack
a column; harness.store.store.sample_files lists a run's files: samples.parquet, and
samples/<trial>.parquet of a run that has not ended), the rest from each run's
manifest.json. A metric is `metric` or
`source.metric`; as in the A/B table, a metric of several hosts of one role is summed
per trial, then the median over the trials of a variant is taken. Only run-level
values (cpu null) are used; the pooled per-transaction percentiles of a report need
its latency files and are not part of the trend. Per metric and variant, the series of
run medians is searched for level shifts (harness.stats.changes: ruptures' PELT); each
change point names the first run of the new level.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from napilab.harness.errors import InputError, NapilabError, StorageError
from napilab.harness.records import codec
from napilab.harness.stats.changes import ChangePoint, change_points
from napilab.harness.store.manifest import Manifest, traced_twins
from napilab.harness.store.store import (
    REPLICAS_DIR,
    damaged_samples,
    load_manifest,
    read_parquet_files,
    sample_files,
)
from napilab.harness.store.summary import RunSummary, read_summary, summary_keys
from napilab.reports.ab.model import format_number, with_unit
from napilab.reports.formats.text_table import MAX_HEADER_LINES, MIN_COLUMN, narrowest, wrap_name
from napilab.reports.nightly.check_record import CheckRecord, HistoryRecord, read_check
from napilab.reports.nightly.series import run_key, runs_under, series_name

# A run's directory from the name of one of its sample files (samples/<trial>.parquet
# while it runs, samples.parquet once it ended); a trial's own file wins over
# samples.parquet (both are there if napilab stopped while it merged them).
_QUERY = """
WITH found AS (
    SELECT regexp_replace(filename, '/(samples/[^/]+|samples[.]parquet)$', '') AS rundir,
           filename LIKE '%/samples/%' AS own, trial, role, source, metric, variant, value,
           unit
    FROM read_parquet($files, union_by_name = true, filename = true)
    WHERE cpu IS NULL AND (list_contains($names, metric)
                           OR list_contains($names, source || '.' || metric))
          AND ($host IS NULL OR host = $host)
), chosen AS (
    SELECT * FROM found AS f
    WHERE own OR NOT EXISTS (SELECT 1 FROM found AS o
                             WHERE o.own AND o.rundir = f.rundir AND o.trial = f.trial)
)
SELECT rundir, role, source, metric, variant, median(v) AS median, count(*) AS n,
       any_value(unit) AS unit
FROM (
    SELECT rundir, trial, role, source, metric, variant, sum(value) AS v,
           any_value(unit) AS unit
    FROM chosen
    GROUP BY rundir, trial, role, source, metric, variant
)
GROUP BY rundir, role, source, metric, variant
"""


@dataclass(frozen=True)
class RunInfo:
    directory: Path
    run_id: str
    profile: str
    description: str
    started: float | None
    status: str
    kernels: dict[str, str]  # host -> kernel release
    variants: tuple[str, ...]
    trials: int
    trials_ok: int
    check: CheckRecord | None  # RUN_DIR/check.json, when `napilab check` ran on it
    summary: RunSummary | None = None  # RUN_DIR/summary.json: read instead of the rest
    replica: str | None = None

    @property
    def profile_dir_name(self) -> str:
        """The name of RESULTS/PROFILE, the folder the run is under."""
        return (self.directory.parent.parent.parent if self.replica_dir else
                self.directory.parent).name

    @property
    def replica_dir(self) -> bool:
        return self.directory.parent.name == REPLICAS_DIR

    @property
    def key(self) -> str:
        """The run's name among its profile's nights (reports.nightly.series.run_key)."""
        return run_key(self.directory)

    @property
    def series(self) -> str:
        """The series the run joins (reports.nightly.series): its replica or host set."""
        return series_name(self.replica, self.kernels)

    def kernel(self, host: str | None = None) -> str:
        """The host's kernel release, or every distinct one in host order."""
        if host is not None:
            return self.kernels.get(host, "-")
        return ",".join(dict.fromkeys(self.kernels.values())) or "-"

    @property
    def when(self) -> str:
        if self.started is None:
            return "-"
        return dt.datetime.fromtimestamp(self.started, dt.UTC).strftime("%Y-%m-%d %H:%M")


def _manifest(directory: Path) -> Manifest | None:
    found = _load(directory)
    return found if isinstance(found, Manifest) else None


def _load(directory: Path) -> Manifest | str:
    """The run's manifest, or why it cannot be read (damaged: truncated, not JSON, not a
    manifest): such a run is left out of trends, and said (`scan_runs`)."""
    try:
        return load_manifest(directory)
    except NapilabError as exc:
        return exc.message
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        return f"{directory / 'manifest.json'}: not a napilab manifest ({exc})"


def _run_info(directory: Path, manifest: Manifest) -> RunInfo:
    profile = manifest.profile
    check = None
    with contextlib.suppress(InputError):  # a check cut short: as if none ran
        check = read_check(directory)
    started = manifest.started
    return RunInfo(directory, manifest.run_id or directory.name,
                   profile.name or directory.parent.name, profile.description or "",
                   float(started) if isinstance(started, int | float) else None,
                   manifest.status or "unknown",
                   {h: f.kernel_release or "-" for h, f in (manifest.host_facts or {}).items()},
                   tuple(v for v in manifest.variants if v not in traced_twins(manifest)),
                   len(manifest.trials),
                   sum(1 for t in manifest.trials if t.status == "ok"),
                   check, None, manifest.replica)


def _summary_info(directory: Path, summary: RunSummary) -> RunInfo:
    check = None
    with contextlib.suppress(InputError):
        check = read_check(directory)
    return RunInfo(directory, summary.run_id or directory.name,
                   summary.profile or directory.parent.name, summary.description,
                   summary.started, summary.status, summary.kernels(),
                   tuple(summary.variants), summary.trials, summary.trials_ok, check,
                   summary, summary.replica)


# Fetches what a report needs of runs whose files are not all here (a remote store's
# mirror: harness.stores.store.Mirror.materialize): the runs, and the files (None: all)
Fetch = Callable[[Sequence[Path], Sequence[str] | None], None]


def find_runs(results: str | Path, profile: str | None = None) -> list[RunInfo]:
    """Runs under RESULTS/<profile>/ (every profile when None), oldest first."""
    return scan_runs(results, profile)[0]


Damaged = tuple[tuple[str, str], ...]  # (run directory, why its manifest cannot be read)


def scan_runs(results: str | Path, profile: str | None = None
              ) -> tuple[list[RunInfo], Damaged]:
    """The runs under RESULTS/<profile>/ (every profile when None), oldest first, and
    the runs whose manifest cannot be read or whose sample files are not whole Parquet
    files (harness.store.store.damaged_samples), each manifest read once: `history` and
    `publish` say the damaged ones instead of showing one run fewer."""
    results = Path(results)
    if not results.is_dir():
        raise InputError(f"{results}: no such results directory")
    runs, damaged = [], []
    for directory in _run_dirs(results, profile):
        summary: RunSummary | str | None
        try:
            summary = read_summary(directory)
        except InputError as exc:  # a damaged summary: the manifest is read instead
            summary = exc.message
        if isinstance(summary, RunSummary):
            runs.append(_summary_info(directory, summary))
            continue
        if not (directory / "manifest.json").exists():
            if isinstance(summary, str):
                damaged.append((str(directory), summary))
            continue
        loaded = _load(directory)
        if isinstance(loaded, Manifest):
            loaded = damaged_samples(directory) or loaded
        if isinstance(loaded, str):
            damaged.append((str(directory), loaded))
        else:
            runs.append(_run_info(directory, loaded))
    if profile:
        runs = [r for r in runs if r.profile == profile]
    return sorted(runs, key=lambda r: (r.started or 0.0, r.key)), tuple(damaged)


def _run_dirs(results: Path, profile: str | None) -> list[Path]:
    """RESULTS/PROFILE/RUN directories that hold a manifest or a summary (a remote
    store's mirror holds the summary alone), hidden ones (a run being made) left out."""
    profiles = [results / profile] if profile else sorted(
        e.path for e in os.scandir(results) if e.is_dir() and not e.name.startswith("."))
    return [run for base in map(Path, profiles) for run in runs_under(base)]


def _covered(summary: RunSummary | None, metrics: Sequence[str], host: str | None) -> bool:
    """The summary holds every one of `metrics` (by name or source.metric), and with a
    `host` each of its metrics is that host's alone or none of its values."""
    if summary is None:
        return False
    keys = set(summary.keys) | {k.split(".", 1)[-1] for k in summary.keys}
    return all(m in keys for m in metrics) and (host is None or all(
        m.hosts == [host] or (m.hosts and host not in m.hosts) for m in summary.metrics))


def _from_summaries(runs: Sequence[RunInfo], metrics: Sequence[str], host: str | None
                    ) -> pd.DataFrame:
    names = set(metrics)
    rows = [(r.key, m.role, m.source, m.metric, variant, v.median, v.n, m.unit)
            for r in runs if r.summary is not None for m in r.summary.metrics
            if {m.metric, f"{m.source}.{m.metric}"} & names
            and (host is None or m.hosts == [host])
            for variant, v in m.variants.items() if v.n]
    return pd.DataFrame(rows, columns=["run", "role", "source", "metric", "variant",
                                       "median", "n", "unit"])


def medians(runs: Sequence[RunInfo], metrics: Sequence[str], host: str | None = None,
            fetch: Fetch | None = None) -> pd.DataFrame:
    """Columns run (RunInfo.key), role, source, metric, variant, median, n, unit:
    from the runs' summaries where they hold the metrics (and the host's values apart,
    when one is asked for), else from their samples (fetched first by `fetch` where
    they are not here)."""
    columns = ["run", "role", "source", "metric", "variant", "median", "n", "unit"]
    if not metrics:
        return pd.DataFrame({c: [] for c in columns})
    summed = [r for r in runs if _covered(r.summary, metrics, host)]
    rest = [r for r in runs if not _covered(r.summary, metrics, host)]
    if fetch is not None and rest:
        fetch([r.directory for r in rest], None)
    frame = _from_summaries(summed, metrics, host) if summed else None
    if not rest:
        return frame if frame is not None else pd.DataFrame({c: [] for c in columns})
    sampled = _sampled(rest, metrics, host, columns)
    return sampled if frame is None else pd.concat([frame, sampled], ignore_index=True)


def _sampled(runs: Sequence[RunInfo], metrics: Sequence[str], host: str | None,
             columns: list[str]) -> pd.DataFrame:
    files = [str(path) for r in runs for path in sample_files(r.directory)]
    if not files:
        return pd.DataFrame({c: [] for c in columns})
    with duckdb.connect() as con:
        try:
            frame = con.execute(_QUERY, {"files": files, "names": list(metrics),
                                         "host": host}).df()
        except duckdb.Error as exc:  # damage inside a file whose ends are whole
            raise StorageError(f"{_culprit(con, files) or f'one of {len(files)} files'}: "
                               f"cannot read the run's samples "
                               f"({str(exc).splitlines()[0]})",
                               hint="the run directory is damaged: move it out of the "
                                    "results directory, or run the profile again") from None
    frame["run"] = [run_key(Path(d)) for d in frame.pop("rundir")]
    return frame[columns]


def _culprit(con: duckdb.DuckDBPyConnection, files: Sequence[str]) -> str | None:
    """The first of `files` that DuckDB cannot read alone."""
    for path in files:
        try:
            con.execute("SELECT count(*) FROM read_parquet($f)", {"f": path}).fetchall()
        except duckdb.Error:
            return path
    return None


def default_metrics(runs: Sequence[RunInfo]) -> list[str]:
    """The newest run's primary metrics first (the profile's `metrics:`, else its
    workload's defaults: harness.stats.family), then its `report.table` rows, else its
    workload's headline metrics: the trend shows what the gate judges."""
    for run in reversed(runs):
        if run.summary is not None and run.summary.keys:
            return list(run.summary.keys)
        manifest = _manifest(run.directory)
        if manifest is None:
            continue
        keys = summary_keys(manifest)  # its primary metrics and report.table rows
        source = manifest.workload_source
        files = sample_files(run.directory) if not keys and source else []
        if files:  # else the workload's metrics it stored
            names = set(read_parquet_files(files, columns=["source", "metric"]).query(
                "source == @source")["metric"])
            keys = summary_keys(manifest, {(source, m) for m in names})
        if keys:
            return keys
    return []


@dataclass(frozen=True)
class History:
    profile: str
    host: str | None
    metrics: tuple[tuple[str, str], ...]  # (key as shown, unit)
    variants: tuple[str, ...]
    runs: tuple[RunInfo, ...]
    values: dict[tuple[str, str, str], tuple[float, int]]  # (run, key, variant) -> (median, n)
    damaged: Damaged = ()  # left out of the trend, and said

    @property
    def series(self) -> tuple[str, ...]:
        """The series of the runs (reports.nightly.series), in order of first night."""
        return tuple(dict.fromkeys(r.series for r in self.runs))

    def of_series(self, name: str) -> History:
        """The runs of one series (their values, and the damaged runs of all)."""
        runs = tuple(r for r in self.runs if r.series == name)
        keys = {r.key for r in runs}
        return replace(self, runs=runs,
                       values={k: v for k, v in self.values.items() if k[0] in keys})

    def change_points(self) -> dict[str, dict[str, list[tuple[RunInfo, ChangePoint]]]]:
        """key -> variant -> (first run of the new level, change point), oldest first;
        searched in each series alone (another host set's level is not a shift)."""
        out: dict[str, dict[str, list[tuple[RunInfo, ChangePoint]]]] = {}
        for key, _ in self.metrics:
            for variant in self.variants:
                for name in self.series:
                    runs = [r for r in self.runs
                            if r.series == name and (r.key, key, variant) in self.values]
                    levels = [self.values[(r.key, key, variant)][0] for r in runs]
                    found = [(runs[p.index], p) for p in change_points(levels)]
                    if found:
                        out.setdefault(key, {}).setdefault(variant, []).extend(found)
        return out


def _keys(frame: pd.DataFrame) -> pd.Series:
    """`source.metric`, with `[role]` when a metric comes from several roles."""
    base = frame["source"] + "." + frame["metric"]
    roles = frame.groupby(base)["role"].transform("nunique")
    return base.where(roles <= 1, base + "[" + frame["role"] + "]")


def history(results: str | Path, profile: str, metrics: Sequence[str] = (),
            host: str | None = None, fetch: Fetch | None = None,
            series: str | None = None) -> History:
    runs, damaged = scan_runs(results, profile)
    if series is not None:
        known = sorted({r.series for r in runs})
        runs = [r for r in runs if r.series == series]
        if not runs:
            raise InputError(f"--series {series!r}: profile {profile!r} under {results} has "
                             f"the series {known}")
    if not runs:
        known = sorted({r.profile for r in find_runs(results)})
        raise InputError(f"no run of profile {profile!r} under {results}; "
                         + (f"known profiles: {', '.join(known)}" if known else
                            "it holds no run at all"),
                         hint="runs are stored as RESULTS/<profile>/<time>-<id>/")
    wanted = list(metrics) or default_metrics(runs)
    frame = medians(runs, wanted, host, fetch)
    if metrics:
        found = set(frame["metric"]) | set(frame["source"] + "." + frame["metric"])
        missing = [m for m in metrics if m not in found]
        if missing:
            raise InputError(f"--metric {', '.join(missing)}: not in any run of {profile!r}"
                             + (f" on host {host}" if host else ""))
    frame["key"] = _keys(frame) if len(frame) else frame["metric"]
    order = {m: i for i, m in enumerate(wanted)}
    # The unit of a key: any run's (an older samples schema may have none).
    units = frame.dropna(subset=["unit"]).groupby("key")["unit"].first().to_dict() \
        if len(frame) else {}
    keys = sorted(dict.fromkeys(zip(frame["key"], frame["source"] + "." + frame["metric"],
                                    frame["metric"], strict=True)),
                  key=lambda k: (order.get(k[1], order.get(k[2], len(order))), k[0]))
    variants: dict[str, None] = {}
    for run in runs:
        variants.update(dict.fromkeys(run.variants))
    values = {(str(run), str(key), str(variant)): (float(median), int(n))
              for run, key, variant, median, n in zip(
                  frame["run"], frame["key"], frame["variant"], frame["median"].astype(float),
                  frame["n"].astype(int), strict=True)}
    present = {v for _, _, v in values}
    return History(profile, host, tuple((k[0], str(units.get(k[0], ""))) for k in keys),
                   tuple(v for v in variants if v in present), tuple(runs), values, damaged)


def _cell(value: tuple[float, int] | None) -> str:
    return "-" if value is None else format_number(value[0])


TIME, RUN = 16, 8  # "2026-11-30 22:06", run ids are 8 hex digits


@dataclass(frozen=True)
class _Columns:
    """The variant columns' width and blocks: every variant in one block when they fit."""

    column: int
    blocks: tuple[tuple[str, ...], ...]


LEFT = (("time", TIME), ("run", RUN))
USED = 2 + TIME + 2 + RUN


def _columns(variants: Sequence[str], cells: dict[tuple[str, str], str], width: int
             ) -> _Columns:
    """Variant names wrap over up to three header lines, as in the A/B table, before the
    variants split into blocks of equal size (one variant more in the first ones)."""
    numbers = max([len(c) for c in cells.values()] + [MIN_COLUMN])
    column = numbers
    for lines in range(1, MAX_HEADER_LINES + 1):
        column = max([numbers] + [narrowest(v, lines) for v in variants])
        if USED + len(variants) * (2 + column) <= width:
            return _Columns(column, (tuple(variants),))
    column = min(column, width - USED - 2)
    per_block = max(1, (width - USED) // (2 + column))
    count = -(-len(variants) // per_block)
    size, longer = divmod(len(variants), count)
    blocks, start = [], 0
    for k in range(count):
        end = start + size + (k < longer)
        blocks.append(tuple(variants[start:end]))
        start = end
    return _Columns(column, tuple(blocks))


def _runs(found: History, width: int) -> list[str]:
    """What is the same in every row of every metric's table is said once: a line when
    every run completed on one kernel, else a table of the runs' status and kernel."""
    kernels = {r.kernel(found.host) for r in found.runs}
    statuses = {r.status for r in found.runs}
    if len(kernels) == 1 and statuses == {"complete"}:
        return textwrap.wrap(f"every run complete, kernel {kernels.pop()}", width,
                             break_on_hyphens=False)
    status = max([6] + [len(r.status) for r in found.runs])
    out = [f"  {'time':<{TIME}}  {'run':<{RUN}}  {'status':<{status}}  kernel"]
    for run in reversed(found.runs):
        out.append((f"  {run.when:<{TIME}}  {run.run_id[:RUN]:<{RUN}}  "
                    f"{run.status:<{status}}  {run.kernel(found.host)}")[:width])
    return out


def _left(run: RunInfo, columns: Sequence[tuple[str, int]], host: str | None) -> list[str]:
    values = {"time": run.when, "run": run.run_id, "status": run.status,
              "kernel": run.kernel(host)}
    return [values[name][:width] for name, width in columns]


def _block(found: History, cells: dict[tuple[str, str], str], left: Sequence[tuple[str, int]],
           column: int, block: Sequence[str]) -> list[str]:
    heads = [wrap_name(v, column) for v in block]
    height = max(len(h) for h in heads)
    heads = [[""] * (height - len(h)) + h for h in heads]  # names sit on the numbers
    out = []
    for row in range(height):
        names = [n if row == height - 1 else "" for n, _ in left]
        out.append(("  " + "  ".join(f"{n:<{w}}" for n, (_, w) in zip(names, left, strict=True))
                    + "".join(f"  {h[row]:>{column}}" for h in heads)).rstrip())
    for run in reversed(found.runs):  # newest first
        row_left = "  ".join(f"{t:<{w}}" for t, (_, w) in
                             zip(_left(run, left, found.host), left, strict=True))
        out.append(("  " + row_left + "".join(
            f"  {cells[(run.key, v)]:>{column}}" for v in block)).rstrip())
    return out


def history_text(found: History, width: int = 80) -> str:
    """The runs (status, kernel) once, then one table per metric: a row per run (newest
    first), the variants side by side, at most `width` columns (the variants split into
    equal blocks that repeat time and run only when they cannot fit one). Several
    series (replicas, host sets): each one's, under its name."""
    if len(found.series) > 1:
        return "\n".join(f"== series {name}: {len(part.runs)} night(s)\n"
                         + _series_text(part, width)
                         for name in found.series
                         for part in (found.of_series(name),))
    return _series_text(found, width)


def _series_text(found: History, width: int) -> str:
    where = f" on host {found.host}" if found.host else ""
    out = textwrap.wrap(f"{found.profile}{where}: {len(found.runs)} run(s), median over "
                        "repetitions per variant", width, break_on_hyphens=False)
    for _, why in found.damaged:
        out += textwrap.wrap(f"left out, damaged: {why}", width, initial_indent="  ",
                             subsequent_indent="    ", break_on_hyphens=False,
                             break_long_words=False)
    out += _runs(found, width)
    if not found.metrics:
        return "\n".join([*out, "  no metric to show (no samples stored)"]) + "\n"
    shifts = found.change_points()
    for key, unit in found.metrics:
        cells = {(r.key, v): _cell(found.values.get((r.key, key, v)))
                 for r in found.runs for v in found.variants}
        shape = _columns(found.variants, cells, width)
        out += ["", with_unit(key, unit)]
        for i, block in enumerate(shape.blocks):
            if i:
                out.append("")
            out += _block(found, cells, LEFT, shape.column, block)
        for variant, points in shifts.get(key, {}).items():
            for run, point in points:
                out += textwrap.wrap(
                    f"change point: {variant} from run {run.run_id} ({run.when}): "
                    f"{format_number(point.before)} -> {format_number(point.after)} "
                    f"({point.change:+.1%})", width, initial_indent="  ",
                    subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(out) + "\n"


def history_doc(found: History) -> dict[str, Any]:
    shifts = found.change_points()
    return {
        "change_points": [{"metric": key, "variant": variant, "run_id": run.run_id,
                           "dir": str(run.directory), "time": run.when,
                           "before": point.before, "after": point.after,
                           "change": point.change}
                          for key, per in shifts.items() for variant, points in per.items()
                          for run, point in points],
        "profile": found.profile, "host": found.host,
        "damaged": [{"dir": d, "error": why} for d, why in found.damaged],
        "metrics": [{"key": k, "unit": u} for k, u in found.metrics],
        "variants": list(found.variants),
        "runs": [{"run_id": r.run_id, "dir": str(r.directory), "started": r.started,
                  "series": r.series, "replica": r.replica,
                  "time": r.when, "status": r.status, "kernel": r.kernels,
                  "trials": r.trials, "trials_ok": r.trials_ok,
                  "check": None if r.check is None else r.check.status,
                  "medians": {k: {v: found.values[(r.key, k, v)][0]
                                  for v in found.variants
                                  if (r.key, k, v) in found.values}
                              for k, _ in found.metrics}}
                 for r in reversed(found.runs)],
    }


def history_json(found: History) -> str:
    record = codec.checked(history_doc(found), HistoryRecord, "history")
    return codec.encode(record, indent=1).decode() + "\n"
