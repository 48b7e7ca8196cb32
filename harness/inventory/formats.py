"""Ansible inventories read as ansible-core reads them, into one model (Entities: groups
and hosts with their variables, set in the order Ansible's inventory plugins set them),
every key and value located:

- INI files (parse_ini), as the `ini` inventory plugin reads them: `[group]`,
  `[group:vars]`, `[group:children]`, `host key=value ...`; hosts before any section are
  ungrouped; values are Python literals (`5`, `True`, `[1, 2]`, `"5"` a string);
- `ansible-inventory --list` JSON (from_list_json), as the `script` plugin reads that
  output: `{"_meta": {"hostvars": ...}, "group": {"hosts": [...], "vars": {...},
  "children": [...]}}`, from a file or standard input;
- YAML group trees, and `group_vars/` and `host_vars/` beside the inventory file, are
  read by harness.inventory.ansible.

Read from ansible-core 2.19's plugins/inventory/{ini,script}.py, inventory/{data,group,
host}.py and parsing/dataloader.py; tests/unit/test_ansible_precedence.py compares the
result with the real `ansible-inventory`.
"""

from __future__ import annotations

import ast
import re
import shlex
import string
import warnings
from dataclasses import dataclass, field

from napilab.harness.errors import Location
from napilab.harness.grammar.keys import INI_SECTION
from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node, Seq

_GROUP_NAME = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")
_WITH_PORT = re.compile(r"((?:[^:\[\]]|\[[^\]]*\])+):(\d+)")


@dataclass
class Group:
    name: str
    path: str  # key path of its first definition, for messages
    where: Location | None
    vars: Node = field(default_factory=Node)
    parents: list[str] = field(default_factory=list)
    priority: int = 1  # ansible_group_priority


@dataclass
class HostEntry:
    name: str
    path: str
    where: Location | None
    vars: Node = field(default_factory=Node)
    groups: list[str] = field(default_factory=list)  # the groups it is listed in


class Entities:
    """An inventory as Ansible holds it (ansible-core's InventoryData): groups and hosts
    by name, each with its own variables, whichever file or section wrote them. A
    variable set again replaces the first (INI lines and YAML keys in file order); a
    host's `host:port` counts where the host is first named, as in Ansible. `origins`
    gets the key path each variable was written at, by its location."""

    def __init__(self, check: Checker, where: Location | None) -> None:
        self.check, self.where = check, where  # where: the inventory's start
        self.origins: dict[Location, str] = {}
        self.groups: dict[str, Group] = {}
        self.hosts: dict[str, HostEntry] = {}
        self.add_group("all", "all", None)  # Ansible's two groups of every inventory
        self.add_group("ungrouped", "ungrouped", None)

    def add_group(self, name: str, path: str, where: Location | None) -> Group:
        group = self.groups.get(name)
        if group is None:
            group = self.groups[name] = Group(name, path, where)
        elif group.where is None:  # all or ungrouped, written here first
            group.path, group.where = path, where
        return group

    def add_child(self, parent: str, child: str, where: Location | None) -> None:
        if child == "all" or child == parent or child in self.ancestors(parent):
            self.check.error(where, self.groups[parent].path, f"group {child!r} under "
                             f"{parent!r} makes a loop of groups")
            return
        if parent not in self.groups[child].parents:
            self.groups[child].parents.append(parent)

    def add_host(self, name: str, group: str | None, port: int | None,
                 where: Location | None, path: str) -> HostEntry:
        host = self.hosts.get(name)
        if host is None:
            host = self.hosts[name] = HostEntry(name, path, where)
            if port is not None:
                self.set_host_var(name, "ansible_port", port, where, where, path)
        if group is not None and group not in host.groups:
            host.groups.append(group)
        return host

    def set_group_var(self, group: str, key: str, value: object, key_at: Location | None,
                      value_at: Location | None, path: str) -> None:
        self._origin(key_at, value_at, f"{path}.{key}")
        if key == "ansible_group_priority":  # the group's, not a variable (group.py)
            if isinstance(value, bool) or not isinstance(value, int | str) \
                    or not re.fullmatch(r"\s*[+-]?\d+\s*", str(value)):
                self.check.error(value_at or key_at, f"{path}.{key}",
                                 f"expected an integer, got {value!r}")
                return
            self.groups[group].priority = int(value)
            return
        _put(self.groups[group].vars, key, value, key_at, value_at)

    def set_host_var(self, host: str, key: str, value: object, key_at: Location | None,
                     value_at: Location | None, path: str) -> None:
        self._origin(key_at, value_at, f"{path}.{key}")
        _put(self.hosts[host].vars, key, value, key_at, value_at)

    def _origin(self, key_at: Location | None, value_at: Location | None, path: str) -> None:
        for where in (key_at, value_at):
            if where is not None:
                self.origins.setdefault(where, path)

    def ancestors(self, name: str) -> set[str]:
        out: set[str] = set()
        todo = list(self.groups[name].parents)
        while todo:
            parent = todo.pop()
            if parent not in out:
                out.add(parent)
                todo += self.groups[parent].parents
        return out

    def depth(self, name: str, memo: dict[str, int]) -> int:
        """The longest way down from `all` (a group no group lists is under `all`)."""
        if name not in memo:
            parents = self.groups[name].parents
            memo[name] = 0 if name == "all" else \
                1 + max((self.depth(p, memo) for p in parents), default=0)
        return memo[name]

    def host_groups(self, host: str) -> list[str]:
        """The host's groups and their ancestors but `all`, in the order Ansible merges
        their variables: by depth, then ansible_group_priority, then name
        (inventory/helpers.py sort_groups). A host in no other group is in `ungrouped`;
        one that is, is not (InventoryData.reconcile_inventory)."""
        listed = [g for g in self.hosts[host].groups if g != "all"]
        if any(g != "ungrouped" for g in listed):
            listed = [g for g in listed if g != "ungrouped"]
        names = set(listed or ["ungrouped"])
        for name in list(names):
            names |= self.ancestors(name)
        names.discard("all")
        memo: dict[str, int] = {}
        return sorted(names, key=lambda g: (self.depth(g, memo), self.groups[g].priority, g))


def _put(node: Node, key: str, value: object, key_at: Location | None,
         value_at: Location | None) -> None:
    node[key] = value
    for locations, where in ((node.key_locations, key_at), (node.value_locations, value_at)):
        if where is not None:
            locations[key] = where
        else:
            locations.pop(key, None)


def _literal(text: str, where: Location) -> object:
    """An INI value as Ansible reads it: a Python literal (`5`, `True`, `None`, `[1, 2]`,
    `"5"` the string 5) if it is one, else the text as written (ini.py _parse_value)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    return _located(value, where)


def _located(value: object, where: Location) -> object:
    if isinstance(value, list | tuple | set):
        items = Seq(_located(v, where) for v in value)
        items.location, items.item_locations = where, [where] * len(items)
        return items
    if isinstance(value, dict):
        node = Node()
        node.location = where
        for key, item in value.items():
            _put(node, str(key), _located(item, where), where, where)
        return node
    if value is Ellipsis or isinstance(value, complex):  # no such variable types
        return "..." if value is Ellipsis else str(value)
    if isinstance(value, bytes):
        return value.decode(errors="surrogateescape")
    return value


def host_pattern(word: str) -> tuple[str, int | None]:
    """`web[01:03]:2222` -> (`web[01:03]`, 2222); without a port, (word, None)."""
    match = _WITH_PORT.fullmatch(word)
    return (match[1], int(match[2])) if match else (word, None)


def expand_range(pattern: str) -> list[str]:
    """Ansible's host ranges (plugins/inventory/__init__.py expand_hostname_range):
    `web[01:03]` -> web01, web02, web03 (zero-padded when the start is, then the end must
    be as long); `web[1:9:4]` -> web1, web5, web9 (a stride); `[:2]` starts at 0;
    `db-[a:c]` -> db-a, db-b, db-c; ranges expand left to right. A bad range is a
    ValueError that says why."""
    if "[" not in pattern:
        return [pattern]
    head, _, rest = pattern.partition("[")
    body, closed, tail = rest.partition("]")
    bounds = body.split(":")
    if not closed or len(bounds) not in (2, 3):
        raise ValueError("a host range is [begin:end] or [begin:end:step]")
    begin, end, step = bounds[0] or "0", bounds[1], bounds[2] if len(bounds) == 3 else "1"
    if not end:
        raise ValueError("a host range needs its end")
    width = len(begin) if begin[0] == "0" and len(begin) > 1 else 0
    if width and width != len(end):
        raise ValueError("a zero-padded host range has a begin and an end of equal length")
    try:
        if begin in string.ascii_letters and end in string.ascii_letters:
            low, high = string.ascii_letters.index(begin), string.ascii_letters.index(end)
            if low > high:
                raise ValueError("a host range's begin comes after its end")
            items: list[str] = list(string.ascii_letters[low:high + 1:int(step)])
        else:
            items = [str(i) for i in range(int(begin), int(end) + 1, int(step))]
    except ValueError as exc:
        raise ValueError(f"[{body}]: {exc}") from None
    return [name for item in items
            for name in expand_range(head + (item.zfill(width) if width else item) + tail)]


def parse_ini(text: str, name: str) -> Entities:
    """An INI inventory, read line by line as Ansible's `ini` plugin reads it. A group
    named in `[x:children]` or `[x:vars]` must have a section of its own somewhere in the
    file (Ansible refuses it otherwise)."""
    reader = _IniReader(Entities(Checker(), Location(name, 1, 1)))
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and stripped[0] not in "#;":
            reader.line(stripped, line, Location(name, number,
                                                  len(line) - len(line.lstrip()) + 1))
    return reader.done()


class _IniReader:
    def __init__(self, inventory: Entities) -> None:
        self.check, self.inventory = inventory.check, inventory
        self.current, self.kind = "ungrouped", "hosts"
        # a group named before its section: kind ("vars", "children"), where, parents
        self.pending: dict[str, tuple[str, Location, list[str]]] = {}

    def line(self, stripped: str, line: str, where: Location) -> None:
        check, inventory, current = self.check, self.inventory, self.current
        section = INI_SECTION.match(stripped)
        if section:
            self.section(section[1], section[2] or "hosts", where)
        elif stripped.startswith("[") and stripped.endswith("]"):
            check.error(where, current, f"{stripped}: not a section (no spaces; "
                        "[group], [group:vars] or [group:children])")
        elif self.kind == "vars":
            key, sep, value = stripped.partition("=")
            if not sep:
                check.error(where, f"{current}.vars", "expected key=value")
                return
            inventory.set_group_var(current, key.strip(), _literal(value.strip(), where),
                                    where, where, f"{current}.vars")
        elif self.kind == "children":
            child = _GROUP_NAME.match(stripped)
            if child is None:
                check.error(where, f"{current}.children", f"{stripped!r}: expected a group name")
            elif child[1] in inventory.groups:
                inventory.add_child(current, child[1], where)
            else:
                self.pending.setdefault(child[1], ("children", where, []))[2].append(current)
        elif self.kind == "hosts":
            _host_line(inventory, stripped, line, where, current)

    def section(self, group: str, kind: str, where: Location) -> None:
        self.current, self.kind = group, kind
        if kind not in ("hosts", "vars", "children"):
            self.check.error(where, group, f"[{group}:{kind}]: unknown section kind; "
                             "expected [group], [group:vars] or [group:children]")
        if group not in self.inventory.groups and kind == "vars":
            self.pending.setdefault(group, ("vars", where, []))
        self.inventory.add_group(group, group, where)
        if group in self.pending and kind != "vars":
            pending_kind, _, parents = self.pending.pop(group)
            for parent in parents if pending_kind == "children" else ():
                self.inventory.add_child(parent, group, where)

    def done(self) -> Entities:
        for group, (kind, where, parents) in self.pending.items():
            self.check.error(where, group, f"[{group}:vars] is for a group that has no "
                             "section" if kind == "vars" else f"[{parents[-1]}:children] "
                             f"names {group!r}, a group that has no section")
        self.check.raise_if_any()
        return self.inventory


def _host_line(inventory: Entities, stripped: str, line: str, where: Location,
               current: str) -> None:
    check = inventory.check
    try:
        words = shlex.split(stripped, comments=True)
    except ValueError as exc:
        check.error(where, current, f"cannot split this line: {exc}")
        return
    if not words:
        return
    pattern, port = host_pattern(words[0])
    if pattern.endswith(":"):
        check.error(where, f"{current}.hosts", f"{words[0]!r}: a host ends in ':' only "
                    "before its port")
        return
    variables: list[tuple[str, object, Location]] = []
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep:
            check.error(where, f"{current}.hosts.{pattern}", f"{word!r}: expected key=value")
            continue
        column = line.find(f"{key}=")
        at = Location(where.file, where.line, column + 1) if column >= 0 else where
        variables.append((key, _literal(value, at), at))
    try:
        names = expand_range(pattern)
    except ValueError as exc:
        check.error(where, f"{current}.hosts", f"{pattern}: {exc}")
        return
    for host in names:
        path = f"{current}.hosts.{host}"
        inventory.add_host(host, current, port, where, path)
        for key, item, at in variables:
            inventory.set_host_var(host, key, item, at, at, path)


def is_list_json(data: Node) -> bool:
    """`ansible-inventory --list` output: `_meta`, or groups whose hosts are a list."""
    return "_meta" in data or any(isinstance(g, Node) and isinstance(g.get("hosts"), Seq)
                                  for g in data.values())


def from_list_json(check: Checker, data: Node) -> Entities:
    """`ansible-inventory --list` (or `--list --export`) JSON, read as Ansible's `script`
    plugin reads it: each group's hosts, vars and children, then each listed host's
    `_meta.hostvars` (merged already by ansible-inventory, or only the host's own with
    --export)."""
    inventory = Entities(check, data.location)
    meta = check.mapping(data.get("_meta"), data.where("_meta"), "_meta") or Node()
    hostvars = check.mapping(meta.get("hostvars"), meta.where("hostvars"),
                             "_meta.hostvars") or Node()
    listed: dict[str, None] = {}
    for name, raw in data.items():
        group = check.mapping(raw, data.where(name), name) if name != "_meta" else None
        if group is not None:
            inventory.add_group(name, name, data.key_locations.get(name))
            check.keys(group, name, ("hosts", "vars", "children"))
            listed.update(_list_group(inventory, name, group))
    for host in listed:
        _set_vars(inventory, host, hostvars.get(host), hostvars.where(host),
                  f"_meta.hostvars.{host}", host=True)
    return inventory


def _list_group(inventory: Entities, name: str, group: Node) -> dict[str, None]:
    """One group of --list JSON into `inventory`; its hosts."""
    hosts: dict[str, None] = {}
    for key, value in group.items():
        if key == "vars":
            _set_vars(inventory, name, value, group.where(key), f"{name}.vars")
        elif not isinstance(value, Seq):
            inventory.check.error(group.where(key), f"{name}.{key}", "expected a list of names")
            continue
        for i, item in enumerate(value if key in ("hosts", "children") else ()):
            at = value.item_locations[i] if i < len(value.item_locations) else None
            if key == "hosts":
                inventory.add_host(str(item), name, None, at, f"_meta.hostvars.{item}")
                hosts[str(item)] = None
            else:
                if str(item) not in inventory.groups:
                    inventory.add_group(str(item), str(item), at)
                inventory.add_child(name, str(item), at)
    return hosts


def _set_vars(inventory: Entities, name: str, raw: object, where: Location | None,
              path: str, *, host: bool = False) -> None:
    """A group's `vars` or (host) a host's `_meta.hostvars` entry."""
    variables = inventory.check.mapping(raw, where, path) or Node()
    setter = inventory.set_host_var if host else inventory.set_group_var
    for var, item in variables.items():
        setter(name, var, item, variables.key_locations.get(var),
               variables.value_locations.get(var), path)
