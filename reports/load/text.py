"""The latency-load table of a run with a `load:` ladder (reports.load.curves), as rows the
text and Markdown reports share: per variant, one row per rung (offered, achieved,
latency percentiles, busy cores per role), then its knee and SLO capacity."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Sequence

from napilab.harness.stats.curves import Estimate
from napilab.reports.ab.model import format_number
from napilab.reports.load.curves import Curve, LoadReport, crossing_text, rate_text


def header(report: LoadReport) -> list[str]:
    """Short column names: the percentiles without their stem (`latency_`), the ladder
    metric's with its unit; busy cores per role."""
    stem = (report.metric or "").rsplit("_p", 1)[0] + "_"
    unit = f" ({report.metric_unit})" if report.metric_unit else ""
    return ["variant", "offered", "achieved",
            *(m.removeprefix(stem) + (unit if m == report.metric else "")
              for m in report.metrics),
            *(f"cores {role}" for role in report.roles)]


def _est(found: Estimate | None, interval: bool = True) -> str:
    if found is None:
        return "-"
    if not interval or found.low is None or found.high is None:
        return format_number(found.value)
    return f"{format_number(found.value)} ({format_number(found.low)}.." \
           f"{format_number(found.high)})"


def rows(report: LoadReport, curve: Curve) -> list[list[str]]:
    """One row per rung: the interval of the ladder metric only (the others' are in the
    JSON and the page's figures), so that a row fits a mail's 80 columns."""
    out = []
    for point in curve.points:
        achieved = rate_text(point.achieved.value) if point.achieved else "-"
        if point.saturated:
            achieved += f" SATURATED {point.short}/{point.achieved.n if point.achieved else 0}"
        elif point.short:
            achieved += f" short {point.short}/{point.achieved.n if point.achieved else 0}"
        out.append([curve.variant, "max" if point.offered is None else
                    rate_text(point.offered), achieved,
                    *(_est(point.metrics.get(m), interval=m == report.metric)
                      for m in report.metrics),
                    *(_est(point.cores.get(r), interval=False) for r in report.roles)])
    return out


def derived(report: LoadReport, curve: Curve) -> list[str]:
    """The knee and the capacity of CURVE, one sentence each."""
    unit = f" {report.unit}" if report.unit else ""
    lines = []
    if report.metric and curve.knee is not None:
        lines.append(f"knee ({report.metric} above {report.knee_factor:g}x its first "
                     f"rung's): {crossing_text(curve.knee)}{unit}")
    if report.metric and report.slo is not None and curve.capacity is not None:
        lines.append(f"capacity ({report.metric} <= {report.slo:g}"
                     f"{' ' + report.metric_unit if report.metric_unit else ''}): "
                     f"{crossing_text(curve.capacity)}{unit}")
    return lines


def caption(report: LoadReport, reps: int) -> str:
    return (f"Latency under offered load ({report.unit or 'rate'}): geometric means over "
            f"repetitions with 95% t intervals (busy cores and rates: means); a rung whose "
            f"achieved rate fell more than {report.tolerance:g}% short of its offered one "
            "is SATURATED; knee and capacity read on achieved load")


def text(report: LoadReport, reps: int = 0) -> str:
    """The fixed-width form (report.txt)."""
    head = header(report)
    body = [r for c in report.curves for r in rows(report, c)]
    widths = [max(len(str(x)) for x in column) for column in zip(head, *body, strict=True)]
    out = [*textwrap.wrap(caption(report, reps), 80), ""]
    out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    for curve in report.curves:
        for row in rows(report, curve):
            out.append("  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True))
                       .rstrip())
        for line in derived(report, curve):
            out += textwrap.wrap(f"{curve.variant}: {line}", 80, initial_indent="  ",
                                 subsequent_indent="    ")
    for note in report.notes:
        out += textwrap.wrap(f"note: {note}", 80, initial_indent="  ",
                             subsequent_indent="    ")
    return "\n".join(out) + "\n"


TableBuilder = Callable[[Sequence[str], Iterable[Sequence[str]], str], list[str]]


def markdown(report: LoadReport, build: TableBuilder,
             escape: Callable[[object], str]) -> list[str]:
    """Markdown lines, with the Markdown report's own table builder and escaping."""
    head = [escape(h) for h in header(report)]
    body = [[escape(x) for x in r] for c in report.curves for r in rows(report, c)]
    lines = ["#### Latency under offered load", "", escape(caption(report, 0)), ""]
    lines += build(head, body, "l" + "r" * (len(head) - 1))
    lines.append("")
    for curve in report.curves:
        lines += [f"- {escape(curve.variant)}: {escape(line)}"
                  for line in derived(report, curve)]
    lines += [f"- note: {escape(n)}" for n in report.notes]
    return [*lines, ""]
