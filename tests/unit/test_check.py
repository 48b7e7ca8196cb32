"""`napilab check` end to end on stored runs (RunStore, fixed seeds): exit 3 on a
regression beyond the threshold, 0 on an improvement or a change shown within it, 5 when
nothing could be judged; the JUnit XML parses and carries the failure with change, CI
and p; the JSON summary says the same; the baseline pool never takes a regressed night."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from napilab.harness.errors import InputError
from napilab.harness.stats.gate import GateSamples, GateStatus, gate_metrics
from napilab.reports.ab.compare import load_run
from napilab.reports.nightly.baselines import Reference, find_reference
from napilab.reports.nightly.check import gate, parse_thresholds
from napilab.reports.nightly.check_record import PIN_FILE
from napilab.reports.nightly.thresholds import Threshold
from tests.cli import run_cli
from tests.synthetic_runs import lognormal, store_run

N = 10  # repetitions per variant
# 1% noise: at n = 10 with Holm over 4 gated cases the detectable change is ~3%, below the
# 5% default threshold, so "noise" is a verdict the gate can reach (at 2% it is ~6%, and
# an unchanged candidate is honestly "not-enough-data").
SIGMA = 0.01
BASE = {"ping.rtt_avg": {"off": lognormal(1, N, 100, SIGMA), "on": lognormal(2, N, 50, SIGMA)},
        "ping.received": {"off": lognormal(3, N, 1e6, SIGMA), "on": lognormal(4, N, 2e6, SIGMA)}}
UNITS = {"ping.received": "count"}
POLICIES = {"rtt_avg": {}, "received": {}}  # the primary metrics (gated)


def candidate(rtt_factor: float, seed: int = 10) -> dict[str, dict[str, list[float]]]:
    """The baseline's distributions with the `on` variant's rtt scaled (new seeds)."""
    return {"ping.rtt_avg": {"off": lognormal(seed, N, 100, SIGMA),
                             "on": lognormal(seed + 1, N, 50 * rtt_factor, SIGMA)},
            "ping.received": {"off": lognormal(seed + 2, N, 1e6, SIGMA),
                              "on": lognormal(seed + 3, N, 2e6, SIGMA)}}


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    store_run(tmp_path / "results", BASE, profile="nightly", units=UNITS, started=1000.0,
              policies=POLICIES)
    return tmp_path / "results"


def run_check(results: Path, cand: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
              *extra: str) -> tuple[int, str, ET.Element, dict[str, object]]:
    junit, summary = tmp_path / "check.xml", tmp_path / "check.json"
    code, out, _ = run_cli(capsys, "check", str(cand), "--baseline", str(results), "--junit",
                                   str(junit), "--json", str(summary), *extra)
    return code, out, ET.parse(junit).getroot(), json.loads(summary.read_text())


def test_regression_exits_3_with_junit_failure_and_json(results: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    cand = store_run(tmp_path / "new", candidate(1.15), profile="nightly", units=UNITS,
                     policies=POLICIES)
    code, out, junit, summary = run_check(results, cand, tmp_path, capsys)
    assert code == 3
    assert out.startswith("napilab check: REGRESSION")
    assert junit.tag == "testsuites" and junit.get("failures") == "1"
    assert junit.get("tests") == "4"  # 2 metrics x 2 variants
    failures = [(case.get("classname"), case.get("name"), f.get("message"))
                for case in junit.iter("testcase") for f in case.findall("failure")]
    assert len(failures) == 1
    classname, name, message = failures[0]
    assert (classname, name) == ("napilab.nightly.on", "ping.rtt_avg[sender]")
    assert message is not None
    assert "regression" in message and "90% CI" in message and "p=" in message
    assert "threshold 5%" in message and "+1" in message  # about +15%
    assert summary["status"] == "regression"
    case = next(c for c in summary["cases"] if c["status"] == "regression")  # type: ignore
    assert case["variant"] == "on" and case["comparison"]["change"] > 0.05
    assert case["comparison"]["p_adjusted"] < 0.05
    assert case["comparison"]["change_ci"][0] > 0


def test_improvement_exits_0(results: Path, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    cand = store_run(tmp_path / "new", candidate(0.8), profile="nightly", units=UNITS,
                     policies=POLICIES)
    code, out, junit, summary = run_check(results, cand, tmp_path, capsys)
    assert code == 0 and out.startswith("napilab check: pass")
    assert junit.get("failures") == "0"
    statuses = {(c["variant"], c["metric"]): c["status"] for c in summary["cases"]}  # type: ignore
    assert statuses[("on", "rtt_avg")] == "improvement"
    assert statuses[("off", "rtt_avg")] == "within"


def test_noise_exits_0(results: Path, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    cand = store_run(tmp_path / "new", candidate(1.0), profile="nightly", units=UNITS,
                     policies=POLICIES)
    code, _, junit, summary = run_check(results, cand, tmp_path, capsys)
    assert code == 0 and junit.get("failures") == "0" and junit.get("skipped") == "0"
    assert {c["status"] for c in summary["cases"]} == {"within"}  # type: ignore


def test_threshold_from_cli_then_policy_then_default(results: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cand = store_run(tmp_path / "new", candidate(1.08), profile="nightly", units=UNITS,
                     policies=POLICIES)
    assert run_check(results, cand, tmp_path, capsys)[0] == 3  # +8% > default 5%
    code, _, _, summary = run_check(results, cand, tmp_path, capsys,
                                    "--max-regression", "ping.rtt_avg=10%")
    assert code == 0
    case = next(c for c in summary["cases"] if c["metric"] == "rtt_avg"  # type: ignore
                and c["variant"] == "on")
    assert (case["max_regression_pct"], case["threshold_origin"]) == (10.0, "cli")
    assert case["status"] == "within"  # +8%, shown to be inside the tolerated 10%
    lenient = store_run(tmp_path / "policy", candidate(1.08), profile="nightly", units=UNITS,
                        policies={**POLICIES, "rtt_avg": {"max_regression": 12.0}})
    code, _, _, summary = run_check(results, lenient, tmp_path, capsys)
    assert code == 0
    assert {c["threshold_origin"] for c in summary["cases"]  # type: ignore
            if c["metric"] == "rtt_avg"} == {"policy"}


def test_gate_with_one_metric_is_the_stats_gate(tmp_path: Path) -> None:
    """The gate is harness.stats.gate with Holm across cases: for one metric and one variant (no
    adjustment) the verdicts and numbers are identical."""
    base, slow = lognormal(1, N, 100), lognormal(2, N, 110)
    a = load_run(store_run(tmp_path / "a", {"ping.rtt_avg": {"x": base}}))
    b = load_run(store_run(tmp_path / "b", {"ping.rtt_avg": {"x": slow}}))
    report = gate(Reference("run", (a,)), b)
    expected = gate_metrics({"m": GateSamples(base, slow, "lower", 5.0)})["m"]
    (case,) = report.cases
    assert case.status == expected.status.value == GateStatus.REGRESSION.value
    assert case.comparison is not None
    assert case.comparison.change == expected.comparison.change
    assert case.comparison.change_ci == expected.comparison.change_ci
    assert case.comparison.p_value == expected.comparison.p_value


def nightly(results: Path, values: dict[str, dict[str, list[float]]], started: float,
            **kwargs: object) -> Path:
    return store_run(results, values, profile="nightly", units=UNITS, policies=POLICIES,
                     started=started, **kwargs)  # type: ignore[arg-type]


def test_baseline_series_is_the_complete_earlier_runs_of_the_profile(
        results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    newest = nightly(results, BASE, 2000.0)
    nightly(results, BASE, 3000.0, status="partial")
    store_run(results, BASE, profile="other", units=UNITS, started=4000.0)
    cand = nightly(results, candidate(1.0), 5000.0)
    for where in (results, results / "nightly"):
        code, _, _, summary = run_check(where, cand, tmp_path, capsys)
        assert code == 0
        baseline = summary["baseline"]
        assert baseline["dir"] == str(newest) and baseline["kind"] == "series"  # type: ignore
        assert len(baseline["runs"]) == 2  # type: ignore


def test_a_regressed_night_never_becomes_the_baseline(
        results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No ratchet: after four normal nights, two slow nights in a row are both
    regressions (the reference is the first nights of the level, not yesterday); a pin
    accepts the slower level on purpose."""
    for k in range(3):
        nightly(results, candidate(1.0, seed=100 + 10 * k), 1500.0 + k)
    slow = nightly(results, candidate(1.3, seed=20), 2000.0)
    assert run_check(results, slow, tmp_path, capsys)[0] == 3  # writes slow/check.json
    again = nightly(results, candidate(1.3, seed=30), 3000.0)
    code, _, _, summary = run_check(results, again, tmp_path, capsys)
    assert code == 3
    assert str(slow) in {r["dir"] for r in summary["baseline"]["runs"]}  # type: ignore
    # pinned: the slow night is the anchor alone, until unpinned
    code, _, _ = run_cli(capsys, "baseline", "pin", str(slow))
    assert code == 0 and (results / "nightly" / PIN_FILE).exists()
    code, _, _, summary = run_check(results, again, tmp_path, capsys)
    assert code == 0 and summary["baseline"]["kind"] == "pinned"  # type: ignore
    code, _, _ = run_cli(capsys, "baseline", "unpin", str(results / "nightly"))
    assert code == 0 and not (results / "nightly" / PIN_FILE).exists()


def test_a_second_night_unlike_the_first_is_never_a_pass(
        results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two nights that disagree: nobody can tell which is the level, and the night-to-
    night noise they show is large; the third night is not green (exit 5), saying so."""
    slow = nightly(results, candidate(1.3, seed=20), 2000.0)
    assert run_check(results, slow, tmp_path, capsys)[0] == 3
    again = nightly(results, candidate(1.3, seed=30), 3000.0)
    code, out, _, summary = run_check(results, again, tmp_path, capsys)
    assert code == 5 and summary["status"] == "inconclusive"
    assert "ping.rtt_avg[sender] (on): inconclusive" in out


def test_a_baseline_of_another_profile_digest_is_refused(
        results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cand = nightly(tmp_path / "new", candidate(1.0), 5000.0)
    manifest_path = cand / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["profile"]["digest"] = "1" * 64
    manifest_path.write_text(json.dumps(manifest))
    base = next((results / "nightly").glob("*"))
    for where in (base, results):
        code, _, err = run_cli(capsys, "check", str(cand), "--baseline", str(where))
        assert code == 2 and "digest" in err and "--intended profile" in err
    code, _, _ = run_cli(capsys, "check", str(cand), "--baseline", str(base), "--intended",
                                 "profile")
    assert code == 0
    assert find_reference(results, load_run(cand), intended=True).kind == "series"


def test_nothing_judged_is_inconclusive_exit_5_and_junit_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = store_run(tmp_path / "a", {"ping.rtt_avg": {"x": [100.0]}})
    cand = store_run(tmp_path / "b", {"ping.rtt_avg": {"x": [101.0]}})
    junit_path = tmp_path / "few.xml"
    code, out, err = run_cli(capsys, "check", str(cand), "--baseline", str(base), "--junit",
                                     str(junit_path))
    assert code == 5 and "inconclusive" in err and out.startswith("napilab check: INCONCLUSIVE")
    junit = ET.parse(junit_path).getroot()
    assert junit.get("skipped") == "1" and junit.get("failures") == "1"
    gate_case = next(c for c in junit.iter("testcase") if c.get("name") == "gate")
    failure = gate_case.find("failure")
    assert failure is not None and failure.get("type") == "inconclusive"
    report = gate(Reference("run", (load_run(base),)), load_run(cand))
    assert report.counts() == {"inconclusive": 1} and report.status == "inconclusive"
    # with a spread but too few repetitions, the text names the repeat that would decide
    wide = store_run(tmp_path / "c", {"ping.rtt_avg": {"x": [100.0, 120, 85]}})
    again = store_run(tmp_path / "d", {"ping.rtt_avg": {"x": [104.0, 90, 118]}})
    code, out, _ = run_cli(capsys, "check", str(again), "--baseline", str(wide))
    assert code == 5 and "repeat >=" in out
    # a run that already had the repeat the noise asked for is not told to do the same again
    report = gate(Reference("run", (load_run(wide),)), load_run(again))
    (case,) = report.cases
    assert case.comparison is not None and case.comparison.n_needed
    assert report.undecided_hint() == \
        f"; about repeat >= {case.comparison.n_needed} per run would decide"
    met = dataclasses.replace(case, comparison=dataclasses.replace(case.comparison,
                                                                   n_needed=3))
    hint = dataclasses.replace(report, cases=(met,)).undecided_hint()
    assert hint == ("; repeat 3 was estimated to decide but this run's noise left it "
                    "undecided: repeat >= 4 or longer trials")


def test_descriptive_metrics_are_not_gated_and_assumed_directions_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = {"softnet_stat.processed": {"x": lognormal(1, N, 1000)},
              "ping.rtt_avg": {"x": lognormal(3, N, 100)}}
    worse = {"softnet_stat.processed": {"x": lognormal(2, N, 1500)},
             "ping.rtt_avg": {"x": lognormal(4, N, 100)}}
    units = {"softnet_stat.processed": "count"}
    a = store_run(tmp_path / "a", values, units=units)
    b = store_run(tmp_path / "b", worse, units=units)
    (case,) = gate(Reference("run", (load_run(a),)), load_run(b)).cases
    assert case.metric == "rtt_avg"  # ping's default primary metric; processed descriptive
    code, _, err = run_cli(capsys, "check", str(b), "--baseline", str(a), "--max-regression",
                                   "processed=10")
    assert code == 2 and "processed: {direction: lower}" in err


def test_bad_thresholds_are_bad_input(results: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    cand = store_run(tmp_path / "new", candidate(1.0), profile="nightly", units=UNITS,
                     policies=POLICIES)
    for bad in ("rtt_avg", "rtt_avg=0", "rtt_avg=x", "=5"):
        code, _, err = run_cli(capsys, "check", str(cand), "--baseline", str(results),
                                       "--max-regression", bad)
        assert code == 2 and "METRIC=PCT" in err, bad
    code, _, err = run_cli(capsys, "check", str(cand), "--baseline", str(results),
                                   "--max-regression", "rtt_avgg=5")
    assert code == 2 and "no such metric" in err and "ping.rtt_avg" in err
    code, _, err = run_cli(capsys, "check", str(cand), "--baseline", str(cand))
    assert code == 2 and "is the run being checked" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(capsys, "check", str(cand), "--baseline", str(empty))
    assert code == 2 and "no complete run of profile 'nightly'" in err
    assert parse_thresholds(["a=5", "s.b=2.5%"]) == {"a": Threshold(5.0), "s.b": Threshold(2.5)}
    assert parse_thresholds(["cpu_time=+500ms", "s=+0.1cores", "d=+10"]) == {
        "cpu_time": Threshold(None, 500.0, "ms"), "s": Threshold(None, 0.1, "cores"),
        "d": Threshold(None, 10.0, "")}
    for bad in ("cpu_time=+0ms", "cpu_time=+x", "cpu_time=+"):
        with pytest.raises(InputError):
            parse_thresholds([bad])


def test_slow_drift_is_caught_against_the_anchor(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Nights each +0.7% slower than the one before (1% noise, 5 repetitions): a rolling
    pool of the last nights would follow them; the anchor (the first nights) does not,
    and a night is red by the time the drift reaches +10% (night 14)."""
    results = tmp_path / "results"
    statuses = []
    for k in range(15):
        level = 1.007 ** k
        run = store_run(results, {"ping.rtt_avg": {"x": lognormal(200 + k, 5, 100 * level,
                                                                  0.01)}},
                        profile="drift", started=1000.0 + k, policies={"rtt_avg": {}})
        if k:
            statuses.append(run_check(results, run, tmp_path, capsys)[0])
    assert 3 in statuses, statuses
    assert statuses.index(3) + 1 <= 14  # the first red night, counted from 0


def test_a_lucky_first_night_does_not_lock_the_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Night 0 is 15% faster than every night after it: at most one of the next six is
    red, and once two normal nights agree, normal nights pass again."""
    results = tmp_path / "results"
    codes = []
    for k in range(7):
        median = 85.0 if k == 0 else 100.0
        run = store_run(results, {"ping.rtt_avg": {"x": lognormal(300 + k, 5, median, 0.01)}},
                        profile="lucky", started=1000.0 + k, policies={"rtt_avg": {}})
        if k:
            codes.append(run_check(results, run, tmp_path, capsys)[0])
    assert codes.count(3) <= 1, codes
    assert codes[-3:] == [0, 0, 0], codes


def test_one_slow_night_in_the_reference_does_not_hide_a_regression(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Five nights (3% noise, 5 repetitions), the third 20% slow, then a night 15% slower:
    red, as it is after the same five nights without the slow one. The slow night is
    left out of the anchor; the noise of the four left must not lose the degrees of
    freedom that decide it (it was "inconclusive", exit 5)."""
    nights = [lognormal(4060 + k, 5, 100, 0.03) for k in range(5)]
    regressed = lognormal(4069, 5, 115, 0.03)
    for label, slow in (("plain", None), ("slow", 2)):
        results = tmp_path / label
        for k, values in enumerate(nights):
            store_run(results, {"ping.rtt_avg": {"x": [v * (1.2 if k == slow else 1.0)
                                                       for v in values]}},
                      profile=label, started=1000.0 + k, policies={"rtt_avg": {}})
        run = store_run(results, {"ping.rtt_avg": {"x": regressed}}, profile=label,
                        started=1010.0, policies={"rtt_avg": {}})
        code, out, _, summary = run_check(results, run, tmp_path, capsys)
        assert code == 3, (label, out)
        (case,) = summary["cases"]  # type: ignore[misc]
        assert case["status"] == "regression"
        assert len(case["anchor"]) == (4 if slow else 5)  # the slow night left out


def test_an_absolute_threshold_in_cores_is_a_share_of_the_window(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`+0.1cores` on a CPU time in ms over a 10 s window is +1,000 ms: a NAPI kthread
    that appears with 9,800 ms is a regression; one with 400 ms is within."""
    window = {"x": [10.0] * 5}
    doc = {"name": "synth", "workload": {"tool": "ping", "duration": 10},
           "hosts": {"sender": {"host": "a"}},
           "report": {"table": [{"label": "NAPI kthread CPU (ms)", "source": "napi_threads",
                                 "metric": "cpu_time", "role": "sender"}]}}
    base = store_run(tmp_path / "a", {"napi_threads.cpu_time": {"x": [0.0] * 5},
                                      "snapshot.interval": window},
                     units={"napi_threads.cpu_time": "ms", "snapshot.interval": "s"},
                     document=doc)
    for cost, want in ((9800.0, 3), (400.0, 0)):
        cand = store_run(tmp_path / f"b{cost:g}",
                         {"napi_threads.cpu_time": {"x": [cost + d for d in (-9, 3, 0, 5, 1)]},
                          "snapshot.interval": window},
                         units={"napi_threads.cpu_time": "ms", "snapshot.interval": "s"},
                         document=doc)
        code, out, _, summary = run_check(base, cand, tmp_path, capsys, "--max-regression",
                                          "cpu_time=+0.1cores")
        case = next(c for c in summary["cases"] if c["metric"] == "cpu_time")  # type: ignore
        assert code == want, out
        assert case["threshold"] == "+0.1 cores" and case["comparison"]["scale"] == "absolute"
        assert case["comparison"]["min_effect"] == pytest.approx(1000.0)
    code, _, err = run_cli(capsys, "check", str(cand), "--baseline", str(base), "--max-regression",
                                   "cpu_time=+5pps")
    assert code == 2 and "does not fit" in err
