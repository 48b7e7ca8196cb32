"""The report as one JSON document (`napilab report RUN_DIR --format json`): the run's
status, verdict summary, the A/B table (reports.ab.table_json: every number unrounded),
kprobe functions absent, settings with their read-back state, hosts, confounders,
failed trials and commands. Strict JSON: an infinite CI side or NaN is null."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import msgspec

from napilab.harness.records import codec
from napilab.harness.records.codec import FrozenRecord
from napilab.reports.ab import queue_traffic, verdicts
from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Table
from napilab.reports.ab.table_json import TableRecord, table_doc
from napilab.reports.formats import run_facts
from napilab.reports.load.curves import load_json, load_report
from napilab.reports.trace import overhead as trace_overhead
from napilab.reports.trace import text as trace_text
from napilab.reports.trace.breakdown import breakdowns

SCHEMA = "napilab.report/1"


class RunRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "the report's run"

    id: str
    dir: str
    profile: str
    description: str = ""
    started: float | None = None
    ended: float | None = None
    napilab: dict[str, Any] = msgspec.field(default_factory=dict)


class StatusRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "the run's status"

    status: str  # complete | partial | failed | interrupted | running
    total: int
    ok: int
    failed: int
    incomplete: bool


class VerdictsRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "the verdict summary"

    counts: dict[str, int] = msgspec.field(default_factory=dict)
    total: int = 0
    findings: list[Any] = msgspec.field(default_factory=list)
    warnings: list[Any] = msgspec.field(default_factory=list)


class ReportRecord(FrozenRecord, frozen=True, omit_defaults=False):
    """report.json (`napilab report RUN_DIR --format json`), versioned by `schema`."""

    WHAT = "a report (report.json)"

    schema: str
    run: RunRecord
    status: StatusRecord
    verdicts: VerdictsRecord
    table: TableRecord
    absent: dict[str, list[str]] = msgspec.field(default_factory=dict)  # variant -> fns
    settings: list[dict[str, Any]] = msgspec.field(default_factory=list)
    hosts: list[dict[str, Any]] = msgspec.field(default_factory=list)
    confounders: Any = None
    queues: Any = None
    failures: list[dict[str, Any]] = msgspec.field(default_factory=list)
    commands: list[dict[str, Any]] = msgspec.field(default_factory=list)
    load: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET  # runs with a load ladder
    # runs with the trace collector: the stages per comparison (reports.trace.text)
    trace: list[dict[str, Any]] | msgspec.UnsetType = msgspec.UNSET
    # runs that traced (reports.trace.overhead): the tracer's overhead, or that it was
    # not measured (traced: all)
    trace_overhead: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def report_doc(run: RunData, tab: Table) -> dict[str, Any]:
    manifest = run.manifest
    profile = manifest.profile
    summary = verdicts.summary(tab)
    settings = run_facts.settings_rows(manifest)
    absent = run_facts.absent_functions(manifest)
    doc = table_doc(tab)
    for line, line_doc in zip(tab.lines, doc["lines"], strict=True):
        line_doc["absent"] = [c for c in tab.variants if run_facts.is_absent(line, c, absent)]
    return {
        "schema": SCHEMA,
        "run": {"id": manifest.run_id, "dir": str(run.directory),
                "profile": profile.name, "description": profile.description,
                "started": manifest.started, "ended": manifest.ended,
                "napilab": manifest.napilab.to_json()},
        "status": asdict(run_facts.run_status(manifest)),
        "verdicts": {"counts": summary.counts, "total": summary.total,
                     "findings": summary.findings, "warnings": summary.warnings},
        "table": doc,
        "absent": {v: sorted(names) for v, names in absent.items()},
        "settings": [asdict(s) for s in settings],
        "hosts": [asdict(h) for h in run_facts.hosts(manifest)],
        "confounders": run_facts.confounders(manifest, settings, run.samples),
        "queues": queue_traffic.carried(run.samples),
        "failures": [asdict(f) for f in run_facts.failures(run)],
        "commands": [{**asdict(c), "shell": c.shell} for c in run_facts.commands(run)],
        **({"load": load_json(found)} if (found := load_report(run.samples, manifest))
           else {}),
        **({"trace_overhead": trace_overhead.json_doc(traced)}
           if (traced := trace_overhead.overhead(run, tab)) else {}),
        **({"trace": trace_text.json_doc(staged)} if (staged := breakdowns(run, tab))
           else {}),
    }


def report_record(run: RunData, tab: Table) -> ReportRecord:
    """report_doc's data checked against the record (what report.json holds)."""
    return codec.checked(_finite(report_doc(run, tab)), ReportRecord, "report")


def report_json(run: RunData, tab: Table) -> str:
    return codec.encode(report_record(run, tab), indent=1).decode() + "\n"
