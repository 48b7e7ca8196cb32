"""report.json of a run over replicas (`napilab schema fleet-report`): per primary
metric and comparison the pooled change with its interval, p, tau, I^2 and Cochran's Q
p-value, the verdict and how many replicas agree, and each replica's own change."""

from __future__ import annotations

import msgspec

from napilab.harness.records import codec
from napilab.harness.records.codec import FrozenRecord
from napilab.reports.fleet.table import FleetTable

SCHEMA = "napilab.fleet-report/1"


class ReplicaChangeRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a replica's change"

    replica: str
    change: float | None  # B/A - 1
    ci: list[float] | None  # its 95% interval, B/A - 1 at both ends
    n_baseline: int
    n_variant: int
    note: str | None = None  # why it could not be compared


class PooledRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a pooled change"

    change: float
    ci: list[float]
    p: float
    k: int  # replicas pooled
    tau: float | None  # between-replica spread, log scale (None: one replica)
    i2: float | None
    q_p: float | None  # Cochran's Q test of no heterogeneity


class FleetLineRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a line of the pooled table"

    label: str
    unit: str
    direction: str
    baseline: str
    variant: str
    verdict: str  # better | worse | no change | inconclusive
    better: int  # replicas whose own interval says better
    worse: int
    pooled: PooledRecord | None
    replicas: list[ReplicaChangeRecord] = msgspec.field(default_factory=list)


class ReplicaStatusRecord(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a replica of the run"

    name: str
    status: str
    pooled: bool  # its run is in the pools
    error: str | None = None


class FleetReportRecord(FrozenRecord, frozen=True, omit_defaults=False):
    """report.json of a run over replicas, versioned by `schema`."""

    WHAT = "a report of a run over replicas (report.json)"

    schema: str
    profile: str
    run_id: str
    status: str
    replicas: list[ReplicaStatusRecord]
    lines: list[FleetLineRecord]


def fleet_record(fleet: FleetTable) -> FleetReportRecord:
    manifest = fleet.manifest
    replicas = [ReplicaStatusRecord(r.name, r.status, r.name in fleet.replicas, r.error)
                for r in manifest.replicas or []]
    lines = []
    for line in fleet.lines:
        pooled = line.pooled
        lines.append(FleetLineRecord(
            line.label, line.unit, line.direction, line.baseline, line.variant, line.verdict,
            line.better, line.worse,
            None if pooled is None else PooledRecord(
                pooled.change, list(pooled.ci), pooled.p, pooled.k, pooled.tau, pooled.i2,
                pooled.q_p),
            [ReplicaChangeRecord(r.replica, r.change, None if r.ci is None else list(r.ci),
                                 r.n[0], r.n[1], r.note) for r in line.replicas]))
    return FleetReportRecord(SCHEMA, manifest.profile.name, manifest.run_id,
                             manifest.status or "unknown", replicas, lines)


def fleet_json(fleet: FleetTable) -> str:
    return codec.encode(fleet_record(fleet), indent=1).decode() + "\n"
