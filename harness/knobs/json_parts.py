"""JSON Schema (draft 2020-12) building blocks: closed mappings, values that may be a
matrix placeholder `${name}`, CPU lists, the schema of a knob value converter, shared
definitions (`$defs`) referenced wherever a block recurs, hover text from docstrings. The
profile's schema (harness.authoring.json_schema) is assembled from them, and each knob
kind describes its own `setup.<role>.<key>` with them (Kind.json_schema), so a new kind
brings its schema along."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from napilab.harness.grammar import cpus
from napilab.harness.knobs import values

Schema = dict[str, Any]
PLACEHOLDER: Schema = {"type": "string", "pattern": r"\$\{[A-Za-z_][A-Za-z0-9_]*\}"}


def regex(pattern: re.Pattern[str] | str, placeholder: bool = False) -> str:
    """A Python regex as an anchored ECMA-262 one (the subset napilab uses is common)."""
    text = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
    body = text.removeprefix("^").removesuffix("$")
    if placeholder:
        body = f"{body}|{PLACEHOLDER['pattern']}"
    return f"^(?:{body})$"


class Defs:
    """The `$defs` of a schema being built: a block used in more than one place is
    defined once, by name, and each place holds a `$ref` to it (the 600 KB of a tool's
    arguments repeated per tool and per side were what made editors and
    check-jsonschema slow; benchmarks/schema_size.py)."""

    def __init__(self, fixed: Mapping[str, Schema] | None = None) -> None:
        self.schemas: dict[str, Schema] = dict(fixed or {})

    def ref(self, name: str, build: Callable[[], Schema]) -> Schema:
        """A reference to definition NAME, built (once) by `build` when first asked for."""
        if name not in self.schemas:
            self.schemas[name] = {}  # a build that refers to itself finds the name taken
            self.schemas[name] = build()
        return {"$ref": f"#/$defs/{name}"}


def described(schema: Schema, text: str) -> Schema:
    """SCHEMA with the hover text editors show for its key (next to a `$ref`, too)."""
    return {**schema, "description": text}


def summary(doc: str | None) -> str:
    """A docstring's first paragraph on one line: a knob kind's hover text."""
    paragraph = (doc or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split())


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
IFACE_KEY = regex(values.IFACE, placeholder=True)
WORD: Schema = {"type": "string", "pattern": regex(values.WORD)}


def spellings(table: Mapping[str, str]) -> Schema:
    """A value spelt as one of `table`'s words (digits also as integers, YAML booleans)."""
    words = sorted(table)
    return leaf({"enum": [*words, *(int(w) for w in words if w.isdigit()), True, False]})


def converter(convert: Callable[[object], str]) -> Schema:
    """The schema of a knob value converter of harness.knobs.values."""
    if isinstance(convert, values.IntegerRange):
        return leaf({"anyOf": [{"type": "integer", "minimum": convert.low,
                                "maximum": convert.high},
                               {"type": "string", "pattern": r"^\s*[+-]?\d+\s*$"}]})
    if convert is values.cpu_list:
        return CPU_LIST
    raise TypeError(f"no JSON Schema for knob converter {convert!r}")
