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
from typing import TYPE_CHECKING

from napilab.harness.errors import NapilabError
from napilab.harness.stats.replicas.effects import Missing
from napilab.harness.store.manifest import Manifest
from napilab.harness.store.store import load_manifest
from napilab.reports.ab.compare import RunData, Table, load_run, table

if TYPE_CHECKING:
    from napilab.harness.stats.replicas import Effect, Pooled

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
    pooled: Pooled | None  # harness.stats.replicas' pool (None: nothing to pool)
    verdict: str  # better | worse | no change | inconclusive
    better: int = 0  # replicas whose own interval says better
    worse: int = 0


@dataclass(frozen=True)
class FleetTable:
    directory: Path
    manifest: Manifest
    replicas: list[str]  # those whose runs are in the pools, in the manifest's order
    absent: dict[str, str]  # replica -> why it is not (its run failed, ...)
    lines: list[FleetLine]
    # each replica's own run and table (its own reports are rendered from them)
    own: dict[str, tuple[RunData, Table]] = field(default_factory=dict)


def is_fleet(directory: str | Path) -> bool:
    """A run over replicas: its manifest lists them."""
    try:
        return bool(load_manifest(Path(directory)).replicas)
    except (NapilabError, OSError):
        return False


def fleet_table(directory: str | Path) -> FleetTable:
    directory = Path(directory)
    manifest = load_manifest(directory)
    own: dict[str, tuple[RunData, Table]] = {}
    absent: dict[str, str] = {}
    for record in manifest.replicas or []:
        if record.status not in USABLE:
            absent[record.name] = record.status + (f": {record.error}" if record.error else "")
            continue
        run = load_run(directory / record.dir)
        own[record.name] = (run, table(run))
    keys: dict[tuple[str, str, str], tuple[str, str]] = {}  # (label, base, var) -> unit, dir
    values: dict[tuple[str, str, str], dict[str, tuple[tuple[float, ...], tuple[float, ...]]]] = {}
    for name, (_, tab) in own.items():
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
    lines = _pool_lines(keys, values, list(own))
    return FleetTable(directory, manifest, list(own), absent, lines, own)


def _pool_lines(keys: dict[tuple[str, str, str], tuple[str, str]],
                values: dict[tuple[str, str, str],
                             dict[str, tuple[tuple[float, ...], tuple[float, ...]]]],
                replicas: list[str]) -> list[FleetLine]:
    """Each key's replicas pooled (harness.stats.replicas: each replica's own change
    and interval, the pooled one), judged with Holm over the keys that could be pooled;
    a key with no replica's effect is "inconclusive"."""
    from napilab.harness.stats.replicas import ReplicaError, judgements, pool, try_effect

    pooled: dict[str, Pooled] = {}
    rows: dict[tuple[str, str, str], list[ReplicaChange]] = {}
    for key in keys:
        effects = {name: try_effect(*values[key].get(name, ((), ()))) for name in replicas}
        found = None
        with contextlib.suppress(ReplicaError):  # no replica gave an effect
            found = pooled["/".join(key)] = pool(effects)
        rows[key] = [_row(name, values[key].get(name, ((), ())), effect, found)
                     for name, effect in effects.items()]
    judged = judgements(pooled, {"/".join(k): keys[k][1] == "lower" for k in keys
                                 if "/".join(k) in pooled}) if pooled else {}
    out = []
    for key, (unit, direction) in keys.items():
        found_judgement = judged.get("/".join(key))
        verdict = found_judgement.verdict.value if found_judgement else "inconclusive"
        out.append(FleetLine(key[0], unit, direction, key[1], key[2], rows[key],
                             pooled.get("/".join(key)), verdict,
                             found_judgement.better if found_judgement else 0,
                             found_judgement.worse if found_judgement else 0))
    return out


def _row(name: str, trials: tuple[tuple[float, ...], tuple[float, ...]],
         effect: Effect | Missing, found: Pooled | None) -> ReplicaChange:
    """A replica's row: its change and interval as the pool computed them, or why it
    has none."""
    n = (len(trials[0]), len(trials[1]))
    own = found.replicas.get(name) if found is not None else None
    if own is not None:
        return ReplicaChange(name, own.change, own.ci, n)
    if isinstance(effect, Missing):
        return ReplicaChange(name, None, None, n, effect.reason)
    return ReplicaChange(name, effect.change, effect.change_ci(), n)


def pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value * 100:+.1f}%"
