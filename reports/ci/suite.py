"""The cases a CI system is shown (reports.ci): one `CiSuite` of `CiCase`s, made once
per run's table (reports.formats.table_junit.table_suite) or per gate
(reports.nightly.junit.gate_suite) and written as JUnit, KTAP or NIPA's JSON by the
modules beside this one. The outcome of a case is JUnit's four, and every writer maps
them the same way:

| outcome | JUnit       | KTAP                         | NIPA   |
|---------|-------------|------------------------------|--------|
| passed  | system-out  | ok N name                    | pass   |
| failure | <failure>   | not ok N name                | fail   |
| skipped | <skipped>   | not ok N name # SKIP reason  | skip   |
| error   | <error>     | not ok N name # ERROR reason | fail   |

A case that could not be judged (too few trials, inconclusive, exploratory, no values)
is `skipped`, never `passed`: JUnit shows it skipped, KTAP as a SKIP on a `not ok` line
(a reader that ignores directives sees a failure, never a pass), NIPA as "skip"."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from napilab.harness.store.manifest import TrialRecord

Outcome = Literal["passed", "failure", "skipped", "error"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "failure", "skipped", "error")


@dataclass(frozen=True)
class CiCase:
    """One test as a CI system shows it: `group` is the compared variant (or column, or
    "trials"; "" for a case of the whole suite, as the gate's own verdict)."""

    group: str
    name: str
    outcome: Outcome
    message: str
    kind: str = ""  # JUnit's failure or error type: worse, regression, inconclusive...
    text: str = ""  # the failure's or error's longer text (a trial's stderr tails)
    seconds: float | None = None  # the time the case's trials took, when known
    path: str = ""  # where in the run directory its output is ("" the run itself)


@dataclass(frozen=True)
class CiSuite:
    name: str  # "napilab report demo", "napilab check demo"
    profile: str
    run_dir: Path  # the run the cases judge (a gate's candidate)
    properties: tuple[tuple[str, str], ...]
    cases: tuple[CiCase, ...]
    notes: str = ""  # said beside the cases (JUnit's system-err): differences of hosts
    started: float | None = None  # the run's, seconds since the epoch
    ended: float | None = None

    def counts(self) -> dict[Outcome, int]:
        return {o: sum(c.outcome == o for c in self.cases) for o in OUTCOMES}

    def groups(self) -> Iterator[tuple[str, tuple[CiCase, ...]]]:
        """(group, its cases) in the order groups first appear; a case of group "" is
        a group of its own."""
        order: dict[str, list[CiCase]] = {}
        for k, case in enumerate(self.cases):
            order.setdefault(case.group or f"\0{k}", []).append(case)
        for key, cases in order.items():
            yield ("" if key.startswith("\0") else key), tuple(cases)


def trial_seconds(trials: Iterable[TrialRecord], variant: str | None = None) -> float | None:
    """The seconds the completed trials (of `variant`, or all) took from start to end;
    None when no trial says."""
    spans = [t.end - t.start for t in trials if t.status == "ok" and t.start is not None
             and t.end is not None and (variant is None or t.variant == variant)]
    return round(sum(spans), 3) if spans else None
