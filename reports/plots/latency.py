"""Latency plots: the percentile ladder, the per-transaction distribution, and latency
against throughput and against CPU cost (one dot per repetition). Registered in
reports.plots.plots.PLOTS; each returns (figure, note) or the reason it has nothing to draw."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow.parquet as pq
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from napilab.reports.ab.compare import POOLED_SOURCE, RunData
from napilab.reports.ab.model import Table, with_unit
from napilab.reports.plots.svg import color, label, log_numbers, numbers

Drawn = tuple[Figure, str] | str

_PERCENTILE = re.compile(r"^(?:latency|rtt)_p(\d+(?:\.\d+)?)$")
# Which workload metric stands for "throughput" and for "latency", in order of preference
# (neper, sockperf, iperf3, netperf and ping names; see runners/).
THROUGHPUT = ("throughput", "message_rate", "bandwidth", "received_per_second",
              "local_throughput", "sender_throughput", "num_transactions")
LATENCY = ("latency_p99", "rtt_p99", "latency_p50", "latency_mean", "rtt_mean", "rtt_avg",
           "latency_avg")
MAX_LINES = 12  # variants drawn as lines in one axes before it turns into noise
LADDER_STYLES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class Measure:
    """One value per trial of a metric: columns trial, variant, value."""

    label: str
    unit: str
    frame: pd.DataFrame


def _workload_rows(run: RunData) -> pd.DataFrame:
    frame = run.samples
    if not len(frame):
        return frame
    return frame[(frame["source"] == run.manifest.workload_source) & frame["cpu"].isna()]


def tool_measure(run: RunData, names: Sequence[str]) -> Measure | None:
    """The first of `names` the workload stored, one value per trial (a metric of several
    hosts of one role summed, as in the A/B table; the most frequent role when several)."""
    rows = _workload_rows(run)
    for name in names:
        sel = rows[rows["metric"] == name] if len(rows) else rows
        if not len(sel):
            continue
        role = sel["role"].value_counts().index[0]
        sel = sel[sel["role"] == role]
        per_trial = sel.groupby(["trial", "variant"])["value"].sum().reset_index()
        return Measure(f"{name} ({role})", str(sel["unit"].iloc[0]), per_trial)
    return None


def pooled_measure(table: Table, metric: str = "latency_p99") -> Measure | None:
    """A pooled percentile line of the table as per-repetition values."""
    for line in table.lines:
        if line.source == POOLED_SOURCE and line.metric == metric:
            rows = [(t, column, v) for column, cell in line.cells.items()
                    for t, v in zip(cell.trials, cell.values, strict=False)]
            if rows:
                return Measure(line.label, line.unit,
                               pd.DataFrame(rows, columns=["trial", "variant", "value"]))
    return None


def latency_measure(run: RunData, table: Table) -> Measure | None:
    return tool_measure(run, LATENCY) or pooled_measure(table)


def _nines(q: float) -> float:
    """Position of percentile q on a "number of nines" axis: p90 -> 1, p99 -> 2, ..."""
    return -math.log10(1 - q / 100)


def _ladder_points(run: RunData, table: Table) -> tuple[str, dict[str, list[tuple[float, float]]]]:
    """(where from, variant -> [(percentile, value)]) from the pooled lines, else from the
    percentiles the tool reported (median over repetitions)."""
    out: dict[str, list[tuple[float, float]]] = {}
    pooled = [ln for ln in table.lines if ln.source == POOLED_SOURCE]
    for line in pooled:
        match = _PERCENTILE.match(line.metric)
        for variant, cell in line.cells.items():
            if match and cell.value is not None:
                out.setdefault(variant, []).append((float(match[1]), cell.value))
    if out:
        return "percentiles of all transactions pooled over repetitions", out
    rows = _workload_rows(run)
    if len(rows):
        rows = rows[rows["metric"].str.match(_PERCENTILE.pattern) & (rows["unit"] == "us")]
    if len(rows):
        medians = rows.groupby(["variant", "metric"])["value"].median().reset_index()
        for variant, metric, value in medians.itertuples(index=False):
            match = _PERCENTILE.match(str(metric))
            if match:
                out.setdefault(str(variant), []).append((float(match[1]), float(value)))
    return "percentiles reported by the tool, median over repetitions", out


def _ordered(table: Table, variants: Sequence[str]) -> list[str]:
    """Table order; at most MAX_LINES, the baseline always among them."""
    keep = [v for v in table.variants if v in variants]
    return keep[:MAX_LINES]


def percentile_ladder(run: RunData, table: Table) -> Drawn:
    where, points = _ladder_points(run, table)
    points = {v: sorted((q, x) for q, x in p if 0 <= q < 100 and x > 0)
              for v, p in points.items()}
    points = {v: p for v, p in points.items() if len(p) >= 2}
    if not points:
        return "no latency percentiles: the workload reports none (or fewer than two) and " \
               "no per-transaction latencies were stored"
    shown = _ordered(table, list(points))
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for i, variant in enumerate(shown):
        qs, xs = zip(*points[variant], strict=True)
        ax.plot([_nines(q) for q in qs], xs, marker="o", markersize=3, color=color(i),
                linestyle=LADDER_STYLES[(i // 10) % len(LADDER_STYLES)], label=label(variant))
    every = sorted({q for v in shown for q, _ in points[v]})
    ax.set_xticks([_nines(q) for q in every], [f"p{q:g}" for q in every])
    ax.set_yscale("log")
    log_numbers(ax.yaxis)
    ax.set_ylabel("latency (us)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left", ncols=1 if len(shown) <= 6 else 2)
    fig.tight_layout()
    return fig, where + _more(len(points), len(shown))


def _more(total: int, shown: int) -> str:
    return f"; {total - shown} more variant(s) not drawn" if total > shown else ""


def _latencies(run: RunData, variant: str) -> npt.NDArray[np.float64]:
    arrays = [pq.read_table(path, columns=["latency_us"]).column(0).to_numpy()
              for _, path in run.latency_files(variant)]
    return np.concatenate(arrays).astype(np.float64) if arrays else np.empty(0)


def latency_distribution(run: RunData, table: Table) -> Drawn:
    """Histogram (log bins) and complementary CDF (log-log: the tail) per variant."""
    variants = [v for v in table.variants if run.latency_files(v)]
    if not variants:
        return "no per-transaction latencies stored (latency/<trial>.parquet): the tool " \
               "gives none, or it was not asked for them (e.g. sockperf --full-log)"
    shown = _ordered(table, variants)
    data = {v: x[np.isfinite(x) & (x > 0)] for v in shown if (x := _latencies(run, v)).size}
    data = {v: x for v, x in data.items() if x.size}
    if not data:
        return "the stored per-transaction latencies are all zero or empty"
    low = min(float(x.min()) for x in data.values())
    high = max(float(x.max()) for x in data.values())
    bins = np.geomspace(low, high * 1.0001, 80) if high > low else np.array([low, low * 1.01])
    fig, (hist, tail) = plt.subplots(1, 2, figsize=(9.6, 3.2))
    for i, (variant, x) in enumerate(data.items()):
        i = table.variants.index(variant) if variant in table.variants else i
        hist.hist(x, bins=bins, density=True, histtype="step", color=color(i),
                  label=label(variant))
        _ccdf(tail, x, color(i))
    hist.set_xscale("log")
    hist.set_xlabel("latency (us)")
    hist.set_ylabel("density")
    hist.legend()
    tail.set_xscale("log")
    tail.set_yscale("log")
    log_numbers(hist.xaxis, tail.xaxis, tail.yaxis)
    tail.set_xlabel("latency (us)")
    tail.set_ylabel("fraction slower (1 - CDF)")
    for ax in (hist, tail):
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    counts = ", ".join(f"{n:,}" for n in (x.size for x in data.values()))
    return fig, f"transactions per variant: {counts}" + _more(len(variants), len(shown))


def _ccdf(ax: Axes, x: npt.NDArray[np.float64], colour: str) -> None:
    """1 - CDF at 300 tail probabilities down to 1/n: millions of transactions make a
    small figure, and the tail keeps its resolution."""
    probs = np.geomspace(1.0, 1.0 / x.size, 300) if x.size > 1 else np.array([1.0])
    values = np.quantile(x, 1 - probs)
    ax.step(values, probs, where="post", color=colour)


def _scatter(table: Table, xs: Measure, ys: Measure, xlabel: str) -> Figure | str:
    both = xs.frame.merge(ys.frame, on=["trial", "variant"], suffixes=("_x", "_y"))
    if not len(both):
        return "no trial has both values"
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    order = [v for v in table.variants if v in set(both["variant"])]
    for i, variant in enumerate(order):
        sel = both[both["variant"] == variant]
        ax.scatter(sel["value_x"], sel["value_y"], color=color(i), s=16, alpha=0.75,
                   linewidths=0, label=label(variant) if i < MAX_LINES else None)
        ax.scatter([sel["value_x"].median()], [sel["value_y"].median()], color=color(i),
                   marker="X", s=60, edgecolors="black", linewidths=0.5)
    ax.set_xlabel(label(xlabel))
    ax.set_ylabel(label(with_unit(ys.label, ys.unit)))
    numbers(ax.xaxis, ax.yaxis)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncols=1 if len(order) <= 6 else 2)
    fig.tight_layout()
    return fig


def throughput_latency(run: RunData, table: Table) -> Drawn:
    rate = tool_measure(run, THROUGHPUT)
    latency = latency_measure(run, table)
    if rate is None or latency is None:
        missing = "a throughput" if rate is None else "a latency"
        return f"the workload stored no {missing} metric (looked for " \
               f"{', '.join(THROUGHPUT if rate is None else LATENCY)})"
    drawn = _scatter(table, rate, latency, with_unit(rate.label, rate.unit))
    return drawn if isinstance(drawn, str) else (drawn, "crosses: medians per variant")


def cpu_busy(run: RunData) -> Measure | None:
    """Busy cores per trial (reports.ab.cpu_cost: user, nice, system, hardirq and softirq
    time of every CPU over the trial's wall time), summed over every host."""
    frame = run.samples
    if not len(frame):
        return None
    sel = frame[(frame["source"] == "cpu") & frame["cpu"].isna()
                & (frame["metric"] == "busy_cores")]
    if not len(sel):
        return None
    per_trial = sel.groupby(["trial", "variant"])["value"].sum().reset_index()
    return Measure("busy cores", "cores", per_trial)


def latency_cpu_cost(run: RunData, table: Table) -> Drawn:
    cost = cpu_busy(run)
    latency = latency_measure(run, table)
    if cost is None:
        return "no proc_stat collector: the CPU time of a trial is unknown"
    if latency is None:
        return "the workload stored no latency metric (looked for " + ", ".join(LATENCY) + ")"
    drawn = _scatter(table, cost, latency,
                     "busy cores (user+nice+system+hardirq+softirq time / wall time)")
    return drawn if isinstance(drawn, str) else (drawn, "crosses: medians per variant")
