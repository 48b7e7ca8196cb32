"""The trace breakdown (reports.trace.breakdown) as text for report.txt and Markdown for
report.md, every line at most 80 columns (a mail), and as report.json's entries."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from napilab.reports.ab.model import format_number, format_signed
from napilab.reports.trace.breakdown import Attribution, Breakdown, Change, StageRow

WIDTH = 80
NOTE = ("stages overlap and some count per event, not per packet: their sum is "
        "no decomposition of the end-to-end change")


def change_text(found: Change | None, unit: str = "") -> str:
    return "-" if found is None else format_signed(found.estimate, unit)


def ci_text(found: Change | None) -> str:
    if found is None:
        return "-"
    if math.isinf(found.low) or math.isinf(found.high):
        return "unbounded"
    return f"{format_signed(found.low)}..{format_signed(found.high)}"


def _value(v: float | None) -> str:
    return format_number(v)


def heading(found: Breakdown) -> str:
    return f"Stages of the receive path: {found.variant} vs {found.baseline}"


def traced_text(found: Breakdown) -> str:
    a, b = found.traced
    twins = a != found.baseline or b != found.variant
    how = (f"from the traced twins {a} and {b}" if twins
           else "every trial traced: the verdicts' trials themselves")
    return f"{how}, {found.reps[0]} and {found.reps[1]} repetitions"


def role_title(found: Breakdown, role: str) -> str:
    host = found.hosts.get(role, "")
    return f"{role}" + (f" ({host})" if host and host != role else "")


def roles_of(found: Breakdown) -> list[str]:
    """The traced roles: those with a stage, then those whose stages are all absent."""
    return list(dict.fromkeys([s.role for s in found.stages]
                              + [r for r, _ in sorted(found.absent)]))


def rows(found: Breakdown, role: str) -> list[list[str]]:
    """stage, q, A, B, change, 95% CI, mark: two rows per stage (p50, p99)."""
    out = []
    for s in (s for s in found.stages if s.role == role):
        unit = "" if s.unit == "us" else " pkts"
        for q, a, b, c in (("p50", s.a_p50, s.b_p50, s.p50), ("p99", s.a_p99, s.b_p99, s.p99)):
            mark = "moved" if c is not None and c.moved else ""
            if q == "p50" and s.status != "both":
                mark = s.status
            out.append([s.stage + unit if q == "p50" else "", q, _absent_or(s, "A", a),
                        _absent_or(s, "B", b), change_text(c), ci_text(c), mark])
    return out


def _absent_or(s: StageRow, side: str, value: float | None) -> str:
    return "absent" if s.status == f"absent in {side}" else _value(value)


HEADER = ["stage", "q", "A", "B", "B-A", "95% CI", ""]


def _table(body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [HEADER, *body]) for i in range(len(HEADER))]
    out = []
    for r in [HEADER, *body]:
        cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1]),
                 *(c.rjust(w) for c, w in zip(r[2:6], widths[2:6], strict=True)), r[6]]
        line = "  " + "  ".join(cells).rstrip()
        if len(line) <= WIDTH:
            out.append(line)
            continue
        # a wide CI: the mark on a line of its own, right-aligned under it
        out.append("  " + "  ".join(cells[:-1]).rstrip())
        if r[6]:
            out.append(r[6].rjust(WIDTH))
    return out


def cpu_lines(found: Breakdown, role: str) -> list[str]:
    out = []
    for s in (s for s in found.stages if s.role == role and s.cpus):
        shifts = ", ".join(f"cpu{c.cpu} {format_number(c.a)} -> {format_number(c.b)}"
                           for c in s.cpus)
        out.append(f"{s.stage}: {shifts}")
    return out


def key_lines(found: Breakdown, role: str) -> list[str]:
    """`irq_to_softirq: IRQ 48 virtio10-input.3 2,146 -> 0`, a line per stage."""
    out = []
    for (r, stage), keys in sorted(found.keys.items()):
        if r == role and keys:
            shifts = ", ".join(f"{k.key} {format_number(k.a)} -> {format_number(k.b)}"
                               for k in keys)
            out.append(f"{stage}: {shifts}")
    return out


def absent_lines(found: Breakdown, role: str) -> list[str]:
    out = []
    for (r, stage), by_variant in sorted(found.absent.items()):
        if r != role:
            continue
        probes = sorted(set(by_variant.values()))
        sides = [v for v in found.traced if v in by_variant]
        where = "both" if len(sides) == 2 else sides[0]
        out.append(f"{stage} ({', '.join(probes)}) on {where}")
    return out


def attribution_text(att: Attribution) -> str:
    """`rtt_avg +31 us (+22..+40): stages that moved (p99): irq_to_softirq +24 us, ...;
    their sum +30 us of +31 ...`"""
    if att.change is None:
        head = "no end-to-end latency metric (a primary metric with a time unit)"
    else:
        head = (f"{att.metric} {change_text(att.change, 'us')} "
                f"(95% CI {ci_text(att.change)})")
    if not att.moved:
        return f"{head}: no stage's {att.quantile} moved (every CI holds 0)"
    names = ", ".join(f"{stage} {change_text(c, 'us')}" for stage, c in att.moved)
    total = format_signed(att.total, "us")
    tail = {
        "no end-to-end": f"their sum {total}",
        "exceeds": f"their sum {total} exceeds the end-to-end "
                   f"{change_text(att.change, 'us')}: {NOTE}",
        "falls short": f"their sum {total} of {change_text(att.change, 'us')}: the rest "
                       "is outside the traced stages or in stages within their noise",
        "opposite": f"their sum {total} runs against the end-to-end "
                    f"{change_text(att.change, 'us')}: {NOTE}",
        "matches": f"their sum {total} of {change_text(att.change, 'us')} ({NOTE})",
    }[att.relation]
    return f"{head}: stages that moved ({att.quantile}): {names}; {tail}"


def _wrap(text: str, indent: str = "  ", later: str = "    ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=later,
                         break_on_hyphens=False)


def text(found: Sequence[Breakdown]) -> str:
    """report.txt's section."""
    out: list[str] = []
    for bd in found:
        out += ["", *_wrap(heading(bd), "", "  "), *_wrap(traced_text(bd))]
        roles = roles_of(bd)
        for role in roles:
            att = bd.attribution.get(role)
            out += [f"  {role_title(bd, role)}: A {bd.baseline}, B {bd.variant}; "
                    "medians over repetitions (us unless pkts)"[:WIDTH]]
            body = rows(bd, role)
            if body:
                out += _table(body)
            cpus = cpu_lines(bd, role)
            if cpus:
                out += ["  events per CPU where one arm has none or 20x fewer:"]
                out += [w for line in cpus for w in _wrap(line, "    ", "      ")]
            keyed = key_lines(bd, role)
            if keyed:
                out += ["  events per IRQ, NAPI or function where one arm has none or 20x fewer:"]
                out += [w for line in keyed for w in _wrap(line, "    ", "      ")]
            for line in absent_lines(bd, role):
                out += _wrap(f"absent, the kernel lacks the probe: {line}")
            if att is not None:
                out += _wrap(attribution_text(att))
        out += [w for n in bd.notes for w in _wrap(f"note: {n}")]
    return "\n".join(out).lstrip("\n") + "\n" if out else ""


def markdown(found: Sequence[Breakdown], table: Callable[..., list[str]],
             escape: Callable[[object], str]) -> list[str]:
    """report.md's section (`table`, `escape`: reports.formats.markdown's)."""
    out: list[str] = []
    for bd in found:
        out += ["#### " + escape(heading(bd)), "", *_md_wrap(escape(traced_text(bd))), ""]
        roles = roles_of(bd)
        for role in roles:
            att = bd.attribution.get(role)
            out += [*_md_wrap(escape(f"{role_title(bd, role)}: A {bd.baseline}, B "
                                     f"{bd.variant}; medians over repetitions "
                                     "(us unless pkts)")), ""]
            body = rows(bd, role)
            if body:
                out += table([escape(h) for h in HEADER[:-1]] + ["note"],
                             [[escape(c) for c in r] for r in body], "llrrrrl")
                out.append("")
            items = ([f"events per CPU where one arm has none or 20x fewer: {line}"
                      for line in cpu_lines(bd, role)]
                     + ["events per IRQ, NAPI or function where one arm has none or 20x "
                        f"fewer: {line}"
                        for line in key_lines(bd, role)]
                     + [f"absent, the kernel lacks the probe: {line}"
                        for line in absent_lines(bd, role)]
                     + ([attribution_text(att)] if att is not None else []))
            for item in items:
                out += _md_wrap(escape(item), "- ", "  ")
            out += [""] if items else []
        for note in bd.notes:
            out += _md_wrap(escape(f"note: {note}"), "- ", "  ")
    return out


def _md_wrap(text: str, first: str = "", later: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=later,
                         break_on_hyphens=False, break_long_words=False)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _change_doc(found: Change | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"estimate": found.estimate, "low": _finite(found.low), "high": _finite(found.high),
            "method": found.method, "moved": found.moved}


def json_doc(found: Sequence[Breakdown]) -> list[dict[str, Any]]:
    """report.json's `trace`: one entry per comparison, every number unrounded."""
    out = []
    for bd in found:
        out.append({
            "baseline": bd.baseline, "variant": bd.variant, "traced": list(bd.traced),
            "reps": list(bd.reps), "hosts": dict(bd.hosts),
            "stages": [{"role": s.role, "stage": s.stage, "unit": s.unit,
                        "status": s.status, "a_p50": s.a_p50, "b_p50": s.b_p50,
                        "a_p99": s.a_p99, "b_p99": s.b_p99, "a_events": s.a_events,
                        "b_events": s.b_events, "p50_change": _change_doc(s.p50),
                        "p99_change": _change_doc(s.p99),
                        "cpus": [{"cpu": c.cpu, "a": c.a, "b": c.b} for c in s.cpus]}
                       for s in bd.stages],
            "absent": [{"role": r, "stage": st, "probes": dict(v)}
                       for (r, st), v in sorted(bd.absent.items())],
            "attribution": [{"role": role, "metric": a.metric, "quantile": a.quantile,
                             "change": _change_doc(a.change), "relation": a.relation,
                             "moved": [{"stage": st, **(_change_doc(c) or {})}
                                       for st, c in a.moved],
                             "sum": a.total, "line": attribution_text(a)}
                            for role, a in bd.attribution.items()],
            "notes": list(bd.notes)})
    return out
