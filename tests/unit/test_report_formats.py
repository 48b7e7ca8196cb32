"""`napilab report --format text|md|json|junit` of the recorded runs under
tests/golden/reports/runs/ (a real demo run from the netns testbed, and the synthetic
seed-000 run of tests/report_runs.py) against golden files beside them
(tests/golden/reports/<run>.txt and .md).

After an intended change of the output, regenerate the goldens with
    .venv/bin/python -m tests.unit.test_report_formats
and read the diff: it is exactly what a reader of a cover letter or a pull request sees
change."""

from __future__ import annotations

import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from napilab.reports.ab.compare import load_run, table
from napilab.reports.formats.render import FILES, render, report_files
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "reports"
RUNS = sorted(p for p in (GOLDEN / "runs").iterdir() if p.is_dir())
SUFFIX = {"text": ".txt", "md": ".md"}


def expected(run: Path, fmt: str) -> Path:
    return GOLDEN / (run.name + SUFFIX[fmt])


@pytest.mark.parametrize("fmt", ["text", "md"])
@pytest.mark.parametrize("run_dir", RUNS, ids=[r.name for r in RUNS])
def test_matches_golden(run_dir: Path, fmt: str) -> None:
    out = render(load_run(run_dir), fmt)
    assert out == expected(run_dir, fmt).read_text()


@pytest.mark.parametrize("run_dir", RUNS, ids=[r.name for r in RUNS])
def test_text_is_a_cover_letter_table(run_dir: Path) -> None:
    out = render(load_run(run_dir), "text")
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "\t" not in out


def test_the_demo_text_is_the_readme_session() -> None:
    """README.md shows this run's table as `napilab demo` printed it."""
    out = render(load_run(GOLDEN / "runs" / "demo-20261130T163215Z-7a9ae54f"), "text")
    readme = (ROOT / "README.md").read_text()
    table_lines = out.split("\n\n")[0].splitlines()
    # the values table and the statistics under it, as the demo prints them now
    assert all(line in readme for line in out.splitlines())
    assert "  Echo replies received     717,309      27,656" in table_lines


def test_absent_kprobe_cells_say_absent_in_every_format() -> None:
    run = load_run(GOLDEN / "runs" / "synthetic-seed-000-5e1f0000")
    tab = table(run)
    row = next(line for line in render(run, "text", tab).splitlines()
               if line.startswith("  napi_threaded_poll_loop()"))
    assert row.split()[1:] == ["absent", "absent", "absent"]  # three variants, one block
    assert "| napi\\_threaded\\_poll\\_loop() | absent | absent | absent |" in \
        render(run, "md", tab)
    doc = json.loads(render(run, "json", tab))
    line = next(ln for ln in doc["table"]["lines"] if ln["metric"] == "napi_threaded_poll_loop")
    assert line["absent"] == list(run.variants)
    assert doc["absent"] == {v: ["napi_threaded_poll_loop"] for v in run.variants}


def test_markdown_has_no_html_and_flags_the_mismatch() -> None:
    out = render(load_run(GOLDEN / "runs" / "synthetic-seed-000-5e1f0000"), "md")
    # "<" only where it starts no HTML (CommonMark: a tag or autolink starts with a
    # letter, "/", "!" or "?"): p<0.001
    assert not re.search(r"(?<!\\)<[A-Za-z/!?]", out)
    assert "| \\<" not in out and "p<0.001" in out
    assert "**1 setting(s) did not read back as requested.**" in out
    assert "| threaded-busypoll-defer | sut | irq\\_affinity eth0/irq 45 | 0-3 | 2 | 2 / 0-3 " \
           "| **mismatch** |" in out
    assert "- **confounder**: irqbalance runs on sut" in out


def test_json_is_strict_and_complete() -> None:
    run = load_run(GOLDEN / "runs" / "synthetic-seed-000-5e1f0000")
    text = render(run, "json")
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert doc["schema"] == "napilab.report/1"
    assert doc["status"] == {"status": "complete", "total": 24, "ok": 24, "failed": 0,
                             "incomplete": False}
    # primary: latency_p99 and throughput (the run's metrics:), the rest exploratory (the
    # 20 of the CPU cost lines, 10 a compared variant, among them)
    assert doc["verdicts"]["counts"] == {"better": 4, "exploratory": 44}
    assert {s["state"] for s in doc["settings"]} == {"ok", "absent", "mismatch"}
    client = next(c for c in doc["commands"] if c["side"] == "client")
    assert client["shell"].startswith("env LC_ALL=C timeout -k 5 40 taskset -c 3 tcp_rr")
    assert len(doc["table"]["lines"]) == len(table(run).lines)


def test_junit_has_one_case_per_line_and_compared_variant() -> None:
    run = load_run(GOLDEN / "runs" / "synthetic-seed-000-5e1f0000")
    tab = table(run)
    root = ET.fromstring(render(run, "junit", tab))
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(tab.lines) * len(tab.compared)
    assert root.get("tests") == str(len(cases)) and root.get("failures") == "0"
    skipped = [c for c in cases if c.find("skipped") is not None]
    # the absent kprobe's line (2), and the exploratory rows (44): never a pass
    assert root.get("skipped") == str(len(skipped)) == "46"
    names = {c.get("name") for c in cases}
    assert "neper.latency_p99[sut]" in names and "pooled.latency_p99.9" in names


def test_report_command_writes_each_format_and_prints_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN / "runs" / "demo-20261130T163215Z-7a9ae54f", run_dir)
    code, out, _ = run_cli(capsys, "report", str(run_dir), "--format", "html,text,md,json,junit")
    assert code == 0
    for fmt in ("html", "md", "json", "junit"):
        assert str(run_dir / FILES[fmt]) in out
        assert (run_dir / FILES[fmt]).stat().st_size > 0
    assert not (run_dir / "report.txt").exists()  # text goes to stdout, as always
    assert out.endswith(expected(GOLDEN / "runs" / "demo-20261130T163215Z-7a9ae54f",
                                 "text").read_text())
    bad = run_cli(capsys, "report", str(run_dir), "--format", "html,pdf")
    assert bad.code == 2
    written = report_files(run_dir, ["text"], print_text=False)[0]
    assert written == [run_dir / "report.txt"]


def _update() -> None:
    for run_dir in RUNS:
        run = load_run(run_dir)
        tab = table(run)
        for fmt in SUFFIX:
            expected(run_dir, fmt).write_text(render(run, fmt, tab))
            print(expected(run_dir, fmt))


if __name__ == "__main__":
    _update()
    sys.exit(0)


def test_one_p_rule_in_junit_exploratory_rows_show_no_p() -> None:
    """The tables show no p for an exploratory row and report.json says adjust "none":
    the JUnit message carries no "(Holm)" p for it either; a primary row's does."""
    out = render(load_run(GOLDEN / "runs" / "synthetic-seed-000-5e1f0000"), "junit")
    root = ET.fromstring(out.split("\n", 1)[1])
    messages = [el.get("message") or "" for el in root.iter() if el.get("message")]
    messages += [el.text or "" for el in root.iter("system-out")]
    exploratory = [m for m in messages if m.startswith("exploratory:")]
    primary = [m for m in messages if m.startswith(("better:", "worse:", "~:"))]
    assert exploratory and all("Holm" not in m and "p=" not in m and "p<" not in m
                               for m in exploratory)
    assert primary and all("(Holm)" in m for m in primary)
