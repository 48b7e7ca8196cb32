"""`napilab init -i INV` against the testbed's real hosts (over SSH): `hosts check`'s
facts pick the tool, the CPU and the knobs, the profile validates as written, and a
shortened copy of it runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb
from napilab.harness.profile.profile import load_profile
from tests.cli import run_cli


def test_init_from_hosts_check_validates_and_runs(
        testbed: tb.Testbed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inventory = str(testbed.inventory_path)
    code, out, _ = run_cli(capsys, "init", "-i", inventory, str(tmp_path / "lab"))
    assert code == 0, out
    profile = tmp_path / "lab" / "profile.yaml"
    assert sorted(p.name for p in profile.parent.iterdir()) == ["profile.yaml"]
    text = profile.read_text()
    assert f"from `hosts check` of {inventory}" in text
    prof = load_profile(profile)
    # sockperf is installed on this machine; the netns hosts have no busy_poll sysctl
    # (initial namespace only), so only the netdev variant is offered.
    assert prof.variants[0].workload.tool == "sockperf.ping-pong"
    assert [v.name for v in prof.variants] == ["baseline", "defer-irqs"]
    assert prof.variants[0].workload.client.cpus == str(os.cpu_count() - 1)  # the last CPU
    quick = tmp_path / "lab" / "quick.yaml"
    quick.write_text(text.replace("repeat: 5", "repeat: 1").replace("duration: 10",
                                                                    "duration: 1"))
    ran = run_cli(capsys, "run", str(quick), "-i", inventory, "-o", str(tmp_path / "results"),
                  "--format", "text", "--quiet")
    assert ran.code == 0, ran
    assert len(list((tmp_path / "results" / "starter").glob("*/report.txt"))) == 1
