"""The shipped seed 001 profile, shortened through `extends`, run on the testbed: the
RPS modes with an idle window, warm-up, dmesg pattern counts, and the defer_list
variant, whose global sysctl does not exist inside a namespace (recorded as a failed
trial with the reason, the others complete)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb
from napilab.harness.store.store import load_samples
from tests.cli import run_napilab

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.serial
def test_seed_001_on_the_testbed(testbed: tb.Testbed, tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    text = testbed.inventory_path.read_text()
    inventory.write_text(text.replace("\n  a:\n", "\n  sender:\n").replace("\n  b:\n",
                                                                          "\n  receiver:\n"))
    profile = tmp_path / "seed-001-short.yaml"
    profile.write_text(f"""\
extends: {ROOT / 'profiles' / 'seed-001-backlog-napi.yaml'}
name: seed-001-short
workload: {{duration: 2, idle: 1, warmup: 1}}
variants:
  defer-list: {{workload: {{duration: 2}}}}
repeat: 1
""")
    proc = run_napilab("run", str(profile), "-i", str(inventory), "-o",
                       str(tmp_path / "r"), "--keep-going", "--format", "html,text")
    assert proc.returncode == 4, proc.stderr  # the defer-list trial fails, the rest run
    run_dir = next((tmp_path / "r" / "seed-001-short").iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    status = {t["variant"]: t for t in manifest["trials"]}
    assert {v: t["status"] for v, t in status.items()} == {
        "rps": "ok", "local": "ok", "norps": "ok", "defer-list": "failed"}
    assert "skb_defer_max" in status["defer-list"]["error"]
    assert "initial network namespace" in status["defer-list"]["error"]

    samples = load_samples(run_dir)
    totals = samples[samples["cpu"].isna()].set_index(["variant", "source", "metric"])["value"]
    assert totals[("rps", "softnet_stat", "received_rps")] > 1000  # read on CPU 1
    assert totals[("norps", "softnet_stat", "received_rps")] < 100  # read on CPU 0
    assert totals[("rps", "interrupts", "function_call_interrupts")] > 1000
    assert ("rps", "proc_stat.idle", "hardirq") in totals.index  # the idle window
    assert totals[("rps", "snapshot.idle", "interval")] >= 0.9
    assert totals[("rps", "dmesg", "target_warnings")] == 0  # counted, not absent
    raw = run_dir / "raw" / "001" / "sender"
    assert (raw / "warmup-client.out").exists() and (raw / "snapshot-idle-before.out").exists()
    assert "Idle hardirq (ms)" in (run_dir / "report.txt").read_text()
