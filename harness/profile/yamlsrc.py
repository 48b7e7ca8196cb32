"""YAML loading that remembers where every key and value was written.

Profiles and inventories are plain YAML (safe loader: no tags, no executable config).
Mappings load as `Node` dicts that carry the location of each key and value, so every
validation error can name file:line:column and the key path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.errors import InputError, Location, Problem


class Node(dict[str, Any]):
    """A YAML mapping with the locations of its keys and values."""

    location: Location | None
    key_locations: dict[str, Location]
    value_locations: dict[str, Location]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.location = None
        self.key_locations = {}
        self.value_locations = {}

    def where(self, key: str) -> Location | None:
        return self.value_locations.get(key) or self.key_locations.get(key) or self.location


class Seq(list[Any]):
    """A YAML sequence with the location of each item."""

    location: Location | None
    item_locations: list[Location]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.location = None
        self.item_locations = []


def _loc(name: str, mark: yaml.Mark) -> Location:
    return Location(name, mark.line + 1, mark.column + 1)


class _Loader(yaml.SafeLoader):
    source_name = "<string>"


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> Node:
    loader.flatten_mapping(node)
    result = Node()
    result.location = _loc(loader.source_name, node.start_mark)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool):
            raise InputError([Problem(_loc(loader.source_name, key_node.start_mark), "",
                                      "mapping keys must be plain scalars")])
        key = str(key)
        if key in result:
            raise InputError([Problem(_loc(loader.source_name, key_node.start_mark), key,
                                      "duplicate key (YAML would keep only the last one)")])
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_locations[key] = _loc(loader.source_name, key_node.start_mark)
        result.value_locations[key] = _loc(loader.source_name, value_node.start_mark)
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> Seq:
    result = Seq(loader.construct_object(child, deep=True) for child in node.value)
    result.location = _loc(loader.source_name, node.start_mark)
    result.item_locations = [_loc(loader.source_name, c.start_mark) for c in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_text(text: str, name: str) -> Any:
    """Parse YAML text; syntax errors become InputError with file:line:column."""
    loader = _Loader(text)
    loader.source_name = name
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _loc(name, mark) if mark is not None else None
        reason = exc.problem or exc.context or "invalid YAML"
        raise InputError([Problem(where, "", f"YAML syntax error: {reason}")]) from None
    except yaml.YAMLError as exc:
        raise InputError([Problem(None, "", f"{name}: YAML error: {exc}")]) from None
    finally:
        loader.dispose()


def read_file(path: str | Path) -> str:
    """A file's text (`-`: standard input); a missing or unreadable file is an InputError."""
    if str(path) == "-":
        import sys

        return sys.stdin.read()
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None


def load_file(path: str | Path) -> Any:
    """Read and parse a YAML file; a missing or unreadable file is an InputError."""
    return load_text(read_file(path), "<stdin>" if str(path) == "-" else str(path))
