"""The report as one JSON document (`napilab report RUN_DIR --format json`): the run's
status, verdict summary, the A/B table (reports.ab.table_json: every number unrounded),
kprobe functions absent, settings with their read-back state, hosts, confounders,
failed trials and commands. Strict JSON: an infinite CI side or NaN is null."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from napilab.reports.ab import queue_traffic, verdicts
from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Table
from napilab.reports.ab.table_json import table_doc
from napilab.reports.formats import run_facts
from napilab.reports.load.curves import load_json, load_report

SCHEMA = "napilab.report/1"


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
    }


def report_json(run: RunData, tab: Table) -> str:
    return json.dumps(_finite(report_doc(run, tab)), indent=1, allow_nan=False,
                      default=str) + "\n"
