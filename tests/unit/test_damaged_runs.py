"""A damaged run directory is a one-line error naming the file, never a traceback or a
silent all-`-` report (issue 21, item 4): a truncated samples file, a missing one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from napilab.harness.cli.main import main
from tests.synthetic_runs import lognormal, store_run


def run_dir(tmp_path: Path) -> Path:
    return store_run(tmp_path / "results", {"ping.rtt_avg": {"a": lognormal(1, 3, 100),
                                                             "b": lognormal(2, 3, 90)}})


def report(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(["report", str(run), "--format", "text"])
    return int(exc.value.code or 0), capsys.readouterr().err


def test_a_truncated_samples_file_is_an_error_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_dir(tmp_path)
    samples = run / "samples.parquet"
    samples.write_bytes(samples.read_bytes()[:100])
    code, err = report(run, capsys)
    assert code == 1 and str(samples) in err and "cannot read" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_missing_samples_of_completed_trials_are_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_dir(tmp_path)
    (run / "samples.parquet").unlink()
    shutil.rmtree(run / "samples", ignore_errors=True)
    code, err = report(run, capsys)
    assert code == 1 and "6 trial(s) completed but no samples are stored" in err


def test_history_says_a_run_whose_manifest_is_damaged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs, one manifest truncated: `history` said "1 run(s)" and nothing more; now
    the damaged run is named, with why, in the text, the JSON and (for CSV) on stderr;
    `publish` says it too."""
    first, second = run_dir(tmp_path), run_dir(tmp_path)
    manifest = second / "manifest.json"
    manifest.write_text(manifest.read_text()[:50])
    results = str(first.parent.parent)
    profile = first.parent.name
    main_ok = ["history", results, "--profile", profile]
    with pytest.raises(SystemExit) as exc:
        main(main_ok)
    out = capsys.readouterr().out
    assert exc.value.code in (0, None)
    assert "1 run(s)" in out and "left out, damaged:" in out and second.name in out
    assert "manifest.json" in " ".join(out.split())
    with pytest.raises(SystemExit):
        main([*main_ok, "--format", "json"])
    captured = capsys.readouterr()
    assert f'"dir": "{second}"' in captured.out and f"left out, damaged: {second}" in captured.err
    with pytest.raises(SystemExit):
        main(["publish", results, str(tmp_path / "site")])
    captured = capsys.readouterr()
    assert "published 1 run(s)" in captured.out and f"left out, damaged: {second}" in captured.err
