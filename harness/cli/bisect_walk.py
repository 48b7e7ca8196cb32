"""`napilab bisect`'s loop: the endpoints measured first (which way each metric changed),
then each commit git bisect checks out: built, staged, measured against the good
endpoint in a napilab run of its own, judged by the nightly gate (reports.bisect.verdict)
and marked good, bad or skip in git; an inconclusive step is measured again at twice the
repetitions, up to `--max-repeat`, then skipped with the reason.

Crash safety: bisect.json is written (fsynced) when a step starts, again when its
candidate's first trial starts (phase `booting`: the boot comes next) and when that trial
ends (`measuring`: the kernel came up). `--resume` first replays the hosts' journals
(`napilab restore`: a host left on a candidate's kernel boots back into its own), then
marks a step found `booting` as the kernel that took the host down (`--on-crash`: skip
or bad) and never boots it again; a step found `running` or `measuring` is measured
again. A run that fails once its candidate's boot began is that kernel's failure too
(it did not boot, or it fell over): marked the same way, with the error, after its hosts
were restored.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from napilab.harness.bisect import build as builds
from napilab.harness.bisect import git
from napilab.harness.bisect.console import ConsoleTap, command_output
from napilab.harness.bisect.record import (
    BAD,
    BOOTING,
    DONE,
    ENDPOINTS,
    GOOD,
    MEASURING,
    RUNNING,
    SKIP,
    Answer,
    Round,
    Step,
)
from napilab.harness.bisect.study import BAD as BAD_VARIANT
from napilab.harness.bisect.study import (
    CANDIDATE,
    Bisection,
    boots_of,
    step_profile,
    write_profile,
)
from napilab.harness.bisect.study import GOOD as GOOD_VARIANT
from napilab.harness.cli.execute import execute
from napilab.harness.engine.progress import QuietProgress
from napilab.harness.errors import ExitCode, InputError, Interrupted, NapilabError
from napilab.harness.inventory.inventory import Inventory
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import Profile, load_profile
from napilab.reports.bisect import verdict as judge
from napilab.reports.nightly.thresholds import parse_thresholds


class StepProgress(QuietProgress):
    """A step's run as bisect follows it: the phase written before the candidate's
    first trial (its boot) and after it; boots counted; boots and failures printed."""

    def __init__(self, on_candidate: Callable[[str], None], say: Callable[[str], None],
                 on_boot: Callable[[], None]) -> None:
        super().__init__()
        self.on_candidate = on_candidate
        self.say = say
        self.on_boot = on_boot
        self.boots = 0
        self.variant = ""

    def trial_start(self, index: int, variant: str, rep: int) -> None:
        self.variant = variant
        if variant == CANDIDATE:
            self.on_candidate("start")
        super().trial_start(index, variant, rep)

    def trial_end(self, index: int, status: str, error: str | None = None) -> None:
        if self.variant == CANDIDATE and status == "ok":
            self.on_candidate("ok")
        super().trial_end(index, status, error)

    def phase(self, phase: str, host: str | None = None, detail: str = "") -> None:
        if ": booting" in phase:
            self.on_boot()  # the console of the boot before this one, whole
            self.boots += 1
            self.say(f"  {phase}")
        super().phase(phase, host, detail)


class Walk:
    def __init__(self, bis: Bisection, prof: Profile, inv: Inventory, tree: git.Tree,
                 say: Callable[[str], None], console_command: str | None = None) -> None:
        self.bis = bis
        self.log = bis.log
        self.prof = prof
        self.inv = inv
        self.tree = tree
        self.say = say
        self.console_command = console_command
        self.thresholds = parse_thresholds(self.log.thresholds)
        bound = bind(prof, inv)
        self.host = bound.role_hosts[self.log.role]
        self.hosts = list(bound.hosts.values())  # every host a step's run locks

    # -- the whole bisection ------------------------------------------------------------

    def run(self) -> ExitCode:
        log = self.log
        self._recover()
        nxt = self.tree.start(log.good, log.bad, self._marks())
        try:
            if not self._endpoints(nxt):
                return ExitCode.INCONCLUSIVE
            nxt = self.tree.start(log.good, log.bad, self._marks())
            while not nxt.done:
                assert nxt.commit is not None
                step = self._step(nxt.commit)
                assert step.verdict is not None
                nxt = self.tree.mark(step.verdict, nxt.commit)
            log.answer = self._answer(nxt)
            log.finished = time.time()
            self.bis.save()
        finally:
            self.tree.reset()
        return ExitCode.OK if log.answer.first_bad else ExitCode.INCONCLUSIVE

    def _marks(self) -> list[tuple[str, str]]:
        return [(s.verdict, s.commit) for s in self.log.steps
                if s.number > 0 and s.phase == DONE and s.verdict]

    def _recover(self) -> None:
        """After a stop: the hosts restored, a step caught booting marked, a step caught
        measuring measured again."""
        open_steps = [s for s in self.log.steps if s.phase != DONE]
        if not open_steps:
            return
        self._restore(break_lock=False)
        for step in open_steps:
            if step.phase == BOOTING:
                self._crashed(step, "napilab stopped while the host booted this kernel (it "
                              "did not come back, or napilab was killed then)")
            else:
                if step.rounds and not step.rounds[-1].status:
                    step.rounds.pop()
                self.say(f"step {step.number} ({self._name(step)}) was {step.phase} when the "
                         "bisection stopped: it is measured again")
                step.phase = RUNNING
        self.bis.save()

    def _crashed(self, step: Step, why: str) -> None:
        verdict = self.log.on_crash
        step.phase, step.verdict = DONE, verdict if step.number > 0 else None
        step.reason = f"{why}: marked {verdict} (--on-crash), never booted again"
        if step.number == 0:
            step.reason = f"the bad endpoint's kernel: {why}"
        self.say(f"step {step.number} ({self._name(step)}): {step.reason}")

    # -- the endpoints ------------------------------------------------------------------

    def _endpoints(self, nxt: git.Next) -> bool:
        """The bad endpoint against the good one: the metrics that changed, and which way
        (False: nothing to bisect, said why)."""
        log = self.log
        step = next((s for s in log.steps if s.number == 0), None)
        if step is None:
            step = Step(number=0, commit=log.bad, subject=ENDPOINTS)
            log.steps.append(step)
            self.bis.save()
        if step.phase == DONE and step.verdict is None:
            raise NapilabError(step.reason, hint="a bisection needs a bad endpoint that boots")
        if step.phase != DONE:
            for which in ("good", "bad"):
                if getattr(log, f"{which}_image") is None:
                    built = self._build(getattr(log, which), self.bis.dir / "images" / which,
                                        self.bis.dir / "steps" / f"build-{which}.log")
                    if built.image is None:
                        raise NapilabError(f"the {which} endpoint: {built.reason}",
                                           hint="a bisection needs endpoints that build and "
                                                "boot")
                    setattr(log, f"{which}_image", built.image)
                    self.bis.save()
            if nxt.commit is not None and log.source == "git":
                self.tree.git("checkout", "-q", "--detach", nxt.commit)
            step.image = log.bad_image
            self._measure(step, endpoints=True)
        if step.verdict is None:
            raise NapilabError(step.reason)
        log.direction = {c.metric: c.status for c in step.rounds[-1].cases
                         if c.status in judge.CHANGED} if step.verdict == BAD else {}
        self.bis.save()
        if step.verdict != BAD:
            self.say(f"the endpoints: {step.reason}: nothing to bisect")
            return False
        self.say("the endpoints: " + ", ".join(f"{m} {s}" for m, s in log.direction.items()))
        return True

    # -- one step -----------------------------------------------------------------------

    def _step(self, commit: str) -> Step:
        log = self.log
        step = next((s for s in log.steps if s.commit == commit and s.phase != DONE), None)
        if step is None:
            step = Step(number=len(log.steps), commit=commit, subject=self._subject(commit))
            log.steps.append(step)
            self.bis.save()
        started = time.monotonic()
        self.say(f"step {step.number}: {self._name(step)}" + (
            f" {step.subject}" if self.log.source == "git" else ""))
        if step.image is None:
            built = self._build(commit, self.bis.image_dir(step),
                                self.bis.step_dir(step) / "build.log")
            if built.image is None:
                step.phase, step.verdict, step.reason = DONE, SKIP, built.reason
                self.bis.save()
                self.say(f"step {step.number}: skip: {built.reason}")
                return step
            step.image = built.image
            self.bis.save()
        self._measure(step)
        step.seconds += time.monotonic() - started
        self.bis.save()
        self.say(f"step {step.number}: {step.verdict}: {step.reason}")
        return step

    def _build(self, commit: str, into: Path, log_path: Path) -> builds.Built:
        if self.log.source == "images":
            return builds.image_of(self._entry(commit), into)
        self.tree.git("checkout", "-q", "--detach", commit)
        return builds.build(self.tree.path, self.log.build, self.log.image_path, log_path, into)

    def _measure(self, step: Step, *, endpoints: bool = False) -> None:
        """Rounds at the repeat, then twice it, up to --max-repeat; the verdict."""
        log = self.log
        repeat = step.rounds[-1].repeat * 2 if step.rounds else log.repeat
        while True:
            rnd = Round(repeat=repeat)
            step.rounds.append(rnd)
            step.phase = RUNNING
            self.bis.save()
            failure = self._round(step, rnd)
            if failure is not None:
                self._crashed(step, failure)
                self.bis.save()
                return
            reading, why = self._reading(rnd, endpoints)
            rnd.status = reading
            if reading in (judge.GOOD, judge.BAD):
                step.phase, step.verdict, step.reason = DONE, reading, why
                return
            if reading == judge.INCONCLUSIVE and repeat * 2 <= log.max_repeat:
                self.say(f"step {step.number}: inconclusive at repeat {repeat} ({why}): "
                         f"measured again at {repeat * 2}")
                repeat *= 2
                continue
            step.phase, step.verdict = DONE, SKIP
            step.reason = (f"{reading} at repeat {repeat}" + (
                f" (--max-repeat {log.max_repeat})" if reading == judge.INCONCLUSIVE else "")
                + f": {why}")
            if endpoints:
                step.verdict = GOOD  # the endpoints cannot be told apart: nothing to bisect
            return

    def _reading(self, rnd: Round, endpoints: bool) -> tuple[str, str]:
        if endpoints:
            changed = {c.metric: c.status for c in rnd.cases if c.status in judge.CHANGED}
            if changed and all(c.status in judge.CHANGED for c in rnd.cases):
                return judge.BAD, "; ".join(f"{c.metric} {c.status} {c.change} (CI {c.ci})"
                                            for c in rnd.cases)
            if any(c.status == "inconclusive" for c in rnd.cases):
                return judge.INCONCLUSIVE, "; ".join(f"{c.metric}: {c.reason}"
                                                     for c in rnd.cases)
            return judge.OTHER, "the endpoints do not differ beyond the threshold: " + \
                "; ".join(f"{c.metric} {c.status} {c.change}" for c in rnd.cases)
        return judge.reading(rnd.cases, self.log.direction)

    def _round(self, step: Step, rnd: Round) -> str | None:
        """One napilab run of the step; None, or why the candidate's kernel failed."""
        log = self.log
        # the good endpoint first: on the host's own kernel (a bisect's good endpoint,
        # as a rule) its trials need no boot, and a step on another kernel boots twice
        # (into it, and back). The candidate first made that three: the good endpoint's
        # staged image boots with its own modules path on the command line, so the boot
        # back to the host's own kernel was a real one (a step on 7.2-rt: 96-107 s, not
        # 71-78 s). It saved the good trials of a step whose kernel did not come up (40
        # s instead of 60): a rarer step than one on another kernel.
        images = {GOOD_VARIANT: log.good_image, CANDIDATE: step.image}
        if log.against == "both" and step.number > 0:
            images[BAD_VARIANT] = log.bad_image
        doc = step_profile(self.prof, log.variant, log.role,
                           {k: str(v) for k, v in images.items()}, rnd.repeat)
        where = self.bis.step_dir(step)
        path = where / f"profile-r{rnd.repeat}.yaml"
        write_profile(path, doc, f"# napilab bisect {log.id}, step {step.number} "
                                 f"({self._name(step)}), repeat {rnd.repeat}\n")
        plan = bind(load_profile(path), self.inv)

        def candidate(event: str) -> None:
            if event == "start" and step.phase == RUNNING:
                step.phase = BOOTING  # written before the boot
                self.bis.save()
            elif event == "ok" and step.phase == BOOTING:
                step.phase = MEASURING
                self.bis.save()

        def stored(directory: Path) -> None:
            rnd.run = str(directory.relative_to(self.bis.dir))
            self.bis.save()

        tap = ConsoleTap(self._console_path())
        progress = StepProgress(candidate, self.say, tap.take)
        started = time.monotonic()
        try:
            execute(plan, str(self.bis.runs), formats=[], progress=progress, on_store=stored)
        except Interrupted:
            step.phase = RUNNING  # stopped by the user, not by the kernel: measured again
            self.bis.save()
            raise
        except NapilabError as exc:
            rnd.error = exc.message
            if step.phase not in (BOOTING, MEASURING):
                raise  # before the candidate's boot: the lab's failure, not the kernel's
            # this process's run is over: its journals replayed, its lock released
            self._restore(break_lock=True, run=self.bis.dir / rnd.run if rnd.run else None)
            first = (_trial_error(self.bis.dir / rnd.run if rnd.run else None)
                     or exc.message).strip().splitlines()[0]
            first = first if len(first) <= 240 else first[:240] + "..."
            if step.phase == BOOTING:  # no trial on the candidate's kernel ended
                return f"did not boot, or came up broken (its first trial failed): {first}"
            return f"failed while it was measured: {first}"
        finally:
            rnd.seconds = time.monotonic() - started
            tap.take()
            self._console_keep(step, tap)
            step.boots += progress.boots if rnd.error or rnd.run is None else \
                boots_of(self.bis.dir / rnd.run)
        assert rnd.run is not None
        rnd.cases = judge.cases(self.bis.dir / rnd.run, GOOD_VARIANT, CANDIDATE, log.metrics,
                                self.thresholds)
        if BAD_VARIANT in images:
            rnd.cases += judge.cases(self.bis.dir / rnd.run, BAD_VARIANT, CANDIDATE,
                                     log.metrics, self.thresholds)
        return None

    def _restore(self, *, break_lock: bool, run: Path | None = None) -> None:
        """Every host of the profile restored, the role's back on its own kernel, their
        locks cleared (`napilab restore`: a guest that is not running is started first);
        RUN: a run of this process that failed, whose locks replay leaves (their holder
        is alive)."""
        from napilab.harness.hosts import lock
        from napilab.harness.hosts.journal_replay import replay
        from napilab.harness.hosts.session import HostSession
        from napilab.harness.store.store import load_manifest
        from napilab.harness.transport.connect import transport_for

        try:
            for line in replay(self.hosts, break_lock=break_lock):
                self.say(f"restore: {line}")
            run_id = load_manifest(run).run_id if run is not None else None
            for host in self.hosts if run_id is not None else ():
                session = HostSession(transport_for(host))
                try:
                    kept = lock.release(session.transport, str(run_id))
                finally:
                    session.close()
                if kept:
                    raise NapilabError(kept)
        except NapilabError as exc:
            raise NapilabError("the hosts could not be restored: "
                               f"{exc.message}", hint="`napilab restore -i INVENTORY`, then "
                               f"`napilab bisect ... --resume {self.bis.dir}`") from None

    # -- consoles -----------------------------------------------------------------------

    def _console_path(self) -> Path | None:
        boot = self.host.boot
        if boot is None or boot.method != "vm":
            return None
        from napilab.harness.lab.vmbed import VmTestbed

        return VmTestbed(state_dir=boot.testbed).console(str(boot.guest))

    def _console_keep(self, step: Step, tap: ConsoleTap) -> None:
        """The round's boots' console output, kept in the step's directory: the VM
        guest's serial console, or what `--console-command` prints for a lab host."""
        text = tap.text()
        if tap.path is None and self.console_command:
            text = command_output(self.console_command, self.host.name, step.number)
        if text:
            where = self.bis.step_dir(step)
            where.mkdir(parents=True, exist_ok=True)
            name = f"console-{self.host.name}-r{len(step.rounds)}.log"
            (where / name).write_bytes(text)
            step.consoles.append(str((where / name).relative_to(self.bis.dir)))

    # -- names --------------------------------------------------------------------------

    def _entry(self, commit: str) -> str:
        """An image list's entry of a commit of its tree."""
        return self.tree.git("show", f"{commit}:{git.IMAGE_FILE}").stdout.strip()

    def _subject(self, commit: str) -> str:
        return self.tree.subject(commit)

    def _name(self, step: Step) -> str:
        return self._entry(step.commit) if self.log.source == "images" else step.commit[:12]

    def _answer(self, nxt: git.Next) -> Answer:
        if nxt.first_bad:
            name = self._entry(nxt.first_bad) if self.log.source == "images" else nxt.first_bad
            return Answer(first_bad=name, subject=self._subject(nxt.first_bad),
                          text=nxt.text)
        names = [self._entry(c) if self.log.source == "images" else c for c in nxt.candidates]
        return Answer(candidates=names, text=nxt.text)


def _trial_error(run_dir: Path | None) -> str | None:
    """The error of the run's first failed trial (the boot that failed, say), which the
    run's own error can hide (a restore that could not reach the host after it)."""
    from napilab.harness.store.store import load_manifest

    if run_dir is None:
        return None
    try:
        manifest = load_manifest(run_dir)
    except NapilabError:
        return None
    return next((t.error for t in manifest.trials if t.status == "failed" and t.error), None)


def check_resumable(bis: Bisection, prof: Any) -> None:
    if bis.log.digest != prof.digest:
        raise InputError(f"{prof.path} changed since the bisection in {bis.dir} began",
                         hint="a changed profile is a new bisection: run without --resume")
