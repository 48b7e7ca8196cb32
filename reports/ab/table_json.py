"""The A/B table as JSON for machines (`napilab compare --format json`): every number
the text and HTML show, unrounded, plus the reasons behind each verdict."""

from __future__ import annotations

import math
from typing import Any

import msgspec

from napilab.harness.records.codec import FrozenRecord
from napilab.harness.stats.compare import Comparison
from napilab.harness.stats.stats import Summary
from napilab.reports.ab.model import Cell, Line, Table


def summary_doc(summary: Summary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    ci = summary.median_ci
    return {"n": summary.n, "median": summary.median, "mean": summary.mean,
            "min": summary.minimum, "max": summary.maximum, "cv": summary.cv,
            "median_ci": None if ci is None else [ci.low, ci.high],
            "median_ci_coverage": None if ci is None else ci.coverage,
            "note": summary.note}


def cell_doc(cell: Cell) -> dict[str, Any]:
    doc: dict[str, Any] = {"values": list(cell.values), "trials": list(cell.trials),
                           "value": cell.value, "summary": summary_doc(cell.summary)}
    if cell.drift is not None:
        doc["drift"] = {"tau": cell.drift.tau, "p": cell.drift.p_value,
                        "slope_per_trial": cell.drift.slope_per_trial,
                        "testable": cell.drift.testable, "significant": cell.drift.significant}
    if cell.pooled is not None:
        doc["pooled"] = {"percentile": cell.pooled.percentile, "value": cell.pooled.value,
                         "ci": None if cell.pooled.ci is None else list(cell.pooled.ci),
                         "per_repetition": list(cell.pooled.per_repetition)}
    return doc


def _bound(value: float) -> float | None:
    """JSON has no infinity: an unbounded CI side is null."""
    return value if math.isfinite(value) else None


def comparison_doc(found: Comparison) -> dict[str, Any]:
    return {"verdict": found.verdict.value, "change": found.change, "scale": found.scale,
            "change_ci": [_bound(v) for v in found.change_ci], "confidence": found.confidence,
            "p": found.p_value, "p_adjusted": found.p_adjusted, "adjust": found.adjust.value,
            "test": found.test_method, "alpha": found.alpha, "min_effect": found.min_effect,
            "detectable_change": found.mde, "n_needed": found.n_needed,
            "n_baseline": found.baseline.n, "n_variant": found.variant.n,
            "reason": found.reason}


def line_doc(line: Line) -> dict[str, Any]:
    return {"label": line.label, "source": line.source, "metric": line.metric,
            "role": line.role, "unit": line.unit, "direction": line.direction,
            "direction_origin": line.direction_origin,
            "cells": {name: cell_doc(cell) for name, cell in line.cells.items()},
            "comparisons": {name: {**comparison_doc(found),
                                   "noise": {"exceeds": line.noise[name].exceeds,
                                             "reason": line.noise[name].reason}
                                   if name in line.noise else None}
                            for name, found in line.comparisons.items()},
            "notes": dict(line.notes)}


def table_doc(tab: Table) -> dict[str, Any]:
    return {"columns": list(tab.variants), "baseline": tab.baseline,
            "pairs": [list(p) for p in tab.pairs], "adjust": tab.adjust,
            "family": tab.family, "lines": [line_doc(ln) for ln in tab.lines]}


# -- the records (harness.records): what report.json, check.json and `compare --format
# json` hold of a table; every key always written, `drift`/`pooled` only when measured


class ComparisonRecord(FrozenRecord, frozen=True):
    """One comparison (comparison_doc); null where JSON has no number."""

    WHAT = "a comparison"

    verdict: str
    change: float | None = None
    scale: str = "ratio"
    change_ci: list[float | None] = msgspec.field(default_factory=list)
    confidence: float | None = None
    p: float | None = None
    p_adjusted: float | None = None
    adjust: str = ""
    test: str = ""
    alpha: float | None = None
    min_effect: float | None = None
    detectable_change: float | None = None
    n_needed: int | None = None
    n_baseline: int = 0
    n_variant: int = 0
    reason: str = ""


class NoiseRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a noise note"

    exceeds: bool
    reason: str = ""


class LineComparison(ComparisonRecord, frozen=True, omit_defaults=False):
    WHAT = "a line's comparison"

    noise: NoiseRecord | None = None


class SummaryRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a cell's summary"

    n: int
    median: float | None = None
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    cv: float | None = None
    median_ci: list[float | None] | None = None
    median_ci_coverage: float | None = None
    note: str | None = None


class DriftRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a cell's drift"

    tau: float | None = None
    p: float | None = None
    slope_per_trial: float | None = None
    testable: bool = False
    significant: bool = False


class PooledRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a pooled percentile"

    percentile: float | None = None
    value: float | None = None
    ci: list[float | None] | None = None
    per_repetition: list[float | None] = msgspec.field(default_factory=list)


class CellRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a table cell"

    values: list[float | None] = msgspec.field(default_factory=list)
    trials: list[Any] = msgspec.field(default_factory=list)
    value: float | None = None
    summary: SummaryRecord | None = None
    drift: DriftRecord | msgspec.UnsetType = msgspec.UNSET
    pooled: PooledRecord | msgspec.UnsetType = msgspec.UNSET


class LineRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a table line"

    label: str
    source: str
    metric: str
    unit: str
    direction: str
    direction_origin: str
    role: str | None = None
    cells: dict[str, CellRecord] = msgspec.field(default_factory=dict)
    comparisons: dict[str, LineComparison] = msgspec.field(default_factory=dict)
    notes: dict[str, Any] = msgspec.field(default_factory=dict)
    # variants whose kprobe functions the kernel lacked (report.json only)
    absent: list[str] | msgspec.UnsetType = msgspec.UNSET


class TableRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "an A/B table"

    columns: list[str] = msgspec.field(default_factory=list)
    baseline: str = ""
    pairs: list[list[str]] = msgspec.field(default_factory=list)
    adjust: str = ""
    family: int = 0
    lines: list[LineRecord] = msgspec.field(default_factory=list)
