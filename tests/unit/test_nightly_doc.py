"""docs/nightly.md's examples, run as written: the napilab-nightly script and the CI
pipeline's steps against stored runs of a nightly profile (a first night, a night like
the last, a regressed night, a night too short to judge: exit 0, 0, 3, 5, each with
its JUnit and the published site), the run step's extraction of the run directory from
the real `--json` progress events, the cron line's shape, and the systemd units through
`systemd-analyze verify`. tests/integration/test_nightly_doc.py runs the script end to
end, `napilab run` included, on the SSH testbed."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from napilab.harness.engine.progress import JsonProgress
from napilab.reports.ab.compare import load_run
from napilab.reports.formats.render import html
from tests.cli import NAPILAB
from tests.synthetic_runs import lognormal, store_run

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "nightly.md"
POLICY = {"rtt_avg": {"direction": "lower", "max_regression": "10%"}}
DAY = 86400.0


def blocks(lang: str) -> list[str]:
    """The fenced blocks of docs/nightly.md in `lang` ("" for a bare fence)."""
    found: list[tuple[str, list[str]]] = []
    inside = False
    for line in DOC.read_text().splitlines(keepends=True):
        if line.startswith("```"):
            if not inside:
                found.append((line[3:].strip(), []))
            inside = not inside
        elif inside:
            found[-1][1].append(line)
    return ["".join(body) for kind, body in found if kind == lang]


def script(tmp_path: Path) -> Path:
    (text,) = [b for b in blocks("sh") if b.startswith("#!/bin/sh\n# napilab-nightly")]
    path = tmp_path / "napilab-nightly"
    path.write_text(text)
    path.chmod(0o755)
    return path


def night(results: Path, index: int, level: float = 100.0, reps: int = 5) -> Path:
    values = {"ping.rtt_avg": {"off": lognormal(2 * index, reps, level, 0.02),
                               "on": lognormal(2 * index + 1, reps, level * 0.9, 0.02)}}
    run_dir = store_run(results, values, profile="nightly", policies=POLICY,
                        started=1_790_000_000.0 + index * DAY)
    # as `napilab run --format html` leaves it (publish renders a run without one)
    (run_dir / "report.html").write_text(html(load_run(run_dir)))
    return run_dir


def env(results: Path, site: Path) -> dict[str, str]:
    return {**os.environ, "RESULTS": str(results), "SITE": str(site), "NAPILAB": NAPILAB,
            "PROFILE": "/nonexistent/profile.yaml", "INVENTORY": "/nonexistent/lab.yaml",
            "PATH": f"{Path(NAPILAB).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def failures(junit: Path) -> tuple[int, int]:
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    return (sum(1 for c in cases if c.find("failure") is not None),
            sum(1 for c in cases if c.find("skipped") is not None))


def test_the_script_gates_each_night_and_publishes(tmp_path: Path) -> None:
    nightly = script(tmp_path)
    results, site = tmp_path / "results", tmp_path / "site"
    outcomes = []
    for index, (level, reps) in enumerate([(100.0, 5), (101.0, 5), (150.0, 5), (100.0, 1)]):
        run_dir = night(results, index, level, reps)
        proc = subprocess.run(["sh", str(nightly), str(run_dir)], env=env(results, site),
                              capture_output=True, text=True, timeout=300, check=False)
        print(f"$ napilab-nightly {run_dir.name} -> exit {proc.returncode}\n{proc.stdout}"
              f"{proc.stderr}")
        outcomes.append((proc.returncode, run_dir, proc.stdout + proc.stderr))
    (first, _, said), (same, same_dir, _), (worse, worse_dir, alarm), (short, short_dir, why) \
        = outcomes
    assert first == 0 and "first night of nightly" in said
    assert same == 0 and failures(same_dir / "check.junit.xml") == (0, 0)
    assert worse == 3 and "REGRESSION in" in alarm
    assert failures(worse_dir / "check.junit.xml") == (2, 0)
    assert short == 5 and "INCONCLUSIVE" in why
    assert failures(short_dir / "check.junit.xml")[1] == 2
    # the site has every night, and its feed the regression
    assert (site / "index.html").is_file()
    feed = (site / "feed.xml").read_text()
    assert worse_dir.name in feed and same_dir.name not in feed
    assert len(list((site / "runs" / "nightly").iterdir())) == 4


def test_the_script_says_when_run_stored_nothing(tmp_path: Path) -> None:
    """Without RUN_DIR it runs the profile: a bad profile exits 2 and stores nothing."""
    proc = subprocess.run(["sh", str(script(tmp_path))],
                          env=env(tmp_path / "results", tmp_path / "site"),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "napilab run stored nothing (exit 2)" in proc.stderr


def test_the_run_step_finds_the_run_directory_in_the_json_events(tmp_path: Path) -> None:
    stream = io.StringIO()
    progress = JsonProgress(stream)
    directory = "/srv/napilab/results/nightly/20261201T023000Z-0a1b2c3d"
    progress.run_start("0a1b2c3d", directory, 20, 12.0)
    progress.trial_start(1, "off", 1)
    progress.note(f"wrote {directory}/report.html")
    (tmp_path / "events.jsonl").write_text(stream.getvalue())
    pipeline = yaml.safe_load(blocks("yaml")[0])
    extract = pipeline["run"]["script"][1]
    (nightly_line,) = [line for line in blocks("sh")[0].splitlines() if "sed -n" in line]
    found = re.search(r"run_dir=\$\((sed -n .*)\)$", nightly_line)
    assert found is not None
    for command in (extract, found[1].replace('"$events"', "events.jsonl")):
        proc = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True,
                              text=True, check=True)
        shown = (tmp_path / "run_dir.txt").read_text() if "run_dir.txt" in command \
            else proc.stdout
        assert shown.strip() == directory, command


def test_the_ci_pipeline_steps_exit_0_3_5(tmp_path: Path) -> None:
    pipeline = yaml.safe_load(blocks("yaml")[0])
    assert pipeline["stages"] == ["run", "check", "publish"]
    assert pipeline["check"]["artifacts"]["reports"]["junit"] == "check.junit.xml"
    assert pipeline["publish"]["when"] == "always"
    results, site = tmp_path / "results", tmp_path / "site"
    night(results, 0)
    codes = []
    for index, (level, reps) in enumerate([(101.0, 5), (150.0, 5), (100.0, 1)], start=1):
        job = tmp_path / f"job{index}"
        job.mkdir()
        (job / "run_dir.txt").write_text(f"{night(results, index, level, reps)}\n")
        variables = {**env(results, site), **{k: v for k, v in pipeline["variables"].items()
                                               if k not in ("RESULTS", "SITE")}}
        (check_line,) = pipeline["check"]["script"]
        proc = subprocess.run(["sh", "-c", check_line], cwd=job, env=variables,
                              capture_output=True, text=True, timeout=120, check=False)
        codes.append(proc.returncode)
        assert (job / "check.json").is_file() and (job / "check.junit.xml").is_file()
    assert codes == [0, 3, 5]
    assert failures(tmp_path / "job2" / "check.junit.xml") == (2, 0)
    assert failures(tmp_path / "job3" / "check.junit.xml")[1] == 2
    (publish_line,) = pipeline["publish"]["script"]
    proc = subprocess.run(["sh", "-c", publish_line.replace("napilab", NAPILAB, 1)],
                          env=env(results, site), capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "published 4 run(s) of 1 profile(s)" in proc.stdout
    assert "(1 regression(s))" in proc.stdout


def test_the_cron_line_starts_the_script_under_flock() -> None:
    (cron,) = [b for b in blocks("") if b.startswith("PROFILE=")]
    assignments = [line for line in cron.splitlines() if re.fullmatch(r"[A-Z]+=\S+", line)]
    assert {a.split("=")[0] for a in assignments} >= {"PROFILE", "INVENTORY", "RESULTS",
                                                      "SITE", "PATH"}
    (entry,) = [line for line in cron.splitlines() if line and line[0].isdigit()]
    minute, hour, dom, month, dow, user, *command = entry.split()
    assert (minute, hour, dom, month, dow, user) == ("30", "2", "*", "*", "*", "root")
    assert command[:3] == ["flock", "-n", "/run/napilab-nightly.lock"]
    assert command[3] == "/usr/local/bin/napilab-nightly"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_systemd_units_verify(tmp_path: Path) -> None:
    service, timer = blocks("ini")
    nightly = script(tmp_path)
    # the one change: the script where this test put it, not /usr/local/bin
    (tmp_path / "napilab-nightly.service").write_text(
        service.replace("/usr/local/bin/napilab-nightly", str(nightly)))
    (tmp_path / "napilab-nightly.timer").write_text(timer)
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no",
                           str(tmp_path / "napilab-nightly.service"),
                           str(tmp_path / "napilab-nightly.timer")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr
    assert "ExecStart=/usr/local/bin/napilab-nightly" in service
    assert "Type=oneshot" in service and "OnCalendar=*-*-* 02:30:00" in timer
