"""A `napilab tune` study on disk: its directory, the Optuna study behind it, its
candidates.

    RESULTS/PROFILE/tune-<UTC time>-<id>/
      tune.json          what was asked and what each candidate gave (written after each)
      study.journal      Optuna's journal storage: `tune --resume` loads the study from it
      runs/              every napilab run of the study: the baseline, each candidate, the
                         confirmation (each a normal run directory: `napilab report` it)
      recommended.yaml   the confirmed settings as a profile `napilab run` takes
      tune.txt, tune.md, tune.html, tune-report.json   the report

Candidates are asked of Optuna one at a time (its ask-and-tell interface): the sampler is
TPE (one objective, or its multi-objective form for a front), NSGA-II or random, with the
`subject_to` bounds as Optuna constraints (`Trial.set_constraint`: a candidate outside
one is infeasible, and the samplers know it).
A candidate that was running when the study stopped (a kill, a lost host) is failed in
the study and asked again on resume.
"""

from __future__ import annotations

import json
import math
import secrets
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.study import Study as OptunaStudy
from optuna.trial import Trial, TrialState

from napilab.harness.profile.tune import Tune
from napilab.harness.records import codec
from napilab.harness.store.store import atomic_write
from napilab.harness.tune import pareto, space
from napilab.harness.tune.record import (
    BROKEN,
    FAILED,
    INTERRUPTED,
    OK,
    RUNNING,
    Candidate,
    Goal,
    TuneStudy,
)

__all__ = ["BROKEN", "FAILED", "INTERRUPTED", "OK", "RUNNING", "Candidate", "Study"]

STATE = "tune.json"
JOURNAL = "study.journal"
RUNS = "runs"
RECOMMENDED = "recommended.yaml"


class Study:
    def __init__(self, directory: Path, state: TuneStudy) -> None:
        self.dir = directory
        self.state = state

    @property
    def candidates(self) -> list[Candidate]:
        return self.state.candidates

    # -- on disk ------------------------------------------------------------------------

    @classmethod
    def create(cls, results: str | Path, profile: Any, inventory: str) -> Study:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        directory = Path(results) / profile.name / f"tune-{stamp}-{secrets.token_hex(4)}"
        directory.mkdir(parents=True)
        assert profile.tune is not None
        study = cls(directory, TuneStudy(
            id=directory.name, profile=str(Path(profile.path).resolve()),
            profile_name=profile.name, digest=profile.digest,
            inventory=str(Path(inventory).resolve()),
            tune=Goal.from_json(codec.plain(profile.tune.record())), started=time.time()))
        study.save()
        return study

    @classmethod
    def open(cls, directory: str | Path) -> Study:
        state = codec.read_state(directory, STATE, TuneStudy, "a tune study",
                                 "`napilab tune PROFILE -i INV` starts one")
        return cls(Path(directory), state)

    def save(self) -> None:
        atomic_write(self.dir / STATE, codec.encode(self.state, indent=1) + b"\n")

    @property
    def runs(self) -> Path:
        return self.dir / RUNS

    @property
    def elapsed(self) -> float:
        """Seconds the search has spent on candidates, over every session of it."""
        return sum(c.seconds for c in self.candidates)

    # -- Optuna -------------------------------------------------------------------------

    def optuna(self, tune: Tune, directions: Sequence[str]) -> OptunaStudy:
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        storage = JournalStorage(JournalFileBackend(str(self.dir / JOURNAL)))
        name = self.state.id
        done = len(self.candidates)
        return optuna.create_study(
            storage=storage, study_name=name, load_if_exists=True,
            directions=[("minimize" if d == "minimise" else "maximize") for d in directions],
            sampler=_sampler(tune, done))

    def recover(self, study: OptunaStudy) -> list[str]:
        """After a stop mid-candidate: the study's running trials failed and asked again,
        the candidate recorded as interrupted. What was done, one line each."""
        lines = []
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            study.tell(trial.number, state=TrialState.FAIL)
            study.enqueue_trial(dict(trial.params), skip_if_exists=False)
            lines.append(f"candidate t{trial.number:03d} was running when the study stopped: "
                         "it is measured again")
        for cand in self.candidates:
            if cand.state == RUNNING:
                cand.state = INTERRUPTED
        self.save()
        return lines

    def ask(self, study: OptunaStudy, tune: Tune) -> tuple[Trial, Candidate]:
        trial = study.ask(space.distributions(tune))
        cand = Candidate(trial.number, space.decode(tune, trial.params))
        self.candidates.append(cand)
        self.save()
        return trial, cand

    def tell(self, study: OptunaStudy, trial: Trial, cand: Candidate, tune: Tune) -> None:
        """Record CAND (already measured, or failed) in tune.json, then in the study."""
        self.save()
        objectives = [cand.numbers.get(o.label) for o in tune.objectives]
        if cand.state != OK or any(v is None or math.isnan(v) for v in objectives):
            study.tell(trial, state=TrialState.FAIL)
            return
        for bound, violation in zip(tune.constraints, violations(tune, cand.numbers),
                                    strict=True):
            trial.set_constraint(bound.label, violation)  # <= 0: inside
        study.tell(trial, [float(v) for v in objectives if v is not None])

    # -- the answer ---------------------------------------------------------------------

    def ranked(self, tune: Tune) -> list[tuple[dict[str, Any], dict[str, float], list[str]]]:
        """Each distinct point measured (values, median numbers, its candidates' names),
        best first: inside every bound first, then by the objective (a front: by Pareto
        layer, then the first objective)."""
        points: dict[str, list[Candidate]] = {}
        for cand in self.candidates:
            if cand.state == OK:
                points.setdefault(json.dumps(cand.values, sort_keys=True), []).append(cand)
        rows = []
        for members in points.values():
            numbers = {}
            for label in {k for c in members for k in c.numbers}:
                found = [v for c in members if (v := c.numbers.get(label)) is not None]
                if found:
                    numbers[label] = statistics.median(found)
            rows.append((members[0].values, numbers, [c.name for c in members]))
        keys = [[pareto.signed(numbers.get(o.label), o.direction) for o in tune.objectives]
                for _, numbers, _ in rows]
        layer = pareto.layers(keys)

        def order(i: int) -> tuple[float, int, float]:
            worst = max((b.violation(v) for b in tune.constraints
                         if (v := rows[i][1].get(b.label)) is not None), default=-math.inf)
            return (max(worst, 0.0), layer[i], keys[i][0])
        return [rows[i] for i in sorted(range(len(rows)), key=order)]


def violations(tune: Tune, numbers: dict[str, Any]) -> list[float]:
    """Optuna's constraint values (<= 0: inside the bound); a missing number is outside."""
    out = []
    for bound in tune.constraints:
        value = numbers.get(bound.label)
        out.append(bound.violation(value) if value is not None else 1.0)
    return out


def inside(tune: Tune, numbers: dict[str, Any]) -> bool:
    """NUMBERS keep every bound of the goal (a missing one does not)."""
    return all(v <= 0 for v in violations(tune, numbers))


def _sampler(tune: Tune, done: int) -> optuna.samplers.BaseSampler:
    """The study's sampler; its seed moves on with the candidates already measured, so a
    resumed study does not ask its first points again."""
    seed = None if tune.seed is None else tune.seed + done
    startup = max(2, min(10, (tune.trials or 30) // 3))
    if tune.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if tune.sampler == "nsga2":
        return optuna.samplers.NSGAIISampler(
            seed=seed, population_size=max(4, min(50, (tune.trials or 30) // 3)))
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup)
