"""The per-CPU view: where packets were processed, IRQs and IPIs landed, and IRQ time
was spent, per variant. One heatmap per counter (variants x host/CPU, median per-CPU
delta over repetitions, numbers printed in the cells while they fit): a heatmap keeps
its shape from 2 variants to 50, and a CPU that lights up in one variant only (RPS
steering work to CPU 1) stands out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Table, format_number
from napilab.reports.plots.svg import label, numbers

Drawn = tuple[Figure, str] | str


@dataclass(frozen=True)
class Counter:
    title: str
    source: str
    metric: Callable[[pd.Series], pd.Series]  # metric names -> selected


def _named(*names: str) -> Callable[[pd.Series], pd.Series]:
    return lambda metric: metric.isin(names)


COUNTERS = (
    Counter("softnet_stat processed", "softnet_stat", _named("processed")),
    Counter("softnet_stat received_rps (RPS IPIs)", "softnet_stat", _named("received_rps")),
    Counter("softnet_stat time_squeeze", "softnet_stat", _named("time_squeeze")),
    Counter("softnet_stat dropped", "softnet_stat", _named("dropped")),
    Counter("function-call IPIs (CAL)", "interrupts", _named("function_call_interrupts")),
    Counter("rescheduling IPIs (RES)", "interrupts", _named("rescheduling_interrupts")),
    # /proc/interrupts' numbered lines are the devices' IRQs (NIC queues among them).
    Counter("device IRQs (numbered lines)", "interrupts",
            lambda metric: metric.str.match(r"^irq_\d+$")),
    Counter("NET_RX softirqs", "softirqs", _named("net_rx")),
    Counter("NET_TX softirqs", "softirqs", _named("net_tx")),
    Counter("hardirq time (ms)", "proc_stat", _named("hardirq")),
    Counter("softirq time (ms)", "proc_stat", _named("softirq")),
    Counter("NAPI kthread CPU time (ms)", "napi_threads", _named("cpu_time")),
)
MAX_ANNOTATED = 120  # cells; beyond that the numbers do not fit and only colour remains
MAX_COLUMNS = 64  # host/CPU columns drawn per counter


def _grid(per_cpu: pd.DataFrame, counter: Counter, variants: list[str]
          ) -> tuple[list[str], np.ndarray] | None:
    sel = per_cpu[(per_cpu["source"] == counter.source) & counter.metric(per_cpu["metric"])]
    if not len(sel):
        return None
    # Per trial and CPU first (several numbered IRQs sum), then the median over trials.
    by = sel.groupby(["variant", "host", "cpu", "trial"])["value"].sum().groupby(
        ["variant", "host", "cpu"]).median()
    if not by.any():
        return None  # all zero: nothing happened on any CPU, nothing to look at
    keys = sorted({(str(h), int(c)) for _, h, c in by.index})[:MAX_COLUMNS]
    cells = by.to_dict()
    grid = np.array([[float(cells.get((v, h, float(c)), cells.get((v, h, c), np.nan)))
                      for h, c in keys] for v in variants])
    return [f"{h}/cpu{c}" for h, c in keys], grid


def per_cpu_counters(run: RunData, table: Table) -> Drawn:
    frame = run.samples
    per_cpu = frame[frame["cpu"].notna()] if len(frame) else frame
    if not len(per_cpu):
        return "no per-CPU counters: the profile collects none of softnet_stat, " \
               "interrupts, softirqs, proc_stat, napi_threads"
    variants = [v for v in table.variants if v in set(per_cpu["variant"])]
    panels = [(c, g) for c in COUNTERS if (g := _grid(per_cpu, c, variants)) is not None]
    drawn = {c.title for c, _ in panels}
    # collected but 0 on every CPU in every variant: named, not drawn as an empty panel
    zero = [c.title for c in COUNTERS if c.title not in drawn and
            (per_cpu["source"] == c.source).any() and
            c.metric(per_cpu[per_cpu["source"] == c.source]["metric"]).any()]
    if not panels:
        return "every collected per-CPU counter stayed 0 in every variant"
    columns = max(len(names) for _, (names, _) in panels)
    per_row = 1 if columns > 8 or len(variants) > 12 else 2 if len(panels) > 1 else 1
    rows = (len(panels) + per_row - 1) // per_row
    cell_w = 0.7 if columns <= 8 else 0.3
    width = min(14.0, 1.6 + 0.08 * max(len(v) for v in variants) + cell_w * columns)
    height = 0.9 + 0.22 * len(variants)
    fig, axes = plt.subplots(rows, per_row, figsize=(width * per_row, height * rows),
                             squeeze=False)
    for ax, (counter, (names, grid)) in zip(axes.flat, panels, strict=False):
        masked = np.ma.masked_invalid(grid)
        mesh = ax.pcolormesh(masked, cmap="Blues", vmin=0, edgecolors="white", linewidth=0.5)
        ax.set_xticks(np.arange(len(names)) + 0.5, [label(n) for n in names],
                      rotation=90 if len(names) > 4 else 0)
        ax.set_yticks(np.arange(len(variants)) + 0.5, [label(v) for v in variants])
        ax.invert_yaxis()  # baseline on top, as in the table
        ax.set_title(label(counter.title))
        ax.tick_params(length=0)
        numbers(fig.colorbar(mesh, ax=ax, fraction=0.05, pad=0.02).ax.yaxis)
        if grid.size <= MAX_ANNOTATED:
            _annotate(ax, grid)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    note = "per-CPU deltas over the measured window; blank cells: not collected there"
    return fig, note + (f"; 0 on every CPU in every variant, not drawn: {', '.join(zero)}"
                        if zero else "")


def _annotate(ax: Axes, grid: np.ndarray) -> None:
    top = np.nanmax(grid) if np.isfinite(grid).any() else 0
    for (row, col), value in np.ndenumerate(grid):
        if np.isfinite(value):
            ax.text(col + 0.5, row + 0.5, format_number(float(value)), ha="center",
                    va="center", fontsize=6, color="white" if value > 0.6 * top else "black")
