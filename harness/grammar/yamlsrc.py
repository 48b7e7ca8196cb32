"""YAML loading that remembers where every key and value was written.

Profiles and inventories are plain YAML (safe loader: no tags, no executable config).
Mappings load as `Node` dicts that carry the location of each key and value, so every
validation error can name file:line:column and the key path.

Limits (docs/profiles.md, "Limits"), each a clear InputError before any host is touched:
a file of at most MAX_BYTES, read only from a regular file (or standard input); nesting
at most MAX_DEPTH deep; at most MAX_NODES values once aliases are expanded (an alias
bomb is refused from its node graph, without expanding it). libyaml's parser
(yaml.CSafeLoader, with the same marks) is used where PyYAML was built with it.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from napilab.harness.errors import InputError, Location, Problem
from napilab.harness.redact import REDACTED


class Node(dict[str, Any]):
    """A YAML mapping with the locations of its keys and values. Keys are the text as
    written (`off:` is the key 'off', not False); `texts` keeps the text of each plain
    value YAML 1.1 read as a boolean or number (`group: off`, `baseline: 1.10`), so a
    name is what the user typed (Checker.get, Checker.string_list)."""

    location: Location | None
    key_locations: dict[str, Location]
    value_locations: dict[str, Location]
    texts: dict[str, str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.location = None
        self.key_locations = {}
        self.value_locations = {}
        self.texts = {}

    def where(self, key: str) -> Location | None:
        return self.value_locations.get(key) or self.key_locations.get(key) or self.location

    def text(self, key: str) -> str | None:
        """node[key] as written when it is a string or a plain scalar YAML typed."""
        value = self.get(key)
        return value if isinstance(value, str) else self.texts.get(key)


class Seq(list[Any]):
    """A YAML sequence with the location of each item, and the text of each plain item
    YAML 1.1 read as a boolean or number (`[on, off, 1.10]`; None for the others)."""

    location: Location | None
    item_locations: list[Location]
    item_texts: list[str | None]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.location = None
        self.item_locations = []
        self.item_texts = []

    def text(self, index: int) -> str | None:
        """self[index] as written when it is a string or a plain scalar YAML typed."""
        value = self[index]
        if isinstance(value, str):
            return value
        return self.item_texts[index] if index < len(self.item_texts) else None


def _written(node: yaml.Node, value: Any) -> str | None:
    """The text of a plain scalar YAML 1.1 resolved to a boolean or a number."""
    if isinstance(node, yaml.ScalarNode) and isinstance(value, bool | int | float):
        return str(node.value)
    return None


MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 1_000_000
LIMITS = "docs/profiles.md, Limits"


def _loc(name: str, mark: yaml.Mark) -> Location:
    return Location(name, mark.line + 1, mark.column + 1)


# libyaml where PyYAML has it: ~20x faster on large profiles, the same marks
_BASE: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE):  # type: ignore[valid-type,misc]
    source_name = "<string>"
    depth = 0


@contextmanager
def _nested(loader: _Loader, node: yaml.Node) -> Iterator[None]:
    """One level deeper while NODE's children are built; past MAX_DEPTH an InputError."""
    if loader.depth >= MAX_DEPTH:
        raise InputError([Problem(_loc(loader.source_name, node.start_mark), "",
                                  f"nested more than {MAX_DEPTH} levels deep ({LIMITS})")])
    loader.depth += 1
    try:
        yield
    finally:
        loader.depth -= 1


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> Node:
    with _nested(loader, node):
        return _mapping(loader, node)


def _mapping(loader: _Loader, node: yaml.MappingNode) -> Node:
    loader.flatten_mapping(node)
    result = Node()
    result.location = _loc(loader.source_name, node.start_mark)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool):
            raise InputError([Problem(_loc(loader.source_name, key_node.start_mark), "",
                                      "mapping keys must be plain scalars")])
        # a key is a name as written: `off:` and `1.10:` stay 'off' and '1.10'
        key = _written(key_node, key) or str(key)
        if key in result:
            raise InputError([Problem(_loc(loader.source_name, key_node.start_mark), key,
                                      "duplicate key (YAML would keep only the last one)")])
        result[key] = loader.construct_object(value_node, deep=True)
        if (text := _written(value_node, result[key])) is not None:
            result.texts[key] = text
        result.key_locations[key] = _loc(loader.source_name, key_node.start_mark)
        result.value_locations[key] = _loc(loader.source_name, value_node.start_mark)
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> Seq:
    with _nested(loader, node):
        result = Seq(loader.construct_object(child, deep=True) for child in node.value)
    result.location = _loc(loader.source_name, node.start_mark)
    result.item_locations = [_loc(loader.source_name, c.start_mark) for c in node.value]
    result.item_texts = [_written(c, v) for c, v in zip(node.value, result, strict=True)]
    return result


def expanded_size(root: yaml.Node, name: str) -> int:
    """How many values the document holds with every alias expanded, counted on the node
    graph (each node once, with its children's counts): linear in the file, so an
    alias bomb is measured without being expanded. Over MAX_NODES is an InputError."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = [c for pair in node.value for c in pair] \
            if isinstance(node, yaml.MappingNode) else list(node.value) \
            if isinstance(node, yaml.SequenceNode) else []
        if done or not children:
            total = 1 + sum(sizes.get(id(c), 0) for c in children)
            if total > MAX_NODES:
                raise InputError([Problem(_loc(name, node.start_mark), "",
                                          f"more than {MAX_NODES:,} values once its aliases "
                                          f"are expanded ({LIMITS})")])
            sizes[id(node)] = total
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


# C0 and C1 control characters and DEL. A NUL is dropped by a remote sh and refused by
# a local exec; a newline turns one value into two lines of a file or a command.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_TEXT_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # free text: \t \n allowed
FREE_TEXT = ("description",)


def control_characters(data: Any, path: str = "") -> list[Problem]:
    """Every key and string value that holds a control character (tabs and newlines
    are allowed in `description` texts only)."""
    problems: list[Problem] = []
    if isinstance(data, Node):
        for key, value in data.items():
            shown = _CONTROL.sub(lambda m: repr(m[0])[1:-1], key)
            where = f"{path}.{shown}" if path else shown
            if _CONTROL.search(key):
                problems.append(Problem(data.key_locations.get(key), where,
                                        f"the key {key!r} contains a control character"))
            if isinstance(value, str):
                pattern = _TEXT_CONTROL if key in FREE_TEXT else _CONTROL
                if pattern.search(value):
                    # an `env:` value is a secret (harness.redact): never in an error
                    shown = REDACTED if path == "env" or path.endswith(".env") \
                        else repr(value)
                    problems.append(Problem(data.where(key), where, f"{shown} contains a "
                                            "control character"))
            else:
                problems += control_characters(value, where)
    elif isinstance(data, Seq):
        for index, item in enumerate(data):
            where = f"{path}[{index}]"
            if isinstance(item, str) and _CONTROL.search(item):
                location = data.item_locations[index] if index < len(data.item_locations) \
                    else data.location
                problems.append(Problem(location, where,
                                        f"{item!r} contains a control character"))
            elif not isinstance(item, str):
                problems += control_characters(item, where)
    return problems


def load_text(text: str, name: str) -> Any:
    """Parse YAML text; syntax errors, and control characters in any key or value,
    become InputError with file:line:column."""
    if len(text) > MAX_BYTES:
        raise InputError([Problem(Location(name, 1, 1), "", f"{len(text):,} characters: a "
                                  f"YAML file holds at most {MAX_BYTES:,} ({LIMITS})")])
    loader = _Loader(text)
    loader.source_name = name
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        expanded_size(root, name)
        data = loader.construct_document(root)
        problems = control_characters(data)
        if problems:
            raise InputError(problems)
        return data
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = _loc(name, mark) if mark is not None else None
        reason = exc.problem or exc.context or "invalid YAML"
        raise InputError([Problem(where, "", f"YAML syntax error: {reason}")]) from None
    except yaml.YAMLError as exc:
        raise InputError([Problem(None, "", f"{name}: YAML error: {exc}")]) from None
    except RecursionError:  # the pure-Python composer, before MAX_DEPTH could be checked
        raise InputError([Problem(Location(name, 1, 1), "", f"nested more than "
                                  f"{MAX_DEPTH} levels deep ({LIMITS})")]) from None
    finally:
        loader.dispose()


def read_file(path: str | Path) -> str:
    """A file's text (`-`: standard input), at most MAX_BYTES of it; a missing, unreadable
    or not regular file (a device, a FIFO, a directory) is an InputError."""
    if str(path) == "-":
        import sys

        stream = getattr(sys.stdin, "buffer", None)
        raw = stream.read(MAX_BYTES + 1) if stream is not None \
            else sys.stdin.read(MAX_BYTES + 1).encode()
        _limited(raw, "<stdin>")
        return raw.decode("utf-8", errors="replace")
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # before open: a FIFO would block it
            raise InputError(f"{path}: not a regular file")
        with path.open("rb") as stream:
            data = stream.read(MAX_BYTES + 1)
        _limited(data, str(path))
        return data.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None


def _limited(data: bytes, name: str) -> None:
    if len(data) > MAX_BYTES:
        raise InputError(f"{name}: over {MAX_BYTES:,} bytes, napilab's limit for a YAML "
                         f"file ({LIMITS})")


def load_file(path: str | Path) -> Any:
    """Read and parse a YAML file; a missing or unreadable file is an InputError."""
    return load_text(read_file(path), "<stdin>" if str(path) == "-" else str(path))
