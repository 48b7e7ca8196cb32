"""`napilab compare` as Markdown and as an HTML page: the runs under their labels, the
differences between them (intended, or allowed mismatches), then the same A/B table,
verdicts and statistics a run's report has, columns label x variant (seed 001's
layout: counters as rows, Baseline and Patched as columns)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from napilab.reports.ab import verdicts
from napilab.reports.ab.compare import RunData
from napilab.reports.ab.cross_run import LabelledRun, column_name
from napilab.reports.ab.model import Table
from napilab.reports.formats import markdown as md
from napilab.reports.formats import render, run_facts
from napilab.reports.plots import plots

_ENV = render.environment()


@dataclass(frozen=True)
class Noted:
    """A difference between the baseline run and another, as compare prints it."""

    kind: str  # intended | mismatch
    text: str


def absent(runs: Sequence[LabelledRun], variants: Sequence[str]) -> dict[str, frozenset[str]]:
    """Column -> the kprobe functions that run's kernel could not probe (printed absent,
    as seed 001's table prints kick_defer_list_purge() for the baseline kernel)."""
    out = {}
    for r in runs:
        found = run_facts.absent_functions(r.run.manifest)
        for variant in variants:
            out[column_name(r.label, variant, variants)] = found.get(variant, frozenset())
    return out


def describe(label: str, run: RunData) -> str:
    manifest = run.manifest
    return f"{label}: {run.directory} (run {manifest.run_id}, {manifest.status or '?'})"


def markdown(runs: Sequence[LabelledRun], tab: Table, noted: Sequence[Noted],
             missing: dict[str, frozenset[str]]) -> str:
    labels = " vs ".join(md.escape(r.label) for r in runs[1:])
    out = [f"### napilab compare: {labels} vs {md.escape(runs[0].label)} (baseline)", ""]
    out += [f"- {md.escape(describe(r.label, r.run))}" for r in runs] + [""]
    for note in noted:
        word = "intended" if note.kind == "intended" else "**MISMATCH (allowed)**"
        out.append(f"- {word}: {md.escape(note.text)}")
    if noted:
        out.append("")
    out += md.tables(tab, missing)
    return "\n".join(out).rstrip("\n") + "\n"


def html(runs: Sequence[LabelledRun], tab: Table, noted: Sequence[Noted],
         missing: dict[str, frozenset[str]]) -> str:
    statuses = [run_facts.run_status(r.run.manifest) for r in runs]
    status = run_facts.RunStatus(
        "complete" if all(s.complete for s in statuses) else "partial",
        sum(s.total for s in statuses), sum(s.ok for s in statuses),
        sum(s.failed for s in statuses), any(s.incomplete for s in statuses))
    summary = verdicts.summary(tab)
    verdict_data = {"summary": summary, "findings": summary.findings[:md.MAX_FINDINGS],
                    "more": max(0, len(summary.findings) - md.MAX_FINDINGS),
                    "one_variant": not tab.pairs, "status": status}
    cells = {(i, col) for i, line in enumerate(tab.lines) for col in tab.variants
             if run_facts.is_absent(line, col, missing)}
    drawn = plots.frontier_of(tab)
    figures = {"figures": [drawn] if isinstance(drawn, plots.Plot) else [],
               "omitted": [drawn] if isinstance(drawn, plots.Omitted) else []}
    return _ENV.get_template("compare.html.j2").render(
        runs=[(r.label, describe(r.label, r.run), r.run) for r in runs], noted=noted,
        verdicts=verdict_data, table={"table": tab, "absent": cells}, figures=figures,
        title=" vs ".join(r.label for r in runs))
