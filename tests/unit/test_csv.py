"""CSV for spreadsheets and notebooks: `napilab report --format csv` writes the run's
tidy samples table as RUN_DIR/samples.csv (read back, it is samples.parquet), and
`napilab history --format csv` prints a row per run, metric and variant with the
medians `history` shows."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pandas as pd
import pytest

from napilab.harness.store.store import COLUMNS
from napilab.reports.nightly.history import history
from tests.cli import run_cli
from tests.report_runs import NAME, STARTED, neper_run

GOLDEN_RUN = Path(__file__).resolve().parents[2] / "tests" / "golden" / "reports" / "runs" / \
    "demo-20261130T163215Z-7a9ae54f"


def test_report_csv_is_the_samples_table(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN_RUN, run_dir)
    done = run_cli(capsys, "report", str(run_dir), "--format", "csv")
    assert done.code == 0
    assert done.out.strip() == str(run_dir / "samples.csv")
    text = (run_dir / "samples.csv").read_text()
    assert text.splitlines()[0] == ",".join(COLUMNS)
    everything = pd.read_csv(io.StringIO(text), dtype={"run_id": str})
    table = pd.read_parquet(run_dir / "samples.parquet")
    # the stored rows, then the CPU cost rows derived from them (reports.ab.cpu_cost)
    back = everything.iloc[:len(table)]
    derived = everything.iloc[len(table):]
    assert set(derived["source"]) == {"cpu"} and "busy_cores" in set(derived["metric"])
    assert len(back) == len(table) > 1000
    pd.testing.assert_series_equal(back["value"], table["value"], check_dtype=False)
    assert (back["cpu"].isna() == table["cpu"].isna()).all()
    per_cpu = text.splitlines()[1:][int(table["cpu"].notna().to_numpy().argmax())]
    assert ",1," in per_cpu and ",1.0," not in per_cpu  # CPU numbers stay integers


def test_history_csv_rows_are_the_medians(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(2):
        neper_run(tmp_path, run_id=f"r{i}", seed=i, reps=3, started=STARTED + i * 86400.0,
                  latency_samples=50)
    done = run_cli(capsys, "history", str(tmp_path), "--profile", NAME, "--format", "csv")
    assert done.code == 0
    rows = list(csv.DictReader(io.StringIO(done.out)))
    found = history(tmp_path, NAME)
    assert len(rows) == len(found.values) == 2 * len(found.metrics) * len(found.variants)
    for row in rows:
        run = next(r for r in found.runs if r.run_id == row["run_id"])
        median, n = found.values[(run.directory.name, row["metric"], row["variant"])]
        assert float(row["median"]) == median and int(row["n"]) == n == 3
        assert row["profile"] == NAME and row["status"] == run.status
    assert [r["run_id"] for r in rows[::len(rows) - 1]] == ["r0", "r1"]  # oldest first
    assert rows[0]["started_utc"].endswith("Z")
