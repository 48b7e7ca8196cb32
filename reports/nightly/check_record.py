"""The nightly records (harness.records): RUN_DIR/check.json, the summary `napilab
check` leaves in the candidate run, written by reports.nightly.check and read by
history, the site index, its trend marks and its Atom feed through `read_check` only;
and RESULTS/<profile>/baseline-pin.json, the run `napilab baseline pin` chose
(`read_pin`).

Version 1 is the first (files before it carry no schema_version and read as 1). Where
JSON has no number (an unbounded interval side, an estimate that could not be made),
the value is null.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from napilab.harness.errors import InputError
from napilab.harness.records import codec
from napilab.harness.records.codec import Document, FrozenRecord
from napilab.reports.ab.table_json import ComparisonRecord

CHECK_FILE = "check.json"
PIN_FILE = "baseline-pin.json"  # RESULTS/<profile>/, written by `napilab baseline pin`


class RunRef(FrozenRecord, frozen=True):
    WHAT = "a run reference"

    dir: str
    run_id: str


class Damaged(FrozenRecord, frozen=True):
    """A reference night left out because its stored data is damaged."""

    WHAT = "a damaged run"

    dir: str
    error: str


class BaselineRecord(FrozenRecord, frozen=True):
    WHAT = "the check's baseline"

    dir: str
    run_id: str
    kind: str  # run | pinned | series...: reports.nightly.baselines' Reference.kind
    runs: list[RunRef] = msgspec.field(default_factory=list)  # the nights of a series
    damaged: list[Damaged] = msgspec.field(default_factory=list)


class DifferenceRecord(FrozenRecord, frozen=True):
    """One way the two runs differ (harness.store.confounders.Difference)."""

    WHAT = "a difference"

    kind: str
    where: str
    key: str
    a: Any = None
    b: Any = None
    note: str = ""


class CaseRecord(FrozenRecord, frozen=True):
    """One gated (metric, variant): reports.nightly.check.GateCase."""

    WHAT = "a check case"

    name: str
    label: str
    source: str
    metric: str
    unit: str
    variant: str
    status: str  # regression | improvement | within | inconclusive | skipped | error
    direction: str
    direction_origin: str
    role: str | None = None
    max_regression_pct: float | None = None
    threshold: str = ""
    threshold_origin: str = ""
    reason: str = ""
    anchor: list[str] = msgspec.field(default_factory=list)
    noise: str = ""
    detail: str = ""
    comparison: ComparisonRecord | None = None


class CheckRecord(Document):
    """check.json."""

    WHAT = "a check summary (check.json)"
    VERSION = 1

    profile: str
    status: str  # regression | pass | inconclusive | error
    candidate: RunRef
    baseline: BaselineRecord
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    family: int = 0
    adjust: str = "holm"
    repeat_needed: int | None = None
    confounders: list[DifferenceRecord] = msgspec.field(default_factory=list)
    intended: list[DifferenceRecord] = msgspec.field(default_factory=list)
    cases: list[CaseRecord] = msgspec.field(default_factory=list)

    @property
    def regressions(self) -> list[CaseRecord]:
        return [c for c in self.cases if c.status == "regression"]


def read_check(run_dir: Path) -> CheckRecord | None:
    """RUN_DIR/check.json typed; None when no check ran on the run (no file). A file
    that is not a check summary is an InputError naming it."""
    path = run_dir / CHECK_FILE
    try:
        return codec.read(path, CheckRecord)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None


class PinRecord(FrozenRecord, frozen=True):
    """baseline-pin.json: the pinned run, by its directory name under RESULTS/<profile>."""

    WHAT = "a baseline pin"

    run: str
    run_id: str = ""


def read_pin(path: Path) -> PinRecord | None:
    """The pin at `path`, None when there is none; a damaged pin is an InputError (a
    nightly job must not judge against the pool while it believes a run is pinned)."""
    try:
        return codec.read(path, PinRecord)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None


class ChangePointRecord(FrozenRecord, frozen=True, omit_defaults=False):
    """A level shift in one metric's nightly medians (harness.stats.changes)."""

    WHAT = "a change point"

    metric: str
    variant: str
    run_id: str
    dir: str
    time: str
    before: float | None = None
    after: float | None = None
    change: float | None = None


class HistoryRun(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a run of the history"

    run_id: str
    dir: str
    time: str
    status: str
    started: float | None = None
    kernel: dict[str, str] = msgspec.field(default_factory=dict)  # host -> release
    trials: int = 0
    trials_ok: int = 0
    check: str | None = None  # the status of `napilab check` on it, when one ran
    medians: dict[str, dict[str, float | None]] = msgspec.field(
        default_factory=dict)  # metric -> variant -> median
    # the series it joins (reports.nightly.series: `replica NAME` or `hosts a+b`) and the
    # replica of a run over replicas
    series: str = ""
    replica: str | None = None


class MetricRef(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a metric"

    key: str
    unit: str


class HistoryRecord(FrozenRecord, frozen=True, omit_defaults=False):
    """`napilab history --format json`: newest run first."""

    WHAT = "a history (history --format json)"

    profile: str
    host: str | None = None
    change_points: list[ChangePointRecord] = msgspec.field(default_factory=list)
    damaged: list[Damaged] = msgspec.field(default_factory=list)
    metrics: list[MetricRef] = msgspec.field(default_factory=list)
    variants: list[str] = msgspec.field(default_factory=list)
    runs: list[HistoryRun] = msgspec.field(default_factory=list)


class HistoryCsvRow(FrozenRecord, frozen=True, omit_defaults=False):
    """One row of `napilab history --format csv`: one run, metric and variant (the
    median over the run's repetitions and how many there were), oldest run first."""

    WHAT = "a history CSV row"

    profile: str
    run_id: str
    started_utc: str  # ISO 8601, Z; empty when not recorded
    status: str
    kernel: str
    metric: str
    unit: str
    variant: str
    median: float
    n: int
