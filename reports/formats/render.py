"""Renderers of a stored run: self-contained HTML, cover-letter text, Markdown for pull
requests, JSON, JUnit, KTAP and the netdev CI's result JSON for machines (`napilab report
RUN_DIR --format ...`).

Everything comes from RUN_DIR (manifest.json, samples.parquet, latency/, raw/); nothing
is re-measured. HTML is rendered with Jinja2 autoescaping on, plots are inline SVG
checked by reports.plots.svg, the page has a CSP that forbids scripts and fetches, and links
to raw outputs are relative (they work next to the run's raw/ directory).
"""

from __future__ import annotations

import datetime as dt
import posixpath
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from napilab.harness.records import codec
from napilab.harness.store.manifest import TCG, Manifest
from napilab.harness.store.store import atomic_write
from napilab.reports.ab.compare import RunData, Table, load_run, table
from napilab.reports.ab.model import format_ci, format_number, format_p, format_pct, p_text
from napilab.reports.ci import ktap as ci_ktap
from napilab.reports.ci import nipa as ci_nipa
from napilab.reports.ci.nipa import NipaTarget
from napilab.reports.fleet import record as fleet_record
from napilab.reports.fleet import table as fleet_table
from napilab.reports.fleet import text as fleet_text
from napilab.reports.formats import (
    markdown,
    report_json,
    run_facts,
    samples_csv,
    sections,
    table_junit,
)
from napilab.reports.formats.text_table import text_table
from napilab.reports.load import text as load_text
from napilab.reports.load.curves import load_report
from napilab.reports.trace import overhead as trace_overhead
from napilab.reports.trace import text as trace_text
from napilab.reports.trace.breakdown import breakdowns

FORMATS = ("html", "text", "md", "json", "junit", "ktap", "nipa", "csv")
FILES = {"html": "report.html", "text": "report.txt", "md": "report.md",
         "json": "report.json", "junit": "report.junit.xml", "ktap": "report.ktap",
         "nipa": "report.nipa.json", "csv": "samples.csv"}


def relurl(path: str) -> str:
    """A path relative to the page as an href: every segment percent-quoted, so a host or
    file name can be neither a scheme (`javascript:`) nor a query or fragment."""
    parts = [p for p in path.split("/") if p not in ("", ".", "..")]
    return "/".join(quote(p, safe="") for p in parts)


def _when(t: object) -> str:
    if isinstance(t, int | float) and not isinstance(t, bool):
        return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "-"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("napilab.reports.formats", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update({
        "num": format_number, "pct": format_pct, "ci": format_ci, "pval": format_p,
        "ptext": p_text,
        # "~" is no CSS class name a stylesheet can select; the other verdicts are
        "vclass": lambda verdict: "same" if verdict == "~" else verdict,
        "cssname": lambda text: re.sub(r"[^a-z0-9-]", "-", str(text).lower()),
        "when": _when, "relurl": relurl, "basename": posixpath.basename,
    })
    return env


_ENV = environment()


def html(run: RunData, tab: Table | None = None) -> str:
    tab = tab if tab is not None else table(run)
    return _ENV.get_template("report.html.j2").render(
        manifest=_manifest_view(run.manifest), status=run_facts.run_status(run.manifest),
        sections=sections.build(run, tab))


def _manifest_view(manifest: Manifest) -> dict[str, Any]:
    """The manifest with the keys the page header reads, defaulted: a run that failed
    before its first trial still renders."""
    doc = codec.full(manifest)
    profile = {**doc["profile"], "name": manifest.profile.name or "?",
               "repeat": manifest.profile.repeat or "?", "order": manifest.profile.order or "?"}
    return {"started": None, "ended": None, "status": "unknown", **doc,
            "run_id": manifest.run_id or "?", "profile": profile}


def text(run: RunData, width: int = 80, tab: Table | None = None) -> str:
    """A fixed-width table in the style of a patch cover letter (seed 001), the
    statistics under it; a line on the run's status when it is not complete."""
    tab = tab if tab is not None else table(run)
    out = text_table(tab, width, run_facts.absent_functions(run.manifest))
    found = load_report(run.samples, run.manifest)
    if found is not None:
        out += "\n" + load_text.text(found)
    traced = trace_overhead.overhead(run, tab)
    if traced is not None:
        out += "\n" + trace_overhead.text(traced)
    staged = breakdowns(run, tab)
    if staged:
        out += "\n" + trace_text.text(staged)
    status = run_facts.run_status(run.manifest)
    if not status.complete:
        out += (f"\n  {status.status} run: {status.ok} of {status.total} trials completed"
                + (f", {status.failed} failed" if status.failed else "") + "\n")
    for column, hosts in run_facts.kernels(run.manifest).items():
        out += f"\n  {column}: " + "; ".join(f"{host} on {ran}" for host, ran in hosts.items())
    if run_facts.kernels(run.manifest):
        out += "\n"
    emulated = run_facts.emulated_hosts(run.manifest)
    if emulated:
        out += (f"\n  host(s) {', '.join(emulated)}: {TCG}; timings (latencies, rates, CPU "
                "times) are not\n  representative of hardware; counters and settings are\n")
    return out


def render(run: RunData, fmt: str, tab: Table | None = None,
           nipa: NipaTarget = ci_nipa.DEFAULT) -> str:
    """One format of the report, as text (`nipa`: the NIPA JSON's executor, branch and
    link, reports.ci.nipa)."""
    tab = tab if tab is not None else table(run)
    if fmt == "html":
        return html(run, tab)
    if fmt == "text":
        return text(run, tab=tab)
    if fmt == "md":
        return markdown.markdown(run, tab)
    if fmt == "json":
        return report_json.report_json(run, tab)
    if fmt == "junit":
        return table_junit.junit_xml(run, tab)
    if fmt == "ktap":
        return ci_ktap.ktap(table_junit.table_suite(run, tab))
    if fmt == "nipa":
        return ci_nipa.nipa_json(table_junit.table_suite(run, tab), nipa)
    if fmt == "csv":
        return samples_csv.samples_csv(run)
    raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")


def report_files(directory: str | Path, formats: list[str], *, print_text: bool = True,
                 nipa: NipaTarget = ci_nipa.DEFAULT) -> tuple[list[Path], str | None]:
    """`napilab report`: the chosen formats written as RUN_DIR/report.{html,txt,md,json,
    junit.xml,ktap,nipa.json}, except text when `print_text` (returned, for stdout, as
    the command has always printed it). The table and its statistics are computed once
    for all."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; expected {', '.join(FORMATS)}")
    if fleet_table.is_fleet(directory):
        return _fleet_files(Path(directory), formats, print_text=print_text, nipa=nipa)
    run = load_run(directory)
    tab = table(run)
    written = _write(run, tab, [f for f in formats if f != "text" or not print_text], nipa)
    return written, render(run, "text", tab) if print_text and "text" in formats else None


def _write(run: RunData, tab: Table, formats: list[str], nipa: NipaTarget) -> list[Path]:
    written = []
    for fmt in formats:
        path = run.directory / FILES[fmt]
        atomic_write(path, render(run, fmt, tab, nipa))
        written.append(path)
    return written


def _fleet_files(directory: Path, formats: list[str], *, print_text: bool,
                 nipa: NipaTarget) -> tuple[list[Path], str | None]:
    """A run over replicas: each replica's own reports in its directory (from the runs
    and tables the pooling read), and the pooled table in the run's (html, text, md,
    json; the other formats are each replica's)."""
    fleet = fleet_table.fleet_table(directory)
    written = []
    for run, tab in fleet.own.values():
        written += _write(run, tab, [f for f in formats if f != "text" or not print_text],
                          nipa)
    for fmt, render_fleet in (("text", fleet_text.text), ("md", fleet_text.markdown),
                              ("json", fleet_record.fleet_json), ("html", _fleet_html)):
        if fmt in formats and not (fmt == "text" and print_text):
            path = directory / FILES[fmt]
            atomic_write(path, render_fleet(fleet))
            written.append(path)
    return written, fleet_text.text(fleet) if print_text and "text" in formats else None


def _fleet_html(fleet: fleet_table.FleetTable) -> str:
    record = fleet_record.fleet_record(fleet)
    return _ENV.get_template("fleet.html.j2").render(record=record, replicas=fleet.replicas,
                                                     pct=fleet_table.pct)


def write_reports(directory: str | Path, formats: list[str]) -> list[Path]:
    """Every chosen format written to RUN_DIR (after `napilab run`)."""
    return report_files(directory, formats, print_text=False)[0]
