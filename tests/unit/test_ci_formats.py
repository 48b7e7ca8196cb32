"""KTAP and the netdev CI's (NIPA's) result JSON, beside JUnit (reports.ci), for a run's
table (`napilab report --format ktap,nipa`) and for the gate (`napilab check --ktap
--nipa`): every case has the outcome JUnit gives it (a case that could not be judged is
never `ok` nor "pass"); the KTAP is KTAP version 1 by a structural reading of the spec
and, where the kernel's own parser is at hand, by tools/testing/kunit/kunit_parser.py;
the NIPA JSON is what its published schema and NIPA's collector read."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path

import jsonschema
import pytest

from napilab.harness.errors import InputError
from napilab.reports.ab.compare import load_run, table
from napilab.reports.ci.ktap import ktap
from napilab.reports.ci.nipa import NipaTarget, namify, nipa_json, nipa_run
from napilab.reports.ci.suite import CiSuite
from napilab.reports.formats.render import render
from napilab.reports.formats.table_junit import table_suite
from napilab.reports.nightly.baselines import Reference, find_reference
from napilab.reports.nightly.check import gate
from napilab.reports.nightly.junit import gate_suite, junit_xml
from tests.cli import run_cli
from tests.import_graph import ROOT
from tests.synthetic_runs import store_run

RUNS = ROOT / "tests" / "golden" / "reports" / "runs"
NIGHTLY = ROOT / "tests" / "golden" / "gate_runs" / "nightly"
SCHEMA = json.loads((ROOT / "docs" / "records" / "nipa.schema.json").read_text())
# the kernel's KTAP parser, tools/testing/kunit/kunit_parser.py with kunit_printer.py
# beside it: never in this repository (GPL-2.0 code of another project); fetched by hand
KUNIT = Path(os.environ.get("NAPILAB_KUNIT_PARSER", "/tmp/kunit"))


# ---------------------------------------------------------------- a KTAP reader

@dataclass
class Node:
    name: str
    outcome: str  # passed | failure | skipped | error
    reason: str = ""
    children: list[Node] = field(default_factory=list)


RESULT = re.compile(r"(ok|not ok) ([0-9]+) ([^#]*[^# ])(?: # (SKIP|ERROR)(?: (.*))?)?$")


def _outcome(ok: str, directive: str | None) -> str:
    if directive == "SKIP":
        return "skipped"
    if directive == "ERROR":
        assert ok == "not ok", "ERROR goes on a not ok line"
        return "error"
    return "passed" if ok == "ok" else "failure"


def read_ktap(text: str) -> list[Node]:
    """KTAP version 1 read strictly (Documentation/dev-tools/ktap.rst): a version line,
    a plan, the tests numbered from 1, each subtest indented by one level (four spaces)
    with its own version line and plan; every other line a "# " diagnostic line. Fails
    on anything else."""
    lines = text.split("\n")
    assert lines[-1] == "", "ends with a newline"
    nodes, end = _block(lines[:-1], 0, 0)
    assert end == len(lines) - 1, f"line {end + 1}: trailing {lines[end]!r}"
    return nodes


def _block(lines: list[str], at: int, depth: int) -> tuple[list[Node], int]:
    pad = "    " * depth
    assert lines[at] == pad + "KTAP version 1", f"line {at + 1}: {lines[at]!r}"
    at += 1
    while lines[at].startswith(pad + "#"):
        at += 1
    plan = re.fullmatch(re.escape(pad) + r"1\.\.([0-9]+)", lines[at])
    assert plan, f"line {at + 1}: no plan: {lines[at]!r}"
    at += 1
    nodes: list[Node] = []
    for number in range(1, int(plan.group(1)) + 1):
        children: list[Node] = []
        while lines[at].startswith(pad + "# "):
            at += 1
        if lines[at] == pad + "    KTAP version 1":
            children, at = _block(lines, at, depth + 1)
        match = RESULT.fullmatch(lines[at].removeprefix(pad))
        assert lines[at].startswith(pad) and match, f"line {at + 1}: {lines[at]!r}"
        assert int(match.group(2)) == number, f"line {at + 1}: test {number} expected"
        node = Node(match.group(3), _outcome(match.group(1), match.group(4)),
                    match.group(5) or "", children)
        if children:  # a parent fails if a subtest failed; KTAP: skips do not count
            bad = any(c.outcome in ("failure", "error") for c in children)
            assert (node.outcome == "failure") == bad, f"line {at + 1}: parent result"
            if not bad:
                judged = any(c.outcome == "passed" for c in children)
                assert node.outcome == ("passed" if judged else "skipped")
        nodes.append(node)
        at += 1
    return nodes, at


def ktap_cases(nodes: list[Node]) -> dict[tuple[str, str], str]:
    out = {}
    for node in nodes:
        for child in node.children or [node]:
            out[(node.name if node.children else "", child.name)] = child.outcome
    return out


def junit_cases(xml: str, profile: str) -> dict[tuple[str, str], str]:
    out = {}
    for case in ET.fromstring(xml).iter("testcase"):
        group = case.get("classname", "").removeprefix(f"napilab.{profile}").lstrip(".")
        found = [tag for tag in ("failure", "error", "skipped") if case.find(tag) is not None]
        out[(group, case.get("name", ""))] = found[0] if found else "passed"
    return out


def nipa_results(doc: dict[str, object]) -> dict[str, str]:
    """The tests as NIPA's collector flattens them (contest/results-collector.py
    result_flatten: group, test, result; "pass" or not) with the value itself."""
    out = {}
    for test in doc["results"]:  # type: ignore[attr-defined]
        assert test["group"] and test["test"] and test["link"]
        assert test["test"] not in out, f"two tests named {test['test']}"
        out[test["test"]] = test["result"]
    return out


NIPA = {"passed": "pass", "failure": "fail", "error": "fail", "skipped": "skip"}


def agree(suite: CiSuite, junit: str) -> None:
    """KTAP, NIPA and JUnit of one suite say the same of every case."""
    expected = junit_cases(junit, suite.profile)
    found = ktap_cases(read_ktap(ktap(suite)))
    assert found == {(g, n.replace("#", "no.")): o for (g, n), o in expected.items()}
    doc = json.loads(nipa_json(suite))
    jsonschema.validate(doc, SCHEMA)
    results = nipa_results(doc)
    assert sorted(results.values()) == sorted(NIPA[o] for o in expected.values())
    for (group, name), outcome in expected.items():
        assert results[namify(f"{group}-{name}" if group else name)] == NIPA[outcome]
    # NIPA stores start and end as timestamps and a branch's last 17 characters as a date
    dt.datetime.fromisoformat(doc["start"])
    dt.datetime.fromisoformat(doc["end"])
    dt.datetime.strptime(doc["branch"][-17:], "%Y-%m-%d--%H-%M")


# ---------------------------------------------------------------- the cases

def _failed_trial_run(tmp_path: Path) -> Path:
    """A run whose second trial failed, its client's stderr kept."""
    run_dir = store_run(tmp_path, {"ping.rtt_avg": {"x": [100.0, 101, 99, 100],
                                                    "y": [90.0, 91, 89, 90]}})
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["trials"][1].update(status="failed", error="ping exited 2")
    manifest["status"] = "partial"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    err = run_dir / "raw" / "002" / "a" / "client.err"
    err.parent.mkdir(parents=True)
    err.write_text("ping: connect: Network is unreachable\n")
    return run_dir


@pytest.mark.parametrize("name", ["synthetic-seed-000-5e1f0000",
                                  "demo-20261130T163215Z-7a9ae54f"])
def test_a_runs_table_says_the_same_in_junit_ktap_and_nipa(name: str) -> None:
    run = load_run(RUNS / name)
    tab = table(run)
    suite = table_suite(run, tab)
    agree(suite, render(run, "junit", tab))
    counts = suite.counts()
    assert counts["skipped"] and counts["passed"] + counts["failure"]  # judged and not
    # exploratory, not-enough-data and no-comparison rows are SKIPs on `not ok` lines
    text = ktap(suite)
    assert all(line.lstrip().startswith("not ok ") for line in text.splitlines()
               if " # SKIP " in line)
    assert render(run, "ktap", tab) == text


def test_a_failed_trial_is_an_error_with_its_stderr(tmp_path: Path) -> None:
    run = load_run(_failed_trial_run(tmp_path))
    tab = table(run)
    suite = table_suite(run, tab)
    agree(suite, render(run, "junit", tab))
    text = ktap(suite)
    assert "    # raw/002/a/client.err:\n    # ping: connect: Network is unreachable\n" \
           "    not ok 1 trial 002 (y rep 1) # ERROR ping exited 2\nnot ok 2 trials\n" in text
    (trial,) = [t for t in nipa_run(suite).results if t.test.startswith("trials-")]
    assert trial.result == "fail" and trial.link.endswith(f"{run.directory.name}/raw/002")


def test_the_gate_says_the_same_in_junit_ktap_and_nipa() -> None:
    runs = sorted(p for p in (NIGHTLY / "demo").iterdir() if p.is_dir())
    candidate = load_run(runs[-1])
    report = gate(find_reference(NIGHTLY, candidate, intended=False), candidate)
    assert report.status == "regression"
    suite = gate_suite(report)
    agree(suite, junit_xml(report))
    assert {t.result for t in nipa_run(suite).results} == {"fail"}


def test_an_inconclusive_gate_is_never_a_pass(tmp_path: Path) -> None:
    """Too few trials to judge: the case is skipped and the gate itself fails, in every
    format."""
    base = store_run(tmp_path / "a", {"ping.rtt_avg": {"x": [100.0]}})
    cand = store_run(tmp_path / "b", {"ping.rtt_avg": {"x": [101.0]}})
    report = gate(Reference("run", (load_run(base),)), load_run(cand))
    suite = gate_suite(report)
    agree(suite, junit_xml(report))
    nodes = read_ktap(ktap(suite))
    assert [(n.name, n.outcome) for n in nodes] == [("x", "skipped"), ("gate", "failure")]
    assert "inconclusive" in nodes[0].children[0].reason
    assert {t.test: t.result for t in nipa_run(suite).results} == {
        "x-ping-rtt-avg-sender": "skip", "gate": "fail"}


def test_the_kernels_kunit_parser_reads_the_ktap(tmp_path: Path) -> None:
    parser = KUNIT / "kunit_parser.py"
    if not (parser.exists() and (KUNIT / "kunit_printer.py").exists()):
        pytest.skip(f"the kernel's KTAP parser is not at {KUNIT} (NAPILAB_KUNIT_PARSER): "
                    "put tools/testing/kunit/kunit_parser.py and kunit_printer.py of a "
                    "Linux tree there to run this check")
    run = load_run(_failed_trial_run(tmp_path / "failed"))
    runs = sorted(p for p in (NIGHTLY / "demo").iterdir() if p.is_dir())
    candidate = load_run(runs[-1])
    suites = [table_suite(run, table(run)),
              table_suite(load_run(RUNS / "synthetic-seed-000-5e1f0000"),
                          table(load_run(RUNS / "synthetic-seed-000-5e1f0000"))),
              gate_suite(gate(find_reference(NIGHTLY, candidate, intended=False), candidate))]
    script = ("import json, sys; sys.path.insert(0, sys.argv[1]); import kunit_parser as p\n"
              "t = p.parse_run_tests(open(sys.argv[2]))\n"
              "print(json.dumps({'status': t.status.name, 'counts': vars(t.counts), "
              "'groups': [[s.name, s.status.name] for s in t.subtests]}))")
    for k, suite in enumerate(suites):
        path = tmp_path / f"{k}.ktap"
        path.write_text(ktap(suite))
        done = subprocess.run([sys.executable, "-c", script, str(KUNIT), str(path)],
                              capture_output=True, text=True, timeout=60, check=True)
        found = json.loads(done.stdout.splitlines()[-1])
        counts = suite.counts()
        assert found["counts"] == {"passed": counts["passed"], "skipped": counts["skipped"],
                                   "failed": counts["failure"] + counts["error"],
                                   "crashed": 0, "errors": 0}, done.stdout
        groups = [name or cases[0].name for name, cases in suite.groups()]
        assert [g for g, _ in found["groups"]] == groups


def test_report_and_check_write_them_from_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(RUNS / "demo-20261130T163215Z-7a9ae54f", run_dir)
    code, out, _ = run_cli(capsys, "report", str(run_dir), "--format", "ktap,nipa",
                           "--link", "https://ci.example/runs/7a9ae54f/",
                           "--nipa-branch", "net-next-2026-11-30--16-00")
    assert code == 0 and out.split() == [str(run_dir / "report.ktap"),
                                         str(run_dir / "report.nipa.json")]
    read_ktap((run_dir / "report.ktap").read_text())
    doc = json.loads((run_dir / "report.nipa.json").read_text())
    assert doc["branch"] == "net-next-2026-11-30--16-00" and doc["executor"] == "napilab-demo"
    assert {t["link"] for t in doc["results"]} == {"https://ci.example/runs/7a9ae54f"}
    base = store_run(tmp_path / "a", {"ping.rtt_avg": {"x": [100.0]}})
    cand = store_run(tmp_path / "b", {"ping.rtt_avg": {"x": [101.0]}})
    ktap_path, nipa_path = tmp_path / "check.ktap", tmp_path / "check.nipa.json"
    code, _, _ = run_cli(capsys, "check", str(cand), "--baseline", str(base), "--ktap",
                         str(ktap_path), "--nipa", str(nipa_path), "--nipa-executor", "rack7")
    assert code == 5
    assert read_ktap(ktap_path.read_text())[-1].outcome == "failure"
    doc = json.loads(nipa_path.read_text())
    assert doc["executor"] == "rack7" and doc["results"][-1] == {
        "test": "gate", "group": "napilab-synth", "result": "fail",
        "link": cand.resolve().as_uri()}


def test_a_run_without_times_has_no_nipa_result() -> None:
    run = load_run(RUNS / "demo-20261130T163215Z-7a9ae54f")
    suite = table_suite(run, table(run))
    with pytest.raises(InputError, match="no start or end time"):
        nipa_run(replace(suite, started=None, ended=None), NipaTarget())
