"""`napilab validate` / `plan` say before the run when a profile cannot reach a verdict
(harness.profile.design): the shipped seed profiles can; a copy of seed 000 that names 12
primary metrics at repeat 5 cannot, says why, and --strict refuses it (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.profile.design import design_warnings, family_size
from napilab.harness.profile.profile import load_profile
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = str(ROOT / "profiles" / "inventory.example.yaml")
SEED_000 = ROOT / "profiles" / "seed-000-threaded-busypoll.yaml"
TWELVE = ("latency_p50", "latency_p90", "latency_p99", "latency_p99.9", "latency_max",
          "num_transactions", "cpu_time", "softirq", "net_rx", "throughput",
          "local_throughput", "remote_throughput")


@pytest.mark.parametrize("name", ["seed-000-threaded-busypoll", "seed-001-backlog-napi",
                                  "seed-002-prefer-busypoll", "seed-003-afxdp-busy-budget",
                                  "nightly-example", "demo"])
def test_shipped_profiles_can_reach_a_verdict(name: str) -> None:
    profile = load_profile(ROOT / "profiles" / f"{name}.yaml")
    assert design_warnings(profile) == []


def test_seed_000_validates_without_a_reachability_warning(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "validate", str(SEED_000), "-i", INVENTORY, "--strict")
    assert code == 0 and out.endswith("ok: 4 variant(s), 20 trial(s), bound to "
                                      f"{INVENTORY}\n")
    assert "warning" not in err


def test_twelve_primary_metrics_at_repeat_5_warn_and_strict_refuses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "seed-000-twelve.yaml"
    metrics = "\n".join(f"  {m}: {{direction: lower, primary: true}}" for m in TWELVE)
    copy.write_text(f"extends: {SEED_000}\nname: seed-000-twelve\nmetrics:\n{metrics}\n")
    profile = load_profile(copy)
    assert family_size(profile) == 9  # 12 named, 9 of them rows of the table
    code, _, err = run_cli(capsys, "validate", str(copy), "-i", INVENTORY)
    assert code == 0
    assert ("napilab: warning: repeat 5 with 9 primary comparison(s): smallest reachable "
            "adjusted p of a distribution-free (rank) test 0.071 > 0.05") in err
    assert "use repeat >= 6 or name fewer primary metrics" in err
    assert "metrics: throughput is primary but not a row of report.table" in err
    print("\n" + err)
    code, _, err = run_cli(capsys, "validate", str(copy), "-i", INVENTORY, "--strict")
    assert code == 2 and "design warning(s) (--strict)" in err
    code, out, err = run_cli(capsys, "plan", str(copy), "-i", INVENTORY)
    assert code == 0 and "0.071 > 0.05" in err and out.startswith("profile seed-000-twelve")
    code, _, _ = run_cli(capsys, "plan", str(copy), "-i", INVENTORY, "--strict")
    assert code == 2


def test_repeat_1_and_unknown_directions_are_named(tmp_path: Path) -> None:
    copy = tmp_path / "one.yaml"
    copy.write_text(f"extends: {SEED_000}\nname: one\nrepeat: 1\nmetrics:\n"
                    "  napi_threads.cpu_time: {}\n  latency_p99: {}\n")
    found = design_warnings(load_profile(copy))
    assert any("repeat 1: one repetition per variant" in w for w in found)
    assert not any("cpu_time: which way" in w for w in found)  # cpu_ is a lower rule
    copy.write_text(f"extends: {SEED_000}\nname: two\nmetrics:\n  softirq: {{}}\n"
                    "  coalesced_frames: {}\n")
    found = design_warnings(load_profile(copy))
    assert "metrics: coalesced_frames: which way is better is unknown (no rule matches its " \
        "name): add direction: lower or higher" in found
    assert not any(w.startswith("metrics: softirq") for w in found)
