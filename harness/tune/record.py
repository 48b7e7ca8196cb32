"""tune.json, a `napilab tune` study's record (harness.records): what was asked (the
goal, the space), the baseline, every candidate with its numbers, the confirmation and
why a search stopped. Rewritten after every candidate; every key is always written
(`omit_defaults=False`), so a script polling the file sees a candidate's `state` and
`run` from the start. Version 1 is the first (files before it have no schema_version).
No Optuna here: the reports read it (reports.tune.report)."""

from __future__ import annotations

from typing import Any

import msgspec

from napilab.harness.records.codec import Document, FrozenRecord, Record

OK, FAILED, BROKEN, RUNNING, INTERRUPTED = "ok", "failed", "broken", "running", "interrupted"


class Goal(FrozenRecord, frozen=True, omit_defaults=False):
    """The profile's `tune:` as the study ran it (harness.profile.tune.Tune.record)."""

    WHAT = "a tune goal"

    variant: str
    parameters: dict[str, str] = msgspec.field(default_factory=dict)  # name -> its space
    objectives: list[tuple[str, str]] = msgspec.field(default_factory=list)  # label, way
    constraints: list[str] = msgspec.field(default_factory=list)  # as written
    bounds: list[tuple[str, float | None, float | None]] = msgspec.field(
        default_factory=list)  # label, low, high
    trials: int | None = None
    seconds: float | None = None
    duration: float | None = None
    top: int | None = None
    repeat: int | None = None  # the confirmation's repetitions (None: the profile's)
    sampler: str = ""
    seed: int | None = None
    guard: list[str] = msgspec.field(default_factory=list)


class Candidate(Record, omit_defaults=False):
    """One point the search measured (Optuna's trial `number`)."""

    WHAT = "a tune candidate"

    number: int
    values: dict[str, Any]  # parameter -> the value the template was filled in with
    state: str = RUNNING  # ok | failed | broken | running | interrupted
    run: str | None = None  # its run directory, relative to the study's
    numbers: dict[str, float | None] = msgspec.field(default_factory=dict)  # label -> value
    seconds: float = 0.0
    error: str | None = None

    @property
    def name(self) -> str:
        return f"t{self.number:03d}"

    def describe(self) -> str:
        return " ".join(f"{k}={_text(v)}" for k, v in self.values.items())


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).lower() if isinstance(value, bool) else str(value)


class Baseline(Record, omit_defaults=False):
    WHAT = "the tune baseline"

    state: str = RUNNING
    run: str | None = None
    numbers: dict[str, float | None] = msgspec.field(default_factory=dict)
    seconds: float = 0.0


class Confirmation(Record, omit_defaults=False):
    """The best candidates measured again with the baseline, and what that said."""

    WHAT = "the tune confirmation"

    candidates: list[tuple[str, dict[str, Any]]] = msgspec.field(default_factory=list)
    run: str | None = None
    # reports.tune.confirm's CandidateVerdict of each, as data
    verdicts: list[dict[str, Any]] | None = None
    recommended: list[str] | None = None
    profile: str | None = None  # recommended.yaml, relative to the study's directory


class Stopped(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "why the search stopped"

    candidate: str
    why: str
    at: float


class TuneStudy(Document, omit_defaults=False):
    """tune.json."""

    WHAT = "a tune study (tune.json)"
    VERSION = 1

    id: str
    profile_name: str
    tune: Goal
    profile: str = ""  # the profile's path
    digest: str | None = None
    inventory: str = ""
    started: float = 0.0
    baseline: Baseline | None = None
    candidates: list[Candidate] = msgspec.field(default_factory=list)
    confirmation: Confirmation | None = None
    stopped: Stopped | None = None
