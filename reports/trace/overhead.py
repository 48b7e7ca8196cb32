"""The tracer's overhead: each variant against its traced twin (Variant.traced_of).

A run whose profile collects `trace` with `traced: twins` (the default) ran every
variant V twice per repetition, interleaved: V without the tracer (the verdicts' trials)
and V+traced with it. This is an A/A comparison but for the tracer, so V+traced against
V is what tracing costs: per primary line of the run's A/B table (its latency
percentiles, rates) and per busy-cores line (reports.ab.cpu_cost), the relative change
with its 95% CI across repetitions, as the A/B table computes an exploratory row
(harness.stats.compare.explore: the test's own estimator and interval, no verdict, no
family: the overhead is described, never judged).

With `traced: all` there are no untraced trials: the overhead was not measured, and
the report says so (`Overhead.unmeasured`). Text and Markdown fit 80 columns and a mail.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, replace
from typing import Any

from napilab.harness.stats.compare import RATIO, MetricSamples, explore
from napilab.harness.stats.stats import StatsError
from napilab.reports.ab import cpu_cost
from napilab.reports.ab.compare import POOLED_SOURCE, RunData, Spec, build_table, column
from napilab.reports.ab.line_stats import SEED, not_comparable
from napilab.reports.ab.model import Line, Table, format_ci, format_number, format_pct, with_unit

BUSY = "busy_cores"
TITLE = "Tracer overhead"
LABEL_WIDTH = 26


@dataclass(frozen=True)
class Row:
    """One line of one variant: untraced against traced."""

    label: str
    source: str
    metric: str
    role: str | None
    unit: str
    untraced: tuple[float, ...]  # per repetition, in trial order
    traced: tuple[float, ...]
    untraced_value: float | None  # what the A/B table shows (median, or pooled value)
    traced_value: float | None
    change: float | None = None  # traced against untraced, on `scale`
    ci: tuple[float, float] | None = None
    scale: str = RATIO
    p: float | None = None  # two-sided, unadjusted: descriptive
    test: str = ""
    note: str = ""  # why there is no change (no values on one side)


@dataclass(frozen=True)
class Pair:
    variant: str
    twin: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Overhead:
    pairs: tuple[Pair, ...] = ()
    unmeasured: tuple[str, ...] = ()  # variants traced in every trial (traced: all)


def wanted(tab: Table) -> list[Line]:
    """The lines whose overhead is shown: the table's primary ones, then busy cores."""
    return [ln for ln in tab.lines if ln.primary] + \
        [ln for ln in tab.lines if not ln.primary and ln.source == cpu_cost.SOURCE
         and ln.metric == BUSY]


def overhead(run: RunData, tab: Table) -> Overhead | None:
    """The run's overhead figures; None when it traced nothing (no twins, no `all`)."""
    unmeasured = tuple(run.manifest.traced_all or ())
    twins = run.twins
    if not twins and not unmeasured:
        return None
    lines = wanted(tab)
    specs = [Spec(ln.label, ln.source, ln.metric, ln.role) for ln in lines
             if ln.source != POOLED_SOURCE]  # build_table adds the pooled lines
    by_label = {ln.label: ln for ln in lines}
    pairs = []
    for twin, variant in twins.items():
        if variant not in run.ran:
            continue
        sub = build_table(specs, [column(run, variant), column(run, twin)], (),
                          run.policies, variant, stats=False)
        rows = [_row(found, by_label[found.label], variant, twin) for found in sub.lines
                if found.label in by_label]
        pairs.append(Pair(variant, twin, tuple(rows)))
    return Overhead(tuple(pairs), unmeasured)


def _row(line: Line, judged: Line, variant: str, twin: str) -> Row:
    a, b = line.cells[variant], line.cells[twin]
    row = Row(line.label, line.source, line.metric, line.role, line.unit, a.values, b.values,
              a.value, b.value)
    why = not_comparable(a, b)
    if why is not None:
        return replace(row, note=why.reason.replace("the baseline", "the untraced variant")
                     .replace("this column", "the traced twin"))
    try:
        found = explore(MetricSamples(a.values, b.values, judged.direction), seed=SEED)
    except StatsError as exc:
        return replace(row, note=str(exc))
    return replace(row, change=found.change, ci=found.change_ci, scale=found.scale,
                 p=found.p_value, test=found.test_method)


def unmeasured_sentence(found: Overhead) -> str:
    names = ", ".join(found.unmeasured)
    return (f"The tracer's overhead was not measured: every trial of {names} was traced "
            "(collect.trace.traced: all), so their verdicts' latencies include it.")


def caption(found: Overhead) -> str:
    n = sorted({len(r.untraced) for p in found.pairs for r in p.rows if r.untraced})
    reps = "/".join(str(k) for k in n) or "no"
    return (f"each variant against its traced twin, interleaved, {reps} repetitions "
            "per side: change with the tracer and its 95% CI; described, not judged")


def _cells(row: Row) -> tuple[str, str, str, str]:
    unit = "" if row.scale != "absolute" else row.unit
    change = format_pct(row.change, row.ci, row.scale, unit) if row.change is not None \
        else "-"
    ci = format_ci(row.ci, row.change, row.scale, unit) if row.change is not None \
        else (row.note or "-")
    return format_number(row.untraced_value), format_number(row.traced_value), change, ci


def text(found: Overhead) -> str:
    """The overhead table for the text report (80 columns)."""
    out = [f"{TITLE}:"]
    if found.pairs:
        out += _wrapped(f"  {caption(found)}:")
        out.append(f"    {'':<{LABEL_WIDTH}} {'untraced':>9}    {'traced':>9} "
                   f"{'change':>8} 95% CI")
    for pair in found.pairs:
        out.append(f"  {pair.variant} (twin {pair.twin}):")
        for row in pair.rows:
            label = with_unit(row.label, row.unit)
            if len(label) > LABEL_WIDTH:
                label = label[:LABEL_WIDTH - 1] + "~"
            untraced, traced, change, ci = _cells(row)
            out.append(f"    {label:<{LABEL_WIDTH}} {untraced:>9} -> {traced:>9} "
                       f"{change:>8} {ci}"[:80].rstrip())
        if not pair.rows:
            out.append("    no primary line or busy cores to compare")
    if found.unmeasured:
        out += _wrapped("  " + unmeasured_sentence(found))
    return "\n".join(out) + "\n"


def _wrapped(text: str, width: int = 80) -> list[str]:
    return textwrap.wrap(text, width, initial_indent="", subsequent_indent="  ")


def markdown(found: Overhead, table: Any, escape: Any) -> list[str]:
    """The Markdown lines (reports.formats.markdown passes its table and escape)."""
    out = [f"#### {TITLE}", ""]
    if found.pairs:
        out += [escape(caption(found)), ""]
        rows = []
        for pair in found.pairs:
            for row in pair.rows:
                untraced, traced, change, ci = _cells(row)
                rows.append([escape(pair.variant), escape(with_unit(row.label, row.unit)),
                             untraced, traced, change, escape(ci)])
        out += table(["variant", "metric", "untraced", "traced", "change", "95% CI"], rows,
                     "llrrrl")
        out.append("")
    if found.unmeasured:
        out += [escape(unmeasured_sentence(found)), ""]
    return out


def html_data(found: Overhead) -> dict[str, Any]:
    """What templates/section_trace_overhead.html.j2 renders."""
    return {"caption": caption(found) if found.pairs else "",
            "pairs": [(p, [(with_unit(r.label, r.unit), *_cells(r)) for r in p.rows])
                      for p in found.pairs],
            "unmeasured": unmeasured_sentence(found) if found.unmeasured else ""}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def json_doc(found: Overhead) -> dict[str, Any]:
    """report.json's `trace_overhead`: every number unrounded (null where not finite)."""
    return {
        "measured": bool(found.pairs),
        "unmeasured": list(found.unmeasured),
        "pairs": [{"variant": p.variant, "twin": p.twin, "rows": [{
            "label": r.label, "source": r.source, "metric": r.metric, "role": r.role,
            "unit": r.unit, "untraced": [_finite(v) for v in r.untraced],
            "traced": [_finite(v) for v in r.traced],
            "untraced_value": _finite(r.untraced_value),
            "traced_value": _finite(r.traced_value), "change": _finite(r.change),
            "ci": None if r.ci is None else [_finite(r.ci[0]), _finite(r.ci[1])],
            "scale": r.scale, "p": _finite(r.p), "test": r.test, "note": r.note}
            for r in p.rows]} for p in found.pairs],
    }
