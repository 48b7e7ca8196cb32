"""Latency under offered load: a run with a `load:` ladder (harness.profile.load) as
curves, one per variant of the profile, with its knee and its SLO capacity.

Per variant and rung, over the rung's repetitions (harness.stats.curves): the achieved
rate (the tool's achieved-rate metric, e.g. sockperf's `send_rate`; a `max` rung's
offered rate is what it achieved), the latency percentiles (`<stem>_p50`, the ladder's
metric, `<stem>_p99.9`, where the tool wrote them), and busy cores per role (reports.ab.
cpu_cost). A rung is *saturated* when its achieved rate (the mean over repetitions)
falls short of the offered one by more than the ladder's tolerance: it is flagged, with
the repetitions that fell short, and neither the knee nor the capacity is read past it.

- knee: the lowest load where the metric exceeds `knee` times its value at the first
  rung (the ratio's interval: a rung's upper end over the first rung's lower end, and
  the other way round);
- capacity: the highest load whose metric stays at most `slo`.
Both are read on the achieved loads with the interval of harness.stats.curves.
Verdicts between variants are the A/B table's, each rung's variants compared with the
rung's baseline (comparison groups `load-RUNG`), never across rungs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from napilab.harness.stats.curves import Crossing, Estimate, crossing, estimate
from napilab.harness.store.manifest import Manifest

CPU_SOURCE = "cpu"
CORES_METRIC = "busy_cores"


@dataclass(frozen=True)
class Point:
    rung: str
    offered: float | None  # None: `max`
    achieved: Estimate | None
    short: int  # repetitions whose achieved rate fell short of the offered one
    saturated: bool
    metrics: dict[str, Estimate]  # latency percentiles
    cores: dict[str, Estimate]  # role -> busy cores

    @property
    def load(self) -> float | None:
        """Where the point sits on the load axis: the achieved rate, else the offered."""
        return self.achieved.value if self.achieved is not None else self.offered


@dataclass(frozen=True)
class Curve:
    variant: str  # the profile's variant (its rungs are variants VARIANT+RUNG)
    points: tuple[Point, ...]
    knee: Crossing | None = None
    capacity: Crossing | None = None


@dataclass(frozen=True)
class LoadReport:
    unit: str
    metric: str | None  # the knee's and the capacity's
    metrics: tuple[str, ...]  # the latency metrics drawn (the ladder's among them)
    roles: tuple[str, ...]  # whose busy cores are drawn
    knee_factor: float
    slo: float | None
    tolerance: float
    max_regression: float
    curves: tuple[Curve, ...]
    metric_unit: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)


def load_report(samples: pd.DataFrame, manifest: Manifest) -> LoadReport | None:
    """The curves of a run with a load ladder; None for a run without one."""
    ladder = manifest.load
    if not ladder or not ladder.get("variants"):
        return None
    source = manifest.workload_source
    metric = ladder.get("metric")
    rows = samples[samples["cpu"].isna()] if len(samples) else samples
    tool = rows[rows["source"] == source] if len(rows) else rows
    metrics = _latency_metrics(tool, metric)
    rungs = {str(v): (str(info["base"]), str(info["rung"]), info.get("rate"))
             for v, info in ladder["variants"].items()}
    order = [str(r[0]) for r in ladder.get("rungs", [])]
    bases = list(dict.fromkeys(rungs[v][0] for v in manifest.variants if v in rungs))
    cores = rows[(rows["source"] == CPU_SOURCE) & (rows["metric"] == CORES_METRIC)] \
        if len(rows) else rows
    roles = tuple(sorted(str(r) for r in cores["role"].dropna().unique())) if len(cores) \
        else ()
    achieved = tuple(str(m) for m in ladder.get("achieved") or ())
    tolerance = float(ladder.get("tolerance", 5.0))
    curves = []
    for base in bases:
        points = []
        for rung in order:
            variant = next((v for v, r in rungs.items() if r[0] == base and r[1] == rung),
                           None)
            if variant is None:
                continue
            point = _point(variant, rung, rungs[variant][2], tool, cores, metrics, roles,
                           achieved, tolerance)
            if point is not None:
                points.append(point)
        curves.append(_curve(base, points, metric, float(ladder.get("knee", 2.0)),
                             ladder.get("slo")))
    units = tool[tool["metric"] == metric]["unit"] if metric and len(tool) \
        else pd.Series([], dtype=object)
    notes = []
    if not achieved:
        notes.append("the ladder names no achieved-rate metric: saturation is not judged")
    elif not any(p.achieved for c in curves for p in c.points):
        notes.append(f"no {' or '.join(achieved)} values: saturation is not judged and "
                     "the loads drawn are the offered ones")
    return LoadReport(
        unit=str(ladder.get("unit", "")), metric=metric, metrics=metrics, roles=roles,
        knee_factor=float(ladder.get("knee", 2.0)), slo=ladder.get("slo"),
        tolerance=tolerance, max_regression=float(ladder.get("max_regression", 10.0)),
        curves=tuple(curves), metric_unit=str(units.iloc[0]) if len(units) else "",
        notes=tuple(notes))


def _latency_metrics(tool: pd.DataFrame, metric: str | None) -> tuple[str, ...]:
    if not metric:
        return ()
    stem = metric.rsplit("_p", 1)[0] if "_p" in metric else metric
    present = set(tool["metric"]) if len(tool) else set()
    wanted = (f"{stem}_p50", metric, f"{stem}_p99.9")
    return tuple(m for m in dict.fromkeys(wanted) if m in present or m == metric)


def _per_trial(frame: pd.DataFrame, metric: str) -> list[float]:
    found = frame[frame["metric"] == metric]
    return [float(v) for v in found.groupby("trial")["value"].mean()] if len(found) else []


def _point(variant: str, rung: str, rate: Any, tool: pd.DataFrame, cores: pd.DataFrame,
           metrics: Sequence[str], roles: Sequence[str], achieved_metrics: Sequence[str],
           tolerance: float) -> Point | None:
    own = tool[tool["variant"] == variant] if len(tool) else tool
    if not len(own):
        return None
    offered = None if rate is None else float(rate)
    rates: list[float] = []
    for name in achieved_metrics:
        rates = _per_trial(own, name)
        if rates:
            break
    achieved = estimate(rates, log=False, floor=0.0)
    floor = None if offered is None else offered * (1 - tolerance / 100)
    short = sum(1 for r in rates if floor is not None and r < floor)
    saturated = achieved is not None and floor is not None and achieved.value < floor
    values = {m: e for m in metrics if (e := estimate(_per_trial(own, m), log=True))}
    mine = cores[cores["variant"] == variant] if len(cores) else cores
    busy = {role: e for role in roles
            if (e := estimate(_per_trial(mine[mine["role"] == role], CORES_METRIC),
                              log=False, floor=0.0))}
    return Point(rung, offered, achieved, short, saturated, values, busy)


def _curve(base: str, points: list[Point], metric: str | None, factor: float,
           slo: Any) -> Curve:
    usable = [p for p in points if p.load is not None and metric in p.metrics]
    if not metric or not usable:
        return Curve(base, tuple(points))
    loads = [float(p.load) for p in usable if p.load is not None]
    saturated = [p.saturated for p in usable]
    levels = [p.metrics[metric] for p in usable]
    value = [e.value for e in levels]
    upper = [e.bounds[1] for e in levels]
    lower = [e.bounds[0] for e in levels]
    first_low, first_high = levels[0].bounds
    knee = crossing(loads, ([v / value[0] for v in value], [u / first_low for u in upper],
                            [lo / first_high for lo in lower]), factor, saturated)
    capacity = crossing(loads, (value, upper, lower), float(slo), saturated) \
        if isinstance(slo, int | float) and slo > 0 else None
    return Curve(base, tuple(points), knee, capacity)


def rate_text(value: float | None, unit: str = "") -> str:
    """10000 -> 10k, 1.5e6 -> 1.5M (3 significant digits)."""
    if value is None or not math.isfinite(value):
        return "-"
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}" + (f" {unit}" if unit else "")
    return f"{value:.3g}" + (f" {unit}" if unit else "")


def crossing_text(found: Crossing | None, unit: str = "") -> str:
    if found is None:
        return "-"
    if found.above:
        return f">= {rate_text(found.value)} (not reached on the ladder; CI from " \
               f"{rate_text(found.low)})"
    high = "above the ladder" if found.high is None else rate_text(found.high)
    if found.below:
        return f"< {rate_text(found.value)} (passed already at the first rung)"
    return f"{rate_text(found.value)} (95% CI {rate_text(found.low)}..{high})" \
        + (f" {unit}" if unit else "")


def load_json(report: LoadReport) -> dict[str, Any]:
    """The curves as report.json keeps them."""
    def est(e: Estimate | None) -> dict[str, Any] | None:
        return None if e is None else {"value": e.value, "low": e.low, "high": e.high,
                                       "n": e.n}

    def cross(c: Crossing | None) -> dict[str, Any] | None:
        return None if c is None else {"value": c.value, "low": c.low, "high": c.high,
                                       "below": c.below, "above": c.above}
    return {
        "unit": report.unit, "metric": report.metric, "knee_factor": report.knee_factor,
        "slo": report.slo, "tolerance": report.tolerance, "notes": list(report.notes),
        "curves": [{"variant": c.variant, "knee": cross(c.knee),
                    "capacity": cross(c.capacity),
                    "points": [{"rung": p.rung, "offered": p.offered,
                                "achieved": est(p.achieved), "saturated": p.saturated,
                                "short": p.short,
                                "metrics": {m: est(e) for m, e in p.metrics.items()},
                                "busy_cores": {r: est(e) for r, e in p.cores.items()}}
                               for p in c.points]} for c in report.curves]}


def rung_of(manifest: Manifest) -> Mapping[str, tuple[str, str]]:
    """variant -> (the profile's variant, rung label), for runs with a ladder."""
    found = (manifest.load or {}).get("variants") or {}
    return {str(v): (str(i["base"]), str(i["rung"])) for v, i in found.items()}
