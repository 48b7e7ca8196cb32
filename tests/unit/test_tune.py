"""`napilab tune` without hosts: the `tune:` grammar and its refusals at their line, the
template filled in per candidate, the space as Optuna distributions, a real Optuna study
on a known function (its resume after a kill), the confirmation's verdicts on stored
runs, and the report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from napilab.harness.errors import InputError
from napilab.harness.profile.profile import load_profile
from napilab.harness.profile.tune import Tuning, filled
from napilab.harness.tune import space
from napilab.harness.tune.record import TuneStudy
from napilab.harness.tune.study import OK, RUNNING, Study
from napilab.reports.tune import report as tune_report
from napilab.reports.tune.confirm import Named, judge
from tests.cli import run_napilab
from tests.synthetic_runs import lognormal, store_run

PROFILE = """\
name: tuned
hosts: {client: {host: a}, server: {host: b}}
workload:
  tool: sockperf.ping-pong
  duration: 5
  client: {role: client}
  server: {role: server}
variants:
  default: {}
  tuned:
    setup:
      server:
        rps: {"${iface}": "${rps}"}
        netdev: {"${iface}": {napi_defer_hard_irqs: "${defer}", gro_flush_timeout: "${gro}"}}
baseline: default
repeat: 5
tune:
  parameters:
    rps: [none, "1"]
    defer: {low: 0, high: 100}
    gro: {low: 0, high: 200000, log: true}
  goal: {minimise: latency_p99, subject_to: {busy_cores: 1.5}}
  budget: {trials: 12, time: 30m}
  duration: 2
  seed: 7
"""


def write(tmp_path: Path, text: str = PROFILE) -> Path:
    path = tmp_path / "tuned.yaml"
    path.write_text(text)
    return path


def test_the_section_is_read(tmp_path: Path) -> None:
    prof = load_profile(write(tmp_path))
    tune = prof.tune
    assert tune is not None and tune.variant == "tuned"
    assert [p.describe() for p in tune.parameters] == ["{none, 1}", "0..100", "0..200000 log"]
    assert [(o.metric, o.direction) for o in tune.objectives] == [("latency_p99", "minimise")]
    assert tune.constraints[0].describe() == "busy_cores <= 1.5"
    assert (tune.trials, tune.seconds, tune.duration, tune.top, tune.seed) == (12, 1800.0, 2.0,
                                                                              3, 7)
    # validate and plan show the template at the space's corner
    assert [v.name for v in prof.variants] == ["default", "tuned"]
    assert prof.variant("tuned").parameters == {"rps": "none", "defer": 0, "gro": 0}


def test_each_candidate_fills_the_template(tmp_path: Path) -> None:
    path = write(tmp_path)
    prof = load_profile(path, Tuning((("t003", {"rps": "1", "defer": 20, "gro": 5000}),),
                                     baseline=False, repeat=1, duration=2))
    assert [v.name for v in prof.variants] == ["t003"] and prof.repeat == 1
    variant = prof.variants[0]
    assert variant.workload.duration == 2
    written = {s.target: s.value for s in variant.settings}
    assert written["${iface}/napi_defer_hard_irqs"] == "20", written
    assert written["${iface}/gro_flush_timeout"] == "5000"
    both = load_profile(path, Tuning((("t1", {"rps": "1", "defer": 2, "gro": 0}),
                                      ("t2", {"rps": "none", "defer": 0, "gro": 9})),
                                     primary=(("latency_p99", "lower"),)))
    assert [v.name for v in both.variants] == ["default", "t1", "t2"]
    assert list(both.metrics) == ["latency_p99"]


@pytest.mark.parametrize("old, new, where, says", [
    ("defer: {low: 0, high: 100}", "defer: {low: 100, high: 10}", 20, "not above low"),
    ("defer: {low: 0, high: 100}", "defer: {low: -5, high: 10, log: true}", 20,
     "log scale starts at 0"),
    ("defer: {low: 0, high: 100}", "defer: {low: 0, high: 9, choices: [1]}", 20,
     "either choices or a low..high range"),
    ("  seed: 7", "  sampler: annealing", 25, "is not one of"),
    ("  budget: {trials: 12, time: 30m}", "  budget: {}", 23, "say when the search stops"),
    ("  budget: {trials: 12, time: 30m}", "  budget: {time: soon}", 23, "a time like"),
    ("{minimise: latency_p99, subject_to: {busy_cores: 1.5}}", "{front: [a, b, c]}", 22,
     "a front of two metrics"),
    ("    gro: {low: 0, high: 200000, log: true}",
     "    gro: {low: 0, high: 200000, log: true}\n    spare: [1, 2]", 22, "not used"),
    ("  duration: 2", "  variant: default", 24, "is the baseline"),
    ("  duration: 2", "  variant: tunde", 24, "did you mean 'tuned'"),
    ("        rps: {\"${iface}\": \"${rps}\"}", "        rps: {\"${iface}\": \"1\"}", 19,
     "rps: not used"),
])
def test_a_bad_section_is_bad_input_at_its_line(tmp_path: Path, old: str, new: str,
                                                where: int, says: str) -> None:
    assert old in PROFILE
    with pytest.raises(InputError) as caught:
        load_profile(write(tmp_path, PROFILE.replace(old, new)))
    assert says in str(caught.value)
    assert f"tuned.yaml:{where}:" in str(caught.value) or says == "not used"


def test_a_parameter_outside_the_template_and_a_matrix_beside_it_are_refused(
        tmp_path: Path) -> None:
    text = PROFILE.replace("  default: {}", "  default: {setup: {server: {rps: "
                           "{\"${iface}\": \"${rps}\"}}}}")
    with pytest.raises(InputError, match=r"used outside variants\.tuned"):
        load_profile(write(tmp_path, text))
    with pytest.raises(InputError, match=r"searched \(tune:\) or swept \(matrix:\)"):
        load_profile(write(tmp_path, PROFILE + "matrix: {x: [1]}\n"))


def test_a_value_the_knob_refuses_is_refused_before_any_host(tmp_path: Path) -> None:
    """`napilab tune` loads every corner: a negative gro_flush_timeout is the knob's
    error, exit 2, before any inventory is read."""
    path = write(tmp_path, PROFILE.replace("gro: {low: 0, high: 200000, log: true}",
                                           "gro: {choices: [0, -1]}"))
    done = run_napilab("tune", str(path), "-i", str(tmp_path / "missing.yaml"))
    assert done.returncode == 2, done.stderr
    assert "gro_flush_timeout" in done.stderr and "Traceback" not in done.stderr


def test_run_refuses_a_tuned_profile(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("hosts: {a: {address: 192.0.2.1}, b: {address: 192.0.2.2}}\n")
    done = run_napilab("run", str(write(tmp_path)), "-i", str(inventory))
    assert done.returncode == 2 and "`napilab tune` it" in done.stderr, done.stderr


def test_filled_keeps_types() -> None:
    doc = {"setup": {"b": {"netdev": {"${iface}": {"gro_flush_timeout": "${gro}",
                                                   "label": "g-${gro}"}}}}}
    out = filled(doc, {"gro": 2000})
    assert out == {"setup": {"b": {"netdev": {"${iface}": {"gro_flush_timeout": 2000,
                                                           "label": "g-2000"}}}}}


def test_the_space_round_trips(tmp_path: Path) -> None:
    tune = load_profile(write(tmp_path)).tune
    assert tune is not None
    dists = space.distributions(tune)
    assert dists["gro"].log and (dists["gro"].low, dists["gro"].high) == (1, 200001)  # type: ignore[attr-defined]
    for values in ({"rps": "1", "defer": 0, "gro": 0}, {"rps": "none", "defer": 100,
                                                        "gro": 200000}):
        assert space.decode(tune, space.encode(tune, values)) == values
    assert space.grid_size(tune) == 2 * 101 * 200001


def _bowl(values: dict[str, object]) -> float:
    """A known landscape: best at rps=1, defer=0, gro=0."""
    return (50.0 * (values["rps"] != "1") + float(values["defer"])  # type: ignore[arg-type]
            + math.log1p(float(values["gro"])))  # type: ignore[arg-type]


def test_a_real_study_finds_the_bowls_floor_and_resumes_after_a_kill(tmp_path: Path) -> None:
    prof = load_profile(write(tmp_path, PROFILE.replace("subject_to: {busy_cores: 1.5}",
                                                        "subject_to: {}")))
    tune = prof.tune
    assert tune is not None
    study = Study.create(tmp_path / "results", prof, str(tmp_path / "inv.yaml"))
    optuna_study = study.optuna(tune, ["minimise"])
    for _ in range(30):
        trial, cand = study.ask(optuna_study, tune)
        cand.state, cand.numbers = OK, {"latency_p99": _bowl(cand.values)}
        study.tell(optuna_study, trial, cand, tune)
    best = study.ranked(tune)[0]
    assert best[0]["rps"] == "1" and _bowl(best[0]) < 12, best
    # a kill mid-candidate: the trial stays running in the journal, the candidate too
    trial, cand = study.ask(optuna_study, tune)
    asked = dict(cand.values)
    again = Study.open(study.dir)
    assert again.candidates[-1].state == RUNNING
    reopened = again.optuna(tune, ["minimise"])
    assert again.recover(reopened) and again.candidates[-1].state == "interrupted"
    _, retried = again.ask(reopened, tune)
    assert retried.values == asked and retried.number == cand.number + 1
    assert json.loads((study.dir / "tune.json").read_text())["candidates"][-1]["state"] == \
        RUNNING


def confirm_run(results: Path, primary: tuple[str, ...] = ("latency_p99",)) -> Path:
    values = {"sockperf.latency_p99": {"default": lognormal(1, 5, 100.0, 0.03),
                                       "t001": lognormal(2, 5, 60.0, 0.03),
                                       "t002": lognormal(3, 5, 99.0, 0.03)},
              "cpu.busy_cores": {"default": lognormal(4, 5, 1.0), "t001": lognormal(5, 5, 1.4),
                                 "t002": lognormal(6, 5, 0.5)}}
    run = store_run(results, values, profile="tuned", units={"cpu.busy_cores": "cores"},
                    policies={m: {"direction": "lower"} for m in primary})
    path = run / "manifest.json"
    doc = json.loads(path.read_text())
    doc["workload_source"] = "sockperf"
    path.write_text(json.dumps(doc))
    return run


def test_only_a_candidate_confirmed_better_is_recommended(tmp_path: Path) -> None:
    run = confirm_run(tmp_path)
    p99, cores = Named("latency_p99", None), Named("busy_cores", None)
    conf = judge(run, [(p99, "minimise")], [], ["t001", "t002"])
    by = {v.name: v for v in conf.candidates}
    assert by["t001"].confirmed and by["t001"].verdicts["latency_p99"] == "better"
    assert not by["t002"].confirmed and conf.recommended == ["t001"]
    low, high = by["t001"].changes["latency_p99"].split(" ")[0], None
    assert low.startswith("-") and high is None
    # a bound on busy cores the better candidate breaks: nothing is recommended
    bounded = judge(run, [(p99, "minimise")], [(cores, None, 1.2)], ["t001", "t002"])
    assert bounded.recommended == [] and "busy_cores outside" in bounded.candidates[0].why


def test_a_front_recommends_what_is_better_on_one_and_worse_on_none(tmp_path: Path) -> None:
    """t001: p99 -40% but 1.4x the cores (worse); t002: p99 unchanged, half the cores."""
    run = confirm_run(tmp_path, ("latency_p99", "busy_cores"))  # as tune's confirmation
    p99, cores = Named("latency_p99", None), Named("busy_cores", None)
    conf = judge(run, [(p99, "minimise"), (cores, "minimise")], [], ["t001", "t002"])
    by = {v.name: v for v in conf.candidates}
    assert by["t001"].verdicts == {"latency_p99": "better", "busy_cores": "worse"}
    assert not by["t001"].confirmed and "worse on busy_cores" in by["t001"].why
    assert by["t002"].confirmed and by["t002"].verdicts["busy_cores"] == "better"
    assert conf.recommended == ["t002"]


def test_the_report_says_what_was_searched_measured_and_recommended(tmp_path: Path) -> None:
    run = confirm_run(tmp_path)
    conf = judge(run, [(Named("latency_p99", None), "minimise")], [], ["t001", "t002"])
    state = {"id": "tune-x", "profile_name": "tuned", "tune": {
        "variant": "tuned", "parameters": {"defer": "0..100"},
        "objectives": [["latency_p99", "minimise"]], "constraints": ["busy_cores <= 1.5"],
        "bounds": [["busy_cores", None, 1.5]],
        "trials": 3, "seconds": None, "sampler": "tpe"},
        "baseline": {"state": OK, "numbers": {"latency_p99": 101.0, "busy_cores": 1.0}},
        "candidates": [{"number": i, "values": {"defer": d}, "state": OK, "seconds": 3.0,
                        "numbers": {"latency_p99": p, "busy_cores": c}}
                       for i, (d, p, c) in enumerate([(50, 90.0, 1.1), (1, 61.0, 1.4),
                                                      (2, 98.0, 0.6)])],
        "confirmation": {"candidates": [["t001", {"defer": 1}], ["t002", {"defer": 2}]],
                         "run": "runs/x", "profile": "recommended.yaml"}}
    paths = tune_report.write(tmp_path, TuneStudy.from_json(state), conf)
    text = paths[0].read_text()
    assert "recommended: t001, written to recommended.yaml" in text
    assert "t002" in text and "not confirmed" in text
    assert "busy_cores (median)" in text  # the bound's; without one, busy cores anyway
    assert "| candidate |" in paths[1].read_text()
    page = paths[2].read_text()
    assert page.count("<svg") == 2 and "tune-answer" in page
    assert json.loads(paths[3].read_text())["confirmation"]["recommended"] == ["t001"]
