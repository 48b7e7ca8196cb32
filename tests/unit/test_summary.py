"""summary.json (harness.store.summary): the numbers `history` shows for a run, without
its samples file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from napilab.harness.errors import InputError
from napilab.harness.records import codec
from napilab.harness.store.summary import (
    SUMMARY_FILE,
    build_summary,
    parse_summary,
    read_summary,
    write_summary,
)
from napilab.reports.nightly.history import history

GATE = Path(__file__).resolve().parents[1] / "golden" / "gate_runs" / "nightly"


def test_the_summary_holds_the_medians_history_computes_from_the_samples() -> None:
    found = history(GATE, "demo")
    for run in found.runs:
        summary = build_summary(run.directory)
        assert summary.run == run.directory.name and summary.profile == "demo"
        assert summary.status == run.status and summary.kernels() == run.kernels
        assert summary.keys == [k for k, _ in found.metrics]
        for metric in summary.metrics:
            key = f"{metric.source}.{metric.metric}"
            for variant, values in metric.variants.items():
                median, n = found.values[(run.directory.name, key, variant)]
                assert (values.median, values.n) == (median, n)
                assert len(values.values) == n


def test_written_read_and_small(tmp_path: Path) -> None:
    run = sorted(GATE.glob("demo/*/manifest.json"))[0].parent
    copy = tmp_path / "demo" / run.name
    shutil.copytree(run, copy)
    assert read_summary(copy) is None
    path = write_summary(copy)
    assert path == copy / SUMMARY_FILE and path.stat().st_size < 4096
    again = read_summary(copy)
    assert again is not None and codec.encode(again) == codec.encode(build_summary(copy))
    assert again.replica is None and again.hosts["a"].kernel


def test_a_damaged_summary_is_one_clear_error() -> None:
    with pytest.raises(InputError, match=r"x/summary\.json: not a napilab run summary"):
        parse_summary(b'{"profile": "demo"}', "x/summary.json")
    with pytest.raises(InputError, match=r"x/summary\.json"):
        parse_summary(b'{"schema_version": 1, "trials": "many"}', "x/summary.json")
