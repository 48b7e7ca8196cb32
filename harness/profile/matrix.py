"""`matrix` sweeps: the cross product of parameters, each combination a variant.

    matrix: {budget: [8, 64, 256, 512]}                 # short form
    matrix:
      parameters: {busy_budget: [0, 64, 256], cores: [1, 2]}
      name: "${cores}c-budget-${busy_budget}"           # default: cores-1-busy_budget-0
      exclude: [{cores: 2, busy_budget: 64}]
      variants: [xdpsock]                               # cross only these variants

A parameter is used as `${name}` anywhere in the profile's strings (setup keys and
values, workload args, wrapper, env, collect); a string that is exactly `${name}`
takes the parameter's value with its type. With explicit `variants`, every variant is
crossed with every combination (`${variant}` names the variant in `name`). Names the
engine fills in at run time are reserved.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from napilab.harness.errors import Location
from napilab.harness.grammar.names import ALLOWED, unsafe
from napilab.harness.grammar.schema import Checker, join, suggest, type_name
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.harness.profile.merge import clone
from napilab.runners.base import PLACEHOLDER, RESERVED, fill

MATRIX_KEYS = ("parameters", "name", "exclude", "variants")


@dataclass(frozen=True)
class Combination:
    name: str
    values: dict[str, Any]
    texts: dict[str, str]  # each value as written (`off`, `1.10`), for names


@dataclass(frozen=True)
class Matrix:
    parameters: dict[str, list[Any]]
    template: str | None
    excludes: list[dict[str, tuple[Any, str]]]  # parameter -> (value, as written)
    variants: list[str] | None  # the explicit variants it crosses (None: all of them)
    texts: dict[str, list[str]]  # each parameter's values as written


def _written(seq: Seq, index: int) -> str:
    text = seq.text(index)
    return text if text is not None else _text(seq[index])


def parse_matrix(check: Checker, node: Node, path: str = "matrix",
                 variant_names: Collection[str] = ()) -> Matrix:
    """A `matrix:` mapping, short form (parameters only) or long form."""
    long_form = "parameters" in node
    if long_form:
        check.keys(node, path, MATRIX_KEYS, required=("parameters",))
        params_node = check.mapping(node["parameters"], node.where("parameters"),
                                    join(path, "parameters")) or Node()
        params_path = join(path, "parameters")
    else:
        params_node, params_path = node, path
    parameters: dict[str, list[Any]] = {}
    texts: dict[str, list[str]] = {}
    for name, values in params_node.items():
        where = params_node.key_locations.get(name)
        if name in RESERVED or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            check.error(where, join(params_path, name), "not a usable parameter name"
                        + (f" ({name!r} is filled in by napilab)" if name in RESERVED else ""))
            continue
        if not isinstance(values, Seq) or not values or any(
                isinstance(v, dict | list) or v is None for v in values):
            check.error(params_node.where(name), join(params_path, name),
                        f"expected a non-empty list of values, got {type_name(values)}")
            continue
        parameters[name] = list(values)
        texts[name] = [_written(values, i) for i in range(len(values))]
    template = check.get(node, "name", path, str) if long_form else None
    raw_excludes = node.get("exclude") if long_form else None
    excludes = _excludes(check, node, raw_excludes, path, parameters, texts, variant_names) \
        if raw_excludes is not None else []
    variants = check.string_list(node, "variants", path) if long_form else None
    return Matrix(parameters, template, excludes, variants, texts)


def _excludes(check: Checker, node: Node, raw: Any, path: str,
              parameters: dict[str, list[Any]], texts: dict[str, list[str]],
              variant_names: Collection[str]) -> list[dict[str, tuple[Any, str]]]:
    """`exclude:` entries, each value one of its parameter's (or a variant's name):
    an entry that can match nothing is an error at its value, not a silent no-op."""
    if not isinstance(raw, Seq):
        check.error(node.where("exclude"), join(path, "exclude"), "expected a list")
        return []
    excludes = []
    for i, item in enumerate(raw):
        at = join(path, f"exclude[{i}]")
        entry = check.mapping(item, raw.item_locations[i], at)
        if entry is None:
            continue
        written = {key: (value, entry.text(key) or _text(value)) for key, value in entry.items()}
        for key, wanted in written.items():
            choices = list(variant_names) if key == "variant" else texts.get(key)
            if choices is None:
                check.error(entry.key_locations.get(key), join(at, key),
                            f"not a parameter{suggest(key, parameters)}")
            elif key == "variant" and wanted[1] not in choices:
                check.error(entry.where(key), join(at, key), f"no variant {wanted[1]!r}"
                            f"{suggest(wanted[1], choices)}" if choices else
                            "the profile has no `variants:` for it to name")
            elif key != "variant" and not any(
                    _same(v, t, wanted) for v, t in zip(parameters[key], choices, strict=True)):
                check.error(entry.where(key), join(at, key), f"{wanted[1]!r} is not one of "
                            f"{key}'s values {choices}{suggest(wanted[1], choices)}")
        excludes.append(written)
    return excludes


def _same(value: Any, text: str, wanted: tuple[Any, str]) -> bool:
    """An exclude's value matches a combination's: written alike (`off` and `off`), or
    the same number (`64` and `64.0`); never a boolean for a number or a name."""
    other, other_text = wanted
    if text == other_text:
        return True
    numbers = [v for v in (value, other) if isinstance(v, int | float)
               and not isinstance(v, bool)]
    return len(numbers) == 2 and value == other


def combinations(spec: Matrix, variant: str | None) -> list[Combination]:
    names = list(spec.parameters)
    out = []
    for index in itertools.product(*(range(len(spec.parameters[n])) for n in names)):
        combo = {n: spec.parameters[n][i] for n, i in zip(names, index, strict=True)}
        texts = {n: spec.texts[n][i] for n, i in zip(names, index, strict=True)}
        context = {**texts, **({"variant": variant} if variant else {})}
        typed = {**combo, **({"variant": variant} if variant else {})}
        if any(all(k in context and _same(typed[k], context[k], v) for k, v in ex.items())
               for ex in spec.excludes):
            continue
        if spec.template:
            name = fill(spec.template, context)
        else:
            name = "-".join(([variant] if variant else [])
                            + [f"{k}-{t}" for k, t in texts.items()])
        out.append(Combination(name, combo, texts))
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def substitute_text(text: str, values: dict[str, Any]) -> str:
    return fill(text, {name: _text(value) for name, value in values.items()})


def substitute_string(text: str, values: dict[str, Any]) -> Any:
    """TEXT with its placeholders filled in; exactly one placeholder: the value itself."""
    whole = PLACEHOLDER.fullmatch(text)
    if whole and whole[1] in values:
        return values[whole[1]]
    return substitute_text(text, values)


def substitute(value: Any, values: dict[str, Any]) -> Any:
    """Replace `${param}` in every string (keys included); a string that is exactly one
    placeholder becomes the parameter's value with its type. Locations are kept."""
    if isinstance(value, str):
        return substitute_string(value, values)
    if isinstance(value, Node):
        out = Node()
        out.location = value.location
        for key, item in value.items():
            new_key = substitute_text(key, values)
            out[new_key] = substitute(item, values)
            if key in value.key_locations:
                out.key_locations[new_key] = value.key_locations[key]
            if key in value.value_locations:
                out.value_locations[new_key] = value.value_locations[key]
        return out
    if isinstance(value, Seq):
        seq = Seq(substitute(v, values) for v in value)
        seq.location = value.location
        seq.item_locations = list(value.item_locations)
        return seq
    return clone(value)


def placeholders(value: Any) -> set[str]:
    """Every `${name}` used in a document."""
    found: set[str] = set()
    if isinstance(value, str):
        found.update(PLACEHOLDER.findall(value))
    elif isinstance(value, dict):
        for key, item in value.items():
            found.update(PLACEHOLDER.findall(str(key)))
            found |= placeholders(item)
    elif isinstance(value, list):
        for item in value:
            found |= placeholders(item)
    return found


def check_name(check: Checker, name: str, where: Any, path: str) -> None:
    if unsafe(name):
        check.error(where, path, f"variant name {name!r}: use {ALLOWED}")


def unknown_placeholders(check: Checker, document: Node, values: dict[str, Any],
                          declared: Collection[str]) -> None:
    """A placeholder that is neither napilab's nor a matrix parameter, at the value that
    holds it (a parameter written under `matrix:` but malformed has its own error)."""
    known = {*RESERVED, *values, *declared}
    for name in sorted(placeholders(document) - known):
        where, path = first_use(document, "${" + name + "}", "")
        check.error(where or document.location, path, f"unknown placeholder ${{{name}}}; "
                    f"matrix parameters are {sorted(values)}{suggest(name, values)}")


def declared_parameters(document: Node) -> set[str]:
    """The parameter names written under `matrix:` (and `tune.parameters`), well-formed
    or not."""
    found: set[str] = set()
    tune = document.get("tune")
    if isinstance(tune, dict) and isinstance(tune.get("parameters"), dict):
        found |= {str(k) for k in tune["parameters"]}  # `napilab tune`'s (profile.tune)
    matrix = document.get("matrix")
    if not isinstance(matrix, dict):
        return found
    params = matrix.get("parameters", matrix)
    return found | ({str(k) for k in params} if isinstance(params, dict) else set())


def first_use(value: Any, text: str, path: str) -> tuple[Location | None, str]:
    """Where the first string holding TEXT was written, and its key path."""
    items = value.items() if isinstance(value, Node) else enumerate(value) \
        if isinstance(value, Seq) else ()
    for key, item in items:
        inner = join(path, key)
        if isinstance(item, str) and text in item:
            return (value.where(key) if isinstance(key, str) and isinstance(value, Node)
                    else value.item_locations[int(key)]), inner
        if isinstance(key, str) and text in key and isinstance(value, Node):
            return value.key_locations.get(key), inner
        found = first_use(item, text, inner)
        if found[0] is not None:
            return found
    return None, path
