"""The trial-order plot: for each table line that drift was flagged on (a significant
Mann-Kendall trend of one variant's values along its trials, the A/B table's "drift"),
every variant's values against the trial number in execution order, the drifting
variants drawn bold with their Theil-Sen trend. A reader sees whether the drift is a
warm-up, a slow trend over the whole run, or one outlier at an end, and whether the
other variants moved with it (a host-wide cause) or not."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Cell, Line, Table, p_text, with_unit
from napilab.reports.plots.svg import color, label, numbers

Drawn = tuple[Figure, str] | str

MAX_PANELS = 12
MAX_VARIANTS = 12  # series drawn per panel: the drifting ones first, then table order


def drifting_lines(table: Table) -> list[Line]:
    return [ln for ln in table.lines if any(c.drifting for c in ln.cells.values())]


def _trend(cell: Cell) -> tuple[list[float], list[float]]:
    """The Theil-Sen line of a drifting cell over its trials: relative slope times the
    median, through the median value at the median trial."""
    assert cell.drift is not None and cell.median is not None
    xs = [float(min(cell.trials)), float(max(cell.trials))]
    middle = float(np.median(cell.trials))
    slope = cell.drift.slope_per_trial * cell.median
    return xs, [cell.median + slope * (x - middle) for x in xs]


def _series(line: Line, variants: list[str]) -> list[str]:
    drifting = [v for v in variants if line.cells[v].drifting]
    rest = [v for v in variants if v not in drifting and line.cells[v].values]
    return (drifting + rest)[:MAX_VARIANTS]


def trial_order(run: RunData, table: Table) -> Drawn:
    del run  # the table's cells carry each value's trial number
    lines = drifting_lines(table)
    if not lines:
        return "no line drifted along its trials (Mann-Kendall, alpha 0.05, per variant)"
    shown = lines[:MAX_PANELS]
    cols = min(2, len(shown))
    rows = (len(shown) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 2.6 * rows), squeeze=False)
    for ax, line in zip(axes.flat, shown, strict=False):
        for variant in _series(line, table.variants):
            cell = line.cells[variant]
            index = table.variants.index(variant)
            order = np.argsort(cell.trials)
            xs = np.asarray(cell.trials, dtype=float)[order]
            ys = np.asarray(cell.values, dtype=float)[order]
            name = label(variant)
            if cell.drifting and cell.drift is not None:
                name = label(f"{variant}: drift, Mann-Kendall {p_text(cell.drift.p_value)}, "
                             f"{cell.drift.slope_per_trial:+.1%} per trial")
                tx, ty = _trend(cell)
                ax.plot(tx, ty, color=color(index), linestyle="--", linewidth=1)
            ax.plot(xs, ys, color=color(index), marker="o", markersize=3.5,
                    linewidth=2 if cell.drifting else 0.8,
                    alpha=1.0 if cell.drifting else 0.6, label=name)
        ax.set_title(label(with_unit(line.label, line.unit)))
        ax.set_xlabel("trial, in execution order")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        numbers(ax.yaxis)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    fig.tight_layout()
    left = len(lines) - len(shown)
    note = "bold: the variant(s) that drifted, dashed: their Theil-Sen trend"
    return fig, note + (f"; {left} more drifting line(s) not drawn" if left else "")
