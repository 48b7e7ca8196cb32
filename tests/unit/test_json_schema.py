"""The JSON Schema editors read agrees with the validator: every shipped profile and
inventory passes both; the malformed corpus fails the schema except where only the
validator can know (roles, a host's CPUs, regexes, placeholders); an unknown key or
bad value injected anywhere into a shipped profile is refused by both or by neither;
the schema files shipped beside the profiles are what `napilab schema` prints; every
top-level key, variant key, knob kind and tool argument has its hover text, from the
validator's own tables and docstrings; no block of the schema is written out twice."""

from __future__ import annotations

import json
from collections import Counter
from copy import deepcopy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from napilab.harness.authoring import shipped
from napilab.harness.authoring.json_schema import (
    SCHEMAS,
    inventory_schema,
    kind_help,
    profile_schema,
    schema_text,
)
from napilab.harness.errors import InputError
from napilab.harness.grammar import keys
from napilab.harness.knobs import registry
from napilab.harness.profile.profile import load_profile
from napilab.runners.registry import TOOLS
from tests.cli import run_cli
from tests.unit.test_malformed import CASES

PROFILES = sorted(p for p in shipped.profiles_dir().glob("*.yaml") if "inventory" not in p.name)
INVENTORIES = sorted(shipped.profiles_dir().glob("inventory*.yaml"))
# Mistakes only the validator can see: what a role, a host or a placeholder is, whether
# a regex compiles, whether a CPU range runs backwards, YAML's duplicate keys.
SEMANTIC = {"baseline-unknown", "collect-bad-regex", "collect-bad-role", "cpus-beyond-host",
            "hosts-not-in-inventory", "matrix-unused", "placeholder-unknown",
            "setup-unknown-role", "table-bad-role", "workload-cpus-host",
            "workload-cpus-range", "workload-unknown-role", "yaml-duplicate-key"}


def validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = profile_schema() if kind == "profile" else inventory_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", PROFILES + INVENTORIES, ids=lambda p: p.name)
def test_shipped_files_pass_the_schema_and_name_it(path: Path) -> None:
    kind = "inventory" if path in INVENTORIES else "profile"
    errors = [f"{list(e.absolute_path)}: {e.message}"
              for e in validator(kind).iter_errors(yaml.safe_load(path.read_text()))]
    assert errors == []
    first = path.read_text().splitlines()[0]
    assert first == f"# yaml-language-server: $schema=schema/{kind}.schema.json"
    assert (path.parent / "schema" / f"{kind}.schema.json").is_file()


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_shipped_schema_files_are_current(kind: str) -> None:
    """Regenerate with `napilab schema KIND -o profiles/schema/KIND.schema.json`."""
    assert shipped.schema_file(kind).read_text() == schema_text(kind)


def test_the_malformed_corpus_mostly_fails_the_schema() -> None:
    profiles, inventories = validator("profile"), validator("inventory")
    passed, failed, not_yaml = [], [], []
    for name, (text, _) in sorted(CASES.items()):
        inventory = text.startswith("INV:\n")
        try:
            doc = yaml.safe_load(text.removeprefix("INV:\n"))
        except yaml.YAMLError:
            not_yaml.append(name)
            continue
        check = inventories if inventory else profiles
        (failed if list(check.iter_errors(doc)) else passed).append(name)
    print(f"\n    [schema] {len(failed)} of {len(failed) + len(passed)} malformed cases fail "
          f"the JSON Schema ({len(not_yaml)} more are not YAML)")
    assert set(passed) == SEMANTIC
    assert len(failed) >= 3 * len(passed)


def _mappings(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    if isinstance(node, dict):
        out.append(path)
        for key, value in node.items():
            out += _mappings(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _mappings(value, (*path, i))
    return out


def _semantic(doc: Any, where: tuple[Any, ...]) -> bool:
    """Places where what a key may be depends on the rest of the profile: setup, kernel
    and a variant's cores are keyed by the profile's roles, report.columns name its
    variants, matrix
    excludes by its parameters, with a matrix name template a new variant may
    collide with another, and a tuned profile has exactly two variants and uses every
    parameter in its template; metric names are those the profile's tool and
    collectors produce."""
    return (where[-1:] in (("setup",), ("kernel",), ("cores",)) or where == ("metrics",)
            or where[:2] == ("matrix", "exclude")
            or where[:2] == ("report", "columns") or where == ("tune", "parameters")
            or (where == ("variants",) and ("name" in (doc.get("matrix") or {})
                                            or "tune" in doc)))


def _with(doc: Any, path: tuple[Any, ...], key: str, value: Any) -> Any:
    copy = deepcopy(doc)
    node = copy
    for part in path:
        node = node[part]
    node[key] = value
    return copy


def _validator_accepts(doc: Any, tmp_path: Path) -> bool:
    path = tmp_path / "injected.yaml"
    path.write_text(yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
    try:
        load_profile(path)
    except InputError:
        return False
    return True


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_schema_and_validator_agree_on_injected_keys(path: Path, tmp_path: Path) -> None:
    """At every mapping of a shipped profile, add a key holding an empty mapping, a
    string and a number: closed mappings refuse it in both, open ones (variants,
    metrics, roles, sysctl names...) decide alike on the value."""
    doc = yaml.safe_load(path.read_text())
    check = validator("profile")
    disagree = []
    for where in [w for w in _mappings(doc) if not _semantic(doc, w)]:
        for value in ({}, "zz", 7):
            changed = _with(doc, where, "zz_unknown", value)
            by_schema = not list(check.iter_errors(changed))
            by_validator = _validator_accepts(changed, tmp_path)
            if by_schema != by_validator:
                disagree.append((where, value, f"schema {by_schema}, validator {by_validator}"))
    assert disagree == []


def test_napilab_schema_prints_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for kind in SCHEMAS:
        done = run_cli(capsys, "schema", kind)
        assert done.code == 0
        assert done.out == schema_text(kind)
    done = run_cli(capsys, "schema", "profiles")
    assert done.code == 2
    assert "'profiles' is not one of 'profile', 'inventory'" in done.err


def test_every_key_and_knob_kind_has_its_hover_text() -> None:
    """Editors show `description`: each top-level and variant key's is its line in
    harness.grammar.keys, each `setup` knob kind's the first paragraph of its
    docstring, which opens with the key's grammar."""
    schema = profile_schema()
    top = schema["properties"]
    assert {key: value.get("description") for key, value in top.items()} == \
        keys.PROFILE_KEY_HELP
    variant = top["variants"]["additionalProperties"]["properties"]
    assert {key: value.get("description") for key, value in variant.items()} == \
        keys.VARIANT_KEY_HELP
    role = schema["$defs"]["setup"]["additionalProperties"]["properties"]
    assert set(role) == set(registry.profile_keys())
    for key, kind in registry.profile_keys().items():
        assert role[key]["description"] == kind_help(kind)
        assert kind_help(kind).startswith(f"`{key}:"), key
        assert "\n" not in kind_help(kind)


def test_every_tool_argument_has_its_help() -> None:
    defs = profile_schema()["$defs"]
    for name, tool in TOOLS.items():
        sides = defs[f"tool.{name}"]["properties"]
        for side, specs in (("client", tool.client_args), ("server", tool.server_args)):
            ref = sides[side]["properties"]["args"]["$ref"].removeprefix("#/$defs/")
            described = {k: v["description"] for k, v in defs[ref]["properties"].items()}
            assert described == {k: spec.help for k, spec in specs.items()}, (name, side)


def _subschemas(node: Any) -> list[Any]:
    out = []
    if isinstance(node, dict):
        out.append(node)
        for value in node.values():
            out += _subschemas(value)
    elif isinstance(node, list):
        for value in node:
            out += _subschemas(value)
    return out


def test_no_block_is_written_twice() -> None:
    """A block used in several places is one `$defs` entry that each place refers to:
    each tool's args once (not per tool in a workload and again in every variant that
    inherits it), a family's shared args once. Written out, they were 594 KB and took
    check-jsonschema 4 s to compile (benchmarks/schema_size.py)."""
    seen = Counter(json.dumps(s, sort_keys=True) for s in _subschemas(profile_schema()))
    repeated = {text[:80]: count for text, count in seen.items()
                if count > 1 and len(text) >= 1000}
    assert repeated == {}
    assert len(schema_text("profile")) < 200_000
