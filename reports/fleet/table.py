"""The A/B table of a run over replicas: per primary metric and comparison, each
replica's change (its own run's trials, log scale) and the change pooled over the
replicas by a random-effects model (harness.stats's pooling: heterogeneity estimated,
a small-sample interval), with the verdict over the primary family: "better on k of N
replicas, pooled X (CI), heterogeneity tau", or "inconclusive" when the replicas
disagree beyond their noise.

Each replica's own table is the one `napilab report` shows for it (reports.ab): the
same lines, the same primary metrics and directions; this module only pools them. A
replica whose run failed, or that has no values of a metric, is named and left out of
that metric's pool."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from napilab.harness.errors import NapilabError
from napilab.harness.store.manifest import Manifest
from napilab.harness.store.store import load_manifest
from napilab.reports.ab.compare import Table, load_run, table

USABLE = ("complete", "partial")


@dataclass(frozen=True)
class ReplicaChange:
    """One replica's change of one metric: B/A - 1 with its 95% interval (None where
    it could not be computed: `note` says why)."""

    replica: str
    change: float | None
    ci: tuple[float, float] | None
    n: tuple[int, int]  # trials of the baseline and of the variant
    note: str | None = None


@dataclass(frozen=True)
class FleetLine:
    label: str
    unit: str
    direction: str  # lower | higher: which way is better
    baseline: str
    variant: str
    replicas: list[ReplicaChange]
    pooled: Any | None  # harness.stats pooling's result (None: nothing to pool)
    verdict: str  # better | worse | no change | inconclusive
    better: int = 0  # replicas whose own interval says better
    worse: int = 0

    @property
    def summary(self) -> str:
        """`better on 3 of 3 replicas, pooled -12.0% [-18.1%, -5.4%], tau 0.031`."""
        k = len([r for r in self.replicas if r.change is not None])
        pooled = self.pooled
        if pooled is None:
            return f"{self.verdict}: no replica could be compared"
        text = (f"{self.verdict}: better on {self.better} of {k}, worse on {self.worse} of "
                f"{k}; pooled {pct(pooled_change(pooled))} "
                f"[{pct(pooled_ci(pooled)[0])}, {pct(pooled_ci(pooled)[1])}]")
        tau = getattr(pooled, "tau", None)
        return text + (f", tau {tau:.3f}" if tau is not None and math.isfinite(tau) else "")


@dataclass(frozen=True)
class FleetTable:
    directory: Path
    manifest: Manifest
    replicas: list[str]  # those whose runs are in the pools, in the manifest's order
    absent: dict[str, str]  # replica -> why it is not (its run failed, ...)
    lines: list[FleetLine]
    tables: dict[str, Table] = field(default_factory=dict)  # each replica's own table


def is_fleet(directory: str | Path) -> bool:
    """A run over replicas: its manifest lists them."""
    try:
        return bool(load_manifest(Path(directory)).replicas)
    except (NapilabError, OSError):
        return False


def fleet_table(directory: str | Path) -> FleetTable:
    directory = Path(directory)
    manifest = load_manifest(directory)
    tables: dict[str, Table] = {}
    absent: dict[str, str] = {}
    for record in manifest.replicas or []:
        if record.status not in USABLE:
            absent[record.name] = record.status + (f": {record.error}" if record.error else "")
            continue
        tables[record.name] = table(load_run(directory / record.dir))
    keys: dict[tuple[str, str, str], tuple[str, str]] = {}  # (label, base, var) -> unit, dir
    values: dict[tuple[str, str, str], dict[str, tuple[tuple[float, ...], tuple[float, ...]]]] = {}
    for name, tab in tables.items():
        for line in tab.lines:
            if not line.primary:
                continue
            for base, var in tab.pairs:
                if base not in line.cells or var not in line.cells:
                    continue
                key = (line.label, base, var)
                keys.setdefault(key, (line.unit, line.direction))
                values.setdefault(key, {})[name] = (line.cells[base].values,
                                                    line.cells[var].values)
    lines = _pool_lines(keys, values, list(tables))
    return FleetTable(directory, manifest, list(tables), absent, lines, tables)


def _pool_lines(keys: dict[tuple[str, str, str], tuple[str, str]],
                values: dict[tuple[str, str, str],
                             dict[str, tuple[tuple[float, ...], tuple[float, ...]]]],
                replicas: list[str]) -> list[FleetLine]:
    from napilab.harness.stats.replicas import judge, pool, replica_effect

    pooled: dict[str, Any] = {}
    changes: dict[tuple[str, str, str], list[ReplicaChange]] = {}
    for key in keys:
        effects = {}
        changes[key] = []
        for name in replicas:
            a, b = values[key].get(name, ((), ()))
            try:
                effect = replica_effect(a, b)
            except ValueError as exc:
                changes[key].append(ReplicaChange(name, None, None, (len(a), len(b)), str(exc)))
                continue
            effects[name] = effect
            changes[key].append(ReplicaChange(name, *effect_change(effect), (len(a), len(b))))
        if effects:
            with contextlib.suppress(ValueError):  # nothing poolable: "inconclusive"
                pooled["/".join(key)] = pool(effects)
    verdicts = judge(pooled, {"/".join(k): keys[k][1] == "lower" for k in keys
                              if "/".join(k) in pooled}) if pooled else {}
    out = []
    for key, (unit, direction) in keys.items():
        label, base, var = key
        found = pooled.get("/".join(key))
        own = changes[key]
        lower = direction == "lower"
        better = sum(1 for r in own if r.ci is not None
                     and (r.ci[1] < 0 if lower else r.ci[0] > 0))
        worse = sum(1 for r in own if r.ci is not None
                    and (r.ci[0] > 0 if lower else r.ci[1] < 0))
        out.append(FleetLine(label, unit, direction, base, var, own, found,
                             verdicts.get("/".join(key), "inconclusive"), better, worse))
    return out


def effect_change(effect: Any) -> tuple[float, tuple[float, float] | None]:
    """A replica's effect (log B/A and its variance) as B/A - 1 and its 95% interval
    (Welch's degrees of freedom where the effect has them, else normal)."""
    from scipy import stats as sp

    estimate = float(effect.effect)
    variance = float(effect.variance)
    df = getattr(effect, "df", None)
    q = float(sp.t.ppf(0.975, df)) if df else 1.959964
    if not math.isfinite(variance) or variance < 0:
        return math.expm1(estimate), None
    half = q * math.sqrt(variance)
    return math.expm1(estimate), (math.expm1(estimate - half), math.expm1(estimate + half))


def pooled_change(pooled: Any) -> float:
    return float(pooled.change)


def pooled_ci(pooled: Any) -> tuple[float, float]:
    return float(pooled.ci[0]), float(pooled.ci[1])


def pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value * 100:+.1f}%"
