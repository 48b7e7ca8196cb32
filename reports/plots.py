"""Plots, rendered from stored results to inline SVG (no files, no network).

Registered explicitly in PLOTS: name -> function(run, table) -> Plot | None (None when
the run has nothing to show for that plot).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from reports.compare import RunData, Table

COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
          "#8c8c8c", "#ccb974", "#64b5cd"]


@dataclass(frozen=True)
class Plot:
    name: str
    title: str
    svg: str


def _svg(fig: Figure) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]  # drop the XML prolog and doctype for inlining
    # The RDF metadata block carries a creation date and namespace URLs: dropping it
    # keeps reports reproducible byte for byte from the same data.
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.DOTALL)


def per_repetition(run: RunData, table: Table) -> Plot | None:
    """Every table line as a small panel: one dot per repetition, a bar at the median."""
    lines = [ln for ln in table.lines if any(c.values for c in ln.cells.values())]
    if not lines:
        return None
    cols = min(3, len(lines))
    rows = (len(lines) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.5 * rows), squeeze=False)
    for ax, line in zip(axes.flat, lines, strict=False):
        for i, variant in enumerate(table.variants):
            values = line.cells[variant].values
            color = COLORS[i % len(COLORS)]
            ax.scatter([i] * len(values), values, color=color, s=18, alpha=0.8, zorder=3)
            median = line.cells[variant].median
            if median is not None:
                ax.hlines(median, i - 0.3, i + 0.3, color=color, linewidth=2)
        ax.set_xticks(range(len(table.variants)), table.variants, fontsize=7, rotation=15)
        ax.set_title(f"{line.label}" + (f" [{line.unit}]" if line.unit else ""), fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(lines):]:
        ax.set_visible(False)
    fig.tight_layout()
    return Plot("per_repetition", "Per-repetition values (dots) and medians (bars)", _svg(fig))


def per_cpu_counters(run: RunData, table: Table) -> Plot | None:
    """Median per-CPU deltas of the collectors' headline counters, per variant."""
    frame = run.samples
    if not len(frame):
        return None
    wanted = [("softnet_stat", "received_rps"), ("softnet_stat", "processed"),
              ("interrupts", "function_call_interrupts"), ("proc_stat", "hardirq"),
              ("proc_stat", "softirq")]
    per_cpu = frame[frame["cpu"].notna()]
    panels = [(s, m) for s, m in wanted
              if len(per_cpu[(per_cpu["source"] == s) & (per_cpu["metric"] == m)])]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 2.6), squeeze=False)
    for ax, (source, metric) in zip(axes.flat, panels, strict=True):
        sel = per_cpu[(per_cpu["source"] == source) & (per_cpu["metric"] == metric)]
        by = sel.groupby(["variant", "host", "cpu", "rep"])["value"].sum().groupby(
            ["variant", "host", "cpu"]).median()
        keys = sorted({(h, int(c)) for _, h, c in by.index})
        width = 0.8 / max(1, len(table.variants))
        for i, variant in enumerate(table.variants):
            heights = [float(by.get((variant, h, c), 0.0)) for h, c in keys]
            xs = [k + i * width for k in range(len(keys))]
            ax.bar(xs, heights, width=width, color=COLORS[i % len(COLORS)], label=variant)
        ax.set_xticks([k + width * (len(table.variants) - 1) / 2 for k in range(len(keys))],
                      [f"{h}/cpu{c}" for h, c in keys], fontsize=7)
        ax.set_title(f"{source} {metric}", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    return Plot("per_cpu_counters", "Per-CPU counters (median over repetitions)", _svg(fig))


PLOTS: dict[str, Callable[[RunData, Table], Plot | None]] = {
    "per_repetition": per_repetition,
    "per_cpu_counters": per_cpu_counters,
}


def render_all(run: RunData, table: Table) -> list[Plot]:
    return [plot for fn in PLOTS.values() if (plot := fn(run, table)) is not None]
