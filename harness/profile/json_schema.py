"""JSON Schema (draft 2020-12) of profiles and inventories, for editors
(`# yaml-language-server: $schema=...`) and `napilab schema profile|inventory`.

Built from the definitions the validator itself uses, never from a copy: the key sets
(TOP_KEYS, SETUP_KINDS, WORKLOAD_KEYS, ...), the choices (ORDERS, POLICIES, TOOLS,
COLLECTORS, ...), the numeric ranges (Number), the knob value converters (IntegerRange,
the `threaded` spellings) and every workload tool's ArgSpecs. The validator still
checks more than a schema can say (roles that exist, CPUs a host has, regexes that
compile, placeholders that resolve); the schema is what an editor can check as you type.
Any string value may hold a matrix placeholder `${name}`, so every leaf also accepts one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from harness.profile import cpus, inventory, inventory_ansible, knobs, matrix, profile, sections
from harness.profile import setup as setup_kinds
from harness.profile.schema import Number
from runners.collectors.collector import COLLECTORS
from runners.registry import TOOLS
from runners.workloads.workload import ArgSpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"
Schema = dict[str, Any]
_PLACEHOLDER: Schema = {"type": "string", "pattern": r"\$\{[A-Za-z_][A-Za-z0-9_]*\}"}


def _regex(pattern: re.Pattern[str] | str, placeholder: bool = False) -> str:
    """A Python regex as an anchored ECMA-262 one (the subset napilab uses is common)."""
    text = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
    body = text.removeprefix("^").removesuffix("$")
    if placeholder:
        body = f"{body}|{_PLACEHOLDER['pattern']}"
    return f"^(?:{body})$"


def leaf(schema: Schema) -> Schema:
    """A value, or a placeholder standing for one."""
    return {"anyOf": [schema, {"$ref": "#/$defs/placeholder"}]}


def obj(properties: Mapping[str, Schema], *, required: Iterable[str] = (),
        description: str | None = None) -> Schema:
    """A closed mapping (unknown keys are errors, as in the validator); an empty value
    (`key:` with nothing) is an empty mapping to the validator, so null passes too."""
    out: Schema = {"type": ["object", "null"], "properties": dict(properties),
                   "additionalProperties": False}
    if required:
        out["required"] = list(required)
    if description:
        out["description"] = description
    return out


def mapping_of(values: Schema, *, keys: str | None = None) -> Schema:
    out: Schema = {"type": ["object", "null"], "additionalProperties": values}
    if keys:
        out["propertyNames"] = {"pattern": keys}
    return out


def one_or_list(item: Schema) -> Schema:
    return {"anyOf": [item, {"type": "array", "items": item}]}


STRING: Schema = {"type": "string"}
_LIST_BODY = cpus._LIST.pattern.removeprefix("^").removesuffix("$")
CPU_LIST: Schema = {"$ref": "#/$defs/cpu_list"}
# an IRQ needs at least one CPU: no empty list, no `none`
CPUS_SOME: Schema = leaf({"anyOf": [
    {"type": "integer", "minimum": 0, "maximum": cpus.MAX_CPUS - 1},
    {"type": "string", "pattern": rf"^\s*(?:{_LIST_BODY})\s*$"}]})
CPU_LIST_DEF: Schema = leaf({"anyOf": [
    {"type": "integer", "minimum": 0, "maximum": cpus.MAX_CPUS - 1},
    {"type": "string", "pattern": rf"^\s*(?:none|{_LIST_BODY})?\s*$"}]})
IFACE_KEY = _regex(knobs._IFACE, placeholder=True)


def _number(spec: Number) -> Schema:
    return leaf(spec.json())


def _converter(convert: Callable[[object], str]) -> Schema:
    """The schema of a knob value converter of harness.profile.knobs."""
    if isinstance(convert, knobs.IntegerRange):
        return leaf({"anyOf": [{"type": "integer", "minimum": convert.low,
                                "maximum": convert.high},
                               {"type": "string", "pattern": r"^\s*[+-]?\d+\s*$"}]})
    spellings = {knobs.NETDEV_ATTRS["threaded"]: knobs.SYSFS_THREADED,
                 knobs.napi_threaded: knobs.NAPI_THREADED}
    if convert in spellings:
        words = sorted(spellings[convert])
        return leaf({"enum": [*words, *(int(w) for w in words if w.isdigit()), True, False]})
    if convert is knobs.cpu_list:
        return CPU_LIST
    raise TypeError(f"no JSON Schema for knob converter {convert!r}")


SYSCTL_VALUE: Schema = leaf({"anyOf": [
    {"type": "integer"}, {"type": "string", "pattern": _regex(knobs.SYSCTL_WORD)},
    {"type": "array", "items": {"anyOf": [
        {"type": "integer"}, {"type": "string", "pattern": _regex(knobs.SYSCTL_WORD)}]}}]})
ON_OFF: Schema = {"enum": ["on", "off", True, False]}


def _queues(kind: str) -> Schema:
    keys = setup_kinds.QUEUE_KEYS[kind]
    properties: Schema = {"cpus": CPU_LIST,
                          "queues": one_or_list(leaf({"type": "string",
                                                      "pattern": r"^(?:rx|tx)-(?:\d{1,4}|\*)$"}))}
    if "flow_cnt" in keys:
        properties["flow_cnt"] = _converter(setup_kinds.RPS_FLOW_CNT)
    assert set(properties) == set(keys)
    return mapping_of({"anyOf": [CPU_LIST, obj(properties)]}, keys=IFACE_KEY)


def _setup_role() -> Schema:
    napi_attrs = {spelling: _converter(convert)
                  for attr, convert in setup_kinds.NAPI_ATTRS.items()
                  for spelling in dict.fromkeys((attr, attr.replace("-", "_")))}
    ethtool_name = _regex(setup_kinds._ETHTOOL_NAME)
    ethtool_groups = {
        "coalesce": mapping_of(leaf({"anyOf": [{"type": "integer", "minimum": 0}, ON_OFF]}),
                               keys=ethtool_name),
        "channels": mapping_of(leaf({"type": "integer", "minimum": 0}), keys=ethtool_name),
        "features": mapping_of(leaf(ON_OFF), keys=ethtool_name),
    }
    assert set(ethtool_groups) == set(setup_kinds.ETHTOOL_GROUPS)
    kinds: dict[str, Schema] = {
        "sysctl": mapping_of(SYSCTL_VALUE, keys=_regex(knobs._SYSCTL)),
        "irqbalance": leaf({"enum": list(setup_kinds.IRQBALANCE)}),
        "cpufreq": obj({"cpus": CPU_LIST, "governor": leaf(
            {"type": "string", "pattern": _regex(setup_kinds._GOVERNOR)})},
            required=setup_kinds.CPUFREQ_KEYS),
        "netdev": mapping_of(obj({a: _converter(c) for a, c in knobs.NETDEV_ATTRS.items()}),
                             keys=IFACE_KEY),
        "napi": mapping_of(obj(napi_attrs), keys=IFACE_KEY),
        "ethtool": mapping_of(obj(ethtool_groups), keys=IFACE_KEY),
        "rps": _queues("rps"),
        "xps": _queues("xps"),
        "irq_affinity": mapping_of({"anyOf": [CPUS_SOME, obj(
            {"cpus": CPUS_SOME, "match": leaf(STRING)}, required=("cpus",))]}, keys=IFACE_KEY),
        "napi_threads": mapping_of(obj({
            "cpus": CPU_LIST, "policy": leaf({"enum": list(setup_kinds.POLICIES)}),
            "priority": leaf({"type": "integer", "minimum": 0, "maximum": 99})}),
            keys=_regex(f"{knobs._IFACE.pattern}|backlog", placeholder=True)),
    }
    assert set(kinds) == set(setup_kinds.SETUP_KINDS)
    return obj(kinds)


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
                                            "pattern": _regex(sections._WORD)}))}
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


def profile_schema() -> Schema:
    setup = _setup_role()
    percent = leaf({"anyOf": [
        {"type": "number", "minimum": 0, "maximum": 1000},
        {"type": "string", "pattern": r"^\s*\d+(?:\.\d+)?\s*%?\s*$"}]})
    overlay = {"description": STRING,
               "group": {"type": "string", "pattern": _regex(profile._GROUP)},
               "setup": {"$ref": "#/$defs/setup"},
               "workload": {"$ref": "#/$defs/workload"},
               "collect": {"$ref": "#/$defs/collect"}}
    assert set(overlay) == set(profile.VARIANT_KEYS)
    properties: Schema = {
        "name": STRING, "description": STRING, "extends": one_or_list(STRING),
        "hosts": mapping_of({"anyOf": [STRING, obj({
            "host": STRING, "iface": {"type": "string", "pattern": _regex(knobs._IFACE)}},
            required=("host",))]}),
        "setup": {"$ref": "#/$defs/setup"},
        "workload": {"$ref": "#/$defs/workload"},
        "collect": {"$ref": "#/$defs/collect"},
        "report": obj({"table": {"type": "array", "items": obj(
            {k: leaf(STRING) for k in sections.TABLE_ROW_KEYS}, required=("source", "metric"))}}),
        "variants": mapping_of(obj(overlay), keys=_regex(matrix._NAME)),
        "baseline": STRING,
        "order": {"enum": list(profile.ORDERS)},
        "on_mismatch": {"enum": list(profile.ON_MISMATCH)},
        "metrics": mapping_of(obj({"direction": {"enum": list(profile.DIRECTIONS)},
                                   "min_effect": percent, "max_regression": percent,
                                   "primary": {"type": "boolean"}})),
        "matrix": _matrix(),
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
                  "cpu_list": CPU_LIST_DEF, "placeholder": _PLACEHOLDER},
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
