"""The statistics under the cover-letter table, in 80 columns: one compact table per
compared column (change, CI, p, verdict) and notes grouped by reason (noise, drift,
assumed directions, lines without a comparison)."""

from __future__ import annotations

import textwrap

from napilab.harness.stats.compare import Comparison
from napilab.reports.ab import frontier, verdicts
from napilab.reports.ab.model import Table, format_ci, format_p, format_pct, verdict_text

LEGEND = ("change: the test's own estimate, always inside its CI: the ratio of geometric "
          "means (Welch's t on logs, below 10 repetitions), the Hodges-Lehmann ratio "
          "(Mann-Whitney, from 10), in the metric's unit where the baseline is 0. "
          "better/worse: a primary metric's change beyond its min_effect, significant "
          "after Holm, its CI clear of 0; ~: no significant change, a CI that holds 0; "
          "need n=K: not-enough-data, about K repetitions per variant would decide; "
          "exploratory: not primary, change and CI only (napilab docs statistics).")

# label, change, CI, p, verdict: 2+26 + 2+8 + 2+16 + 2+6 + 2+12 = 78 columns
_WIDTHS = (26, 8, 16, 6, 12)
_ALIGN = ("<", ">", ">", ">", "<")


def _row(cells: tuple[str, str, str, str, str]) -> str:
    out = ""
    for text, width, align in zip(cells, _WIDTHS, _ALIGN, strict=True):
        out += f"  {text[:width] if align == '<' else text:{align}{width}}"
    return out.rstrip()


def heading(other: str, base: str, family: int, width: int = 80) -> list[str]:
    """Which columns a block compares, then what its numbers are: two lines whose breaks
    are fixed, so no word is left alone on a line (textwrap left `CI,` on one); names
    too long for one line break only at " vs " and are cut at `width`."""
    pair = f"  {other} vs {base} (baseline)"
    lines = [pair] if len(pair) <= width else [f"  {other}", f"  vs {base} (baseline)"]
    lines = [line[:width] for line in lines]
    return [*lines, f"  change, 95% CI, p Holm-adjusted over {family} primary "
                    "comparison(s)"]


def _verdict(comparison: Comparison) -> str:
    """not-enough-data prints as "need n=K" (K repetitions per variant would detect the
    change) so the n needed fits in 80 columns; the legend under the table says so."""
    verdict, need = verdict_text(comparison)
    if verdict == "not-enough-data":
        return f"need {need}" if need else "need more n"
    return verdict


def stats_block(tab: Table, width: int = 80) -> str:
    """"" when the table compares nothing (one variant)."""
    if not tab.pairs:
        return ""
    out = []
    for base, other in tab.pairs:
        out.extend(heading(other, base, tab.family, width))
        out.append(_row(("", "change", "95% CI", "p", "verdict")))
        for line in tab.lines:
            found = line.comparisons.get(other)
            if found is None:
                out.append(_row((line.label, "-", "-", "-", "n/a")))
                continue
            p = "-" if found.verdict.value == "exploratory" else format_p(found.p_adjusted)
            out.append(_row((line.label,
                             format_pct(found.change, found.change_ci, found.scale, line.unit),
                             format_ci(found.change_ci, found.change, found.scale, line.unit),
                             p, _verdict(found))))
        out.append("")
    costs = [f for f in verdicts.summary(tab).findings if f["cost"]]
    if costs:
        out.append("  verdicts at their CPU cost:")
        for f in costs:
            change = format_pct(f["change"], f["ci"], f["scale"], f["unit"])
            out.extend(textwrap.wrap(f"{f['verdict']}: {f['label']} ({f['column']}) {change} "
                                     f"{f['cost']}", width, initial_indent="  - ",
                                     break_on_hyphens=False, subsequent_indent="    "))
    front = frontier.frontier(tab)
    if isinstance(front, frontier.Frontier):
        head, *rest = frontier.text(front)
        out.extend(textwrap.wrap(head, width, initial_indent="  ", subsequent_indent="  ",
                                 break_on_hyphens=False))
        for item in rest:
            out.extend(textwrap.wrap(item, width, initial_indent="  - ",
                                     break_on_hyphens=False, subsequent_indent="    "))
    notes = verdicts.notes(tab)
    if notes:
        out.append("  notes:")
        for note in notes:
            out.extend(textwrap.wrap(note, width, initial_indent="  - ", break_on_hyphens=False,
                                     subsequent_indent="    "))
    out.extend(textwrap.wrap(LEGEND, width, initial_indent="  ", subsequent_indent="  "))
    return "\n".join(out) + "\n"
