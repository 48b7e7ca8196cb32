"""Plots of a stored run, as inline SVG (no files, no network), registered in PLOTS.

Each entry of PLOTS is name -> (title, function(run, table)); the function returns the
figure and a caption note, or, when the run has nothing to show for that plot, the
reason as a string: the report then prints the note instead of an empty figure. The
SVG goes through reports.plots.svg (escaped text, per-figure ids, checked before use).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Line, Table, with_unit
from napilab.reports.load.curves import LoadReport
from napilab.reports.plots import cpu as plots_cpu
from napilab.reports.plots import frontier as plots_frontier
from napilab.reports.plots import latency as plots_latency
from napilab.reports.plots import load as plots_load
from napilab.reports.plots import stages as plots_stages
from napilab.reports.plots import trial_order as plots_trial_order
from napilab.reports.plots.svg import RC, SvgRejected, color, figure_svg, label, numbers
from napilab.reports.trace.breakdown import Breakdown

Drawn = tuple[Figure, str] | str  # (figure, caption note) or why there is no figure
PlotFunction = Callable[[RunData, Table], Drawn]

MAX_PANELS = 12  # per-repetition panels; a 30-metric table still gets one readable figure
MIN_PANELS = 3
MAX_STRIPS = 300  # panels x variants


@dataclass(frozen=True)
class Plot:
    name: str
    title: str
    svg: str
    note: str = ""


@dataclass(frozen=True)
class Omitted:
    name: str
    title: str
    reason: str


def _panel_order(lines: list[Line]) -> list[Line]:
    """Lines with a significant verdict first (what the reader looks for), then the
    rest in table order."""
    def key(item: tuple[int, Line]) -> tuple[int, int]:
        index, line = item
        found = any(c.verdict.value in ("better", "worse") for c in line.comparisons.values())
        return (0 if found else 1, index)

    return [line for _, line in sorted(enumerate(lines), key=key)]


def per_repetition(run: RunData, table: Table) -> Drawn:
    """Every table line as a small panel: one dot per repetition, a bar at the median."""
    lines = [ln for ln in table.lines if any(c.values for c in ln.cells.values())]
    if not lines:
        return "no table line has values"
    # A line that stayed 0 everywhere would be an empty panel: named in the note instead.
    zero = [ln for ln in lines if not any(v for c in ln.cells.values() for v in c.values)]
    lines = [ln for ln in lines if ln not in zero]
    if not lines:
        return f"every table line stayed 0 in every repetition ({_names(zero)})"
    # Panels x variants bounds the figure: 12 panels of 3 variants, 6 of 50 (a figure of
    # 12 x 50 strips took 2 s and 1.6 MB of SVG, and nobody reads it).
    panels = max(MIN_PANELS, min(MAX_PANELS, MAX_STRIPS // len(table.variants)))
    shown = _panel_order(lines)[:panels]
    shown.sort(key=lines.index)
    variants = table.variants
    per_row = 3 if len(variants) <= 6 else 2 if len(variants) <= 14 else 1
    cols = min(per_row, len(shown))
    rows = (len(shown) + cols - 1) // cols
    width = min(14.0, max(3.6, 0.24 * len(variants) + 1.2))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, 2.4 * rows), squeeze=False)
    rng = np.random.default_rng(0)  # horizontal jitter of the dots: reproducible
    for ax, line in zip(axes.flat, shown, strict=False):
        xs: list[float] = []
        ys: list[float] = []
        colors: list[str] = []
        for i, variant in enumerate(variants):
            values = line.cells[variant].values
            xs += list(i + rng.uniform(-0.12, 0.12, len(values)))
            ys += values
            colors += [color(i)] * len(values)
        ax.scatter(xs, ys, c=colors, s=14, alpha=0.8, zorder=3, linewidths=0)
        medians = [(i, line.cells[v].median) for i, v in enumerate(variants)]
        present = [(i, m) for i, m in medians if m is not None]
        if present:
            ax.hlines([m for _, m in present], [i - 0.3 for i, _ in present],
                      [i + 0.3 for i, _ in present], colors=[color(i) for i, _ in present],
                      linewidth=2)
        long_names = len(variants) > 3 or max(len(v) for v in variants) > 12
        ax.set_xticks(range(len(variants)), [label(v) for v in variants],
                      rotation=90 if len(variants) > 6 else 20 if long_names else 0,
                      ha="center" if len(variants) > 6 or not long_names else "right")
        numbers(ax.yaxis)
        ax.set_title(label(with_unit(line.label, line.unit)))
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    fig.tight_layout()
    left = len(lines) - len(shown)
    notes = [f"{left} more line(s) not drawn: the {len(shown)} shown are those with a "
             "significant verdict first, then in table order"] if left else []
    if zero:
        notes.append(f"not drawn, 0 in every repetition of every variant: {_names(zero)}")
    return fig, "; ".join(notes)


def _names(lines: list[Line], most: int = 6) -> str:
    names = [ln.label for ln in lines[:most]]
    return ", ".join(names) + (f" and {len(lines) - most} more" if len(lines) > most else "")


PLOTS: dict[str, tuple[str, PlotFunction]] = {
    "percentile_ladder": ("Latency percentiles per variant (log scale)",
                          plots_latency.percentile_ladder),
    "per_repetition": ("Per-repetition values (dots) and medians (bars)", per_repetition),
    "trial_order": ("Values in trial order, for the lines drift was flagged on",
                    plots_trial_order.trial_order),
    "latency_distribution": ("Per-transaction latency distribution (pooled repetitions)",
                             plots_latency.latency_distribution),
    "throughput_latency": ("Throughput vs latency, one dot per repetition",
                           plots_latency.throughput_latency),
    "per_cpu_counters": ("Per-CPU counters (median over repetitions)",
                         plots_cpu.per_cpu_counters),
    "frontier": ("The latency-CPU frontier: latency vs busy cores per variant",
                 plots_frontier.frontier),
    "latency_cpu_cost": ("Latency vs busy cores, one dot per repetition",
                         plots_latency.latency_cpu_cost),
}


def render(name: str, run: RunData, table: Table) -> Plot | Omitted:
    title, function = PLOTS[name]
    with plt.rc_context(RC):  # the fonts must be set when the figure is laid out
        drawn = function(run, table)
    if isinstance(drawn, str):
        plt.close("all")  # a function that gave up half way leaves nothing behind
        return Omitted(name, title, drawn)
    figure, note = drawn
    try:
        return Plot(name, title, figure_svg(figure, f"plot-{name}"), note)
    except SvgRejected as exc:  # fail closed: never inline a figure that did not pass
        return Omitted(name, title, f"figure withheld: {exc}")


def frontier_of(table: Table) -> Plot | Omitted:
    """The frontier figure of a table without a run (`napilab compare`'s columns)."""
    title = PLOTS["frontier"][0]
    with plt.rc_context(RC):
        drawn = plots_frontier.figure(table)
    if isinstance(drawn, str):
        plt.close("all")
        return Omitted("frontier", title, drawn)
    figure, note = drawn
    try:
        return Plot("frontier", title, figure_svg(figure, "plot-frontier"), note)
    except SvgRejected as exc:
        return Omitted("frontier", title, f"figure withheld: {exc}")


def load_figures(report: LoadReport) -> list[Plot | Omitted]:
    """The latency-load figures of a run with a load ladder (reports.plots.load)."""
    with plt.rc_context(RC):
        return _inline(plots_load.figures(report))


def stage_figures(found: Sequence[Breakdown]) -> list[Plot | Omitted]:
    """The trace breakdown's figures (reports.plots.stages)."""
    with plt.rc_context(RC):
        return _inline(plots_stages.figures(found))


def _inline(drawn: Sequence[tuple[str, str, Drawn]]) -> list[Plot | Omitted]:
    out: list[Plot | Omitted] = []
    for name, title, found in drawn:
        if isinstance(found, str):
            out.append(Omitted(name, title, found))
            continue
        figure, note = found
        try:
            out.append(Plot(name, title, figure_svg(figure, f"plot-{name}"), note))
        except SvgRejected as exc:
            out.append(Omitted(name, title, f"figure withheld: {exc}"))
    plt.close("all")
    return out


def render_all(run: RunData, table: Table) -> list[Plot | Omitted]:
    return [render(name, run, table) for name in PLOTS]
