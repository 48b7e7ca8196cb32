"""docs/nightly.md's napilab-nightly script end to end on the SSH testbed, `napilab run`
included: the demo profile with 1 s trials and 3 repetitions, twice. The first night finds the run
directory in the real `--json` events, publishes, and becomes the reference (exit 0);
the second night is gated against it through `check --baseline RESULTS` and passes,
fails or is inconclusive on what the testbed measured, never an error (exit 0, 3 or 5,
with its JUnit and check.json saying the same).
tests/unit/test_nightly_doc.py covers the exit codes 3 and 5 on stored runs."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from napilab.harness.lab import netns as tb
from tests.cli import NAPILAB
from tests.unit.test_nightly_doc import script

DEMO = Path(__file__).resolve().parents[2] / "profiles" / "demo.yaml"


def test_the_documented_script_runs_two_nights(testbed: tb.Testbed, tmp_path: Path) -> None:
    profile = tmp_path / "demo-short.yaml"
    profile.write_text(f"extends: {DEMO}\nworkload: {{duration: 1}}\nrepeat: 3\n")
    results, site = tmp_path / "results", tmp_path / "site"
    env = {**os.environ, "PROFILE": str(profile), "INVENTORY": str(testbed.inventory_path),
           "RESULTS": str(results), "SITE": str(site), "NAPILAB": NAPILAB}
    nightly = script(tmp_path)
    said = []
    for _ in range(2):
        proc = subprocess.run(["sh", str(nightly)], env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        print(f"$ napilab-nightly -> exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
        said.append((proc.returncode, proc.stdout + proc.stderr))
    (first, first_out), (second, second_out) = said
    assert first == 0 and "first night of demo" in first_out, first_out
    assert second in (0, 3, 5), second_out  # what the testbed measured; never an error
    nights = sorted(p.parent for p in (results / "demo").glob("*/manifest.json"))
    assert len(nights) == 2
    for night in nights:
        assert json.loads((night / "manifest.json").read_text())["status"] == "complete"
        assert (night / "report.html").is_file() and (night / "report.junit.xml").is_file()
    gated = nights[1]
    junit = ET.parse(gated / "check.junit.xml").getroot()
    kinds = [f.get("type") for f in junit.iter("failure")]
    assert ("regression" in kinds) == (second == 3), kinds
    assert ("inconclusive" in kinds) == (second == 5), kinds  # the gate's own testcase
    status = json.loads((gated / "check.json").read_text())["status"]
    assert status == {0: "pass", 3: "regression", 5: "inconclusive"}[second]
    assert not (nights[0] / "check.json").exists()  # the first night was not gated
    assert (site / "index.html").is_file()
    assert len(list((site / "runs" / "demo").iterdir())) == 2
