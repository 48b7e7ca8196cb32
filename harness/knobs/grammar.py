"""Grammar helpers the knob kinds share: a kind's mapping under `setup.<role>`, its
interface keys (`${iface}` allowed), and values checked by a converter, every problem
recorded at its file:line by the profile's Checker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from napilab.harness.errors import Written
from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import values
from napilab.runners.base import PLACEHOLDER, unresolved


def body(check: Checker, node: Node, key: str, path: str) -> Node | None:
    """The mapping under `key` (None, after recording why, when it is not one)."""
    return check.mapping(node[key], node.where(key), path)


def value(check: Checker, node: Node, key: str, path: str,
          convert: Callable[[object], str]) -> str | None:
    try:
        return str(convert(node[key]))
    except values.KnobValueError as exc:
        if not unresolved(node[key]):  # the unknown placeholder is the error, reported once
            check.error(node.where(key), at(node, key, path).key_path, str(exc))
        return None


def at(node: Node, key: str, path: str) -> Written:
    """Where node[key] was written; a short form (`rps: {eth0: "1"}`) is its own key."""
    return Written(node.where(key), join(path, key) if key in node.key_locations else path)


def iface_key(check: Checker, node: Node, key: str, path: str) -> bool:
    if PLACEHOLDER.fullmatch(key):
        return True
    try:
        values.check_iface(key)
        return True
    except values.KnobValueError as exc:
        check.error(node.key_locations.get(key), join(path, key), str(exc))
        return False


def interfaces(check: Checker, node: Node, path: str, *, short: bool = False,
               also: tuple[str, ...] = ()) -> Iterator[tuple[str, Node, str]]:
    """(iface, its mapping, its key path) for each valid interface key of `node`.
    `short`: a bare value stands for `{cpus: VALUE}`; `also`: other allowed keys."""
    for iface, raw in node.items():
        if iface not in also and not iface_key(check, node, iface, path):
            continue
        ipath = join(path, iface)
        if short and not isinstance(raw, Node):
            bare = Node({"cpus": raw})
            bare.value_locations["cpus"] = node.where(iface)  # type: ignore[assignment]
            yield iface, bare, ipath
            continue
        spec = check.mapping(raw, node.where(iface), ipath)
        if spec is not None:
            yield iface, spec, ipath


def attributes(check: Checker, node: Node, path: str, allowed: dict[str, Any]
               ) -> Iterator[tuple[str, str, str]]:
    """(iface, attribute, value) for `{IFACE: {ATTR: VALUE}}` where `allowed` maps each
    attribute to its converter."""
    for iface, attrs, _ in interfaces(check, node, path):
        check.keys(attrs, join(path, iface), allowed)
        for attr, convert in allowed.items():
            if attr in attrs:
                text = value(check, attrs, attr, join(path, iface), convert)
                if text is not None:
                    yield iface, attr, text
