"""The A/B table: one line per metric, one cell per variant, from stored data only.

Lines come from the profile's `report.table` (the shape of a cover letter's table) or,
without one, from every run-level metric of the workload and the collectors' totals.
A cell holds the per-repetition values of its variant; the table shows their median.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.store import load_manifest, load_samples

# Default lines when a profile has no report.table: the collectors' headline counters.
DEFAULT_COLLECTOR_METRICS = {
    "proc_stat": ("hardirq", "softirq"),
    "softnet_stat": ("processed", "dropped", "time_squeeze", "received_rps"),
    "interrupts": ("function_call_interrupts", "rescheduling_interrupts"),
}


@dataclass(frozen=True)
class RunData:
    directory: Path
    manifest: dict[str, Any]
    samples: pd.DataFrame

    @property
    def variants(self) -> list[str]:
        """Variants in profile order (baseline first), as the manifest lists trials."""
        seen: dict[str, None] = {}
        for trial in sorted(self.manifest.get("trials", []), key=lambda t: (t["variant"] !=
                                                                           self.baseline)):
            seen.setdefault(trial["variant"], None)
        return [v for v in self.manifest.get("variants", list(seen)) if v in seen]

    @property
    def baseline(self) -> str:
        return str(self.manifest.get("baseline", ""))


def load_run(directory: str | Path) -> RunData:
    directory = Path(directory)
    return RunData(directory, load_manifest(directory), load_samples(directory))


@dataclass(frozen=True)
class Cell:
    values: tuple[float, ...]  # one per completed repetition

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None


@dataclass(frozen=True)
class Line:
    label: str
    source: str
    metric: str
    role: str | None
    unit: str
    cells: dict[str, Cell]


@dataclass(frozen=True)
class Table:
    variants: list[str]
    baseline: str
    lines: list[Line]


def table(run: RunData) -> Table:
    rows = run.manifest.get("profile", {}).get("document", {}).get("report", {}).get("table")
    specs = [(r.get("label") or f"{r['source']} {r['metric']}", r["source"], r["metric"],
              r.get("role")) for r in rows] if rows else _default_specs(run)
    totals = run.samples[run.samples["cpu"].isna()] if len(run.samples) else run.samples
    lines = [_line(totals, run.variants, *spec) for spec in specs]
    return Table(run.variants, run.baseline, [ln for ln in lines if ln is not None])


def _default_specs(run: RunData) -> list[tuple[str, str, str, str | None]]:
    frame = run.samples[run.samples["cpu"].isna()] if len(run.samples) else run.samples
    workload = run.manifest.get("workload_source")
    specs: list[tuple[str, str, str, str | None]] = []
    if len(frame):
        for key, _ in frame.groupby(["source", "metric", "role"], sort=False):
            source, metric, role = (str(k) for k in key)
            wanted = source == workload or metric in DEFAULT_COLLECTOR_METRICS.get(source, ())
            if wanted:
                specs.append((f"{metric} ({role})" if source == workload else
                              f"{source} {metric} ({role})", source, metric, role))
    return specs


def _line(frame: pd.DataFrame, variants: list[str], label: str, source: str, metric: str,
          role: str | None) -> Line | None:
    if not len(frame):
        return Line(label, source, metric, role, "", {v: Cell(()) for v in variants})
    match = frame[(frame["source"] == source) & (frame["metric"] == metric)]
    if role is not None:
        match = match[match["role"] == role]
    unit = str(match["unit"].iloc[0]) if len(match) else ""
    cells = {}
    for variant in variants:
        per_rep = match[match["variant"] == variant].groupby("rep")["value"].sum()
        cells[variant] = Cell(tuple(float(v) for v in per_rep.to_numpy()))
    return Line(label, source, metric, role, unit, cells)


def format_number(value: float | None, unit: str = "") -> str:
    """Cover-letter style: thousands separators, integers as integers, and three
    significant digits for small fractional values."""
    if value is None:
        return "-"
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    return f"{value:.3g}"
