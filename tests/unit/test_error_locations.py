"""Every validation error points at the line of the offending value with its full key
path, once; errors a variant's overlay wrote keep `variants.NAME.`; one mistake is one
error; a file of the wrong kind is one sentence."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
SEED_000 = (ROOT / "profiles" / "seed-000-threaded-busypoll.yaml").read_text()
EXAMPLE_INVENTORY = ROOT / "profiles" / "inventory.example.yaml"


def _errors(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    """The problems of a refused command (exit 2), one per line."""
    code, _, err = run_cli(capsys, *argv)
    assert code == 2, err
    return [line.removeprefix("napilab: error: ").strip() for line in err.splitlines()
            if re.match(r"(napilab: error: )?\s*\S+:\d+:\d+: ", line)]


def _line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def _seed(tmp_path: Path, old: str, new: str) -> tuple[Path, str]:
    assert old in SEED_000
    text = SEED_000.replace(old, new, 1)
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path, text


@pytest.mark.parametrize("old,new,value,key_path", [
    # the case: two variants share the base's `cpus: "3-20"`: one error
    ('cpus: "3-10"', 'cpus: "3-20"', '"3-20"', "workload.client.cpus"),
    # a variant's own cpus keep its name
    ("    setup:\n      sut:\n        napi:",
     '    workload: {client: {cpus: "4-17"}}\n    setup:\n      sut:\n        napi:',
     '"4-17"', "variants.threaded-busypoll.workload.client.cpus"),
])
def test_cpus_beyond_the_host_once_at_the_value(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str], old: str,
                                                new: str, value: str, key_path: str) -> None:
    path, text = _seed(tmp_path, old, new)
    found = _errors(capsys, "validate", str(path), "-i", str(EXAMPLE_INVENTORY))
    line = _line_of(text, value)
    column = text.splitlines()[line - 1].index(value) + 1
    assert found == [f"{path}:{line}:{column}: {key_path}: CPU 16 does not exist on sut, "
                     "which has 16 CPUs (0-15)"]


def test_setup_cpus_in_a_variant_at_the_value(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path, text = _seed(tmp_path, '{cpus: "2", policy: fifo', '{cpus: "2,40", policy: fifo')
    found = _errors(capsys, "validate", str(path), "-i", str(EXAMPLE_INVENTORY))
    line = _line_of(text, '"2,40"')
    assert len(found) == 1
    assert found[0].startswith(f"{path}:{line}:")
    assert "variants.threaded-busypoll.setup.sut.napi_threads.${iface}.cpus: CPU 40" in found[0]


def test_errors_inside_a_variant_keep_variants_prefix(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path, text = _seed(tmp_path, '    setup:\n      sut:\n        napi:',
                       '    workload: {client: {args: {Rr: 1}}}\n    setup:\n      sut:\n'
                       '        napi:')
    found = _errors(capsys, "validate", str(path))
    line = _line_of(text, "Rr: 1")
    assert len(found) == 1
    assert found[0].startswith(f"{path}:{line}:")
    assert ": variants.threaded-busypoll.workload.client.args.Rr: unknown argument" in found[0]


def test_a_base_error_is_reported_once_without_a_variant(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, text = _seed(tmp_path, "args: {Q: 200,", "args: {Qq: 200,")
    found = _errors(capsys, "validate", str(path))
    assert len(found) == 1
    assert found[0].startswith(f"{path}:{_line_of(text, 'Qq: 200')}:")
    assert ": workload.client.args.Qq: unknown argument" in found[0]


def test_a_matrix_overlay_error_names_the_written_variant_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """seed-003 crosses the overlay `1c` with a matrix: one error for the overlay, under
    the name written in the file, not one per generated variant."""
    text = (ROOT / "profiles" / "seed-003-afxdp-busy-budget.yaml").read_text()
    old = '  1c:\n    description: "IRQs and PMD on core 0, defer 2 / flush 200000"\n'
    assert old in text
    text = text.replace(old, old + "    workload: {client: {cpus: 'x'}}\n")
    path = tmp_path / "p.yaml"
    path.write_text(text)
    found = _errors(capsys, "validate", str(path))
    assert len(found) == 1, found
    assert found[0].startswith(f"{path}:{_line_of(text, 'cpus: ')}:")
    assert ": variants.1c.workload.client.cpus: " in found[0]


@pytest.mark.parametrize("old,new,expected", [
    ("policy: fifo", "policy: FIFO",
     "policy: 'FIFO' is not one of ['batch', 'fifo', 'idle', 'other', 'rr']; did you mean "
     "'fifo'?"),
    ("policy: fifo, priority: 50", "priority: 50", "priority: a priority needs a policy"),
])
def test_a_bad_policy_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   old: str, new: str, expected: str) -> None:
    path, text = _seed(tmp_path, old, new)
    found = _errors(capsys, "validate", str(path))
    assert len(found) == 1, found
    assert found[0].startswith(f"{path}:{_line_of(text, new)}:")
    assert "variants.threaded-busypoll.setup.sut.napi_threads.${iface}." + expected in found[0]


INVENTORY_SENTENCE = "this is an inventory (it has {signs}), not a profile: give it with -i"


@pytest.mark.parametrize("name,text,signs", [
    ("inventory.yaml", EXAMPLE_INVENTORY.read_text(),
     "transport:, host_key_policy:, hosts.sut.address"),
    ("ansible.yaml", "all:\n  hosts:\n    sut: {ansible_host: 198.51.100.10}\n", "all:"),
    ("list.json", json.dumps({"_meta": {"hostvars": {}}, "all": {"children": ["ungrouped"]}}),
     "all:, _meta:"),
    ("bare.yaml", "hosts:\n  sut: {address: 198.51.100.10, user: root}\n",
     "hosts.sut.address"),
])
def test_an_inventory_given_as_a_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         name: str, text: str, signs: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run_cli(capsys, "plan", str(path), "-i", str(EXAMPLE_INVENTORY))
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert INVENTORY_SENTENCE.format(signs=signs) in err


def test_an_ini_inventory_given_as_a_profile(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hosts"
    path.write_text("[lab]\nsut ansible_host=198.51.100.10\n")
    code, _, err = run_cli(capsys, "validate", str(path))
    assert code == 2
    assert err.strip() == (f"napilab: error: {path}:1:1: this is an Ansible INI inventory, "
                           "not a profile: give it with -i, and a profile as the first "
                           "argument")


def test_a_profile_given_as_an_inventory(capsys: pytest.CaptureFixture[str]) -> None:
    profile = ROOT / "profiles" / "demo.yaml"
    code, _, err = run_cli(capsys, "validate", str(profile), "-i", str(profile))
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "this is a profile (it has setup:, workload:, collect:), not an inventory" in err
