"""The report as GitHub-flavoured Markdown, for a pull request or an issue: status,
verdict summary, the A/B table and the statistics per compared variant, settings as
requested and read back, hosts, confounders, commands. No HTML at all: GitHub would
strip most of it, and text from hosts and tools must stay text, so every such string
goes through `escape` (and commands through a fenced block longer than any backtick
run in them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from napilab.reports.ab import frontier, queue_traffic, verdicts
from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Table, format_ci, format_p, format_pct, p_text, verdict_text
from napilab.reports.formats import run_facts
from napilab.reports.load import text as load_text
from napilab.reports.load.curves import load_report
from napilab.reports.trace import overhead as trace_overhead
from napilab.reports.trace import text as trace_text
from napilab.reports.trace.breakdown import breakdowns

MAX_FINDINGS = 25

# Characters that start Markdown or HTML constructs inside a line: emphasis, code, links,
# images, raw HTML, entities, table cells, strikethrough. Parentheses and # are only
# special after "]" or at the start of a line, which escaping "[" and the layout rule out.
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")


def escape(text: object) -> str:
    """Untrusted text as literal Markdown on one line (a table cell or list item)."""
    flat = " ".join(str(text).split())
    return _SPECIAL.sub(r"\\\1", flat)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str) -> list[str]:
    """A GFM table; `align` has one of "l"/"r" per column; cells already escaped."""
    marks = {"l": ":--", "r": "--:"}
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    out += ["| " + " | ".join(c or " " for c in row) + " |" for row in rows]
    return out


md_table = _table  # for the other Markdown pages (reports.tune.report)


def _fence(text: str) -> list[str]:
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return [ticks, text, ticks]


def markdown(run: RunData, tab: Table) -> str:
    manifest = run.manifest
    profile = manifest.profile
    status = run_facts.run_status(manifest)
    out = [f"### napilab: {escape(profile.name or '?')} (run "
           f"{escape(manifest.run_id or '?')}, {escape(status.status)})", ""]
    if profile.description:
        out += [escape(profile.description), ""]
    if not status.complete:
        out += [f"> **{escape(status.status)} run**: {status.ok} of {status.total} trials "
                f"completed; the statistics use those only.", ""]
        for failure in run_facts.failures(run):
            out.append(f"> - trial {escape(failure.trial)} ({escape(failure.variant)} rep "
                       f"{failure.rep}) failed: {escape(failure.error)}")
        out.append("")
    out += tables(tab, run_facts.absent_functions(manifest))
    found = load_report(run.samples, manifest)
    if found is not None:
        out += load_text.markdown(found, _table, escape)
    out += trace_text.markdown(breakdowns(run, tab), _table, escape)
    traced = trace_overhead.overhead(run, tab)
    if traced is not None:
        out += trace_overhead.markdown(traced, _table, escape)
    out += _settings(run) + _hosts(run)
    out += _commands(run)
    return "\n".join(out).rstrip("\n") + "\n"


def _verdicts(tab: Table) -> list[str]:
    summary = verdicts.summary(tab)
    if not summary.total:
        return ["**Verdicts**: no comparison (" + ("one variant" if not tab.pairs else
                                                  "no line has comparable values") + ").", ""]
    counts = ", ".join(f"{n} {escape(name)}" for name, n in summary.counts.items())
    out = [f"**Verdicts**: {counts} (of {summary.total} comparison(s); p Holm-adjusted "
           f"over the {summary.family} primary one(s), alpha 0.05; exploratory rows show "
           "change and CI only)", ""]
    for f in summary.findings[:MAX_FINDINGS]:
        change = format_pct(f["change"], f["ci"], f["scale"], f["unit"])
        ci = format_ci(f["ci"], f["change"], f["scale"], f["unit"])
        out.append(f"- **{f['verdict']}**: {escape(f['label'])} ({escape(f['column'])} vs "
                   f"{escape(f['baseline'])}) {escape(change)}, 95% CI {escape(ci)}, "
                   f"{p_text(f['p'])}{f['note']}" + (f", {escape(f['cost'])}" if f["cost"]
                                                     else ""))
    more = len(summary.findings) - MAX_FINDINGS
    if more > 0:
        out.append(f"- ... and {more} more in the tables below")
    return [*out, ""] if summary.findings else out


def tables(tab: Table, absent: dict[str, frozenset[str]]) -> list[str]:
    """The verdicts, the medians and the statistics per compared column (a run's report
    and `napilab compare --format md` alike)."""
    return _verdicts(tab) + _values(tab, absent) + _stats(tab) + _frontier(tab)


def _frontier(tab: Table) -> list[str]:
    found = frontier.frontier(tab)
    if not isinstance(found, frontier.Frontier):
        return []
    head, *rest = frontier.text(found)
    return ["#### " + escape(head[0].upper() + head[1:].rstrip(":")), "",
            *(f"- {escape(line)}" for line in rest), ""]


def _values(tab: Table, absent: dict[str, frozenset[str]]) -> list[str]:
    header = ["metric", *(escape(v) for v in tab.variants), "unit"]
    rows = [[escape(ln.label), *(escape(run_facts.cell_text(ln, v, absent))
                                 for v in tab.variants), escape(ln.unit)] for ln in tab.lines]
    out = ["#### Medians over repetitions", ""]
    out += _table(header, rows, "l" + "r" * len(tab.variants) + "l")
    return [*out, ""]


def _stats(tab: Table) -> list[str]:
    out: list[str] = []
    for base, other in tab.pairs:
        out += [f"#### {escape(other)} vs {escape(base)}", ""]
        rows = []
        for line in tab.lines:
            found = line.comparisons.get(other)
            if found is None:
                rows.append([escape(line.label), "-", "-", "-", "n/a"])
                continue
            verdict, need = verdict_text(found)
            rows.append([escape(line.label),
                         escape(format_pct(found.change, found.change_ci, found.scale,
                                           line.unit)),
                         escape(format_ci(found.change_ci, found.change, found.scale,
                                          line.unit)),
                         "-" if verdict == "exploratory" else format_p(found.p_adjusted),
                         escape(f"{verdict} ({need})" if need else verdict)])
        out += _table(["metric", "change", "95% CI", "p (Holm)", "verdict"], rows, "lrrrl")
        out.append("")
    notes = verdicts.notes(tab)
    if notes:
        out += ["Notes:", ""] + [f"- {escape(n)}" for n in notes] + [""]
    return out


def _settings(run: RunData) -> list[str]:
    rows = run_facts.settings_rows(run.manifest)
    if not rows:
        return ["#### Settings", "", "No settings were changed.", ""]
    flagged = sum(1 for s in rows if s.state in ("mismatch", "unread"))
    out = ["#### Settings requested and read back", ""]
    if flagged:
        out += [f"**{flagged} setting(s) did not read back as requested.**", ""]
    out += _table(["variant", "host", "knob", "original", "requested", "read back", "state"],
                  ([escape(s.variant), escape(s.host), escape(f"{s.kind} {s.target}"),
                    escape(s.shown(s.original)), escape(s.shown(s.requested)),
                    escape(s.shown(s.effective)),
                    f"**{s.state}**" if s.state in ("mismatch", "unread") else s.state]
                   for s in rows), "lllllll")
    return [*out, ""]


def _hosts(run: RunData) -> list[str]:
    hosts = run_facts.hosts(run.manifest)
    out = ["#### Hosts", ""]
    out += _table(["host", "kernel", "CPU", "online CPUs", "irqbalance", "NICs", "tools"],
                  ([escape(h.name), escape(h.facts["kernel_release"]), escape(h.facts["cpu_model"]),
                    escape(h.facts["online_cpus"]), escape(h.facts["irqbalance"]),
                    escape(", ".join(f"{n}: {d}" for n, d in h.nics)),
                    escape("; ".join(f"{t}: {v}" for t, v in h.tools) or "-")] for h in hosts),
                  "lllllll")
    found = run_facts.confounders(run.manifest, run_facts.settings_rows(run.manifest),
                                  run.samples)
    out += [""] + ([f"- **confounder**: {escape(c)}" for c in found] or
                   ["No confounder found: no host changed during the run, every setting "
                    "read back as requested."])
    out += [f"- received by queue: {escape(q)}" for q in queue_traffic.carried(run.samples)]
    return [*out, ""]


def _commands(run: RunData) -> list[str]:
    found = run_facts.commands(run)
    if not found:
        return []
    out = ["#### Commands", ""]
    for c in found:
        out.append(f"{escape(c.variant)}, trial {escape(c.trial)}, {escape(c.side)} on "
                   f"{escape(c.host)} (exit {c.exit_code if c.exit_code is not None else '-'}):")
        out += ["", *_fence(c.shell), ""]
    return out
