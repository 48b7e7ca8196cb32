"""A trial's steps in order, as typed records: the engine executes them and `napilab
plan` prints the commands of each, so the plan shows the order the run keeps.

    ApplySettings -> [idle: Snapshot, Idle, Snapshot, Deltas] -> [Workload(warmup)]
    -> Snapshot -> Workload -> Snapshot -> Deltas -> RestoreSettings

The settings steps of one host are harness.hosts.setting_steps'. RestoreSettings runs
whatever happened before it (the engine runs it in `finally`)."""

from __future__ import annotations

from dataclasses import dataclass

from napilab.harness.profile.profile import Variant


@dataclass(frozen=True)
class ApplySettings:
    """Every host's settings for the variant (journalled, written, read back)."""


@dataclass(frozen=True)
class Snapshot:
    """One exec per host reads every collector's sources; `name` is the raw output's
    (raw/<trial>/<host>/snapshot-<name>.out), `phase` the plan's label."""

    name: str
    phase: str


@dataclass(frozen=True)
class Idle:
    """No load for `seconds`, between two snapshots."""

    seconds: float


@dataclass(frozen=True)
class Workload:
    """The tool's server and client; a warm-up's output is stored, its values are not."""

    warmup: bool = False


@dataclass(frozen=True)
class Deltas:
    """Collector values between two snapshots, sources suffixed with `suffix`."""

    before: str
    after: str
    suffix: str = ""


@dataclass(frozen=True)
class RestoreSettings:
    """Every host back as it was, in reverse order."""


TrialStep = ApplySettings | Snapshot | Idle | Workload | Deltas | RestoreSettings


def trial_steps(variant: Variant) -> list[TrialStep]:
    spec = variant.workload
    steps: list[TrialStep] = [ApplySettings()]
    if spec.idle:
        steps += [Snapshot("idle-before", "idle"), Idle(spec.idle),
                  Snapshot("idle-after", f"idle+{spec.idle:g}s"),
                  Deltas("idle-before", "idle-after", ".idle")]
    if spec.warmup:
        steps.append(Workload(warmup=True))
    steps += [Snapshot("before", "snapshot"), Workload(), Snapshot("after", "snapshot"),
              Deltas("before", "after")]
    return [*steps, RestoreSettings()]
