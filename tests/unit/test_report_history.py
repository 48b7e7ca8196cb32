"""`napilab history`: the trend across stored runs of one profile, from one DuckDB query
over their sample files (samples/<trial>.parquet, or one samples.parquet for runs of
older napilab versions), checked against the A/B table's medians of the same runs; runs
without samples, half-written run directories, an older samples layout and schema."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from napilab.harness.errors import InputError
from napilab.reports.ab.compare import load_run, table
from napilab.reports.nightly.history import (
    default_metrics,
    find_runs,
    history,
    history_doc,
    history_text,
)
from tests.cli import run_cli
from tests.report_runs import NAME, STARTED, neper_run

DAY = 86400.0


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    for i, (kernel, slower) in enumerate([("6.18.0", 1.0), ("6.18.0", 1.0), ("6.19.0", 1.3)]):
        neper_run(root, run_id=f"r{i}", seed=i, reps=3, started=STARTED + i * DAY,
                  kernel=kernel, slower=slower, latency_samples=100)
    return root


def test_history_is_the_tables_medians_per_run(results: Path) -> None:
    found = history(results, NAME)
    # the primary metrics first (the profile's `metrics:` names latency_p99 and
    # throughput), then the table's rows
    assert [k for k, _ in found.metrics] == ["neper.latency_p99", "neper.throughput",
                                             "neper.latency_p50", "neper.latency_p99.9"]
    assert dict(found.metrics)["neper.throughput"] == "trans/s"
    assert [r.run_id for r in found.runs] == ["r0", "r1", "r2"]  # oldest first
    for run in found.runs:
        tab = table(load_run(run.directory))
        line = next(ln for ln in tab.lines if ln.metric == "latency_p99")
        for variant in found.variants:
            median, n = found.values[(run.directory.name, "neper.latency_p99", variant)]
            assert median == pytest.approx(line.cells[variant].median)
            assert n == 3
    slow = found.values[(found.runs[2].directory.name, "neper.latency_p50", "sysctl-busypoll")]
    fast = found.values[(found.runs[1].directory.name, "neper.latency_p50", "sysctl-busypoll")]
    assert slow[0] / fast[0] == pytest.approx(1.3, rel=0.05)


def test_metrics_by_name_or_source_and_host(results: Path) -> None:
    found = history(results, NAME, ["latency_p99", "proc_stat.softirq"], host="sut")
    assert [k for k, _ in found.metrics] == ["neper.latency_p99", "proc_stat.softirq"]
    assert found.runs[0].kernel("sut") == "6.18.0" and found.runs[2].kernel("sut") == "6.19.0"
    with pytest.raises(InputError, match="on host peer"):
        history(results, NAME, ["latency_p99"], host="peer")
    with pytest.raises(InputError, match="no run of profile 'other'"):
        history(results, "other")


def test_text_fits_80_columns_newest_first(results: Path) -> None:
    text = history_text(history(results, NAME))
    assert max(len(line) for line in text.splitlines()) <= 80
    rows = [line for line in text.splitlines() if line.startswith("  2026-")]
    assert rows[0].split()[2] == "r2" and rows[2].split()[2] == "r0"
    assert "6.19.0" in rows[0]
    doc = history_doc(history(results, NAME))
    assert [r["run_id"] for r in doc["runs"]] == ["r2", "r1", "r0"]
    assert set(doc["runs"][0]["medians"]["neper.latency_p99"]) == set(doc["variants"])


def test_runs_without_samples_or_manifest(results: Path, tmp_path: Path) -> None:
    root = tmp_path / "results"
    shutil.copytree(results, root)
    broken = root / NAME / "20261201T000000Z-halfway"
    broken.mkdir()
    (broken / "manifest.json").write_text("{")
    failed = neper_run(root, run_id="r3", reps=1, started=STARTED + 5 * DAY,
                       failed={1: "x", 2: "y", 3: "z"})
    assert not (failed / "samples").exists() and not (failed / "samples.parquet").exists()
    # An older napilab wrote no `unit` column: union_by_name reads it as null.
    oldest, second = sorted((root / NAME).iterdir())[:2]
    pq.write_table(pq.read_table(oldest / "samples.parquet").drop_columns(["unit"]),
                   oldest / "samples.parquet")
    # A run stopped while its per-trial files were merged has both: each trial counts
    # once, from its own file.
    merged = pq.read_table(second / "samples.parquet")
    (second / "samples").mkdir()
    for trial in set(merged["trial"].to_pylist()):
        pq.write_table(merged.filter(pc.equal(merged["trial"], trial)),
                       second / "samples" / f"{trial:03d}.parquet")
    found = history(root, NAME)
    assert found.values[(second.name, "neper.latency_p99", "sysctl-busypoll")][1] == 3
    assert found.values[(oldest.name, "neper.latency_p99", "sysctl-busypoll")][1] == 3
    assert [r.run_id for r in found.runs] == ["r0", "r1", "r2", "r3"]
    text = history_text(found)
    assert re.search(r"  r3 +partial ", text)
    assert "(nan)" not in text and "neper.latency_p50 (us)" in text
    assert len([r for r in find_runs(root) if r.profile == NAME]) == 4


def test_default_metrics_without_a_report_table(tmp_path: Path) -> None:
    run_dir = neper_run(tmp_path, reps=1, latency_samples=50)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    del manifest["profile"]["document"]["report"]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert default_metrics(find_runs(tmp_path)) == ["neper.latency_p99", "neper.throughput"]


def test_history_command(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "history", str(results), "--profile", NAME, "--metric",
                           "latency_p99", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["profile"] == NAME and len(doc["runs"]) == 3
    bad = run_cli(capsys, "history", str(results), "--profile", NAME, "--metric", "nope")
    assert bad.code == 2
    assert "--metric nope" in bad.err


def test_change_points_mark_a_level_shift_in_text_json_and_trend(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[
                                                                     str]) -> None:
    """16 nights, rtt_avg +20% from night 10 on: one change point, at night 10."""
    from napilab.reports.nightly.trends import trend
    from tests.synthetic_runs import lognormal, store_run

    results = tmp_path / "results"
    for night in range(16):
        level = 100 * (1.2 if night >= 10 else 1.0)
        store_run(results, {"ping.rtt_avg": {"x": lognormal(night, 5, level, 0.01)}},
                  profile="nightly", started=1000.0 + 86400 * night)
    found = history(results, "nightly", ["ping.rtt_avg"])
    shifts = found.change_points()
    ((run, point),) = shifts["ping.rtt_avg"]["x"]
    assert run is found.runs[10] and point.change == pytest.approx(0.2, abs=0.03)
    assert "change point: x from run" in history_text(found)
    doc = history_doc(found)
    assert [c["run_id"] for c in doc["change_points"]] == [run.run_id]
    code, out, _ = run_cli(capsys, "history", str(results), "--profile", "nightly", "--metric",
                           "ping.rtt_avg", "--format", "json")
    assert code in (0, None)
    listed = json.loads(out)["change_points"]
    assert [(c["metric"], c["variant"]) for c in listed] == [("ping.rtt_avg", "x")]
    plot = trend("nightly", "a", found.runs, ["ping.rtt_avg"])
    assert "change point" in plot.note  # type: ignore[union-attr]


def test_variants_side_by_side_in_80_columns(results: Path) -> None:
    """Seed 000's three variants share one table per metric (they were a block each):
    the runs' status and kernel are said once above the tables, not in every row."""
    found = history(results, NAME, ["latency_p99"])
    out = history_text(found)
    assert max(len(line) for line in out.splitlines()) <= 80
    heading, metric = out.split("\n\n")[:2]
    assert heading.splitlines()[1].split() == ["time", "run", "status", "kernel"]
    assert "6.19.0,6.18.0-synthetic" in heading.splitlines()[2]  # the newest run first
    lines = metric.splitlines()
    assert lines[0] == "neper.latency_p99 (us)"
    assert lines[1].split() == ["sysctl-", "threaded-", "threaded-"]
    assert lines[2].split() == ["time", "run", "busypoll", "busypoll", "busypoll-defer"]
    rows = lines[3:]
    assert [row.split()[2] for row in rows] == ["r2", "r1", "r0"]  # newest first
    assert all(len(row.split()) == 3 + 3 for row in rows)  # time is two words


def test_many_variants_split_into_equal_blocks(tmp_path: Path) -> None:
    from tests.synthetic_runs import lognormal, store_run

    variants = [f"variant-number-{i:02d}" for i in range(9)]
    store_run(tmp_path, {"ping.rtt_avg": {v: lognormal(i, 3, 100 + i) for i, v in
                                          enumerate(variants)}}, profile="wide")
    out = history_text(history(tmp_path, "wide", ["ping.rtt_avg"]))
    assert max(len(line) for line in out.splitlines()) <= 80
    blocks = out.split("\n\n")[1:]
    assert len(blocks) == 2
    shown = [line for b in blocks for line in b.splitlines() if "number-" in line]
    assert sum(line.count("number-") for line in shown) == 9
    assert "every run complete, kernel 6.18.0" in out


def test_unknown_profile_lists_the_known_ones(results: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "history", str(results), "--profile", "dem")
    assert code == 2
    assert f"no run of profile 'dem' under {results}; known profiles: {NAME}" in err


def test_a_one_run_trend_spans_hours_not_years(tmp_path: Path) -> None:
    """matplotlib widens a single date to +-2 years (2025-2029 on the axis)."""
    import datetime as dt

    from napilab.reports.nightly.trends import MIN_SPAN, time_span, trend
    from tests.synthetic_runs import lognormal, store_run

    store_run(tmp_path, {"ping.rtt_avg": {"x": lognormal(1, 5, 100)}}, profile="once",
              started=STARTED)
    found = history(tmp_path, "once", ["ping.rtt_avg"])
    plot = trend("once", "a", found.runs, ["ping.rtt_avg"])
    ticks = re.findall(r"<text[^>]*>([^<]*)</text>", plot.svg)  # type: ignore[union-attr]
    years = {t for t in ticks if re.fullmatch(r"20\d\d", t.strip())}
    assert years <= {"2026"}, ticks
    assert "ping.rtt_avg (us)" in ticks
    moment = dt.datetime.fromtimestamp(STARTED, dt.UTC)
    low, high = time_span([moment])
    assert high - low == MIN_SPAN and low < moment < high
    week = [moment + dt.timedelta(days=d) for d in range(8)]
    low, high = time_span(week)
    assert (high - low) == dt.timedelta(days=7) * 1.1
