"""A bisection's reports, from bisect.json alone: bisect.txt (mail-ready: the first bad
commit and its subject, then the evidence table, each step's change, CI and verdict, and
the steps skipped with their reasons), bisect-report.json (the same as data) and
bisect.html (the table and the gated metric's median per step beside the endpoints')."""

from __future__ import annotations

import html
import json
import textwrap
from pathlib import Path
from typing import Any

from napilab.harness.bisect.record import BisectLog, Step
from napilab.harness.records import codec
from napilab.harness.store.store import atomic_write

TEXT, JSON, HTML = "bisect.txt", "bisect-report.json", "bisect.html"


def _name(log: BisectLog, step: Step) -> str:
    """A git range's commit (its short sha), or an image list's entry (the list tree's
    commit subject; a path by its file name)."""
    if step.number == 0:
        return "endpoints"
    if log.source == "images":
        return Path(step.subject).name or step.subject
    return step.commit[:12]


def _evidence(step: Step) -> tuple[str, str, str]:
    """(metric, change, CI) of a step's last round: its first gated case."""
    cases = step.rounds[-1].cases if step.rounds else []
    if not cases:
        return "-", "-", "-"
    c = cases[0]
    return c.metric, c.change, c.ci


def _headline(log: BisectLog) -> list[str]:
    answer = log.answer
    if answer is None:
        done = [s for s in log.steps if s.verdict]
        return [f"napilab bisect: not finished ({len(done)} step(s) decided)"]
    if answer.first_bad:
        what = "image" if log.source == "images" else "commit"
        return [f"napilab bisect: the first bad {what} is {answer.first_bad}",
                f"  {answer.subject}" if log.source == "git" else ""]
    return ["napilab bisect: inconclusive: the first bad one is one of "
            + ", ".join(c if log.source == "images" else c[:12] for c in answer.candidates)]



def text(log: BisectLog) -> str:
    lines = [ln for ln in _headline(log) if ln]
    good, bad = ((log.images[0], log.images[-1]) if log.source == "images"
                 else (log.good[:12], log.bad[:12]))
    head = [f"profile {log.profile_name}, variant {log.variant}, role {log.role}; "
            f"good {good}, bad {bad}",
            "endpoints: " + (", ".join(f"{m} {s}" for m, s in log.direction.items())
                             or "no metric changed"),
            "each step: the candidate against the good endpoint"
            + (" and the bad one" if log.against == "both" else "")
            + f", repeat {log.repeat} (up to {log.max_repeat} when inconclusive)"]
    lines += [""] + [ln for h in head for ln in _wrap(h)] + [""]
    width = max(12, *(len(_name(log, s)) for s in log.steps))
    lines.append(f"{'step':>4}  {'candidate':<{width}}  {'verdict':<7}  {'n':>3}  "
                 f"{'change':>9}  {'CI':>19}  boots")
    for step in log.steps:
        _, change, ci = _evidence(step)
        n = step.rounds[-1].repeat if step.rounds else 0
        verdict = step.verdict or step.phase
        if step.number == 0:
            verdict = "differ" if log.direction else (step.verdict or step.phase)
        lines.append(f"{step.number:>4}  {_name(log, step):<{width}}  {verdict:<7}  "
                     f"{n:>3}  {change:>9}  {ci:>19}  {step.boots:>5}")
    metric = next((c.metric for s in log.steps for r in s.rounds for c in r.cases), None)
    if metric:
        lines += _wrap(f"(change and its 90% CI: {metric}, the candidate against the good "
                       "endpoint)")
    skipped = [s for s in log.steps if s.verdict == "skip"]
    if skipped:
        lines += ["", "skipped:"]
        lines += [ln for s in skipped for ln in _wrap(f"{_name(log, s)}: {s.reason}", "  ")]
    if log.answer is not None and log.answer.text and log.source == "git":
        lines += ["", "git bisect:"] + [f"  {ln}"[:80] for ln in
                                        log.answer.text.splitlines()[:12]]
    return "\n".join(lines) + "\n"


def _wrap(line: str, indent: str = "") -> list[str]:
    """A line of at most 80 columns, continued indented (mail)."""
    return textwrap.wrap(line, 80, initial_indent=indent, subsequent_indent=indent + "    ",
                         break_long_words=False, break_on_hyphens=False) or [""]


def document(log: BisectLog) -> dict[str, Any]:
    doc: dict[str, Any] = codec.plain(log)
    doc["report"] = {"first_bad": log.answer.first_bad if log.answer else None,
                     "skipped": [s.commit for s in log.steps if s.verdict == "skip"],
                     "measured_steps": sum(1 for s in log.steps if s.number > 0
                                           and s.verdict in ("good", "bad")),
                     "boots": sum(s.boots for s in log.steps)}
    return doc


def page(log: BisectLog) -> str:
    rows = []
    points = []
    for step in log.steps:
        metric, change, ci = _evidence(step)
        cases = step.rounds[-1].cases if step.rounds else []
        median = cases[0].candidate if cases else None
        if median is not None:
            points.append((step, median, cases[0].good))
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            step.number, _name(log, step), step.subject, step.verdict or step.phase,
            step.rounds[-1].repeat if step.rounds else "-", metric, change, ci,
            step.boots, step.reason)) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("step", "candidate", "subject", "verdict", "n",
                                              "metric", "change", "CI", "boots", "why"))
    title = html.escape(" ".join(_headline(log)))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
            "<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left;"
            "border-bottom:1px solid #ddd}</style></head><body>"
            f"<h1>{title}</h1>{_svg(points)}<table><tr>{head}</tr>{''.join(rows)}</table>"
            "</body></html>\n")


def _svg(points: list[tuple[Step, float, float | None]]) -> str:
    """The gated metric's median per step (the candidate's; the good endpoint's as a
    grey tick), a bar each."""
    if not points:
        return ""
    top = max(max(v, g or 0.0) for _, v, g in points) or 1.0
    width, height, bar = 60 * len(points) + 40, 180, 30
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height + 40}'>"]
    for i, (step, value, good) in enumerate(points):
        x = 20 + 60 * i
        h = height * value / top
        colour = {"bad": "#c33", "good": "#3a3"}.get(step.verdict or "", "#888")
        parts.append(f"<rect x='{x}' y='{height - h:.1f}' width='{bar}' height='{h:.1f}' "
                     f"fill='{colour}'><title>{html.escape(f'{value:g}')}</title></rect>")
        if good is not None:
            y = height - height * good / top
            parts.append(f"<line x1='{x - 4}' x2='{x + bar + 4}' y1='{y:.1f}' y2='{y:.1f}' "
                         "stroke='#555' stroke-width='2'/>")
        parts.append(f"<text x='{x}' y='{height + 15}' font-size='11'>{step.number}</text>")
        parts.append(f"<text x='{x}' y='{height + 30}' font-size='10'>"
                     f"{html.escape(f'{value:.4g}')}</text>")
    return "".join(parts) + "</svg>"


def write(directory: str | Path, log: BisectLog) -> list[Path]:
    out = Path(directory)
    written = []
    for name, body in ((TEXT, text(log)), (JSON, json.dumps(document(log), indent=1) + "\n"),
                       (HTML, page(log))):
        atomic_write(out / name, body)
        written.append(out / name)
    return written
