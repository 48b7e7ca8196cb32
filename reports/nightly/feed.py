"""The Atom feed (RFC 4287) of the published site: one entry per run in which
`napilab check` found a regression (RUN_DIR/check.json, status "regression"), newest
first, each with the regressed metrics and their evidence as plain text. Built with
ElementTree: every string is escaped as XML text, and characters XML cannot carry
(a tool's ANSI colour codes) are replaced."""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from napilab.harness.stats.compare import RATIO
from napilab.reports.ab.model import format_ci, format_pct, p_text
from napilab.reports.ab.table_json import ComparisonRecord
from napilab.reports.nightly.check_record import CaseRecord, CheckRecord

ATOM = "http://www.w3.org/2005/Atom"
MAX_ENTRIES = 100
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass(frozen=True)
class Entry:
    id: str
    title: str
    updated: dt.datetime
    href: str  # the run's report, relative to the site (or absolute with a base URL)
    summary: str


def rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _case_line(case: CaseRecord) -> str:
    found = case.comparison or ComparisonRecord(verdict="")
    ci = [*found.change_ci, None, None][:2]  # null: the side is unbounded
    low = float("-inf") if ci[0] is None else float(ci[0])
    high = float("inf") if ci[1] is None else float(ci[1])
    scale = found.scale or RATIO
    shown = f"{found.confidence:.0%}" if found.confidence is not None else "95%"
    return (f"{case.label} ({case.variant}): "
            f"{format_pct(found.change, (low, high), scale, case.unit)} ({shown} CI "
            f"{format_ci((low, high), found.change, scale, case.unit)}), "
            f"{p_text(found.p_adjusted)} (Holm), threshold "
            f"{case.threshold or str(case.max_regression_pct) + '%'}")


def regression_entry(run_id: str, profile: str, check: CheckRecord, href: str,
                     updated: dt.datetime) -> Entry | None:
    """The feed entry of one run's check summary; None when it found no regression."""
    if check.status != "regression":
        return None
    cases = check.regressions
    lines = [f"napilab check of {profile} run {run_id} against baseline run "
             f"{check.baseline.run_id}: {len(cases)} regression(s)",
             *(_case_line(c) for c in cases)]
    return Entry(f"urn:napilab:check:{profile}:{run_id}",
                 f"{profile}: {len(cases)} regression(s) in run {run_id}", updated, href,
                 "\n".join(lines))


def _text(parent: ET.Element, tag: str, text: str, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, f"{{{ATOM}}}{tag}", attrs)
    element.text = _NOT_XML.sub("\ufffd", text)
    return element


def atom(entries: Sequence[Entry], *, title: str, feed_id: str, updated: dt.datetime,
         base_url: str | None = None) -> str:
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed")
    _text(feed, "title", title)
    _text(feed, "id", feed_id)
    newest = max([e.updated for e in entries], default=updated)
    _text(feed, "updated", rfc3339(newest))
    author = ET.SubElement(feed, f"{{{ATOM}}}author")
    _text(author, "name", "napilab check")
    base = (base_url.rstrip("/") + "/") if base_url else ""
    ET.SubElement(feed, f"{{{ATOM}}}link", {"rel": "alternate", "href": base + "index.html"})
    if base:
        ET.SubElement(feed, f"{{{ATOM}}}link", {"rel": "self", "href": base + "feed.xml"})
    for entry in sorted(entries, key=lambda e: e.updated, reverse=True)[:MAX_ENTRIES]:
        element = ET.SubElement(feed, f"{{{ATOM}}}entry")
        _text(element, "title", entry.title)
        _text(element, "id", entry.id)
        _text(element, "updated", rfc3339(entry.updated))
        ET.SubElement(element, f"{{{ATOM}}}link", {"rel": "alternate",
                                                   "href": base + entry.href})
        _text(element, "summary", entry.summary, type="text")
    ET.indent(feed)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, "unicode") + "\n"
