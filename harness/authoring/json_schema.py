"""JSON Schema (draft 2020-12) of profiles and inventories, for editors
(`# yaml-language-server: $schema=...`) and `napilab schema profile|inventory`.

Built from the definitions the validator itself uses, never from a copy: the key sets
(TOP_KEYS, WORKLOAD_KEYS, ...), the choices (ORDERS, TOOLS, COLLECTORS, ...), the
numeric ranges (Number), every knob kind's own schema of its `setup` key (Kind.json_schema,
built from its converters) and every workload tool's ArgSpecs. The validator still
checks more than a schema can say (roles that exist, CPUs a host has, regexes that
compile, placeholders that resolve); the schema is what an editor can check as you type.
Any string value may hold a matrix placeholder `${name}`, so every leaf also accepts one.

Every top-level key, variant key and knob kind carries its hover text (`description`)
from the same definitions: harness.grammar.keys (PROFILE_KEY_HELP, VARIANT_KEY_HELP) and
each knob kind's docstring; each tool argument its ArgSpec help. A block used in several
places (a tool's arguments, a typed value) is one `$defs` entry and `$ref`s to it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping

from napilab.harness.grammar import keys, names
from napilab.harness.grammar.schema import Number
from napilab.harness.inventory import ansible as inventory_ansible
from napilab.harness.inventory import inventory
from napilab.harness.knobs import registry, values
from napilab.harness.knobs.json_parts import (
    CPU_LIST,
    CPU_LIST_DEF,
    PLACEHOLDER,
    STRING,
    Defs,
    Schema,
    described,
    leaf,
    mapping_of,
    obj,
    one_or_list,
    summary,
)
from napilab.harness.knobs.json_parts import regex as _regex
from napilab.harness.knobs.kind import Kind
from napilab.harness.profile import kernel, load, matrix, profile, sections, tune
from napilab.runners.collectors import netstat
from napilab.runners.collectors.trace import program as trace_program
from napilab.runners.registry import COLLECTORS, TOOLS
from napilab.runners.workloads.workload import ArgSpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _number(spec: Number) -> Schema:
    return leaf(spec.json())


def kind_help(kind: Kind) -> str:
    """A knob kind's hover text: the first paragraph of its class's docstring, else of
    its module's (one kind per module: the module says what its key sets)."""
    text = summary(type(kind).__doc__) or summary(sys.modules[type(kind).__module__].__doc__)
    if not text:
        raise TypeError(f"knob kind {kind.name}: no docstring to describe `{kind.key}:`")
    return text


def _setup_role() -> Schema:
    """`setup.<role>`: every knob kind of the registry describes its own key."""
    return obj({kind.key: described(kind.json_schema(), kind_help(kind))
                for kind in registry.kinds() if kind.key})


_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean",
               list: "array", dict: "object"}


def _arg(spec: ArgSpec, defs: Defs) -> Schema:
    """A tool argument: its help, and a reference to the value of its JSON types."""
    kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    types = sorted({_JSON_TYPES[k] for k in kinds})
    if spec.choices:
        return described(leaf({"type": types, "enum": list(spec.choices)}), spec.help)
    return described(defs.ref("value." + "-".join(types), lambda: leaf({"type": types})),
                     spec.help)


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


def _clients(defs: Defs) -> Schema:
    """`workload.clients`: role -> a process without `role` (the key is its role)."""
    process = {k: v for k, v in _process()["properties"].items() if k != "role"}
    return {"type": "object", "minProperties": 1,
            "additionalProperties": obj(process)}


def _side_args(name: str, side: str) -> Mapping[str, ArgSpec]:
    tool = TOOLS[name]
    return tool.client_args if side == "client" else tool.server_args


def _args(name: str, side: str, defs: Defs) -> Schema:
    """`SIDE.args` of tool NAME: its ArgSpecs and nothing else. One definition per
    family (netperf.*, sockperf.*) whose tools all take the same, else per tool."""
    family = name.split(".")[0]
    shared = all(_side_args(other, side) == _side_args(name, side)
                 for other in TOOLS if other.split(".")[0] == family)
    return defs.ref(f"args.{family if shared else name}.{side}", lambda: obj(
        {key: _arg(spec, defs) for key, spec in _side_args(name, side).items()}))


def _tool_args(name: str, defs: Defs) -> Schema:
    """The args of both sides of tool NAME, for a workload that names it and for one
    that inherits it."""
    return defs.ref(f"tool.{name}", lambda: {"properties": {
        side: {"properties": {"args": _args(name, side, defs)}} for side in ("client", "server")}})


def _workload(defs: Defs) -> Schema:
    """With `tool`, that tool's args only; without (a variant's overlay) the args of the
    profile's tool, which profile_schema checks (any, when a parent file names it)."""
    properties: Schema = {key: _number(spec) for key, spec in sections.WORKLOAD_NUMBERS.items()}
    process = defs.ref("process", _process)
    properties |= {"tool": {"enum": list(TOOLS)}, "client": process,
                   "clients": defs.ref("clients", lambda: _clients(defs)), "server": process,
                   "load": defs.ref("load", _load)}
    assert set(properties) == set(sections.WORKLOAD_KEYS)
    out = obj(properties)
    out["allOf"] = [{"if": {"required": ["tool"], "properties": {"tool": {"const": name}}},
                     "then": _tool_args(name, defs)} for name in TOOLS]
    return out


def _load() -> Schema:
    """`workload.load` (harness.profile.load): the rates, or a mapping with them."""
    rate: Schema = {"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                              {"type": "string", "pattern": r"^(max|\d+(\.\d+)?\s*[kKmMgG]?)$"}]}
    rates: Schema = {"type": "array", "items": rate, "minItems": 1}
    percent: Schema = {"anyOf": [{"type": "number", "minimum": 0},
                                 {"type": "string", "pattern": r"^\d+(\.\d+)?%?$"}]}
    ladder = obj({"rates": rates, "tolerance": percent, "knee": {"type": "number",
                  "exclusiveMinimum": 1}, "slo": {"type": "number", "minimum": 0},
                  "metric": {"type": "string"}, "max_regression": percent,
                  "unit": {"type": "string"}, "achieved": {"type": "array",
                  "items": {"type": "string"}}}, required=("rates",))
    assert set(ladder["properties"]) == set(load.LOAD_KEYS)
    return described({"anyOf": [rates, ladder]}, "offered-load ladder: the rates, or "
                     "{rates, tolerance, knee, slo, metric, max_regression}")


def _inherited_args(defs: Defs) -> list[Schema]:
    """A variant's workload without `tool` runs the profile's: its args are that tool's."""
    return [{"if": {"required": ["workload"], "properties": {"workload": {
                "required": ["tool"], "properties": {"tool": {"const": name}}}}},
             "then": {"properties": {"variants": {"additionalProperties": {"properties": {
                 "workload": {"if": {"not": {"required": ["tool"]}},
                              "then": _tool_args(name, defs)}}}}}}}
            for name in TOOLS]


def _collect() -> Schema:
    kinds = {"regex": leaf(STRING), "names": one_or_list(leaf(STRING)),
             "patterns": {"type": "object", "additionalProperties": leaf(STRING),
                          "propertyNames": {"pattern": "^[a-z][a-z0-9_]{0,63}$"},
                          "minProperties": 1},
             "functions": one_or_list(leaf({"type": "string",
                                            "pattern": _regex(sections._WORD)})),
             "since": {"enum": list(sections.SINCE)},
             "traced": {"enum": list(sections.TRACED)},
             "stages": one_or_list({"enum": list(trace_program.stages())}),
             "fields": one_or_list(leaf({"type": "string", "pattern": _regex(netstat.NAME)}))}
    return obj({name: obj({"roles": one_or_list(leaf(STRING)), "cpus": CPU_LIST,
                           **{key: kinds[kind] for key, kind in
                              collector.options.items()}})
                for name, collector in COLLECTORS.items()})


def _matrix() -> Schema:
    values = {"type": "array", "minItems": 1,
              "items": {"type": ["string", "number", "boolean"]}}
    long_form = obj({"parameters": mapping_of(values),
                     "name": STRING, "exclude": {"type": "array", "items": {"type": "object"}},
                     "variants": one_or_list(STRING)}, required=("parameters",))
    assert set(long_form["properties"]) == set(matrix.MATRIX_KEYS)
    return {"if": {"type": "object", "required": ["parameters"]}, "then": long_form,
            "else": mapping_of(values, keys=r"^[A-Za-z_][A-Za-z0-9_]*$")}


def _tune() -> Schema:
    """`tune:` (harness.profile.tune): the space, the goal, the budget."""
    scalar = {"type": ["string", "number", "boolean"]}
    param = {"anyOf": [{"type": "array", "minItems": 1, "items": scalar},
                       obj({"low": {"type": "number"}, "high": {"type": "number"},
                            "log": {"type": "boolean"}, "step": {"type": "number",
                                                                  "exclusiveMinimum": 0},
                            "choices": {"type": "array", "minItems": 1, "items": scalar}})]}
    assert set(param["anyOf"][1]["properties"]) == set(tune.PARAM_KEYS)
    bound = {"anyOf": [{"type": "number"}, obj({"min": {"type": "number"},
                                                "max": {"type": "number"}})]}
    bounds = mapping_of(bound)
    goal = obj({"minimise": STRING, "maximise": STRING, "subject_to": bounds,
                "front": {"type": "array", "items": STRING, "minItems": 2, "maxItems": 2}})
    assert set(goal["properties"]) == set(tune.GOAL_KEYS)
    seconds: Schema = {"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                              {"type": "string", "pattern": r"^\d+(\.\d+)?\s*(s|m|h)?$"}]}
    out = obj({"variant": STRING,
               "parameters": mapping_of(param, keys=r"^[A-Za-z_][A-Za-z0-9_]*$"),
               "goal": goal,
               "budget": obj({"trials": {"type": "integer", "minimum": 1,
                                         "maximum": tune.MAX_TRIALS}, "time": seconds}),
               "duration": {"type": "number", "minimum": 0.1},
               "confirm": obj({"top": {"type": "integer", "minimum": 1, "maximum": 20},
                               "repeat": {"type": "integer", "minimum": 2}}),
               "sampler": {"enum": list(tune.SAMPLERS)},
               "seed": {"type": "integer", "minimum": 0}, "guard": bounds},
              required=("parameters", "goal"))
    assert set(out["properties"]) == set(tune.TUNE_KEYS)
    return out


def _kernel() -> Schema:
    image: Schema = {"type": "string", "pattern": _regex(kernel._IMAGE)}
    word: Schema = {"type": "string", "pattern": _regex(kernel._WORD)}
    spec = obj({"image": image, "append": {"anyOf": [STRING, {"type": "array",
                                                              "items": word}]}})
    spec["anyOf"] = [{"required": ["image"]}, {"required": ["append"]}]  # append alone:
    assert set(spec["properties"]) == set(kernel.KERNEL_KEYS)  # the image it runs
    return mapping_of({"anyOf": [image, spec]})


def profile_schema() -> Schema:
    defs = Defs({"cpu_list": CPU_LIST_DEF, "placeholder": PLACEHOLDER})
    percent = leaf({"anyOf": [
        {"type": "number", "minimum": 0, "maximum": 1000},
        {"type": "string", "pattern": r"^\s*\d+(?:\.\d+)?\s*%?\s*$"}]})
    setup = defs.ref("setup", lambda: mapping_of(_setup_role()))
    workload = defs.ref("workload", lambda: _workload(defs))
    collect = defs.ref("collect", _collect)
    kernels = defs.ref("kernel", _kernel)
    overlay = {"description": STRING,
               "group": {"type": "string", "pattern": _regex(profile._GROUP)},
               "cores": {"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                                   {"type": "object", "minProperties": 1,
                                    "additionalProperties": {"type": "number",
                                                             "exclusiveMinimum": 0}}]},
               "setup": setup, "workload": workload, "collect": collect, "kernel": kernels}
    assert list(overlay) == list(profile.VARIANT_KEYS) == list(keys.VARIANT_KEY_HELP)
    properties: Schema = {
        "name": {"type": "string", "pattern": _regex(names.SAFE_NAME)},
        "description": STRING, "extends": one_or_list(STRING),
        "hosts": mapping_of({"anyOf": [STRING, obj({
            "host": STRING, "iface": {"type": "string", "pattern": _regex(values.IFACE)}},
            required=("host",))]}),
        "setup": setup, "workload": workload, "collect": collect,
        "report": obj({"table": {"type": "array", "items": obj(
            {k: leaf(STRING) for k in sections.TABLE_ROW_KEYS}, required=("source", "metric"))},
            "columns": mapping_of(one_or_list(STRING))}),
        "variants": mapping_of(obj({key: described(schema, keys.VARIANT_KEY_HELP[key])
                                    for key, schema in overlay.items()}),
                               keys=_regex(names.SAFE_NAME)),
        "baseline": STRING,
        "order": {"enum": list(profile.ORDERS)},
        "on_mismatch": {"enum": list(profile.ON_MISMATCH)},
        "metrics": mapping_of(obj({"direction": {"enum": list(profile.DIRECTIONS)},
                                   "min_effect": percent, "max_regression": percent,
                                   "primary": {"type": "boolean"}})),
        "matrix": _matrix(),
        "tune": _tune(),
        "kernel": kernels,
        "boot": {"enum": list(kernel.BOOT_MODES)},
        "bisect": obj({key: STRING for key in profile.BISECT_KEYS}),
        **{key: _number(spec) for key, spec in profile.TOP_NUMBERS.items()},
    }
    assert set(properties) == set(profile.TOP_KEYS)
    return {
        "$schema": DIALECT, "$id": "https://napilab.invalid/schema/profile.schema.json",
        "title": "napilab profile", "description": "Every key with an example: `napilab "
        "docs profiles`; `napilab validate` checks what a schema cannot (roles, CPUs, "
        "hosts).",
        "type": "object",
        "properties": {key: described(properties[key], keys.PROFILE_KEY_HELP[key])
                       for key in profile.TOP_KEYS},
        "additionalProperties": False,
        # a file that extends another may leave hosts and workload to its parent
        "if": {"required": ["extends"]}, "then": {},
        "else": {"required": ["hosts", "workload"],
                 "properties": {"workload": {"required": ["tool"], "oneOf": [
                     {"required": ["client"]}, {"required": ["clients"]}]}}},
        "allOf": _inherited_args(defs),
        "$defs": dict(sorted(defs.schemas.items())),
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
                  "additionalProperties": obj(types)},
        "replicas": {"type": "object",
                     "propertyNames": {"pattern": _regex(inventory._NAME)},
                     "additionalProperties": {
                         "type": "object", "minProperties": 1,
                         "additionalProperties": {
                             "type": "string", "pattern": _regex(inventory._NAME)}}}}
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
