"""The report of a run over replicas (reports.fleet): each primary metric's change pooled
over the replicas beside each replica's own, in text, Markdown, JSON (a published record)
and HTML, each replica's own reports in its directory, and a failed replica named and
left out of the pools. The replicas' runs are the report tests' synthetic neper runs
(tests/report_runs.py), each the slower by its own factor."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from napilab.harness.records import codec
from napilab.harness.store.manifest import ReplicaRecord
from napilab.harness.store.store import RunStore, load_manifest
from napilab.reports.fleet.record import FleetReportRecord
from napilab.reports.fleet.table import fleet_table
from napilab.reports.formats.render import report_files
from tests.report_runs import neper_run

HOSTILE = "<script>alert('replica')</script>"


def fleet_run(tmp: Path, slower: dict[str, float], failed: str | None = None) -> Path:
    """RUN/ with replicas/NAME/ for each of `slower` (the variant's latency factor on that
    replica: a real change where every replica agrees), the run's manifest listing them;
    `failed`: a replica whose run failed before its first trial (no directory)."""
    run = tmp / "fleet" / "20261205T120000Z-f1ee7000"
    records = []
    for i, (name, factor) in enumerate(slower.items()):
        built = neper_run(tmp / "build" / name, variants=("base", "busypoll"), reps=5,
                          run_id=f"{i + 1}" * 8, seed=i, latency_samples=400)
        _slow(built, factor)
        target = run / "replicas" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(built, target)
        store = RunStore.open(target)
        store.manifest.replica = name
        store.save_manifest()
        records.append(ReplicaRecord(name, {"sut": f"{name}-sut", "peer": f"{name}-peer"},
                                     f"replicas/{name}", "complete", 0))
    if failed:
        records.append(ReplicaRecord(failed, {"sut": "x", "peer": "y"}, f"replicas/{failed}",
                                     "failed", 1, f"exit code 1; {HOSTILE}"))
    top = load_manifest(run / "replicas" / next(iter(slower)))
    top.replica, top.replicas, top.trials = None, records, []
    top.status = "partial" if failed else "complete"
    RunStore(run, top).save_manifest()
    return run


def _slow(run: Path, factor: float) -> None:
    """The busypoll variant's latencies (not its throughput) times `factor`."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    for path in [run / "samples.parquet", *sorted((run / "samples").glob("*.parquet"))]:
        if not path.exists():
            continue
        table = pq.read_table(path)
        scale = pc.if_else(pc.and_(pc.equal(table["variant"], "busypoll"),
                                   pc.starts_with(table["metric"], "latency")),
                           factor, 1.0)
        table = table.set_column(table.schema.get_field_index("value"), "value",
                                 pc.multiply(table["value"], scale))
        pq.write_table(table, path)
    assert pa is not None


def test_the_pooled_table_beside_each_replica(tmp_path: Path) -> None:
    run = fleet_run(tmp_path, {"pair1": 1.30, "pair2": 1.30, "pair3": 1.30})
    written, text = report_files(run, ["text", "md", "json", "html"])
    assert text is not None
    assert {p.name for p in written} >= {"report.md", "report.json", "report.html"}
    for name in ("pair1", "pair2", "pair3"):
        assert (run / "replicas" / name / "report.html").exists()  # each replica's own
    fleet = fleet_table(run)
    p99 = next(line for line in fleet.lines if line.label.startswith("latency p99"))
    assert p99.verdict == "worse" and p99.worse == 3, text
    assert p99.pooled is not None
    low, high = p99.pooled.ci
    assert 0.2 < p99.pooled.change < 0.4 and low <= p99.pooled.change <= high
    for change in p99.replicas:
        assert change.ci is not None and change.ci[0] <= (change.change or 0) <= change.ci[1]
    assert "worse 3/3" in text and "pair1" in text and "pooled" in text
    record = codec.parse((run / "report.json").read_bytes(), FleetReportRecord, "report.json")
    assert [r.name for r in record.replicas] == ["pair1", "pair2", "pair3"]
    line = next(x for x in record.lines if x.label == p99.label)
    assert line.pooled is not None and line.pooled.change == pytest.approx(p99.pooled.change)
    assert "| latency p99" in (run / "report.md").read_text()


def test_a_failed_replica_is_named_and_left_out(tmp_path: Path) -> None:
    run = fleet_run(tmp_path, {"pair1": 1.3, "pair2": 1.3}, failed="pair3")
    _, text = report_files(run, ["text", "html"])
    assert text is not None
    assert "replica pair3 is not pooled: failed: exit code 1" in text
    assert all(len(line.replicas) == 2 for line in fleet_table(run).lines)
    page = (run / "report.html").read_text()
    assert HOSTILE not in page and "&lt;script&gt;" in page


def test_replicas_that_disagree_are_not_a_verdict(tmp_path: Path) -> None:
    """One replica 40% slower, one 40% faster, one the same: the pooled change cannot
    say better or worse."""
    run = fleet_run(tmp_path, {"up": 1.4, "down": 0.6, "same": 1.0})
    p99 = next(line for line in fleet_table(run).lines if line.label.startswith("latency p99"))
    assert p99.verdict == "inconclusive" and p99.better == 1 and p99.worse == 1
