"""Ansible inventories in their other shapes, read into the group tree of an Ansible YAML
inventory (`{all: {hosts: {...}, vars: {...}, children: {...}}}`) with every key and
value located, so harness.inventory.ansible reads them all alike:

- INI files (`[group]`, `[group:vars]`, `[group:children]`, `host key=value ...`,
  host ranges `web[01:03]`, `host:port`); hosts before any section are ungrouped;
- `ansible-inventory --list` JSON (`{"_meta": {"hostvars": ...}, "all": {"children":
  [...]}, "group": {"hosts": [...], "vars": {...}}}`), from a file or standard input;
- `group_vars/` and `host_vars/` beside the inventory file (GroupVars).
"""

from __future__ import annotations

import re
import shlex
import string
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import InputError, Location, Problem
from harness.profile.yamlsrc import Node, Seq, load_file

_SECTION = re.compile(r"^\[([^\]\s]+)\]\s*(?:[#;].*)?$")
_HOST_LINE = re.compile(r"^[A-Za-z0-9_.\[\]-]+(?::\d+)?(?:\s+[A-Za-z_]\w*=\S*)*\s*(?:#.*)?$")
_RANGE = re.compile(r"\[([0-9]+|[a-z]):([0-9]+|[a-z])\]")
_VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")


def looks_like_ini(text: str) -> bool:
    """The first line that is not blank or a comment is an INI section or host line."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        return bool((_SECTION.match(stripped) and "," not in stripped)
                    or (_HOST_LINE.match(stripped) and not stripped.startswith("[")))
    return False


def _node(where: Location | None) -> Node:
    node = Node()
    node.location = where
    return node


def _put(node: Node, key: str, value: object, where: Location | None) -> None:
    node[key] = value
    if where is not None:
        node.key_locations[key] = where
        node.value_locations[key] = where


def _value(text: str) -> object:
    """INI values: integers as integers (ansible_port=2222), the rest as written."""
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else text


def expand_range(pattern: str) -> list[str]:
    """`web[01:03]` -> web01, web02, web03; `db-[a:c]` -> db-a, db-b, db-c."""
    match = _RANGE.search(pattern)
    if not match:
        return [pattern]
    low, high = match[1], match[2]
    if low.isdigit() != high.isdigit():
        return [pattern]
    if low.isdigit():
        items = [str(i).zfill(len(low)) for i in range(int(low), int(high) + 1)]
    else:
        letters = string.ascii_lowercase
        items = list(letters[letters.index(low):letters.index(high) + 1])
    head, tail = pattern[:match.start()], pattern[match.end():]
    return [name for item in items for name in expand_range(head + item + tail)]


@dataclass
class _Group:
    node: Node
    children: list[tuple[str, Location]] = field(default_factory=list)


def parse_ini(text: str, name: str) -> Node:
    """An INI inventory as the group tree of a YAML one, under `all`."""
    groups: dict[str, _Group] = {}
    problems: list[Problem] = []
    start = Location(name, 1, 1)

    def group(group_name: str, where: Location) -> _Group:
        if group_name not in groups:
            groups[group_name] = _Group(_node(where))
        return groups[group_name]

    current, kind = "ungrouped", "hosts"
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        where = Location(name, number, len(line) - len(line.lstrip()) + 1)
        if not stripped or stripped.startswith(("#", ";")):
            continue
        section = _SECTION.match(stripped)
        if section:
            current, _, kind = section[1].partition(":")
            kind = kind or "hosts"
            if kind not in ("hosts", "vars", "children"):
                problems.append(Problem(where, current, f"[{section[1]}]: unknown section "
                                        "kind; expected [group], [group:vars] or "
                                        "[group:children]"))
            group(current, where)
            continue
        try:
            words = shlex.split(stripped, comments=True)
        except ValueError as exc:
            problems.append(Problem(where, current, f"cannot split this line: {exc}"))
            continue
        target = group(current, where).node
        if kind == "children":
            groups[current].children.append((words[0], where))
        elif kind == "vars":
            key, sep, value = stripped.partition("=")
            if not sep:
                problems.append(Problem(where, f"{current}.vars", "expected key=value"))
                continue
            variables = target.setdefault("vars", _node(where))
            _put(variables, key.strip(), _value(value.strip().strip("'\"")), where)
        else:
            _host_line(target, words, line, where, problems, current)
    if problems:
        raise InputError(problems)
    return _tree(groups, start)


def _host_line(target: Node, words: list[str], line: str, where: Location,
               problems: list[Problem], current: str) -> None:
    hosts = target.setdefault("hosts", _node(where))
    pattern, _, port = words[0].rpartition(":") if re.search(r":\d+$", words[0]) \
        else (words[0], "", "")
    variables = _node(where)
    if port:
        _put(variables, "ansible_port", int(port), where)
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep:
            problems.append(Problem(where, f"{current}.hosts.{pattern}",
                                    f"{word!r}: expected key=value"))
            continue
        column = line.find(f"{key}=")
        _put(variables, key, _value(value),
             Location(where.file, where.line, column + 1) if column >= 0 else where)
    for host in expand_range(pattern):
        _put(hosts, host, variables, where)


def _tree(groups: dict[str, _Group], start: Location) -> Node:
    """Groups nested by their [group:children] sections, every top one under `all`."""
    nested = {child for g in groups.values() for child, _ in g.children}
    for info in groups.values():
        if info.children:
            children = info.node.setdefault("children", _node(info.children[0][1]))
            for child, where in info.children:
                _put(children, child, groups[child].node if child in groups
                     else _node(where), where)
    everything = groups["all"].node if "all" in groups else _node(start)
    top = [n for n in groups if n not in nested and n != "all"]
    if top:
        children = everything.setdefault("children", _node(start))
        for name in top:
            if name == "ungrouped" and not groups[name].node:
                continue
            _put(children, name, groups[name].node, groups[name].node.location or start)
    root = _node(start)
    _put(root, "all", everything, start)
    return root


def record_origins(variables: object, path: str, origins: dict[Location, str]) -> None:
    """The key path each variable of `variables` was written at, by its locations (the
    first record of a location wins)."""
    if not isinstance(variables, Node):
        return
    for key in variables:
        for where in (variables.key_locations.get(key), variables.value_locations.get(key)):
            if where is not None:
                origins.setdefault(where, f"{path}.{key}")


def is_list_json(data: Node) -> bool:
    """`ansible-inventory --list` output: `_meta`, or groups whose hosts are a list."""
    return "_meta" in data or any(isinstance(g, Node) and isinstance(g.get("hosts"), Seq)
                                  for g in data.values())


def from_list_json(data: Node, origins: dict[Location, str]) -> Node:
    """`ansible-inventory --list` JSON as the group tree of a YAML inventory; a host's
    `_meta.hostvars` (already merged by ansible-inventory) go on every occurrence.
    `origins` gets the key path each variable was written at, by location."""
    meta = data.get("_meta")
    hostvars = meta.get("hostvars") if isinstance(meta, Node) else None
    hostvars = hostvars if isinstance(hostvars, Node) else Node()
    groups = {k: v for k, v in data.items() if k != "_meta" and isinstance(v, Node)}
    for host, variables in hostvars.items():
        record_origins(variables, f"_meta.hostvars.{host}", origins)
    for group_name, group in groups.items():
        record_origins(group.get("vars"), f"{group_name}.vars", origins)
    built: dict[str, Node] = {}

    def build(group_name: str) -> Node:
        if group_name in built:
            return built[group_name]
        source = groups.get(group_name, Node())
        node = _node(source.location or data.location or Location("<inventory>", 1, 1))
        built[group_name] = node
        for key in ("vars",):
            if key in source:
                _put(node, key, source[key], source.where(key) or node.location)
        hosts = source.get("hosts")
        if isinstance(hosts, Seq):
            members = _node(hosts.location or node.location)
            for i, host in enumerate(hosts):
                where = hosts.item_locations[i] if i < len(hosts.item_locations) else None
                _put(members, str(host), hostvars.get(str(host)) or _node(where),
                     hostvars.where(str(host)) or where or node.location)
            _put(node, "hosts", members, hosts.location or node.location)
        children = source.get("children")
        if isinstance(children, Seq):
            kids = _node(children.location or node.location)
            for i, child in enumerate(children):
                where = children.item_locations[i] if i < len(children.item_locations) \
                    else node.location
                _put(kids, str(child), build(str(child)), where)
            _put(node, "children", kids, children.location or node.location)
        return node

    root = _node(data.location or Location("<inventory>", 1, 1))
    for top in (["all"] if "all" in groups else list(groups)):
        _put(root, top, build(top), data.where(top) or root.location)
    return root


class GroupVars:
    """`group_vars/<group>` and `host_vars/<host>` beside an inventory file: a YAML or
    JSON file (no suffix, .yml, .yaml, .json) or a directory of them, merged in name order."""

    def __init__(self, inventory: Path | None) -> None:
        self.base = inventory.parent if inventory is not None else None

    def group(self, name: str) -> Node | None:
        return self._load("group_vars", name)

    def host(self, name: str) -> Node | None:
        return self._load("host_vars", name)

    def _load(self, kind: str, name: str) -> Node | None:
        if self.base is None or not (self.base / kind).is_dir():
            return None
        where = self.base / kind / name
        files = [where.with_name(name + s) for s in _VARS_SUFFIXES
                 if where.with_name(name + s).is_file()]
        if where.is_dir():
            files += sorted(p for p in where.iterdir()
                            if p.is_file() and p.suffix in _VARS_SUFFIXES[1:])
        merged: Node | None = None
        for path in files:
            data = load_file(path)
            if data is None:
                continue
            if not isinstance(data, Node):
                raise InputError([Problem(Location(str(path), 1, 1), "",
                                          f"{kind} file: expected a mapping of variables")])
            merged = data if merged is None else overlay(merged, data)
        return merged


def overlay(base: Node, top: Node) -> Node:
    """Ansible's variable precedence: `top`'s variables replace `base`'s (no deep merge,
    Ansible's default hash_behaviour); every location is kept."""
    out = Node({**base, **top})
    out.location = top.location or base.location
    out.key_locations = {**base.key_locations, **top.key_locations}
    out.value_locations = {**base.value_locations, **top.value_locations}
    return out
