"""The report of a `napilab tune` study, from its tune.json and the confirmation's
verdicts (reports.tune.confirm): tune.txt and tune.md (for mailing lists and pull requests),
tune.html (the same, with the search drawn: the objective candidate by candidate with
the best so far, and the first two goal metrics against each other with the front), and
tune-report.json.

What it says: the space and the goal, every candidate measured (its values and numbers:
single trials, which the search ranks by and nothing else), the candidates re-measured
with the baseline and their verdicts with intervals, and what is recommended, which is
only a candidate confirmed better.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from napilab.harness.records import codec
from napilab.harness.records.codec import FrozenRecord
from napilab.harness.store.store import atomic_write
from napilab.harness.tune.record import Baseline, Goal, Stopped, TuneStudy
from napilab.reports.formats import markdown as md
from napilab.reports.formats import render
from napilab.reports.tune.confirm import Confirmation

FILES = ("tune.txt", "tune.md", "tune.html", "tune-report.json")


class CandidateRow(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a searched candidate"

    name: str
    values: dict[str, Any]
    state: str
    numbers: dict[str, float | None] = msgspec.field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None
    run: str | None = None


class ConfirmedRow(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a confirmed candidate"

    name: str
    values: dict[str, Any]
    verdicts: dict[str, str]  # objective label -> better | worse | ~ | not-enough-data
    changes: dict[str, str]  # objective label -> the change with its interval, as printed
    medians: dict[str, float | None]
    inside: dict[str, bool]
    confirmed: bool
    why: str


class ConfirmationReport(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "the confirmation"

    baseline: str
    run: str | None = None
    baseline_medians: dict[str, float | None] = msgspec.field(default_factory=dict)
    candidates: list[ConfirmedRow] = msgspec.field(default_factory=list)
    recommended: list[str] = msgspec.field(default_factory=list)
    profile: str | None = None
    cost: dict[str, float | None] = msgspec.field(default_factory=dict)  # busy cores


class TuneReportRecord(FrozenRecord, frozen=True, omit_defaults=False):
    """tune-report.json: everything the tune report shows, as data."""

    WHAT = "a tune report (tune-report.json)"

    study: str
    profile: str
    tune: Goal
    labels: list[str] = msgspec.field(default_factory=list)
    bounds: list[str] = msgspec.field(default_factory=list)
    baseline: Baseline | None = None
    candidates: list[CandidateRow] = msgspec.field(default_factory=list)
    measured: int = 0
    seconds: float = 0.0
    stopped: Stopped | None = None
    confirmation: ConfirmationReport | None = None


def document(state: TuneStudy, conf: Confirmation | None) -> dict[str, Any]:
    """Everything the report shows, as data (tune-report.json), from the study's record
    (harness.tune.record) and the confirmation's verdicts."""
    tune = codec.full(state.tune)
    labels = [label for label, _ in state.tune.objectives]
    bounds = [label for label, _, _ in state.tune.bounds]
    rows = [{"name": cand.name, "values": cand.values, "state": cand.state,
             "numbers": cand.numbers, "seconds": round(cand.seconds, 1),
             "error": cand.error, "run": cand.run} for cand in state.candidates]
    confirmation = state.confirmation
    asked = dict(confirmation.candidates) if confirmation is not None else {}
    return {
        "study": state.id, "profile": state.profile_name, "tune": tune,
        "labels": labels, "bounds": bounds,
        "baseline": None if state.baseline is None else codec.full(state.baseline),
        "candidates": rows,
        "measured": sum(1 for r in rows if r["state"] == "ok"),
        "seconds": round(sum(round(c.seconds, 1) for c in state.candidates), 1),
        "stopped": None if state.stopped is None else codec.full(state.stopped),
        "confirmation": None if conf is None else {
            "run": None if confirmation is None else confirmation.run,
            "baseline": conf.baseline, "baseline_medians": conf.baseline_medians,
            "candidates": [{"name": v.name, "values": dict(asked.get(v.name, {})),
                            "verdicts": v.verdicts, "changes": v.changes, "medians": v.medians,
                            "inside": v.inside, "confirmed": v.confirmed, "why": v.why}
                           for v in conf.candidates],
            "recommended": conf.recommended,
            "profile": None if confirmation is None else confirmation.profile,
            "cost": conf.cost},
    }


def _n(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    from napilab.reports.ab.model import format_number

    return format_number(float(value))


def _values(values: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


def _tables(doc: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table, shared by text, Markdown and HTML."""
    labels = list(dict.fromkeys([*doc["labels"], *doc["bounds"]]))
    out = []
    base = doc["baseline"] or {}
    rows = [["baseline", "-", *[_n((base.get("numbers") or {}).get(k)) for k in labels],
             base.get("state", "-")]]
    for r in doc["candidates"]:
        state = r["state"] + (f": {r['error']}" if r.get("error") else "")
        rows.append([r["name"], _values(r["values"]),
                     *[_n(r["numbers"].get(k)) for k in labels], state])
    out.append(("Candidates (one trial each: the search's ranking, not a verdict)",
                ["candidate", "values", *labels, "state"], rows))
    conf = doc["confirmation"]
    if conf is not None:
        cost = conf.get("cost") or {}
        extra = ["busy cores (median)"] if cost and "busy_cores" not in labels else []
        head = ["candidate", "values", *[f"{k} (median)" for k in labels], *extra,
                *[f"{k} change [95% CI]" for k in doc["labels"]], "verdict"]
        rows = [[conf["baseline"] + " (baseline)", "-",
                 *[_n(conf["baseline_medians"].get(k)) for k in labels],
                 *[_n(cost.get(conf["baseline"])) for _ in extra],
                 *["" for _ in doc["labels"]], ""]]
        for c in conf["candidates"]:
            verdict = ("confirmed: " if c["confirmed"] else "not confirmed: ") + c["why"]
            rows.append([c["name"], _values(c["values"]),
                         *[_n(c["medians"].get(k)) for k in labels],
                         *[_n(cost.get(c["name"])) for _ in extra],
                         *[f"{c['changes'].get(k, '-')} {c['verdicts'].get(k, '')}"
                           for k in doc["labels"]], verdict])
        out.append(("Confirmation (re-measured, interleaved with the baseline)", head, rows))
    return out


def _header(doc: dict[str, Any]) -> list[str]:
    tune = doc["tune"]
    goal = " and ".join(f"{d} {label}" for label, d in tune["objectives"])
    if len(tune["objectives"]) > 1:
        goal = "the front of " + " and ".join(label for label, _ in tune["objectives"])
    if tune["constraints"]:
        goal += ", subject to " + "; ".join(tune["constraints"])
    space = ", ".join(f"{k} {v}" for k, v in tune["parameters"].items())
    budget = " or ".join(([f"{tune['trials']} candidates"] if tune["trials"] else [])
                         + ([f"{tune['seconds'] / 60:g} min"] if tune["seconds"] else []))
    lines = [f"napilab tune {doc['study']} ({doc['profile']}): variant {tune['variant']}",
             f"space: {space}", f"goal: {goal}",
             f"search: optuna {tune['sampler']}, budget {budget}: {doc['measured']} "
             f"candidate(s) measured in {doc['seconds']:.0f} s"]
    if doc["stopped"]:
        lines.append(f"stopped: candidate {doc['stopped']['candidate']} broke the workload: "
                     f"{doc['stopped']['why']}")
    return lines


def _answer(doc: dict[str, Any]) -> str:
    conf = doc["confirmation"]
    if conf is None:
        return "recommended: none (no candidate was confirmed)"
    if not conf["recommended"]:
        return ("recommended: none: no candidate is better than the baseline with the "
                "stated confidence")
    return (f"recommended: {', '.join(conf['recommended'])}, written to "
            f"{conf['profile']} (`napilab run` it to measure it again)")


def text(doc: dict[str, Any]) -> str:
    out = [*_header(doc), ""]
    for title, head, rows in _tables(doc):
        widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
        out.append(title)
        out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
        for row in rows:
            out.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        out.append("")
    out.append(_answer(doc))
    return "\n".join(out) + "\n"


def markdown(doc: dict[str, Any]) -> str:
    out = [f"### {md.escape(_header(doc)[0])}", ""]
    out += [f"- {md.escape(line)}" for line in _header(doc)[1:]] + [""]
    for title, head, rows in _tables(doc):
        table = md.md_table([md.escape(h) for h in head],
                            [[md.escape(c) for c in row] for row in rows],
                            "l" * len(head))
        out += [f"**{md.escape(title)}**", "", *table, ""]
    out.append(md.escape(_answer(doc)))
    return "\n".join(out) + "\n"


def html(doc: dict[str, Any], figures: Sequence[tuple[str, str]]) -> str:
    template = render.environment().get_template("tune.html.j2")
    return template.render(doc=doc, header=_header(doc), tables=_tables(doc),
                           answer=_answer(doc), figures=figures)


def write(directory: str | Path, state: TuneStudy, conf: Confirmation | None
          ) -> list[Path]:
    from napilab.reports.tune import plots as tune_plots

    doc = document(state, conf)
    directory = Path(directory)
    paths = [directory / name for name in FILES]
    atomic_write(paths[0], text(doc))
    atomic_write(paths[1], markdown(doc))
    atomic_write(paths[2], html(doc, tune_plots.figures(doc)))
    record = codec.checked(doc, TuneReportRecord, "tune report")
    atomic_write(paths[3], codec.encode(record, indent=1) + b"\n")
    return paths
