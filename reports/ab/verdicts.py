"""What a reader should take from an A/B table first: verdict counts, the significant
findings, and the caveats (noise, drift, assumed directions) grouped by reason.
Shared by the HTML summary block and the text renderer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from napilab.harness.stats.compare import ABSOLUTE
from napilab.reports.ab import cpu_cost, tradeoff
from napilab.reports.ab.model import Line, Table, p_text

ORDER = ("worse", "better", "~", "not-enough-data", "exploratory")


@dataclass(frozen=True)
class Summary:
    counts: dict[str, int]  # verdict -> comparisons, in ORDER, zeros left out
    total: int
    family: int  # primary comparisons (the Holm family); the rest are exploratory
    findings: list[dict[str, Any]]  # better/worse comparisons, worse first
    warnings: list[str]


def summary(tab: Table) -> Summary:
    counts = dict.fromkeys(ORDER, 0)
    findings: list[dict[str, Any]] = []
    for line in tab.lines:
        for column, found in line.comparisons.items():
            verdict = found.verdict.value
            counts[verdict] += 1
            if verdict in ("better", "worse"):
                # a verdict on a direction no rule knows is a guess: said so where it shows
                assumed = line.direction_origin == "assumed"
                findings.append({"verdict": verdict, "label": line.label, "column": column,
                                 "baseline": tab.baseline_of(column), "change": found.change,
                                 "ci": found.change_ci, "p": found.p_adjusted,
                                 "scale": found.scale, "unit": line.unit,
                                 "assumed": assumed, "cost": tradeoff.cost(tab, column),
                                 "note": " (direction assumed: lower taken as better)"
                                 if assumed else ""})
    findings.sort(key=lambda f: (f["verdict"] != "worse", f["scale"] != ABSOLUTE,
                                 -abs(f["change"])))
    return Summary({k: n for k, n in counts.items() if n}, sum(counts.values()), tab.family,
                   findings, notes(tab))


def notes(tab: Table) -> list[str]:
    """Notes grouped by reason so a 3-repetition run does not repeat one caveat 20 times."""
    grouped: dict[str, list[str]] = {}
    several = len(tab.pairs) > 1

    def add(reason: str, line: Line, column: str | None = None) -> None:
        where = f"{line.label} ({column})" if column and several else line.label
        grouped.setdefault(reason, []).append(where)

    for line in tab.lines:
        if line.direction_origin == "assumed" and line.primary:
            add("direction unknown, judged as lower-is-better", line)
        for column, why in line.notes.items():
            add(why, line, column)
        # the CPU cost lines are read beside the verdicts (reports.ab.tradeoff): their
        # noise is said only where they are primary
        quiet = line.source == cpu_cost.SOURCE and not line.primary
        for column, noise in line.noise.items():
            if quiet:
                continue
            if noise.exceeds:
                add(f"baseline noise exceeds the effect: {noise.reason}", line, column)
            elif not noise.known and line.primary:
                add(noise.reason, line, column)
        for column, cell in line.cells.items():
            if cell.drifting and cell.drift is not None:
                add(f"drift along trials in {column} (Mann-Kendall "
                    f"{p_text(cell.drift.p_value)}, {cell.drift.slope_per_trial:+.1%} per "
                    "trial)", line)
    return [f"{reason}: {', '.join(labels)}" for reason, labels in grouped.items()] + \
        tradeoff.notes(tab) + list(tab.notes)
