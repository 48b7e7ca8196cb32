"""`napilab compare [LABEL=]RUN ...` on synthetic runs: labels as column names (seed 001's
Baseline / Patched), label x variant columns, the first run as the baseline of every
other, --variant, three runs, Markdown and HTML, and the refusals (a kernel difference
unless --intended kernel, a bad or repeated label, a missing directory, one run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.report_runs import neper_run

KERNEL = "6.18.0-synthetic"


def run(tmp_path: Path, name: str, *, kernel: str = KERNEL, slower: float = 1.0,
        variants: tuple[str, ...] = ("busypoll", "threaded")) -> Path:
    return neper_run(tmp_path / name, variants=variants, reps=5, run_id=name[:8].ljust(8, "0"),
                     kernel=kernel, slower=slower, latency_samples=200)


def test_two_labelled_runs_one_variant_print_the_letters_columns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, patched = run(tmp_path, "base"), run(tmp_path, "patched", slower=1.5)
    code, out, err = run_cli(capsys, "compare", f"Baseline={base}", f"Patched={patched}",
                             "--variant", "threaded")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"Baseline: {base}") and lines[1].startswith(f"Patched: {patched}")
    header = next(ln for ln in lines if "Baseline" in ln and "Patched" in ln and ":" not in ln)
    assert header.split() == ["Baseline", "Patched"]
    assert "Patched vs Baseline (baseline)" in out
    assert "latency p99 (us)" in out


def test_columns_are_label_by_variant_and_every_run_is_compared_with_the_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [run(tmp_path, n) for n in ("a", "b", "c")]
    code, out, err = run_cli(capsys, "compare", str(runs[0]), f"rc1={runs[1]}", str(runs[2]),
                             "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [r["label"] for r in doc["runs"]] == ["A", "rc1", "C"] and doc["baseline"] == "A"
    assert doc["table"]["columns"] == ["A:busypoll", "rc1:busypoll", "C:busypoll",
                                       "A:threaded", "rc1:threaded", "C:threaded"]
    assert [tuple(p) for p in doc["table"]["pairs"]] == [
        ("A:busypoll", "rc1:busypoll"), ("A:busypoll", "C:busypoll"),
        ("A:threaded", "rc1:threaded"), ("A:threaded", "C:threaded")]


def test_markdown_and_html_have_the_same_table(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    base, patched = run(tmp_path, "base"), run(tmp_path, "patched")
    args = ["compare", f"Baseline={base}", f"Patched kernel={patched}", "--variant", "busypoll"]
    code, md, err = run_cli(capsys, *args, "--format", "md")
    assert code == 0, err
    assert "| metric | Baseline | Patched kernel | unit |" in md
    assert "#### Patched kernel vs Baseline" in md
    code, page, err = run_cli(capsys, *args, "--format", "html")
    assert code == 0, err
    assert '<th class="num">Patched kernel</th><th class="num">change vs Baseline</th>' in page
    assert page.count("<script") == 0 and 'id="ab-table"' in page


def test_a_kernel_difference_is_refused_unless_intended(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, patched = run(tmp_path, "base"), run(tmp_path, "patched", kernel="6.18.0-patched")
    code, _, err = run_cli(capsys, "compare", f"Baseline={base}", f"Patched={patched}")
    assert code == 2
    assert ("sut: kernel_release: Baseline '6.18.0-synthetic', Patched '6.18.0-patched'"
            in err)
    code, out, err = run_cli(capsys, "compare", f"Baseline={base}", f"Patched={patched}",
                             "--intended", "kernel")
    assert code == 0, err
    assert ("intended: sut: kernel_release: Baseline '6.18.0-synthetic', Patched "
            "'6.18.0-patched'") in out


@pytest.mark.parametrize(("args", "message"), [
    (["X=RUN", "X=RUN"], "label 'X' names two runs"),
    (["bad:label=RUN", "RUN"], "label 'bad:label'"),
    (["Baseline=nowhere", "RUN"], "no such run directory 'nowhere'"),
    (["RUN"], "two or more runs"),
    (["RUN", "RUN", "--variant", "nope"], "variant 'nope' is not in every run"),
    (["A=RUN", "B=RUN"], "is given twice"),
])
def test_bad_arguments_exit_2_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               args: list[str], message: str) -> None:
    one = run(tmp_path, "one")
    code, _, err = run_cli(capsys, "compare", *(a.replace("RUN", str(one)) for a in args))
    assert code == 2 and message in err
