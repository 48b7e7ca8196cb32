"""A damaged run directory is a one-line error naming the file, never a traceback or a
silent all-`-` report (issue 21, item 4): a truncated samples file, a missing one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.synthetic_runs import lognormal, store_run


def run_dir(tmp_path: Path) -> Path:
    return store_run(tmp_path / "results", {"ping.rtt_avg": {"a": lognormal(1, 3, 100),
                                                             "b": lognormal(2, 3, 90)}})


def report(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, _, err = run_cli(capsys, "report", str(run), "--format", "text")
    return code, err


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
    code, out, _ = run_cli(capsys, *main_ok)
    assert code in (0, None)
    assert "1 run(s)" in out and "left out, damaged:" in out and second.name in out
    assert "manifest.json" in " ".join(out.split())
    captured = run_cli(capsys, *main_ok, "--format", "json")
    assert f'"dir": "{second}"' in captured.out and f"left out, damaged: {second}" in captured.err
    captured = run_cli(capsys, "publish", results, str(tmp_path / "site"))
    assert "published 1 run(s)" in captured.out and f"left out, damaged: {second}" in captured.err


def history_and_publish(results: Path, profile: str, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, str]:
    """(history's exit code, its stdout, its stderr, publish's stderr)."""
    history = run_cli(capsys, "history", str(results), "--profile", profile)
    published = run_cli(capsys, "publish", str(results), str(tmp_path / "site"))
    return history.code, history.out, history.err, published.err


def test_history_and_publish_leave_out_a_run_whose_samples_are_cut_in_half(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs, one's samples.parquet cut in half: `history` was a DuckDB traceback ("No
    magic bytes found at end of file"); now the run is left out with the file named, as
    for a damaged manifest, and `publish` says the same."""
    first, second = run_dir(tmp_path), run_dir(tmp_path)
    samples = second / "samples.parquet"
    samples.write_bytes(samples.read_bytes()[:samples.stat().st_size // 2])
    code, out, err, published = history_and_publish(first.parent.parent, first.parent.name,
                                                    tmp_path, capsys)
    assert code == 0 and "Traceback" not in err + published
    assert "1 run(s)" in out and "left out, damaged:" in out
    assert f"left out, damaged: {samples}: not a whole Parquet file" in published
    listed = run_cli(capsys, "history", str(first.parent.parent), "--profile",
                     first.parent.name, "--format", "json")
    (left,) = json.loads(listed.out)["damaged"]
    assert left["dir"] == str(second) and left["error"].startswith(f"{samples}: not a whole")


def test_damage_inside_a_samples_file_is_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file whose first and last bytes are whole but whose inside is not: `history`
    cannot leave it out without reading it, so it stops with one line naming it."""
    first, second = run_dir(tmp_path), run_dir(tmp_path)
    samples = second / "samples.parquet"
    data = bytearray(samples.read_bytes())
    data[8:len(data) // 2] = b"\xff" * (len(data) // 2 - 8)
    samples.write_bytes(bytes(data))
    code, _, err = run_cli(capsys, "history", str(first.parent.parent), "--profile",
                           first.parent.name)
    assert code == 1 and str(samples) in err and "cannot read" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_check_names_a_damaged_run_it_leaves_out_of_the_series(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`check --baseline RESULTS` left a night whose samples cannot be read out of the
    series without a word; it still leaves it out, and says so (stderr and the JSON)."""
    results = tmp_path / "results"
    nights = [store_run(results, {"ping.rtt_avg": {"x": lognormal(20 + k, 5, 100, 0.01)}},
                        profile="nightly", started=1000.0 + k, policies={"rtt_avg": {}})
              for k in range(3)]
    samples = nights[1] / "samples.parquet"
    samples.write_bytes(samples.read_bytes()[:100])
    candidate = store_run(results, {"ping.rtt_avg": {"x": lognormal(30, 5, 100, 0.01)}},
                          profile="nightly", started=1010.0, policies={"rtt_avg": {}})
    summary = tmp_path / "check.json"
    done = run_cli(capsys, "check", str(candidate), "--baseline", str(results), "--json",
                   str(summary))
    assert done.code in (0, 5), done.err
    assert f"left out of the reference, damaged: {samples}: cannot read" in done.err
    baseline = json.loads(summary.read_text())["baseline"]
    assert [d["dir"] for d in baseline["damaged"]] == [str(nights[1])]
    assert len(baseline["runs"]) == 2
