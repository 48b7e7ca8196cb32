"""Trend figures of the published site: per profile and host, the median of each
headline metric per variant over the runs' start times (reports.nightly.history's query).
Runs that did not complete are hollow markers; runs `napilab check` found a regression
in are marked with a red dotted line; a change point of a variant's series
(harness.stats.changes, ruptures' PELT) is a diamond on the first run of the new level.
Same SVG path as the report's plots."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import matplotlib.dates as mdates
import matplotlib.pyplot as plt

from napilab.harness.stats.changes import change_points
from napilab.reports.ab.model import with_unit
from napilab.reports.nightly.history import Fetch, RunInfo, default_metrics, medians
from napilab.reports.plots.latency import MAX_LINES
from napilab.reports.plots.plots import Omitted, Plot
from napilab.reports.plots.svg import RC, SvgRejected, color, figure_svg, label, numbers

MAX_METRICS = 3


def hosts_of(runs: Sequence[RunInfo]) -> list[str]:
    found: dict[str, None] = {}
    for run in runs:
        found.update(dict.fromkeys(run.kernels))
    return list(found)


MIN_SPAN = dt.timedelta(hours=12)  # around one run, or runs minutes apart


def time_span(moments: Sequence[dt.datetime]) -> tuple[dt.datetime, dt.datetime]:
    """The x range of a trend: the runs' time span and 5% on each side, at least
    MIN_SPAN wide (matplotlib widens a single date to +-2 years: 2025-2029 for one run)."""
    first, last = min(moments), max(moments)
    pad = max((last - first) * 0.05, (MIN_SPAN - (last - first)) / 2)
    return first - pad, last + pad


def trend(profile: str, host: str, runs: Sequence[RunInfo],
          metrics: Sequence[str] | None = None, fetch: Fetch | None = None
          ) -> Plot | Omitted:
    name = f"trend-{profile}-{host}"
    title = f"{profile} on {host}: median per variant over runs"
    wanted = list(metrics) if metrics is not None else default_metrics(runs)[:MAX_METRICS]
    frame = medians(runs, wanted, host, fetch)
    if not len(frame):
        return Omitted(name, title, f"none of {', '.join(wanted) or 'the metrics'} was "
                                    f"measured on {host}")
    frame["key"] = frame["source"] + "." + frame["metric"]
    present = set(frame["key"])
    by_name = {f"{s}.{m}": m for s, m in zip(frame["source"], frame["metric"], strict=True)}
    keys = [k for w in wanted for k in sorted(present) if w in (k, by_name[k])]
    keys = list(dict.fromkeys(keys))[:MAX_METRICS]
    when = {r.key: dt.datetime.fromtimestamp(r.started or 0, dt.UTC) for r in runs}
    complete = {r.key: r.status == "complete" for r in runs}
    regressed = [when[r.key] for r in runs
                 if r.check is not None and r.check.status == "regression"]
    order = list(dict.fromkeys(v for r in runs for v in r.variants))
    shifts = 0
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 2.8), squeeze=False)
        for ax, key in zip(axes.flat, keys, strict=True):
            sel = frame[frame["key"] == key]
            shown = [v for v in order if v in set(sel["variant"])][:MAX_LINES]
            for i, variant in enumerate(shown):
                rows = sel[sel["variant"] == variant].copy()
                rows["when"] = rows["run"].map(when)
                rows = rows.sort_values("when")
                ax.plot(rows["when"], rows["median"], color=color(i), linewidth=1,
                        label=label(variant))
                hollow = [not complete.get(r, True) for r in rows["run"]]
                ax.scatter(rows["when"], rows["median"], s=14, zorder=3,
                           facecolors=["white" if h else color(i) for h in hollow],
                           edgecolors=color(i))
                for point in change_points(list(rows["median"].astype(float))):
                    shifts += 1
                    ax.scatter([rows["when"].iloc[point.index]],
                               [rows["median"].iloc[point.index]], s=60, marker="D",
                               zorder=4, facecolors="none", edgecolors="#b00020")
            for moment in regressed:
                ax.axvline(moment, color="#b00020", linestyle=":", linewidth=1)
            unit = str(sel["unit"].iloc[0]) if len(sel) else ""
            ax.set_title(label(with_unit(key, unit)))
            ax.set_xlim(*time_span([when[r] for r in sel["run"]]))
            # matplotlib.dates ships without annotations for these two (3.11)
            locator = mdates.AutoDateLocator(minticks=3, maxticks=8)  # type: ignore[no-untyped-call]
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(
                mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
            numbers(ax.yaxis)
            ax.grid(alpha=0.3)
        axes.flat[0].legend(fontsize=6)
        fig.tight_layout()
    try:
        svg = figure_svg(fig, name)
    except SvgRejected as exc:
        return Omitted(name, title, f"figure withheld: {exc}")
    note = "hollow: run not complete" + ("; red dotted: napilab check found a regression"
                                         if regressed else "") + (
        "; red diamond: a change point (level shift) starts here" if shifts else "")
    return Plot(name, title, svg, note)
