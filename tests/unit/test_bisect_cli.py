"""`napilab bisect`'s input, plan and reports: bad input is one line naming the option
and what it allows, exit 2, no host touched and no directory written; `--dry-run` says
how many steps, boots and trials at most before anything runs; the gate judges a step
within one run (reports.bisect.verdict); the reports render from bisect.json alone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from napilab.harness.bisect.record import Answer, BisectLog, Case, Round, Step
from napilab.harness.bisect.study import step_profile, write_profile
from napilab.harness.lab import kernels
from napilab.harness.profile.profile import load_profile
from napilab.harness.transport import connect
from napilab.reports.bisect import report, verdict
from tests.bisect_trees import NEW, OLD, bzimage, profile_and_inventory, tree
from tests.cli import run_cli
from tests.conftest import ROOT

DEMO_RUN = ROOT / "tests" / "golden" / "reports" / "runs" / "demo-20261130T163215Z-7a9ae54f"


@pytest.fixture(autouse=True)
def tripwire(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a transport was opened")

    monkeypatch.setattr(connect, "transport_for", refuse)
    monkeypatch.setattr(connect, "LocalTransport", refuse)


EIGHT = {1: "A", 2: "A", 3: "A", 4: "A", 5: "A", 6: "B", 7: "B", 8: "B"}


def bisect_args(tmp_path: Path, *extra: str) -> list[str]:
    profile, inventory = profile_and_inventory(tmp_path)
    return ["bisect", str(profile), "-i", str(inventory), "-o", str(tmp_path / "r"), *extra]


def test_dry_run_plans_the_steps_boots_and_trials_and_touches_nothing(
        tmp_path: Path) -> None:
    path, shas, build = tree(tmp_path, EIGHT)
    done = run_cli(None, *bisect_args(tmp_path, "--tree", str(path), "--good", shas[1],
                                      "--bad", shas[8], "--build", build, "--role",
                                      "receiver", "--dry-run"))
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0] == (f"bisect: bisect-unit: 7 commits may be the first bad one (good "
                        f"{shas[1][:12]}, bad {shas[8][:12]}): at most 3 step(s) when none is "
                        "skipped (each skipped one adds at most one), after the endpoints' "
                        "step")
    assert lines[2] == ("an inconclusive step is measured again: repeat 2, 4, 8 (3 round(s) "
                        "at most), then skipped")
    assert lines[3].startswith("  round at repeat 2: 4 trials, at most 3 boots, about ")
    assert lines[6].startswith("at most: 4 steps x 3 round(s): 112 trials, 36 boots, about ")
    assert "b        + kernel = BISECT_DIR/images/good/vmlinuz" in done.out
    assert not (tmp_path / "r").exists()
    assert subprocess.run(["git", "-C", str(path), "status", "--porcelain"],
                          capture_output=True, text=True, check=True).stdout == ""


def test_dry_run_of_an_image_list(tmp_path: Path) -> None:
    for name, banner in (("old", OLD), ("mid", OLD.replace("#1 ", "#2 ")), ("new", NEW)):
        (tmp_path / name).write_bytes(bzimage(banner))
    images = [f"--image={tmp_path / n}" for n in ("old", "mid", "new")]
    done = run_cli(None, *bisect_args(tmp_path, *images, "--role", "receiver", "--repeat",
                                      "3", "--max-repeat", "6", "--dry-run"))
    assert done.code == 0, done.err
    assert done.out.startswith("bisect: bisect-unit: 2 images may be the first bad one (good "
                               f"{tmp_path / 'old'}, bad {tmp_path / 'new'}): at most 1 step")
    assert "repeat 3, 6 (2 round(s) at most)" in done.out


@pytest.mark.parametrize(("extra", "message"), [
    (["--good", "HEAD~7", "--bad", "HEAD", "--role", "receiver"],
     "--build: the command that builds a commit's image"),
    (["--build", "true", "--role", "receiver"], "--good and --bad: the endpoints"),
    (["--good", "nosuch", "--bad", "HEAD", "--build", "true", "--role", "receiver"],
     "--good nosuch: no such commit in"),
    (["--good", "HEAD", "--bad", "HEAD~7", "--build", "true", "--role", "receiver"],
     "is not an ancestor of --bad"),
    (["--good", "HEAD~7", "--bad", "HEAD", "--build", "true"],
     "--role: variant rps of"),
    (["--good", "HEAD~7", "--bad", "HEAD", "--build", "true", "--role", "server"],
     "--role server: no such role in"),
    (["--good", "HEAD~7", "--bad", "HEAD", "--build", "true", "--role", "sender"],
     "--role sender: its host a has no `boot:`"),
    (["--good", "HEAD~7", "--bad", "HEAD", "--build", "true", "--role", "receiver",
      "--variant", "nope"], "--variant nope: no such variant"),
    (["--good", "HEAD~7", "--bad", "HEAD", "--build", "true", "--role", "receiver",
      "--repeat", "4", "--max-repeat", "2"], "--max-repeat 2 is below --repeat 4"),
    (["--good", "HEAD~7", "--bad", "HEAD", "--build", "true", "--role", "receiver",
      "--max-regression", "function_call_interrupts"], "--max-regression"),
    (["--image", "6.1-rt", "--image", "7.2-rt", "--good", "7.2", "--role", "receiver"],
     "--good 7.2: not an --image of the list"),
    (["--image", "6.1-rt", "--image", "6.1-rt", "--role", "receiver"],
     "--image: at least two images, each once"),
    (["--image", "a", "--image", "b", "--good", "b", "--bad", "a", "--role", "receiver"],
     "--good b is not before --bad a"),
    (["--image", "a", "--image", "b", "--tree", ".", "--role", "receiver"],
     "--image is an image list: --tree and --build are for a git range"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(
        tmp_path: Path, extra: list[str], message: str) -> None:
    path, _, _ = tree(tmp_path, EIGHT)
    where = [] if "--image" in extra else ["--tree", str(path)]
    done = run_cli(None, *bisect_args(tmp_path, *where, *extra))
    assert done.code == 2, done.out + done.err
    assert message in done.err, done.err
    assert "Traceback" not in done.err
    assert not (tmp_path / "r").exists()


def test_a_tree_with_changed_files_is_refused(tmp_path: Path) -> None:
    path, shas, _ = tree(tmp_path, EIGHT)
    (path / "which").write_text("C\n")
    done = run_cli(None, *bisect_args(tmp_path, "--tree", str(path), "--good", shas[1],
                                      "--bad", shas[8], "--build", "true", "--role",
                                      "receiver"))
    assert done.code == 2 and "has changes to tracked files: M which" in done.err


def test_resume_of_a_directory_that_is_no_bisection(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    done = run_cli(None, *bisect_args(tmp_path, "--resume", str(tmp_path / "x")))
    assert done.code == 2 and "not a bisection (no bisect.json)" in done.err


def test_a_step_is_the_variant_once_per_image_on_the_roles_host(tmp_path: Path) -> None:
    profile, _ = profile_and_inventory(tmp_path)
    prof = load_profile(profile)
    doc = step_profile(prof, "rps", "receiver", {"good": "/k/a", "candidate": "/k/b"}, 3)
    write_profile(tmp_path / "step.yaml", doc, "# a step\n")
    step = load_profile(tmp_path / "step.yaml")
    assert [v.name for v in step.variants] == ["good", "candidate"]
    assert step.repeat == 3 and step.baseline == "good"
    assert [(k.role, k.image) for v in step.variants for k in v.kernels] == [
        ("receiver", "/k/a"), ("receiver", "/k/b")]
    assert all(v.settings == step.variants[0].settings for v in step.variants)


def test_an_image_is_staged_where_virtme_finds_its_modules(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    release = OLD.split()[0]
    (cache / "lib" / "modules" / release / "kernel").mkdir(parents=True)
    (cache / "lib" / "modules" / release / "modules.dep").write_text("")
    (tmp_path / "bzImage").write_bytes(bzimage(OLD))
    staged = kernels.stage(tmp_path / "bzImage", tmp_path / "s", cache)
    assert staged == tmp_path / "s" / "lib" / "modules" / release / "vmlinuz"
    assert staged.read_bytes() == (tmp_path / "bzImage").read_bytes()
    assert (staged.parent / "modules.dep").resolve() == \
        cache / "lib" / "modules" / release / "modules.dep"
    assert kernels.read_image(staged) == (release, OLD.split(") ", 1)[1])


# -- the gate within one run ------------------------------------------------------------


def test_the_gate_judges_a_variant_against_another_of_the_same_run() -> None:
    """The demo's recorded run: rps-remote's echo replies fell 95% from rps-off's."""
    worse = verdict.cases(DEMO_RUN, "rps-off", "rps-remote", ["received"], {})
    assert [(c.metric, c.status, c.change) for c in worse] == [
        ("ping.received[sender]", "regression", "-95.4%")]
    assert worse[0].good is not None and worse[0].candidate is not None
    assert worse[0].good > 700_000 > 30_000 > worse[0].candidate
    better = verdict.cases(DEMO_RUN, "rps-remote", "rps-off", ["received"], {})
    assert [c.status for c in better] == ["improvement"]
    same = verdict.cases(DEMO_RUN, "rps-off", "rps-off", ["received"], {})
    assert [c.status for c in same] == ["within"]


def test_a_metric_the_runs_do_not_have_is_bad_input() -> None:
    from napilab.harness.errors import InputError

    with pytest.raises(InputError, match="--metric nosuch: no such metric in these runs"):
        verdict.cases(DEMO_RUN, "rps-off", "rps-remote", ["nosuch"], {})


@pytest.mark.parametrize(("statuses", "reading"), [
    (["improvement"], "bad"), (["within"], "good"), (["inconclusive"], "inconclusive"),
    (["regression"], "other"), (["improvement", "within"], "other"),
    (["within", "inconclusive"], "inconclusive"),
])
def test_a_step_reads_against_the_endpoints_direction(statuses: list[str],
                                                      reading: str) -> None:
    changed = {f"m{i}": "improvement" for i in range(len(statuses))}
    found = [Case(metric=f"m{i}", status=s) for i, s in enumerate(statuses)]
    assert verdict.reading(found, changed)[0] == reading


def test_against_both_endpoints() -> None:
    changed = {"m": "regression"}
    bad = [Case(metric="m", status="regression"), Case(metric="m", status="within",
                                                       against="bad")]
    good = [Case(metric="m", status="within"), Case(metric="m", status="improvement",
                                                    against="bad")]
    torn = [Case(metric="m", status="regression"), Case(metric="m", status="improvement",
                                                        against="bad")]
    assert verdict.reading(bad, changed)[0] == "bad"
    assert verdict.reading(good, changed)[0] == "good"
    assert verdict.reading(torn, changed)[0] == "other"


# -- reports ----------------------------------------------------------------------------


def finished_log() -> BisectLog:
    sha = "{:x}".format
    def case(status: str, change: str, value: float) -> Case:
        return Case(metric="interrupts.function_call_interrupts[receiver]", status=status,
                    change=change, ci="-", good=4500.0, candidate=value)
    return BisectLog(
        id="bisect-x", profile_name="vm-bisect", variant="rps", role="receiver", repeat=2,
        max_repeat=8, good="a" * 40, bad="b" * 40,
        direction={"interrupts.function_call_interrupts[receiver]": "improvement"},
        steps=[Step(number=0, commit="b" * 40, subject="endpoints", verdict="bad", boots=2,
                    rounds=[Round(repeat=2, cases=[case("improvement", "-100%", 0.0)])]),
               Step(number=1, commit=sha(4) * 40, subject="commit 4", verdict="skip",
                    reason="did not boot, or came up broken: guest b exited while booting"),
               Step(number=2, commit="6" * 40, subject="commit 6", verdict="bad", boots=2,
                    rounds=[Round(repeat=2, cases=[case("improvement", "-100%", 0.0)])])],
        answer=Answer(first_bad="6" * 40, subject="commit 6", text="6666 is the first bad"))


def test_the_text_report_is_mail_ready(tmp_path: Path) -> None:
    text = report.text(finished_log())
    lines = text.splitlines()
    assert lines[0] == f"napilab bisect: the first bad commit is {'6' * 40}"
    assert lines[1] == "  commit 6"
    assert all(len(line) <= 80 for line in lines), text
    assert any(line.split()[:3] == ["2", "666666666666", "bad"] for line in lines), text
    assert f"  {'4' * 12}: did not boot, or came up broken: guest b exited while booting" \
        in lines
    written = report.write(tmp_path, finished_log())
    assert [p.name for p in written] == ["bisect.txt", "bisect-report.json", "bisect.html"]
    doc = json.loads((tmp_path / "bisect-report.json").read_text())
    assert doc["report"] == {"first_bad": "6" * 40, "skipped": ["4" * 40],
                             "measured_steps": 1, "boots": 4}
    page = (tmp_path / "bisect.html").read_text()
    assert page.count("<rect") == 2 and "commit 6" in page and "<script" not in page


def test_the_profile_gives_the_tree_and_the_build(tmp_path: Path) -> None:
    _, shas, build = tree(tmp_path, EIGHT)
    profile, inventory = profile_and_inventory(tmp_path)
    profile.write_text(profile.read_text() + f"bisect: {{tree: linux, build: {build!r}, "
                                             "image: out/bzImage}\n")
    assert load_profile(profile).bisect == {"tree": "linux", "build": build,
                                            "image": "out/bzImage"}
    done = run_cli(None, "bisect", str(profile), "-i", str(inventory), "--good", shas[2],
                   "--bad", shas[8], "--role", "receiver", "--dry-run")
    assert done.code == 0, done.err
    assert done.out.startswith("bisect: bisect-unit: 6 commits may be the first bad one")


def test_a_bisect_section_with_an_unknown_key_is_bad_input(tmp_path: Path) -> None:
    profile, _ = profile_and_inventory(tmp_path)
    profile.write_text(profile.read_text() + "bisect: {tree: linux, make: x}\n")
    done = run_cli(None, "validate", str(profile))
    assert done.code == 2 and "bisect.make" in done.err, done.err


def test_the_console_tap_keeps_every_boot_of_a_console_each_start_rewrites(
        tmp_path: Path) -> None:
    from napilab.harness.bisect.console import ConsoleTap

    console = tmp_path / "console.log"
    console.write_bytes(b"--- napilab: vng ... (the testbed's boot)\nold lines\n")
    tap = ConsoleTap(console)
    with console.open("ab") as f:
        f.write(b"the trial's kernel messages\n")
    tap.take()  # before a boot: what the running kernel printed since
    console.write_bytes(b"--- napilab: vng ... (the candidate)\nKernel panic\n")
    tap.take()  # before the next: the candidate's boot, whole
    console.write_bytes(b"--- napilab: vng ... (back to its own)\n")
    tap.take()
    tap.take()  # nothing new
    assert tap.text() == (b"the trial's kernel messages\n--- napilab: vng ... (the candidate)"
                          b"\nKernel panic\n--- napilab: vng ... (back to its own)\n")
    assert tap.restarts == 2
    assert ConsoleTap(None).text() == b""


def test_unchanged_needs_the_ci_inside_the_threshold_on_both_sides() -> None:
    """The gate's `within` (the worse side inside the threshold) is not "like the good
    endpoint" for a bisect step when the CI reaches past the threshold the better way:
    the first VM run's endpoints read within at -98.5% (CI -100..-43.8%, threshold 50%)."""
    import dataclasses

    from napilab.reports.ab.compare import load_run
    from napilab.reports.bisect.verdict import _both_sides
    from napilab.reports.nightly.baselines import Reference
    from napilab.reports.nightly.check import gate
    from napilab.reports.nightly.thresholds import Threshold

    run = load_run(DEMO_RUN)
    found = gate(Reference("run", (run,)), run, {"rtt_avg": Threshold(50.0)},
                 within=("rps-off", "rps-off"), only=["rtt_avg"]).cases[0].comparison
    assert found is not None and found.direction.value == "lower"
    assert found.min_effect == 0.5
    assert _both_sides(dataclasses.replace(found, change_ci=(-0.2, 0.3)))
    assert not _both_sides(dataclasses.replace(found, change_ci=(-1.0, -0.438)))
    assert not _both_sides(dataclasses.replace(found, change_ci=(-0.2, 0.6)))
