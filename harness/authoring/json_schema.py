"""JSON Schema (draft 2020-12) of profiles and inventories, for editors
(`# yaml-language-server: $schema=...`) and `napilab schema profile|inventory`.

Built from the definitions the validator itself uses, never from a copy: the key sets
(TOP_KEYS, WORKLOAD_KEYS, ...), the choices (ORDERS, TOOLS, COLLECTORS, ...), the
numeric ranges (Number), every knob kind's own schema of its `setup` key (Kind.json_schema,
built from its converters) and every workload tool's ArgSpecs. The validator still
checks more than a schema can say (roles that exist, CPUs a host has, regexes that
compile, placeholders that resolve); the schema is what an editor can check as you type.
Any string value may hold a matrix placeholder `${name}`, so every leaf also accepts one.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from harness.authoring.json_parts import (
    CPU_LIST,
    CPU_LIST_DEF,
    PLACEHOLDER,
    STRING,
    Schema,
    leaf,
    mapping_of,
    obj,
    one_or_list,
)
from harness.authoring.json_parts import regex as _regex
from harness.inventory import ansible as inventory_ansible
from harness.inventory import inventory
from harness.knobs import registry, values
from harness.profile import kernel, matrix, names, profile, sections
from harness.profile.schema import Number
from runners.collectors.collector import COLLECTORS
from runners.registry import TOOLS
from runners.workloads.workload import ArgSpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _number(spec: Number) -> Schema:
    return leaf(spec.json())


def _setup_role() -> Schema:
    """`setup.<role>`: every knob kind of the registry describes its own key."""
    return obj({kind.key: kind.json_schema() for kind in registry.kinds() if kind.key})


def _arg(spec: ArgSpec) -> Schema:
    names = {int: "integer", float: "number", str: "string", bool: "boolean",
             list: "array", dict: "object"}
    kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    out: Schema = {"type": sorted({names[k] for k in kinds}), "description": spec.help}
    if spec.choices:
        out["enum"] = list(spec.choices)
    return leaf(out)


def _process() -> Schema:
    properties: Schema = {
        "role": leaf(STRING), "cpus": CPU_LIST, "args": {"type": ["object", "null"]},
        "wrapper": one_or_list(leaf({"type": ["string", "number"]})),
        "env": mapping_of(leaf({"type": ["string", "number"]}),
                          keys=_regex(sections._ENV)),
        "show_env": one_or_list(leaf({"type": "string", "pattern": _regex(sections._ENV)})),
    }
    assert set(properties) == set(sections.PROCESS_KEYS)
    return obj(properties)


def _tool_args(name: str) -> Schema:
    """`client.args` and `server.args` of tool NAME: its ArgSpecs and nothing else."""
    tool = TOOLS[name]
    return {"properties": {side: {"properties": {"args": obj(
        {k: _arg(v) for k, v in args.items()})}}
        for side, args in (("client", tool.client_args), ("server", tool.server_args))}}


def _workload() -> Schema:
    """With `tool`, that tool's args only; without (a variant's overlay) the args of the
    profile's tool, which profile_schema checks (any, when a parent file names it)."""
    properties: Schema = {key: _number(spec) for key, spec in sections.WORKLOAD_NUMBERS.items()}
    properties |= {"tool": {"enum": list(TOOLS)}, "client": _process(),
                   "server": _process()}
    assert set(properties) == set(sections.WORKLOAD_KEYS)
    out = obj(properties)
    out["allOf"] = [{"if": {"required": ["tool"], "properties": {"tool": {"const": name}}},
                     "then": _tool_args(name)} for name in TOOLS]
    return out


def _inherited_args() -> list[Schema]:
    """A variant's workload without `tool` runs the profile's: its args are that tool's."""
    return [{"if": {"required": ["workload"], "properties": {"workload": {
                "required": ["tool"], "properties": {"tool": {"const": name}}}}},
             "then": {"properties": {"variants": {"additionalProperties": {"properties": {
                 "workload": {"if": {"not": {"required": ["tool"]}},
                              "then": _tool_args(name)}}}}}}}
            for name in TOOLS]


def _collect() -> Schema:
    kinds = {"regex": leaf(STRING), "names": one_or_list(leaf(STRING)),
             "patterns": {"type": "object", "additionalProperties": leaf(STRING),
                          "propertyNames": {"pattern": "^[a-z][a-z0-9_]{0,63}$"},
                          "minProperties": 1},
             "functions": one_or_list(leaf({"type": "string",
                                            "pattern": _regex(sections._WORD)})),
             "since": {"enum": list(sections.SINCE)}}
    return obj({name: obj({"roles": one_or_list(leaf(STRING)), "cpus": CPU_LIST,
                           **{key: kinds[kind] for key, kind in
                              sections.COLLECTOR_OPTIONS.get(name, {}).items()}})
                for name in COLLECTORS})


def _matrix() -> Schema:
    values = {"type": "array", "minItems": 1,
              "items": {"type": ["string", "number", "boolean"]}}
    long_form = obj({"parameters": mapping_of(values),
                     "name": STRING, "exclude": {"type": "array", "items": {"type": "object"}},
                     "variants": one_or_list(STRING)}, required=("parameters",))
    assert set(long_form["properties"]) == set(matrix.MATRIX_KEYS)
    return {"if": {"type": "object", "required": ["parameters"]}, "then": long_form,
            "else": mapping_of(values, keys=r"^[A-Za-z_][A-Za-z0-9_]*$")}


def _kernel() -> Schema:
    image: Schema = {"type": "string", "pattern": _regex(kernel._IMAGE)}
    word: Schema = {"type": "string", "pattern": _regex(kernel._WORD)}
    spec = obj({"image": image, "append": {"anyOf": [STRING, {"type": "array",
                                                              "items": word}]}},
               required=("image",))
    assert set(spec["properties"]) == set(kernel.KERNEL_KEYS)
    return mapping_of({"anyOf": [image, spec]})


def profile_schema() -> Schema:
    setup = _setup_role()
    percent = leaf({"anyOf": [
        {"type": "number", "minimum": 0, "maximum": 1000},
        {"type": "string", "pattern": r"^\s*\d+(?:\.\d+)?\s*%?\s*$"}]})
    overlay = {"description": STRING,
               "group": {"type": "string", "pattern": _regex(profile._GROUP)},
               "setup": {"$ref": "#/$defs/setup"},
               "workload": {"$ref": "#/$defs/workload"},
               "collect": {"$ref": "#/$defs/collect"},
               "kernel": {"$ref": "#/$defs/kernel"}}
    assert set(overlay) == set(profile.VARIANT_KEYS)
    properties: Schema = {
        "name": {"type": "string", "pattern": _regex(names.SAFE_NAME)},
        "description": STRING, "extends": one_or_list(STRING),
        "hosts": mapping_of({"anyOf": [STRING, obj({
            "host": STRING, "iface": {"type": "string", "pattern": _regex(values.IFACE)}},
            required=("host",))]}),
        "setup": {"$ref": "#/$defs/setup"},
        "workload": {"$ref": "#/$defs/workload"},
        "collect": {"$ref": "#/$defs/collect"},
        "report": obj({"table": {"type": "array", "items": obj(
            {k: leaf(STRING) for k in sections.TABLE_ROW_KEYS}, required=("source", "metric"))},
            "columns": mapping_of(one_or_list(STRING))}),
        "variants": mapping_of(obj(overlay), keys=_regex(names.SAFE_NAME)),
        "baseline": STRING,
        "order": {"enum": list(profile.ORDERS)},
        "on_mismatch": {"enum": list(profile.ON_MISMATCH)},
        "metrics": mapping_of(obj({"direction": {"enum": list(profile.DIRECTIONS)},
                                   "min_effect": percent, "max_regression": percent,
                                   "primary": {"type": "boolean"}})),
        "matrix": _matrix(),
        "kernel": {"$ref": "#/$defs/kernel"},
        "boot": {"enum": list(kernel.BOOT_MODES)},
        **{key: _number(spec) for key, spec in profile.TOP_NUMBERS.items()},
    }
    assert set(properties) == set(profile.TOP_KEYS)
    return {
        "$schema": DIALECT, "$id": "https://napilab.invalid/schema/profile.schema.json",
        "title": "napilab profile", "description": "docs/profiles.md has every key with an "
        "example; `napilab validate` checks what a schema cannot (roles, CPUs, hosts).",
        "type": "object", "properties": properties, "additionalProperties": False,
        # a file that extends another may leave hosts and workload to its parent
        "if": {"required": ["extends"]}, "then": {},
        "else": {"required": ["hosts", "workload"],
                 "properties": {"workload": {"required": ["tool", "client"]}}},
        "allOf": _inherited_args(),
        "$defs": {"setup": mapping_of(setup), "workload": _workload(), "collect": _collect(),
                  "kernel": _kernel(), "cpu_list": CPU_LIST_DEF, "placeholder": PLACEHOLDER},
    }


def inventory_schema() -> Schema:
    address: Schema = {"type": "string", "anyOf": [
        {"pattern": _regex(inventory.HOSTNAME)}, {"pattern": r"^[0-9A-Fa-f:.]+(?:%\w+)?$"}]}
    types: dict[str, Schema] = {
        "address": address, "data_address": address, "key": STRING, "known_hosts": STRING,
        "user": {"type": "string", "pattern": _regex(inventory._USER)},
        "netns": {"type": "string", "pattern": _regex(inventory._NAME)},
        "iface": {"type": "string", "pattern": _regex(inventory._IFACE)},
        "transport": {"enum": list(inventory.TRANSPORTS)},
        "host_key_policy": {"enum": list(inventory.HOST_KEY_POLICIES)},
        "become": {"enum": list(inventory.BECOME)},
        **{key: spec.json() for key, spec in inventory.HOST_NUMBERS.items()},
        "boot": obj({"method": {"enum": list(inventory.BOOT_METHODS)}, "testbed": STRING,
                     "guest": STRING, "timeout": inventory.BOOT_TIMEOUT.json()},
                    required=("method",)),
    }
    assert set(types) == set(inventory._HOST_KEYS)
    top: Schema = {
        "transport": types["transport"], "host_key_policy": types["host_key_policy"],
        "ssh_config": STRING,
        "hosts": {"type": "object", "minProperties": 1,
                  "propertyNames": {"pattern": _regex(inventory._NAME)},
                  "additionalProperties": obj(types)}}
    assert set(top) == set(inventory.INVENTORY_KEYS)
    own = {"type": "object", "additionalProperties": False, "required": ["hosts"],
           "properties": top}
    # Ansible variables: those napilab reads are typed, the others are Ansible's.
    variables: Schema = {"type": ["object", "null"], "properties": {
        **{name: types[key] for name, key in inventory_ansible.ANSIBLE_KEYS.items()},
        **{f"napilab_{key}": types[key] for key in inventory_ansible.NAPILAB_KEYS},
        "ansible_become_method": {"enum": list(inventory.BECOME)}}}
    group = obj({"hosts": mapping_of(variables),
                 "children": mapping_of({"$ref": "#/$defs/group"}), "vars": variables})
    assert set(group["properties"]) == set(inventory_ansible._GROUP_KEYS)
    return {
        "$schema": DIALECT, "$id": "https://napilab.invalid/schema/inventory.schema.json",
        "title": "napilab inventory", "description": "napilab's own format (a top-level "
        "`hosts:`) or an Ansible YAML inventory (groups such as `all:`).",
        "if": {"type": "object", "required": ["hosts"]}, "then": own,
        "else": {"type": "object", "minProperties": 1, "additionalProperties": {
            "$ref": "#/$defs/group"}},
        "$defs": {"group": group},
    }


SCHEMAS: dict[str, Callable[[], Schema]] = {"profile": profile_schema,
                                             "inventory": inventory_schema}


def schema_text(kind: str) -> str:
    return json.dumps(SCHEMAS[kind](), indent=1) + "\n"
