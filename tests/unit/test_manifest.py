"""The typed manifest (harness.store.manifest): the recorded runs under
tests/golden/reports/runs/ were written by napilab 0.1 (schema_version 1, no verdicts);
they load through the migration, get each change's verdict from the knob kind's
comparator once, round-trip through to_json/from_json, and a run saved in the current
schema renders the same reports byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from napilab.harness.errors import InputError
from napilab.harness.knobs.change import Change
from napilab.harness.store.manifest import SCHEMA_VERSION, Manifest
from napilab.harness.store.store import load_manifest
from napilab.reports.ab.compare import load_run
from napilab.reports.formats.render import render

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "reports"
RUNS = sorted(p for p in (GOLDEN / "runs").iterdir() if p.is_dir())


@pytest.mark.parametrize("run_dir", RUNS, ids=[r.name for r in RUNS])
def test_a_run_of_napilab_0_1_loads_and_gets_verdicts(run_dir: Path) -> None:
    assert json.loads((run_dir / "manifest.json").read_text())["schema_version"] == 1
    manifest = load_manifest(run_dir)
    assert manifest.schema_version == SCHEMA_VERSION
    changes = [c for t in manifest.trials for c in t.settings or []]
    assert changes and all(c.verdict is not None for c in changes)
    assert Manifest.from_json(manifest.to_json()) == manifest


def test_migrated_verdicts_use_the_kinds_comparators() -> None:
    manifest = load_manifest(GOLDEN / "runs" / "synthetic-seed-000-5e1f0000")
    states = {(c.kind, c.state) for t in manifest.trials for c in t.settings or []}
    assert ("kprobe", "absent") in states and ("kprobe", "taken") in states
    assert ("irq_affinity", "mismatch") in states  # irqbalance rewrote it in one trial
    (demo_dir,) = (GOLDEN / "runs").glob("demo-*")
    demo = load_manifest(demo_dir)
    (rps,) = {c.verdict for t in demo.trials for c in t.settings or []
              if c.kind == "rps" and c.requested == "2"}
    assert rps is not None and (rps.state, rps.requested, rps.effective) == ("taken", "1", "1")


@pytest.mark.parametrize("fmt", ["text", "md"])
@pytest.mark.parametrize("run_dir", RUNS, ids=[r.name for r in RUNS])
def test_the_current_schema_renders_the_same_reports(run_dir: Path, fmt: str,
                                                     tmp_path: Path) -> None:
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    doc = load_manifest(run_dir).to_json()
    (copy / "manifest.json").write_text(json.dumps(doc, indent=1))
    assert json.loads((copy / "manifest.json").read_text())["schema_version"] == SCHEMA_VERSION
    expected = (GOLDEN / (run_dir.name + {"text": ".txt", "md": ".md"}[fmt])).read_text()
    assert render(load_run(copy), fmt) == expected


def test_a_stored_verdict_is_read_not_recomputed() -> None:
    doc = {"host": "b", "role": "r", "kind": "netdev", "target": "d/threaded",
           "path": "/sys/class/net/d/threaded", "original": "0", "requested": "1",
           "effective": "1", "verdict": {"state": "mismatch", "requested": "1",
                                         "effective": "x"}}
    assert Change.from_json(doc).state == "mismatch"
    del doc["verdict"]
    assert Change.from_json(doc).state == "taken"
    doc["effective"] = None
    assert Change.from_json(doc).state == "unread"


def test_unknown_keys_are_kept() -> None:
    doc = Manifest(run_id="ab12").to_json()
    doc["future_key"] = {"x": 1}
    doc["trials"] = [{"index": 1, "id": "001", "variant": "v", "rep": 1, "status": "ok",
                      "new_trial_key": 2}]
    back = Manifest.from_json(doc).to_json()
    assert back["future_key"] == {"x": 1} and back["trials"][0]["new_trial_key"] == 2


@pytest.mark.parametrize(("doc", "message"), [
    ({"schema_version": 9, "run_id": "x"}, "schema_version 9, this napilab reads 1, 2, 3"),
    ({"schema_version": 2, "trials": [{"index": 1}]}, "not a manifest napilab can read"),
    ({"schema_version": 2, "profile": [1]}, r"Expected `object`, got `array` - at `\$.profile`"),
])
def test_bad_manifests_are_input_errors(tmp_path: Path, doc: dict[str, object],
                                        message: str) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=message):
        load_manifest(tmp_path)


def test_groups_comparisons_and_tool_versions_are_typed_fields() -> None:
    """What napilab 0.1 wrote at its last (issue 12: comparison groups, tool versions)
    lands in the records' fields, not in `extra`, and is written back unchanged."""
    doc = {"schema_version": 1, "run_id": "ab12", "variants": ["a", "b", "x", "y"],
           "baseline": "a", "groups": {"x": "xdp", "y": "xdp"},
           "comparisons": [["a", "b"], ["x", "y"]],
           "host_facts": {"sut": {"kernel_release": "6.18.0",
                                  "nics": {"eth0": {"driver": "virtio_net"}},
                                  "tool_versions": {"ping": "ping from iputils 20240905"}}}}
    manifest = Manifest.from_json(doc)
    assert manifest.groups == {"x": "xdp", "y": "xdp"}
    assert manifest.comparisons == [["a", "b"], ["x", "y"]]
    assert manifest.host_facts is not None
    assert manifest.host_facts["sut"].tool_versions == {"ping": "ping from iputils 20240905"}
    assert manifest.extra == {} and manifest.host_facts["sut"].extra == {}
    back = manifest.to_json()
    assert {k: back[k] for k in ("groups", "comparisons", "host_facts")} == {
        k: doc[k] for k in ("groups", "comparisons", "host_facts")}
    assert "comparisons" not in Manifest(run_id="old").to_json()  # None: every variant
    # against the baseline, as runs before comparison groups are read
