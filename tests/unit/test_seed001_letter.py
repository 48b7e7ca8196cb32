"""Seed 001's table against the letter's own script, on a run of the whole letter
measured on the VM testbed and stored as napilab wrote it (tests/golden/seed001/: the
recorder says how; tests/seed001_letter.py what the run holds and what "the same
pattern" means). The report is rendered here from the stored run, by `napilab report`.

A run measured during the test still boots b into a variant's kernel and back
(tests/integration/vm/test_vm_kernel.py); this one is the letter's scale: two RT kernels,
both experiments and the script in each boot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.seed001_letter import (
    COLUMNS,
    ROWS,
    RT_NEW,
    RT_OLD,
    SECS,
    disagreements,
    letter_output,
    letter_trial,
    parse_letter,
)

STORED = Path(__file__).resolve().parents[1] / "golden" / "seed001" / "run"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict]:
    """A copy of the stored run, its reports rendered by `napilab report` (once: every
    test reads them), and the text report as printed."""
    (stored,) = STORED.iterdir()
    run_dir = tmp_path_factory.mktemp("seed001") / stored.name
    shutil.copytree(stored, run_dir)
    # a module-scoped fixture: no capsys, run_cli captures the streams itself
    done = run_cli(None, "report", str(run_dir), "--format", "text,json")
    assert not done.code, done.out + done.err
    text = done.out
    return run_dir, text, json.loads((run_dir / "report.json").read_text())


def letter_outputs(run_dir: Path) -> dict[str, dict[str, str]]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {column: parse_letter(letter_output(run_dir, letter_trial(manifest, column))
                                 .read_text()) for column, _ in COLUMNS}


def test_every_trial_ran_on_its_variants_kernel(rendered: tuple[Path, str, dict]) -> None:
    run_dir = rendered[0]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert len(manifest["trials"]) == 6 and not manifest.get("hosts_changed")
    for trial in manifest["trials"]:
        kernel = next(c for c in trial["settings"] if c["kind"] == "kernel")
        want = RT_OLD if trial["variant"].startswith("Baseline") else RT_NEW
        assert kernel["verdict"]["state"] == "taken"
        effective = json.loads(kernel["effective"])
        assert effective["release"].startswith({RT_OLD: "6.1.0-", RT_NEW: "7.2."}[want])
        assert "PREEMPT_RT" in kernel["effective"]


def test_seed_001_table_agrees_with_the_letters_script(
        rendered: tuple[Path, str, dict]) -> None:
    run_dir, text, page = rendered
    assert "\n  Baseline: b on 6.1.0-" in text and "\n  Patched: b on 7.2." in text
    assert "host(s) a, b: QEMU TCG, emulated" in text
    print("\nnapilab's table (napilab run profiles/seed-001-backlog-napi-vm.yaml, "
          f"{SECS} s):\n" + text.split("\n\n")[0].split("\n", 1)[1])
    table = page["table"]
    assert table["columns"] == [c for c, _ in COLUMNS]
    assert [line["label"] for line in table["lines"]][:len(ROWS)] == list(ROWS)
    letter = letter_outputs(run_dir)
    assert not disagreements(table, letter), disagreements(table, letter)


def test_a_row_that_differs_is_a_disagreement(rendered: tuple[Path, str, dict]) -> None:
    """The comparison can fail: the letter's script seeing IPIs vanish where napilab's
    Patched column has them (and the larger column turned round) is caught."""
    run_dir, _, page = rendered
    letter = letter_outputs(run_dir)
    letter["Baseline"]["CALL_IPI"] = "0"
    found = disagreements(page["table"], letter)
    assert "Function-call IPIs Baseline: napilab nonzero, letter zero" in found
