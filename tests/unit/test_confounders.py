"""Confounders between two runs (harness.store.confounders, pure) and `napilab compare` on
stored runs: intended knob differences pass, host-fact differences fail with exit 2
unless --allow-mismatch or --intended names them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from napilab.harness.store.confounders import diff_manifests
from napilab.harness.store.manifest import Manifest
from tests.cli import run_cli
from tests.synthetic_runs import FACTS, lognormal, store_run


def change(target: str, requested: str, effective: str | None = None,
           original: str = "0") -> dict[str, Any]:
    return {"host": "b", "role": "receiver", "kind": "netdev", "target": target,
            "path": f"/sys/class/net/{target}", "original": original, "requested": requested,
            "effective": requested if effective is None else effective}


def manifest(facts: dict[str, Any] | None = None, settings: list[dict[str, Any]] | None = None,
             workload: dict[str, Any] | None = None, variants: dict[str, Any] | None = None,
             hosts: dict[str, Any] | None = None) -> Manifest:
    """A manifest as napilab 0.1 wrote it (changes without verdicts), migrated."""
    document = {"workload": workload or {"tool": "ping", "duration": 1},
                "hosts": {"sender": "a"}, **({"variants": variants} if variants else {})}
    return Manifest.from_json({
        "schema_version": 1, "variants": ["x"],
        "host_facts": hosts or {"a": FACTS, "b": facts or FACTS},
        "profile": {"document": document},
        "trials": [{"index": 1, "id": "001", "variant": "x", "rep": 1, "status": "ok",
                    "settings": settings or []}]})


def test_identical_runs_have_no_differences() -> None:
    found = diff_manifests(manifest(), manifest())
    assert found.confounders == () and found.intended == ()


def test_knob_requested_differently_is_intended() -> None:
    a = manifest(settings=[change("data0/gro_flush_timeout", "0")])
    b = manifest(settings=[change("data0/gro_flush_timeout", "20000")])
    found = diff_manifests(a, b)
    assert found.confounders == ()
    (one,) = found.intended
    assert (one.key, one.a, one.b) == ("data0/gro_flush_timeout", "0", "20000")


def test_knob_set_in_one_run_only_is_intended_and_says_what_the_host_had() -> None:
    found = diff_manifests(manifest(), manifest(settings=[change("data0/threaded", "1")]))
    (one,) = found.intended
    assert one.a == "unset" and "set in one run only" in one.note and "'0'" in one.note


def test_same_request_read_back_differently_is_a_confounder() -> None:
    a = manifest(settings=[change("data0/threaded", "1")])
    b = manifest(settings=[change("data0/threaded", "1", effective="0")])
    (one,) = diff_manifests(a, b).confounders
    assert one.kind == "setting" and "read back differently" in one.note


def test_cpu_masks_compare_canonically() -> None:
    mask = {"host": "b", "role": "receiver", "kind": "rps", "target": "data0/rx-0",
            "path": "/sys/class/net/data0/queues/"
            "rx-0/rps_cpus", "original": "0", "requested": "2"}
    a = manifest(settings=[{**mask, "effective": "2"}])
    b = manifest(settings=[{**mask, "effective": "00000002"}])
    assert diff_manifests(a, b).confounders == ()


@pytest.mark.parametrize(("path", "value"), [
    (("kernel_release",), "6.19.0"), (("cmdline",), "quiet isolcpus=1"),
    (("cpu_model",), "Other CPU"), (("online_cpus",), "0-3"), (("irqbalance",), "running"),
    (("user_hz",), 250), (("nics", "data0", "driver"), "mlx5_core"),
    (("nics", "data0", "firmware-version"), "16.35"), (("tool_versions", "ping"), "20240905")])
def test_every_host_fact_difference_is_a_confounder(path: tuple[str, ...], value: Any) -> None:
    facts = copy.deepcopy(FACTS)
    node: dict[str, Any] = facts
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    (one,) = diff_manifests(manifest(), manifest(facts)).confounders
    assert (one.kind, one.where, one.key) == ("host_fact", "b", ".".join(path))
    assert one.b == str(value)


def test_waive_moves_named_facts_to_intended() -> None:
    facts = {**FACTS, "kernel_release": "6.19.0", "kernel_version": "#2", "cmdline": "x"}
    found = diff_manifests(manifest(), manifest(facts)).waive(["kernel"])
    assert [d.key for d in found.confounders] == ["cmdline"]
    assert {d.key for d in found.intended} == {"kernel_release", "kernel_version"}


def test_missing_host_and_workload_differences_are_confounders() -> None:
    b = manifest(workload={"tool": "ping", "duration": 2}, hosts={"a": FACTS})
    found = diff_manifests(manifest(), b)
    assert {(d.kind, d.key) for d in found.confounders} == {("host", "host"),
                                                            ("workload", "workload.duration")}


def test_variant_overlay_workload_is_merged_before_comparing() -> None:
    a = manifest(workload={"tool": "ping", "duration": 1})
    b = manifest(workload={"tool": "ping", "duration": 2},
                 variants={"x": {"workload": {"duration": 1}}})
    assert diff_manifests(a, b).confounders == ()


# -- napilab compare on stored runs ---------------------------------------------------------

VALUES = {"ping.rtt_avg": {"off": lognormal(1, 6, 100), "on": lognormal(2, 6, 80)}}


def test_compare_cli_refuses_then_allows_a_kernel_difference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = store_run(tmp_path / "a", VALUES)
    patched = {"a": FACTS, "b": {**FACTS, "kernel_release": "6.19.0-patched"}}
    b = store_run(tmp_path / "b", {"ping.rtt_avg": {"off": lognormal(3, 6, 90),
                                                    "on": lognormal(4, 6, 70)}},
                  host_facts=patched)
    code, _, err = run_cli(capsys, "compare", str(a), str(b))
    assert code == 2
    assert "differ in more than the knobs under test" in err and "6.19.0-patched" in err
    code, out, _ = run_cli(capsys, "compare", str(a), str(b), "--allow-mismatch")
    assert code == 0 and "MISMATCH (allowed): b: kernel_release" in out
    assert "B:off vs A:off (baseline)" in out and "B:on vs A:on (baseline)" in out
    assert max(len(line) for line in out.splitlines()[2:]) <= 80
    code, out, _ = run_cli(capsys, "compare", str(a), str(b), "--intended", "kernel", "--format",
                                   "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["confounders"] == [] and doc["intended"][0]["key"] == "kernel_release"
    assert doc["table"]["pairs"] == [["A:off", "B:off"], ["A:on", "B:on"]]
    found = doc["table"]["lines"][0]["comparisons"]["B:off"]
    assert found["verdict"] in ("better", "~", "not-enough-data") and found["change"] < 0


def test_compare_cli_needs_a_common_variant(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    a = store_run(tmp_path / "a", VALUES)
    b = store_run(tmp_path / "b", {"ping.rtt_avg": {"other": lognormal(3, 6, 90)}})
    code, _, err = run_cli(capsys, "compare", str(a), str(b))
    assert code == 2 and "share no variant" in err
