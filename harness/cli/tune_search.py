"""`napilab tune`'s loop: the baseline once, then candidates asked of Optuna, each run as
a napilab run of its own (applied, measured, restored through the journal exactly as a
run's variant), until the budget is spent; then the best candidates re-measured with
the baseline at the profile's repeat, judged, and the confirmed ones written out.

Every candidate's run directory is recorded in tune.json before its trial starts, and
its numbers after it ends, so a stop at any point loses nothing measured: a killed
study leaves its hosts restorable by `napilab restore`, and `napilab tune --resume`
measures again the candidate that was running and goes on.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from napilab.harness.cli.execute import execute
from napilab.harness.engine.progress import Progress, QuietProgress, reporter
from napilab.harness.errors import ExitCode, InputError, Interrupted, NapilabError
from napilab.harness.inventory.inventory import Inventory
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import Profile, load_profile
from napilab.harness.profile.tune import Tune, Tuning, filled
from napilab.harness.records import codec
from napilab.harness.store.store import atomic_write, load_manifest
from napilab.harness.tune import space
from napilab.harness.tune.record import Baseline, Confirmation, Stopped
from napilab.harness.tune.study import (
    BROKEN,
    FAILED,
    INTERRUPTED,
    OK,
    RECOMMENDED,
    Candidate,
    Study,
    inside,
)
from napilab.reports.tune import confirm as ab_tune


def directions(prof: Profile, tune: Tune) -> Tune:
    """A front's metrics go the way the profile's `metrics:` says (default: lower)."""
    if not tune.front:
        return tune
    objectives = tuple(dataclasses.replace(o, direction="maximise" if (
        (policy := prof.metrics.get(o.metric)) is not None and policy.direction == "higher")
        else "minimise") for o in tune.objectives)
    return dataclasses.replace(tune, objectives=objectives)


class Search:
    def __init__(self, study: Study, prof: Profile, inv: Inventory,
                 say: Callable[[str], None], *, quiet: bool = False) -> None:
        assert prof.tune is not None
        self.study = study
        self.prof = prof
        self.tune = directions(prof, prof.tune)
        self.inv = inv
        self.say = say
        self.quiet = quiet
        self.objectives = [ab_tune.Named(o.metric, o.role) for o in self.tune.objectives]
        self.bounds = [ab_tune.Named(b.metric, b.role)
                       for b in (*self.tune.constraints, *self.tune.guard)]

    # -- the whole study ----------------------------------------------------------------

    def run(self) -> ExitCode:
        study = self.study
        optuna_study = study.optuna(self.tune, [o.direction for o in self.tune.objectives])
        for line in study.recover(optuna_study):
            self.say(line)
        if study.state.baseline is None or study.state.baseline.state != OK:
            self._baseline()
        while self._budget_left():
            self._candidate(optuna_study)
        return self._confirm()

    def _budget_left(self) -> bool:
        tune, study = self.tune, self.study
        done = [c for c in study.candidates if c.state == OK]
        size = space.grid_size(tune)
        distinct = {repr(sorted(c.values.items())) for c in done}
        if size is not None and len(distinct) >= size:
            self.say(f"every point of the space ({size}) is measured")
            return False
        if tune.trials is not None and len(done) >= tune.trials:
            return False
        return tune.seconds is None or study.elapsed < tune.seconds

    # -- one measurement ----------------------------------------------------------------

    def _measure(self, tuning: Tuning, record: Callable[[Path], None], *,
                 progress: Progress | None = None, resume: Path | None = None) -> Path:
        """Run TUNING's profile as a napilab run of the study. A search run stops at a
        failed trial (the guard); the confirmation (PROGRESS given) goes on past one, and
        its verdicts use the trials that completed."""
        plan = bind(load_profile(self.prof.path, tuning), self.inv)
        where: list[Path] = []

        def stored(directory: Path) -> None:
            where.append(directory)
            record(directory)

        execute(plan, str(self.study.runs), formats=[] if progress is None else ["html", "text"],
                progress=progress or QuietProgress(), on_store=stored,
                resume=str(resume) if resume else None, keep_going=progress is not None)
        return where[0]  # execute() names the directory before any trial, or raises

    def _search_tuning(self, candidates: tuple[tuple[str, dict[str, Any]], ...],
                       baseline: bool) -> Tuning:
        return Tuning(candidates, baseline=baseline, repeat=1, duration=self.tune.duration)

    def _baseline(self) -> None:
        study = self.study
        entry = Baseline()
        study.state.baseline = entry

        def record(directory: Path) -> None:
            entry.run = str(directory.relative_to(study.dir))
            study.save()

        start = time.monotonic()
        run_dir = self._measure(self._search_tuning((), True), record)
        numbers = ab_tune.candidate(run_dir, self.prof.baseline, self.objectives, self.bounds)
        missing = [n.label for n in self.objectives if numbers.get(n.label) is None]
        entry.state, entry.numbers = OK, dict(numbers)
        entry.seconds = time.monotonic() - start
        study.save()
        if missing:
            raise InputError(f"the baseline's run ({run_dir}) has no {', '.join(missing)}: the "
                             "search has nothing to optimise", hint="busy_cores needs "
                             "`collect: {proc_stat: ...}`; `napilab report RUN` lists the metrics")
        self.say(f"baseline {self.prof.baseline}: {self._numbers(numbers)}")

    def _candidate(self, optuna_study: Any) -> None:
        study, tune = self.study, self.tune
        trial, cand = study.ask(optuna_study, tune)

        def record(directory: Path) -> None:
            cand.run = str(directory.relative_to(study.dir))
            study.save()

        start = time.monotonic()
        try:
            run_dir = self._measure(self._search_tuning(((cand.name, cand.values),), False),
                                    record)
            numbers = ab_tune.candidate(run_dir, cand.name, self.objectives, self.bounds)
        except Interrupted:
            cand.state, cand.seconds = INTERRUPTED, time.monotonic() - start
            study.save()  # Optuna's trial stays running: --resume asks it again
            raise
        except ab_tune.MetricError as exc:
            cand.state, cand.error = FAILED, str(exc)
            study.tell(optuna_study, trial, cand, tune)
            raise InputError(f"tune.goal: {exc}") from None
        except NapilabError as exc:
            cand.seconds = time.monotonic() - start
            cand.error = exc.message
            cand.state = BROKEN if self._broke(cand) else FAILED
            study.tell(optuna_study, trial, cand, tune)
            if cand.state == BROKEN:
                self._stop(cand, exc.message)
            raise
        cand.seconds = time.monotonic() - start
        broken = self._guard(numbers)
        cand.numbers = dict(numbers)
        cand.state = BROKEN if broken else OK
        cand.error = broken
        study.tell(optuna_study, trial, cand, tune)
        if broken:
            self._stop(cand, broken)
        self.say(f"{cand.name} {cand.describe()}: {self._numbers(numbers)}{self._best()}")

    def _broke(self, cand: Candidate) -> bool:
        """Did the candidate's own trial fail (the workload), rather than a host or the
        store? Read from its run's manifest."""
        if cand.run is None:
            return False
        try:
            manifest = load_manifest(self.study.dir / cand.run)
        except NapilabError:
            return False
        return any(t.status == "failed" for t in manifest.trials)

    def _guard(self, numbers: dict[str, float | None]) -> str | None:
        """Why the candidate broke the workload (None: it did not)."""
        ops = numbers.get("operations")
        if ops is not None and ops <= 0:
            return "the workload did no work (its operation count is 0)"
        for bound in self.tune.guard:
            value = numbers.get(bound.label)
            if value is None:
                return f"guard {bound.describe()}: the trial has no {bound.label}"
            if bound.violation(value) > 0:
                return f"guard {bound.describe()}: {bound.label} was {value:g}"
        return None

    def _stop(self, cand: Candidate, why: str) -> None:
        self.study.state.stopped = Stopped(candidate=cand.name, why=why, at=time.time())
        self.study.save()
        raise NapilabError(f"candidate {cand.name} ({cand.describe()}) broke the workload: "
                           f"{why}; every host was restored; the search stopped",
                           hint="narrow tune.parameters; `napilab tune ... --resume "
                                f"{self.study.dir}` goes on without it")

    def _numbers(self, numbers: dict[str, float | None]) -> str:
        labels = [n.label for n in (*self.objectives, *self.bounds)]
        return ", ".join(f"{k} {v:.4g}" if v is not None else f"{k} -"
                         for k, v in numbers.items() if k in labels) or "no numbers"

    def _best(self) -> str:
        ranked = self.study.ranked(self.tune)
        return f" (best so far {ranked[0][2][0]})" if ranked else ""

    # -- the confirmation ---------------------------------------------------------------

    def _confirm(self) -> ExitCode:
        from napilab.reports.tune import report as tune_report

        study, tune = self.study, self.tune
        entry = study.state.confirmation or Confirmation()
        if not entry.candidates:
            ranked = [r for r in study.ranked(tune) if inside(tune, r[1])][:tune.top]
            entry = Confirmation(candidates=[(names[0], values) for values, _, names in ranked])
            study.state.confirmation = entry
            study.save()
        if not entry.candidates:
            self.say("no candidate of the search is inside the goal's bounds: nothing to "
                     "confirm")
            tune_report.write(study.dir, study.state, None)
            return ExitCode.INCONCLUSIVE
        names = [name for name, _ in entry.candidates]
        repeat = tune.repeat or self.prof.repeat
        self.say(f"confirming {', '.join(names)} against {self.prof.baseline}, {repeat} "
                 "repetitions each")
        tuning = Tuning(tuple((n, v) for n, v in entry.candidates), baseline=True,
                        repeat=repeat, primary=tuple((o.metric, o.policy)
                                                     for o in tune.objectives))

        def record(directory: Path) -> None:
            entry.run = str(directory.relative_to(study.dir))
            study.save()

        previous = study.dir / entry.run if entry.run else None
        resume = previous if previous is not None and _incomplete(previous) else None
        run_dir = previous if previous is not None and resume is None else self._measure(
            tuning, record, progress=reporter(quiet=self.quiet), resume=resume)
        conf = ab_tune.judge(run_dir, [(n, o.direction) for n, o in zip(
            self.objectives, tune.objectives, strict=True)], [
            (ab_tune.Named(b.metric, b.role), b.low, b.high) for b in tune.constraints], names)
        entry.verdicts = [codec.plain(dataclasses.asdict(v)) for v in conf.candidates]
        entry.recommended = list(conf.recommended)
        if conf.recommended:
            path = self._write_profile(entry, conf)
            entry.profile = str(path.relative_to(study.dir))
        study.save()
        for path in tune_report.write(study.dir, study.state, conf):
            self.say(f"wrote {path}")
        if not conf.recommended:
            self.say("no candidate is confirmed better than the baseline: none is recommended")
            return ExitCode.INCONCLUSIVE
        self.say(f"recommended: {', '.join(conf.recommended)} -> {entry.profile}")
        return ExitCode.OK

    def _write_profile(self, entry: Confirmation, conf: ab_tune.Confirmation) -> Path:
        """The confirmed settings as a profile `napilab run` takes: the profile as
        written (extends resolved), without `tune:`, the baseline and each recommended
        candidate as a variant, the goal's metrics primary."""
        tune, doc = self.tune, dict(self.prof.document)
        values = dict(entry.candidates)
        template = doc["variants"][tune.variant]
        variants = {self.prof.baseline: doc["variants"][self.prof.baseline]}
        for name in conf.recommended:
            verdict = next(v for v in conf.candidates if v.name == name)
            key = tune.variant if len(conf.recommended) == 1 else f"{tune.variant}-{name}"
            overlay = filled(template, values[name])
            overlay["description"] = (
                f"napilab tune {self.study.state.id}, candidate {name}: "
                + " ".join(f"{k}={v}" for k, v in values[name].items()) + "; confirmed "
                + "; ".join(f"{label} {verdict.verdicts[label]} {verdict.changes[label]}"
                            for label in verdict.verdicts))
            variants[key] = overlay
        doc.pop("tune", None)
        doc.update(variants=variants, baseline=self.prof.baseline,
                   repeat=tune.repeat or self.prof.repeat,
                   metrics={o.metric: {"direction": o.policy} for o in tune.objectives})
        path = self.study.dir / RECOMMENDED
        head = (f"# Written by napilab tune (study {self.study.state.id}) from "
                f"{self.prof.path}: the settings it confirmed, against the baseline.\n"
                "# `napilab run` this file to measure them again.\n")
        atomic_write(path, head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
        load_profile(path)  # it runs: a profile napilab refuses is napilab's bug, said now
        return path


def _incomplete(run_dir: Path) -> bool:
    try:
        manifest = load_manifest(run_dir)
    except NapilabError:
        return False
    return manifest.status != "complete"
