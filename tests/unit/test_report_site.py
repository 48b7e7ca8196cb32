"""`napilab publish`: the static site of a results directory (index per profile, trend
figures, copied or rendered reports with their raw outputs, Atom feed of the
regressions `napilab check` stored in RUN_DIR/check.json), published twice."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from napilab.reports.nightly.site import publish
from tests.cli import run_cli
from tests.report_runs import NAME, STARTED, neper_run

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "golden" / "reports" / "runs" / "demo-20261130T163215Z-7a9ae54f"
ATOM = "{http://www.w3.org/2005/Atom}"
SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two profiles: the recorded demo run (no report.html), and three synthetic runs,
    the last 30% slower and checked against the one before it (a regression; against the
    series of two nights it is inconclusive: two nights cannot show night-to-night
    noise, tests/unit/test_check.py)."""
    root = tmp_path_factory.mktemp("results")
    shutil.copytree(DEMO, root / "demo" / DEMO.name)
    for i in range(3):
        run = neper_run(root, run_id=f"r{i}", seed=i, reps=8, started=STARTED + i * 86400,
                        slower=1.3 if i == 2 else 1.0, latency_samples=100,
                        description=f"nightly {SCRIPT}")
        if i < 2:  # reports `napilab run` wrote: copied as they are
            (run / "report.html").write_text(f"<!DOCTYPE html><p>report of r{i}</p>\n")
    *_, before, newest = sorted((root / NAME).iterdir())
    # a module-scoped fixture: no capsys, run_cli captures the streams itself
    code, _, _ = run_cli(None, "check", str(newest), "--baseline", str(before))
    assert code == 3
    return root


@pytest.fixture(scope="module")
def site_dir(results: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Published once (rendering a report takes seconds); tests that publish again use
    the same directory, as a nightly job would."""
    site = tmp_path_factory.mktemp("site")
    publish(results, site, base_url="https://lab.example/napilab/")
    return site


def test_check_keeps_its_summary_in_the_run(results: Path) -> None:
    newest = sorted((results / NAME).iterdir())[-1]
    doc = json.loads((newest / "check.json").read_text())
    assert doc["status"] == "regression" and doc["candidate"]["run_id"] == "r2"


def test_site_index_runs_reports_and_raw(results: Path, site_dir: Path) -> None:
    site = publish(results, site_dir, base_url="https://lab.example/napilab/")
    assert [p.name for p in site.profiles] == ["demo", NAME]
    assert site.runs == 4 and site.rendered == 2 and site.regressions == 1
    index = (site_dir / "index.html").read_text()
    assert "Content-Security-Policy" in index and "<script" not in index
    assert f"nightly {SCRIPT}" not in index and "nightly &lt;script&gt;" in index
    synthetic = next(p for p in site.profiles if p.name == NAME)
    assert [r.run.run_id for r in synthetic.runs] == ["r2", "r1", "r0"]  # newest first
    for page in site.profiles:
        for published in page.runs:
            assert f'href="{published.href}"' in index
            report = site_dir / published.href
            assert report.read_text().startswith("<!DOCTYPE html>")
            raw = report.parent / "raw"
            assert raw.is_symlink() and (raw / "001").is_dir()
    trends = [t for p in site.profiles for t in p.trends]
    drawn = [t for t in trends if hasattr(t, "svg")]
    # demo's primary metrics (rtt_avg, received) on its sender host a, its table's
    # hard-IRQ time on receiver b; synthetic on sut
    assert len(drawn) == 3
    assert "regression</td>" in index


def test_feed_is_atom_with_the_regression(site_dir: Path) -> None:
    root = ET.parse(site_dir / "feed.xml").getroot()
    assert root.tag == f"{ATOM}feed"
    assert root.findtext(f"{ATOM}id") == "https://lab.example/napilab/feed.xml"
    entries = root.findall(f"{ATOM}entry")
    assert len(entries) == 1
    entry = entries[0]
    assert entry.findtext(f"{ATOM}title", "").startswith(f"{NAME}: ")
    assert "regression(s) in run r2" in entry.findtext(f"{ATOM}title", "")
    link = entry.find(f"{ATOM}link")
    assert link is not None and link.get("href", "").startswith(
        f"https://lab.example/napilab/runs/{NAME}/")
    summary = entry.findtext(f"{ATOM}summary", "")
    assert "latency p99 (us) (sysctl-busypoll): +" in summary and "threshold 5" in summary


def test_publish_command_again_with_raw_copies(results: Path, site_dir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    copied = site_dir / "runs" / NAME
    reports = {p: p.stat().st_mtime_ns for p in copied.glob("*/report.html")}
    code, out, _ = run_cli(capsys, "publish", str(results), str(site_dir), "--raw", "copy")
    assert code == 0
    assert "published 4 run(s) of 2 profile(s)" in out and "(1 regression(s))" in out
    assert {p: p.stat().st_mtime_ns for p in reports} == reports  # nothing copied again
    for report in reports:
        raw = report.parent / "raw"
        assert raw.is_dir() and not raw.is_symlink() and (raw / "001" / "sut").is_dir()


def test_site_paths_come_from_directories_not_manifests(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = neper_run(results, reps=1, latency_samples=20, run_id="evil")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["profile"]["name"] = "../../outside"
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "report.html").write_text("<!DOCTYPE html>\n")
    site = publish(results, tmp_path / "site", raw="none")
    assert site.profiles[0].name == "../../outside"  # shown as text on the index
    assert site.profiles[0].runs[0].href == f"runs/{NAME}/{run.name}/report.html"
    assert not (tmp_path / "outside").exists()
