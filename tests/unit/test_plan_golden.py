"""`napilab plan` of the shipped profiles against golden files (tests/golden/plan/).

After an intended change of what napilab runs, regenerate them with
    for p in tests/golden/plan/*.txt; do n=$(basename $p .txt);
      HOME=/nonexistent napilab plan profiles/$n.yaml -i profiles/inventory.example.yaml > $p
    done
and read the diff: it is exactly what changed on the hosts. HOME is one without
~/.ssh/config: the summary shows the endpoints ssh_config resolves to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.engine.plan_render import plan_json, plan_text
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted((ROOT / "tests" / "golden" / "plan").glob("*.txt"))


@pytest.mark.parametrize("golden", GOLDEN, ids=[g.stem for g in GOLDEN])
def test_plan_matches_golden(golden: Path, monkeypatch: pytest.MonkeyPatch,
                             tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)  # the golden files hold paths relative to the repository
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/config of this machine
    plan = bind(load_profile(f"profiles/{golden.stem}.yaml"),
                load_inventory("profiles/inventory.example.yaml"))
    assert plan_text(plan) == golden.read_text()


@pytest.mark.parametrize("golden", GOLDEN, ids=[g.stem for g in GOLDEN])
def test_plan_json_parses(golden: Path, monkeypatch: pytest.MonkeyPatch,
                          tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HOME", str(tmp_path))
    plan = bind(load_profile(f"profiles/{golden.stem}.yaml"),
                load_inventory("profiles/inventory.example.yaml"))
    doc = json.loads(json.dumps(plan_json(plan)))
    assert doc["trials"] == len(doc["steps"]) == len(plan.trials())
    first = doc["steps"][0]["commands"]
    assert all(isinstance(c["argv"], list) and c["host"] in doc["hosts"] for c in first)
    assert {"client", "snapshot"} <= {c["phase"] for c in first}


def test_every_seed_has_a_profile() -> None:
    seeds = sorted((ROOT.parent / "shared" / "seeds").glob("*.txt"))
    numbers = [s.name[:3] for s in seeds] or ["000", "001", "002", "003"]
    for number in numbers:
        assert list((ROOT / "profiles").glob(f"seed-{number}-*.yaml")), number
