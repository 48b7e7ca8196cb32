"""A small checker that walks located YAML and collects every problem at once.

Each accessor reads one key of a `Node`, checks its type or range and returns the typed
value, or records a `Problem` (file:line:column, key path, what was expected, and a
did-you-mean for misspelt keys and values) and returns None. Callers raise one
`InputError` with all problems at the end, so a user fixes everything in one pass.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from napilab.harness.errors import InputError, Location, Problem
from napilab.harness.grammar.yamlsrc import Node, Seq

T = TypeVar("T")


def suggest(word: str, choices: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the closest choice, or ''."""
    options = list(choices)
    same = [c for c in options if c.lower() == word.lower()]  # FIFO for fifo
    close = same or difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


@dataclass(frozen=True)
class Number:
    """The range of a numeric key: what Checker.num accepts and what the JSON Schema
    says (harness.authoring.json_schema reads the same objects)."""

    minimum: float | None = None
    maximum: float | None = None
    integer: bool = False

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer" if self.integer else "number"}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return out


class Checker:
    def __init__(self, default_location: Location | None = None) -> None:
        self.problems: list[Problem] = []
        self.default_location = default_location

    def error(self, where: Location | None, path: str, message: str) -> None:
        self.problems.append(Problem(where or self.default_location, path, message))

    def raise_if_any(self) -> None:
        if self.problems:
            self.problems.sort(key=lambda p: (p.location.file, p.location.line, p.location.column)
                               if p.location else ("", 0, 0))
            raise InputError(self.problems)

    def keys(self, node: Node, path: str, allowed: Collection[str],
             required: Collection[str] = ()) -> None:
        """Unknown keys (with a did-you-mean) and missing required keys."""
        for key in node:
            if key not in allowed:
                self.error(node.key_locations.get(key), join(path, key),
                           f"unknown key; expected one of {sorted(allowed)}{suggest(key, allowed)}")
        for key in required:
            if key not in node:
                self.error(node.location, join(path, key), "required key is missing")

    def mapping(self, value: Any, where: Location | None, path: str) -> Node | None:
        if value is None:
            return Node()
        if isinstance(value, Node):
            return value
        self.error(where, path, f"expected a mapping, got {type_name(value)}")
        return None

    def get(self, node: Node, key: str, path: str, kind: type[T] | tuple[type, ...],
            *, required: bool = False, default: Any = None) -> Any:
        """Read node[key] if it has the given type; booleans are never numbers."""
        if key not in node:
            if required:
                self.error(node.location, join(path, key), "required key is missing")
            return default
        value = node[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if not ok and str in kinds and key in node.texts:
            return node.texts[key]  # `group: off`, `baseline: 1.10`: the name as written
        if not ok:
            names = " or ".join(type_name(k()) if k is not type(None) else "null" for k in kinds)
            self.error(node.where(key), join(path, key), f"expected {names}, got "
                       f"{type_name(value)} {value!r}" if not isinstance(value, dict | list)
                       else f"expected {names}, got {type_name(value)}")
            return default
        return value

    def number(self, node: Node, key: str, path: str, *, minimum: float | None = None,
               maximum: float | None = None, integer: bool = False, required: bool = False,
               default: float | None = None) -> Any:
        kinds: tuple[type, ...] = (int,) if integer else (int, float)
        value = self.get(node, key, path, kinds, required=required, default=None)
        if value is None:
            return default
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            bounds = (f"{minimum if minimum is not None else '-inf'}.."
                      f"{maximum if maximum is not None else 'inf'}")
            self.error(node.where(key), join(path, key), f"{value} is out of range {bounds}")
            return default
        return value

    def num(self, node: Node, key: str, path: str, spec: Number, *, required: bool = False,
            default: float | None = None) -> Any:
        return self.number(node, key, path, minimum=spec.minimum, maximum=spec.maximum,
                           integer=spec.integer, required=required, default=default)

    def choice(self, node: Node, key: str, path: str, choices: Collection[str], *,
               default: str | None = None, required: bool = False) -> Any:
        value = self.get(node, key, path, str, required=required, default=None)
        if value is None:
            return default
        if value not in choices:
            self.error(node.where(key), join(path, key), f"{value!r} is not one of "
                       f"{sorted(choices)}{suggest(value, choices)}")
            return default
        return value

    def string_list(self, node: Node, key: str, path: str) -> list[str] | None:
        value = node.get(key)
        if value is None:
            return None
        if isinstance(value, str) or key in node.texts:
            return [node.text(key) or ""]
        if isinstance(value, Seq):  # each item as written: `[on, 1.10]` is 'on', '1.10'
            items = [value.text(i) if value.text(i) is not None else str(v)
                     if isinstance(v, int | float) and not isinstance(v, bool) else None
                     for i, v in enumerate(value)]
            if all(item is not None for item in items):
                return [item for item in items if item is not None]
        self.error(node.where(key), join(path, key), "expected a list of strings")
        return None


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key
