"""Deep merge of located YAML documents (`extends`, variant overlays): the child wins,
mappings merge key by key, everything else is replaced, and every value keeps the
location it was written at so errors point at the file that wrote it."""

from __future__ import annotations

import copy
from typing import Any

from harness.profile.yamlsrc import Node, Seq


def deep_merge(base: Any, overlay: Any) -> Any:
    if not (isinstance(base, Node) and isinstance(overlay, Node)):
        return clone(overlay)
    result = clone(base)
    for key, value in overlay.items():
        result[key] = deep_merge(result[key], value) if key in result else clone(value)
        if key in overlay.key_locations:
            result.key_locations[key] = overlay.key_locations[key]
        if key in overlay.value_locations:
            result.value_locations[key] = overlay.value_locations[key]
    return result


def clone(value: Any) -> Any:
    """A deep copy that keeps locations (Node/Seq attributes survive copy.deepcopy)."""
    if isinstance(value, Node):
        out = Node({k: clone(v) for k, v in value.items()})
        out.location = value.location
        out.key_locations = dict(value.key_locations)
        out.value_locations = dict(value.value_locations)
        return out
    if isinstance(value, Seq):
        seq = Seq(clone(v) for v in value)
        seq.location = value.location
        seq.item_locations = list(value.item_locations)
        return seq
    return copy.deepcopy(value)


def plain(value: Any) -> Any:
    """Located YAML as plain dicts and lists (for the manifest and hashing)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
