"""`napilab bisect`'s walk without hosts: git bisect (real, over a synthetic tree whose
build copies one of two images) walks; each step's measurement is replaced by what the
image it booted would read (image A: within the good endpoint; image B: the endpoints'
improvement), so the tests prove the walking, the build and skip handling, the record and
`--resume` after a kill at each phase. The measurement itself (a napilab run judged by the
gate) is tests/unit/test_bisect_verdict.py's and, with real kernels,
tests/integration/vm/test_vm_bisect.py's."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from napilab.harness.bisect import git
from napilab.harness.bisect.record import BOOTING, MEASURING, BisectLog, Case, Round, Step
from napilab.harness.bisect.study import Bisection
from napilab.harness.cli import bisect_walk
from napilab.harness.cli.bisect_walk import Walk
from napilab.harness.errors import ExitCode, HostError
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.lab.kernels import read_image
from napilab.harness.profile.profile import load_profile
from tests.bisect_trees import NEW, OLD, bzimage, profile_and_inventory, tree

METRIC = "interrupts.function_call_interrupts[receiver]"


class Killed(Exception):
    """What SIGKILL would have done at that point: nothing more of this process."""


class MeasuredWalk(Walk):
    """A walk whose rounds read the image each step booted instead of running it."""

    def __init__(self, *args: Any, kill: tuple[str, str] | None = None,
                 noisy: set[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kill = kill  # (commit, phase): stop there
        self.noisy = noisy or set()  # commits whose rounds are inconclusive
        self.measured: list[str] = []
        self.restores: list[bool] = []

    def _round(self, step: Step, rnd: Round) -> str | None:
        self.measured.append(step.commit)
        assert step.image is not None
        for phase in (BOOTING, MEASURING):
            step.phase = phase
            self.bis.save()
            if self.kill == (step.commit, phase):
                raise Killed
        new = "-rt-" in read_image(Path(step.image))[0]  # image B's kernel
        status = "inconclusive" if step.commit in self.noisy else \
            "improvement" if new else "within"
        rnd.cases = [Case(metric=METRIC, status=status, change="-100%" if new else "+1.0%",
                          ci="-", good=4500.0, candidate=0.0 if new else 4545.0,
                          reason="cannot tell" if status == "inconclusive" else "")]
        return None

    def _restore(self, *, break_lock: bool, run: Path | None = None) -> None:
        self.restores.append(break_lock)


def start(tmp_path: Path, which: dict[int, str], **options: Any
          ) -> tuple[Bisection, Any, Any, git.Tree, dict[int, str]]:
    path, shas, build = tree(tmp_path, which)
    profile, inventory = profile_and_inventory(tmp_path)
    prof = load_profile(profile)
    log = BisectLog(id="", profile_name=prof.name, digest=prof.digest, role="receiver",
                    variant="rps", repeat=2, max_repeat=options.pop("max_repeat", 4),
                    source="git", tree=str(path), good=shas[1], bad=shas[len(shas)],
                    build=build, image_path="out/bzImage", started=time.time(), **options)
    bis = Bisection.create(tmp_path / "r", log)
    return bis, prof, load_inventory(inventory), git.Tree(path), shas


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No kernel cache: a staged image gets no modules linked (the VM lab's)."""
    monkeypatch.setenv("NAPILAB_KERNELS", str(tmp_path / "no-cache"))


EIGHT = {1: "A", 2: "A", 3: "A", 4: "A", 5: "A", 6: "B", 7: "B", 8: "B"}


def test_git_bisect_walks_and_the_first_bad_commit_is_named(tmp_path: Path) -> None:
    bis, prof, inv, walked, shas = start(tmp_path, EIGHT)
    walk = MeasuredWalk(bis, prof, inv, walked, lambda line: None)
    assert walk.run() == ExitCode.OK
    assert bis.log.answer is not None and bis.log.answer.first_bad == shas[6]
    assert bis.log.answer.subject == "commit 6"
    assert bis.log.direction == {METRIC: "improvement"}
    # the endpoints, then git's own choices: 4 (good), 6 (bad), 5 (good)
    assert walk.measured == [shas[8], shas[4], shas[6], shas[5]]
    verdicts = [(s.number, s.commit, s.verdict) for s in bis.log.steps]
    assert verdicts == [(0, shas[8], "bad"), (1, shas[4], "good"), (2, shas[6], "bad"),
                        (3, shas[5], "good")]
    # the record on disk is the one in memory; the tree is back where it was
    assert Bisection.open(bis.dir).log == bis.log
    assert not (walked.path / ".git" / "BISECT_LOG").exists()
    assert walked.git("rev-parse", "HEAD").stdout.strip() == shas[8]


def test_a_commit_that_does_not_build_is_skipped_with_the_reason(tmp_path: Path) -> None:
    bis, prof, inv, walked, shas = start(tmp_path, {**EIGHT, 4: "missing"})
    walk = MeasuredWalk(bis, prof, inv, walked, lambda line: None)
    assert walk.run() == ExitCode.OK
    assert bis.log.answer is not None and bis.log.answer.first_bad == shas[6]
    step = next(s for s in bis.log.steps if s.commit == shas[4])
    assert step.verdict == "skip" and step.rounds == []
    assert step.reason.startswith("the build exited 1: cp: cannot stat"), step.reason
    assert (bis.step_dir(step) / "build.log").read_text().startswith("cp: cannot stat")
    assert shas[4] not in walk.measured


def test_an_image_that_is_not_a_kernel_is_skipped(tmp_path: Path) -> None:
    bis, prof, inv, walked, shas = start(tmp_path, {**EIGHT, 4: "junk"})
    MeasuredWalk(bis, prof, inv, walked, lambda line: None).run()
    step = next(s for s in bis.log.steps if s.commit == shas[4])
    assert step.verdict == "skip" and "is not a bzImage" in step.reason


def test_an_inconclusive_step_is_measured_at_twice_the_repeat_then_skipped(
        tmp_path: Path) -> None:
    bis, prof, inv, walked, shas = start(tmp_path, EIGHT)
    walk = MeasuredWalk(bis, prof, inv, walked, lambda line: None, noisy={shas[4]})
    walk.run()
    step = next(s for s in bis.log.steps if s.commit == shas[4])
    assert [r.repeat for r in step.rounds] == [2, 4]  # --max-repeat 4
    assert step.verdict == "skip"
    assert step.reason == ("inconclusive at repeat 4 (--max-repeat 4): "
                           f"{METRIC} against good: cannot tell")
    # git chose around the skipped commit; the answer still stands
    assert bis.log.answer is not None and bis.log.answer.first_bad == shas[6]


def test_killed_while_a_kernel_booted_it_is_marked_and_never_booted_again(
        tmp_path: Path) -> None:
    bis, prof, inv, walked, shas = start(tmp_path, EIGHT)
    with pytest.raises(Killed):
        MeasuredWalk(bis, prof, inv, walked, lambda line: None, kill=(shas[6], BOOTING)).run()
    on_disk = json.loads((bis.dir / "bisect.json").read_text())
    assert [s["phase"] for s in on_disk["steps"] if s["commit"] == shas[6]] == [BOOTING]
    again = Bisection.open(bis.dir)
    lines: list[str] = []
    walk = MeasuredWalk(again, prof, inv, walked, lines.append)
    assert walk.run() == ExitCode.INCONCLUSIVE  # the answer below
    assert walk.restores == [False]  # the hosts restored first, as `napilab restore` does
    assert shas[6] not in walk.measured
    step = next(s for s in again.log.steps if s.commit == shas[6])
    assert step.verdict == "skip"
    assert step.reason.startswith("napilab stopped while the host booted this kernel")
    # 6 skipped: git cannot tell 6 from 7 without it
    assert again.log.answer is not None and again.log.answer.first_bad is None
    assert set(again.log.answer.candidates) == {shas[6], shas[7]}


def test_killed_while_measuring_the_step_is_measured_again_with_the_same_answer(
        tmp_path: Path) -> None:
    bis, prof, inv, walked, shas = start(tmp_path, EIGHT)
    with pytest.raises(Killed):
        MeasuredWalk(bis, prof, inv, walked, lambda line: None,
                     kill=(shas[6], MEASURING)).run()
    again = Bisection.open(bis.dir)
    walk = MeasuredWalk(again, prof, inv, walked, lambda line: None)
    assert walk.run() == ExitCode.OK
    assert walk.measured == [shas[6], shas[5]]  # the endpoints and 4 are not measured again
    assert again.log.answer is not None and again.log.answer.first_bad == shas[6]
    step = next(s for s in again.log.steps if s.commit == shas[6])
    assert len(step.rounds) == 1 and step.verdict == "bad"


def test_endpoints_that_do_not_differ_leave_nothing_to_bisect(tmp_path: Path) -> None:
    bis, prof, inv, walked, shas = start(tmp_path, {1: "A", 2: "A", 3: "A"})
    lines: list[str] = []
    walk = MeasuredWalk(bis, prof, inv, walked, lines.append)
    assert walk.run() == ExitCode.INCONCLUSIVE
    assert walk.measured == [shas[3]]
    assert any("nothing to bisect" in ln for ln in lines), lines


def test_on_crash_bad_marks_a_kernel_whose_run_failed_after_its_boot_began(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real round: the run (execute) fails once the candidate's first trial began
    (its boot): the hosts are restored (breaking this process's own lock) and the step
    is marked as --on-crash says, with the error."""
    bis, prof, inv, walked, shas = start(tmp_path, EIGHT, on_crash="bad")
    walk = Walk(bis, prof, inv, walked, lambda line: None)
    restored: list[bool] = []
    monkeypatch.setattr(walk, "_restore",
                        lambda *, break_lock, run=None: restored.append(break_lock))

    def execute(plan: Any, results: str, *, progress: Any, on_store: Any,
                **kw: Any) -> None:
        directory = Path(results) / "run"
        directory.mkdir(parents=True, exist_ok=True)
        on_store(directory)
        assert [v.name for v in plan.profile.variants] == ["good", "candidate"]
        progress.trial_start(1, "candidate", 1)
        assert json.loads((bis.dir / "bisect.json").read_text())["steps"][-1]["phase"] \
            == BOOTING  # on disk before the boot
        raise HostError("b: not back within 600s after the boot (no answer)")

    monkeypatch.setattr(bisect_walk, "execute", execute)
    step = Step(number=1, commit=shas[4], image=str(tmp_path / "images" / "B"))
    bis.log.good_image = str(tmp_path / "images" / "A")
    bis.log.steps.append(step)
    walk._measure(step)
    assert restored == [True]
    assert step.verdict == "bad" and step.phase == "done"
    assert step.reason == ("did not boot, or came up broken (its first trial failed): b: "
                           "not back within 600s after the boot (no answer): marked bad "
                           "(--on-crash), never booted again")
    assert step.rounds[0].error is not None


def test_a_run_that_fails_before_the_candidates_boot_stops_the_bisection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bis, prof, inv, walked, shas = start(tmp_path, EIGHT)
    walk = Walk(bis, prof, inv, walked, lambda line: None)

    def execute(plan: Any, results: str, **kw: Any) -> None:
        raise HostError("a: connection refused")

    monkeypatch.setattr(bisect_walk, "execute", execute)
    step = Step(number=1, commit=shas[4], image=str(tmp_path / "images" / "B"))
    bis.log.good_image = str(tmp_path / "images" / "A")
    with pytest.raises(HostError, match="connection refused"):
        walk._measure(step)
    assert step.verdict is None


def test_the_image_list_is_walked_by_git_bisect_too(tmp_path: Path) -> None:
    (tmp_path / "k").mkdir()
    entries = []
    for i, banner in enumerate(["#1 ", "#2 ", "#3 ", "#4 ", "#5 "]):
        path = tmp_path / "k" / f"vmlinuz-{i}"
        path.write_bytes(bzimage((NEW if i >= 3 else OLD).replace("#1 ", banner)))
        entries.append(str(path))
    profile, inventory = profile_and_inventory(tmp_path)
    prof = load_profile(profile)
    log = BisectLog(id="", profile_name=prof.name, digest=prof.digest, role="receiver",
                    variant="rps", repeat=2, max_repeat=4, source="images", images=entries)
    bis = Bisection.create(tmp_path / "r", log)
    walked, shas = git.image_tree(bis.dir / "list", entries)
    log.good, log.bad, log.tree = shas[0], shas[-1], str(walked.path)

    class ByRelease(MeasuredWalk):
        def _round(self, step: Step, rnd: Round) -> str | None:
            self.measured.append(step.commit)
            new = "-rt-" in read_image(Path(str(step.image)))[0]
            rnd.cases = [Case(metric=METRIC, status="improvement" if new else "within")]
            return None

    walk = ByRelease(bis, prof, load_inventory(inventory), walked, lambda line: None)
    assert walk.run() == ExitCode.OK
    assert bis.log.answer is not None and bis.log.answer.first_bad == entries[3]
    assert git.image_tree(bis.dir / "list", entries)[1] == shas  # found again on resume


@pytest.mark.parametrize(("count", "steps"), [(1, 0), (2, 1), (7, 3), (8, 3), (9, 4),
                                              (1000, 10)])
def test_the_most_steps_git_bisect_takes(count: int, steps: int) -> None:
    assert git.max_steps(count) == steps
