"""The sections of report.html, registered in SECTIONS in the order the page shows them.

Each entry is name -> (title, function(context) -> data); the page renders
`templates/section_<name>.html.j2` with that data as `data` (Jinja2 autoescape on: every
string from a host, tool or profile is text, never markup). The verdict summary comes
first: it is what a reader of a published report looks for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from napilab.harness import redact
from napilab.harness.records import codec
from napilab.reports.ab import queue_traffic, verdicts
from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Table
from napilab.reports.formats import run_facts
from napilab.reports.load import text as load_text
from napilab.reports.load.curves import load_report
from napilab.reports.plots import plots
from napilab.reports.trace import overhead as trace_overhead
from napilab.reports.trace import text as trace_text
from napilab.reports.trace.breakdown import breakdowns

MAX_FINDINGS = 25  # significant comparisons listed in the summary; the table has them all


@dataclass(frozen=True)
class Context:
    """What every section may read: the run, its A/B table, and facts used twice."""

    run: RunData
    table: Table
    absent: dict[str, frozenset[str]]
    settings: list[run_facts.SettingRow]
    status: run_facts.RunStatus


def context(run: RunData, table: Table) -> Context:
    return Context(run, table, run_facts.absent_functions(run.manifest),
                   run_facts.settings_rows(run.manifest), run_facts.run_status(run.manifest))


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    data: Mapping[str, Any]


def verdict_summary(ctx: Context) -> dict[str, Any]:
    summary = verdicts.summary(ctx.table)
    return {"summary": summary, "findings": summary.findings[:MAX_FINDINGS],
            "more": max(0, len(summary.findings) - MAX_FINDINGS),
            "one_variant": not ctx.table.pairs, "status": ctx.status}


def ab_table(ctx: Context) -> dict[str, Any]:
    absent = {(i, column) for i, line in enumerate(ctx.table.lines)
              for column in ctx.table.variants if run_facts.is_absent(line, column, ctx.absent)}
    return {"table": ctx.table, "absent": absent}


def plot_figures(ctx: Context) -> dict[str, Any]:
    rendered = plots.render_all(ctx.run, ctx.table)
    return {"figures": [p for p in rendered if isinstance(p, plots.Plot)],
            "omitted": [p for p in rendered if isinstance(p, plots.Omitted)]}


def load(ctx: Context) -> dict[str, Any] | None:
    """The latency-load curves, knees and capacities; None (no section) without a
    `load:` ladder."""
    found = load_report(ctx.run.samples, ctx.run.manifest)
    if found is None:
        return None
    rendered = plots.load_figures(found)
    return {"report": found, "header": load_text.header(found),
            "rows": [(c, load_text.rows(found, c), load_text.derived(found, c))
                     for c in found.curves],
            "caption": load_text.caption(found, 0),
            "figures": [p for p in rendered if isinstance(p, plots.Plot)],
            "omitted": [p for p in rendered if isinstance(p, plots.Omitted)]}


def traced(ctx: Context) -> dict[str, Any] | None:
    """The tracer's overhead (each variant against its traced twin), or that it was not
    measured; None (no section) for a run that traced nothing."""
    found = trace_overhead.overhead(ctx.run, ctx.table)
    return None if found is None else trace_overhead.html_data(found)


def trace(ctx: Context) -> dict[str, Any] | None:
    """The trace collector's stages per comparison, with their figures; None (no
    section) for a run without trace rows."""
    found = breakdowns(ctx.run, ctx.table)
    if not found:
        return None
    rendered = plots.stage_figures(found)
    return {"breakdowns": [
        {"heading": trace_text.heading(bd), "traced": trace_text.traced_text(bd),
         "roles": [{"title": trace_text.role_title(bd, role), "rows": trace_text.rows(bd, role),
                    "cpus": trace_text.cpu_lines(bd, role),
                    "absent": trace_text.absent_lines(bd, role),
                    "attribution": trace_text.attribution_text(bd.attribution[role])
                    if role in bd.attribution else ""}
                   for role in trace_text.roles_of(bd)],
         "notes": list(bd.notes), "baseline": bd.baseline, "variant": bd.variant}
        for bd in found],
        "header": [*trace_text.HEADER[:-1], "note"],
        "figures": [p for p in rendered if isinstance(p, plots.Plot)],
        "omitted": [p for p in rendered if isinstance(p, plots.Omitted)]}


def settings(ctx: Context) -> dict[str, Any]:
    flagged = [s for s in ctx.settings if s.state in ("mismatch", "unread")]
    return {"rows": ctx.settings, "flagged": len(flagged),
            "absent": [s for s in ctx.settings if s.state == "absent"]}


def hosts(ctx: Context) -> dict[str, Any]:
    return {"hosts": run_facts.hosts(ctx.run.manifest),
            "confounders": run_facts.confounders(ctx.run.manifest, ctx.settings,
                                                 ctx.run.samples),
            "queues": queue_traffic.carried(ctx.run.samples)}


def commands(ctx: Context) -> dict[str, Any]:
    return {"commands": run_facts.commands(ctx.run)}


def trials(ctx: Context) -> dict[str, Any]:
    raw = {t.trial: t for t in run_facts.raw_outputs(ctx.run)}
    return {"status": ctx.status, "failures": run_facts.failures(ctx.run),
            "trials": [t.to_json() for t in ctx.run.manifest.trials], "raw": raw,
            "absent": ctx.absent}


def profile(ctx: Context) -> dict[str, Any]:
    """The resolved profile as YAML (the form it was written in), secrets redacted,
    folded away: it is the reference at the end of a page, some hundred lines long."""
    meta = ctx.run.manifest.profile
    document = meta.document
    shown = redact.document(document) if isinstance(document, dict) else document
    text = yaml.safe_dump(codec.plain(shown), sort_keys=False,
                          allow_unicode=True, width=100)
    return {"text": text, "lines": text.count("\n"), "path": meta.path,
            "digest": str(meta.digest or "")[:12]}


SECTIONS: dict[str, tuple[str, Callable[[Context], Mapping[str, Any] | None]]] = {
    "verdicts": ("Verdicts", verdict_summary),
    "load": ("Latency under offered load", load),
    "ab_table": ("A/B table", ab_table),
    "trace_overhead": (trace_overhead.TITLE, traced),
    "trace": ("Where the time went: stages of the receive path", trace),
    "plots": ("Plots", plot_figures),
    "settings": ("Settings requested and read back", settings),
    "hosts": ("Hosts and confounders", hosts),
    "commands": ("Commands", commands),
    "trials": ("Trials and raw outputs", trials),
    "profile": ("Profile (resolved)", profile),
}


# sections a run shows only when it has them (their function returns None otherwise)
OPTIONAL = ("load", "trace_overhead", "trace")


def build(run: RunData, table: Table) -> list[Section]:
    ctx = context(run, table)
    built = ((name, title, function(ctx)) for name, (title, function) in SECTIONS.items())
    return [Section(name, title, data) for name, title, data in built if data is not None]
