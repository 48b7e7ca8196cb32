"""Deep merge of located YAML documents (`extends`, variant overlays): the child wins,
mappings merge key by key, everything else is replaced, and every value keeps the
location it was written at so errors point at the file that wrote it. Also the two
merges a profile is built by: its `extends` chain, and a variant's overlay that names
another tool."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from napilab.harness.errors import InputError, Location, Problem
from napilab.harness.grammar import keys
from napilab.harness.grammar.yamlsrc import Node, Seq

LIST_EDITS = ("after", "at")  # a variant's edit of a list it inherits (docs/profiles.md)


def deep_merge(base: Any, overlay: Any) -> Any:
    if isinstance(base, list) and isinstance(overlay, Node) and overlay \
            and set(overlay) <= set(LIST_EDITS):
        return edited(base, overlay)
    if not (isinstance(base, Node) and isinstance(overlay, Node)):
        return clone(overlay)
    result = clone(base)
    for key, value in overlay.items():
        result[key] = deep_merge(result[key], value) if key in result else clone(value)
        if key in overlay.key_locations:
            result.key_locations[key] = overlay.key_locations[key]
        if key in overlay.value_locations:
            result.value_locations[key] = overlay.value_locations[key]
        result.texts.pop(key, None)
        if key in overlay.texts:
            result.texts[key] = overlay.texts[key]
    return result


def edited(base: list[Any], edits: Node) -> Seq:
    """A list with some of its words replaced, without writing it out again:
    `{after: {-b: "256"}}` replaces the word after `-b` (its first occurrence),
    `{at: {3: "256"}}` the word at index 3 (from 0). A word or index the list does not
    have is an error at the edit."""
    out = clone(base) if isinstance(base, Seq) else Seq(clone(v) for v in base)
    words = [str(v) for v in out]
    problems = []
    for how in LIST_EDITS:
        body = edits.get(how)
        if how not in edits:
            continue
        if not isinstance(body, Node) or not body:
            shape = "option: new value" if how == "after" else "index: new value"
            problems.append(Problem(edits.where(how), how, f"`{how}` takes a mapping: "
                                    f"{shape}"))
            continue
        for key, value in body.items():
            where = body.where(key)
            if how == "after":
                index = words.index(key) + 1 if key in words else -1
                if index == -1 or index >= len(out):
                    problems.append(Problem(where, f"after.{key}", f"{key!r} is not followed "
                                            f"by a word in the list {words}" if index != -1
                                            else f"{key!r} is not in the list {words}"))
                    continue
            else:
                index = int(key) if key.lstrip("-").isdigit() else len(out)
                if not -len(out) <= index < len(out):
                    problems.append(Problem(where, f"at.{key}", f"{key!r} is not an index "
                                            f"of the list (0 to {len(out) - 1}): {words}"))
                    continue
            out[index] = clone(value)
            words[index] = str(value)
            if 0 <= index < len(out.item_locations) and where is not None:
                out.item_locations[index] = where
    if problems:
        raise InputError(problems)
    return out


def clone(value: Any) -> Any:
    """A deep copy that keeps locations (Node/Seq attributes survive copy.deepcopy)."""
    if isinstance(value, Node):
        out = Node({k: clone(v) for k, v in value.items()})
        out.location = value.location
        out.key_locations = dict(value.key_locations)
        out.value_locations = dict(value.value_locations)
        out.texts = dict(value.texts)
        return out
    if isinstance(value, Seq):
        seq = Seq(clone(v) for v in value)
        seq.location = value.location
        seq.item_locations = list(value.item_locations)
        seq.item_texts = list(value.item_texts)
        return seq
    if value is None or isinstance(value, str | int | float | bool):
        return value  # immutable
    return copy.deepcopy(value)


def located(value: Any) -> Any:
    """Plain data (a document stored in a manifest) as YAML without locations, so that
    deep_merge applies to it."""
    if isinstance(value, dict):
        return Node({str(k): located(v) for k, v in value.items()})
    if isinstance(value, list):
        return Seq(located(v) for v in value)
    return value


def plain(value: Any) -> Any:
    """Located YAML as plain dicts and lists (for the manifest and hashing)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def resolve_extends(path: Path, chain: list[Path]) -> Node:
    """The profile at `path` with its `extends` files merged under it, parents first
    (a list in order, each resolved the same way); a cycle or a missing file is an
    error naming it."""
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in [*chain, resolved])
        raise InputError([Problem(None, "extends", f"cycle: {cycle}")])
    document = keys.load_profile_document(path)
    if not isinstance(document, Node):
        raise InputError([Problem(Location(str(path), 1, 1), "",
                                  "a profile is a YAML mapping of keys (name, hosts, ...)")])
    parents = document.get("extends")
    if parents is None:
        return document
    parent_list = [parents] if isinstance(parents, str) else parents
    if not isinstance(parent_list, list) or not all(isinstance(p, str) for p in parent_list):
        raise InputError([Problem(document.where("extends"), "extends",
                                  "expected a file name or a list of file names")])
    merged = Node()
    for parent in parent_list:
        parent_path = (path.parent / parent)
        if not parent_path.exists():
            raise InputError([Problem(document.where("extends"), "extends",
                                      f"{parent}: no such file (looked in {path.parent})")])
        if not parent_path.is_file():  # /dev/zero, a FIFO, a directory: never read
            raise InputError([Problem(document.where("extends"), "extends",
                                      f"{parent}: not a regular file")])
        merged = deep_merge(merged, resolve_extends(parent_path, [*chain, resolved]))
    child = clone(document)
    child.pop("extends")
    result: Node = deep_merge(merged, child)
    result.location = document.location
    return result


def without_other_tool(base: Node, overlay: Node) -> Node:
    """A variant that names another tool gets a fresh workload, not the base's args
    merged into its own."""
    workload = overlay.get("workload")
    base_workload = base.get("workload")
    if (isinstance(workload, Node) and isinstance(base_workload, Node)
            and "tool" in workload and workload["tool"] != base_workload.get("tool")):
        stripped: Node = clone(base)
        stripped.pop("workload")
        return stripped
    return base
