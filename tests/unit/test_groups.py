"""Comparison groups: a variant with `group` is compared with its group's first variant
(seed 002's xdpsock variants with the plain xdpsock run, not the netperf baseline);
validation, matrix variants inheriting the group, the manifest, the A/B table, the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.engine.plan_render import plan_text
from napilab.harness.errors import InputError
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from napilab.reports.ab.compare import load_run, table
from tests.report_runs import neper_run

ROOT = Path(__file__).resolve().parents[2]
PROFILE = """\
name: groups
hosts:
  a: {host: a}
  b: {host: b}
workload:
  tool: ping
  duration: 1
  client: {role: a}
  server: {role: b}
variants:
  ping: {}
  ping-small: {workload: {client: {args: {size: 16}}}}
  rr:
    group: rr
    workload: {tool: iperf3, client: {role: a}, server: {role: b}}
  rr-p:
    group: rr
    workload: {tool: iperf3, client: {role: a, args: {P: "${p}"}}, server: {role: b}}
matrix:
  parameters: {p: [2, 4]}
  variants: [rr-p]
  name: "rr-p${p}"
"""


def test_each_variant_is_compared_with_its_groups_first(tmp_path: Path) -> None:
    path = tmp_path / "groups.yaml"
    path.write_text(PROFILE)
    profile = load_profile(path)
    assert [v.group for v in profile.variants] == [None, None, "rr", "rr", "rr"]
    assert profile.comparisons == (("ping", "ping-small"), ("rr", "rr-p2"), ("rr", "rr-p4"))


def test_the_named_baseline_leads_its_group(tmp_path: Path) -> None:
    path = tmp_path / "groups.yaml"
    path.write_text(PROFILE + "baseline: rr-p4\n")
    profile = load_profile(path)
    assert profile.baseline == "rr-p4"  # the run's baseline; ungrouped ones keep theirs
    assert profile.comparisons == (("ping", "ping-small"), ("rr-p4", "rr"), ("rr-p4", "rr-p2"))


@pytest.mark.parametrize(("group", "message"), [
    ("'two words'", "group name 'two words'"), ("[rr]", "expected a string, got a list"),
])
def test_a_bad_group_is_refused_with_its_place(tmp_path: Path, group: str,
                                               message: str) -> None:
    path = tmp_path / "groups.yaml"
    path.write_text(PROFILE.replace("group: rr\n    workload: {tool: iperf3, client: {role: a}",
                                    f"group: {group}\n    workload: {{tool: iperf3, "
                                    "client: {role: a}"))
    with pytest.raises(InputError) as info:
        load_profile(path)
    assert "variants.rr.group" in str(info.value) and message in str(info.value)
    assert "groups.yaml:" in str(info.value)


def test_the_table_compares_the_recorded_pairs(tmp_path: Path) -> None:
    run_dir = neper_run(tmp_path, variants=("a", "b", "x", "y"), reps=3)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert table(load_run(run_dir)).pairs == (("a", "b"), ("a", "x"), ("a", "y"))  # old runs
    manifest["comparisons"] = [["a", "b"], ["x", "y"]]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    tab = table(load_run(run_dir))
    assert tab.pairs == (("a", "b"), ("x", "y")) and tab.baseline_of("y") == "x"
    line = next(ln for ln in tab.lines if ln.metric == "latency_p99")
    assert set(line.comparisons) == {"b", "y"}


def test_seed_002_plan_names_both_baselines() -> None:
    plan = bind(load_profile(ROOT / "profiles" / "seed-002-prefer-busypoll.yaml"),
                load_inventory(ROOT / "profiles" / "inventory.example.yaml"))
    compared = plan_text(plan).splitlines()[1]
    assert compared == ("compared: udp-rr-busy-read, udp-rr-prefer with udp-rr; xdpsock-2c, "
                        "xdpsock-budget-8, xdpsock-budget-64, xdpsock-budget-256, "
                        "xdpsock-budget-512 with xdpsock")
