"""Ansible inventories: groups with `hosts`, `children` and `vars`, each host's variables
resolved as ansible-core 2.19 resolves them (vars/manager.py get_vars, the default
VARIABLE_PRECEDENCE), lowest first:

1. the inventory's `all` variables;
2. the inventory's variables of the host's other groups and their ancestors, by depth
   (a child after its parents), then ansible_group_priority, then name;
3. group_vars/all, then group_vars/<group> in the same order: a group_vars file beats
   every group variable written in the inventory, a parent's file a child's section;
4. the inventory's host variables (YAML host entries, INI host lines: the last line
   naming the host wins), then host_vars/<host>.

INI files and `ansible-inventory --list` JSON are read by harness.inventory.formats; the
YAML group tree and group_vars/ and host_vars/ here:

    all:
      vars: {ansible_user: root}
      children:
        lab:
          hosts:
            sut: {ansible_host: 198.51.100.2, ansible_port: 22, napilab_iface: eth0}

Ansible's connection variables map to napilab's host keys; napilab-only keys are
written `napilab_<key>` (napilab_data_address, napilab_iface, ...), and a `napilab_`
variable napilab does not know is an error. Other variables are Ansible's business and
are ignored.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from napilab.harness.errors import InputError, Location, Problem
from napilab.harness.grammar.schema import Checker, join, suggest
from napilab.harness.grammar.yamlsrc import Node, load_file
from napilab.harness.inventory.formats import Entities, expand_range, host_pattern

# Each napilab host key from the last of its Ansible names that is set, as Ansible's ssh
# connection plugin reads its options (ansible_ssh_host over ansible_host).
ANSIBLE_KEYS = {
    "ansible_host": "address",
    "ansible_ssh_host": "address",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_private_key_file": "key",
    "ansible_ssh_private_key_file": "key",
    "ansible_ssh_timeout": "connect_timeout",
}
NAPILAB_KEYS = ("data_address", "iface", "netns", "transport", "known_hosts",
                "host_key_policy", "cpus", "connect_timeout", "boot")
# ansible_connection -> napilab's transport (ansible.builtin.NAME too)
CONNECTIONS = {"ssh": "ssh", "paramiko": "ssh", "paramiko_ssh": "ssh", "smart": "ssh",
               "local": "local"}
_WRITTEN_AS = {"address": "ansible_host", "port": "ansible_port", "user": "ansible_user",
               "key": "ansible_ssh_private_key_file", "become": "ansible_become"}
_INTEGERS = ("port", "connect_timeout")  # Ansible's int options: "2222" is 2222
_GROUP_KEYS = ("hosts", "children", "vars")
_VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")


class GroupVars:
    """`group_vars/<group>` and `host_vars/<host>` beside an inventory file, found as
    Ansible's host_group_vars plugin finds them (parsing/dataloader.py find_vars_files):
    the first of NAME, NAME.yml, NAME.yaml and NAME.json that exists; a directory is
    every file in it and its subdirectories (no suffix, .yml, .yaml or .json; not hidden,
    not ending in `~`), in name order, merged in that order."""

    def __init__(self, inventory: Path | None) -> None:
        self.base = inventory.parent if inventory is not None else None

    def group(self, name: str) -> Node | None:
        return self._load("group_vars", name)

    def host(self, name: str) -> Node | None:
        return self._load("host_vars", name)

    def _load(self, kind: str, name: str) -> Node | None:
        # a name with a '/' is no napilab host name (refused later): no file is read for it
        if self.base is None or "/" in name or not (self.base / kind).is_dir():
            return None
        files: list[Path] = []
        for suffix in _VARS_SUFFIXES:
            where = self.base / kind / (name + suffix)
            if where.exists():
                files = _vars_files(where) if where.is_dir() else [where]
                break
        merged: Node | None = None
        for path in files:
            data = load_file(path)
            if not data:  # an empty file
                continue
            if not isinstance(data, Node):
                raise InputError([Problem(Location(str(path), 1, 1), "",
                                          f"{kind} file: expected a mapping of variables")])
            merged = data if merged is None else overlay(merged, data)
        return merged


def _vars_files(directory: Path) -> list[Path]:
    out: list[Path] = []
    for entry in sorted(os.listdir(directory)):
        path, suffix = directory / entry, os.path.splitext(entry)[1]
        if entry.startswith(".") or entry.endswith("~"):
            continue  # hidden files and editors' backups
        if path.is_dir() and not suffix:
            out += _vars_files(path)
        elif path.is_file() and suffix in _VARS_SUFFIXES:
            out.append(path)
    return out


def record_origins(variables: object, path: str, origins: dict[Location, str]) -> None:
    """The key path each variable of `variables` was written at, by its locations (the
    first record of a location wins)."""
    if not isinstance(variables, Node):
        return
    for key in variables:
        for where in (variables.key_locations.get(key), variables.value_locations.get(key)):
            if where is not None:
                origins.setdefault(where, f"{path}.{key}")


def overlay(base: Node, top: Node) -> Node:
    """Ansible's variable precedence: `top`'s variables replace `base`'s (no deep merge,
    Ansible's default hash_behaviour); every location is kept."""
    out = Node({**base, **top})
    out.location = top.location or base.location
    out.key_locations = {**base.key_locations, **top.key_locations}
    out.value_locations = {**base.value_locations, **top.value_locations}
    return out


def read_yaml(check: Checker, data: Node) -> Entities:
    """A YAML inventory's groups, read as Ansible's `yaml` plugin reads them: each
    group's keys in file order, host keys as patterns (`web[01:03]`, `sut:2222`)."""
    inventory = Entities(check, data.location)
    for name in data:
        _yaml_group(inventory, name, data[name], data.where(name), name, ())
    return inventory


def _yaml_group(inventory: Entities, name: str, raw: Any, where: Location | None,
                path: str, seen: tuple[int, ...]) -> None:
    check = inventory.check
    node = check.mapping(raw, where, path)
    if node is None:
        return
    if id(node) in seen and node:
        check.error(node.location, path, "group cycle")
        return
    inventory.add_group(name, path, where)
    check.keys(node, path, _GROUP_KEYS)
    for key in [k for k in node if k in _GROUP_KEYS]:
        section = check.mapping(node[key], node.where(key), join(path, key))
        for item in section or Node():
            assert section is not None
            at = join(path, key)
            if key == "vars":
                inventory.set_group_var(name, item, section[item],
                                        section.key_locations.get(item),
                                        section.value_locations.get(item), at)
            elif key == "children":
                at = join(at, item)
                _yaml_group(inventory, item, section[item], section.where(item), at,
                            (*seen, id(node)))
                if item in inventory.groups:
                    inventory.add_child(name, item, section.key_locations.get(item))
            else:
                _yaml_host(inventory, name, item, section, at)


def _yaml_host(inventory: Entities, group: str, pattern: str, hosts: Node, at: str) -> None:
    check = inventory.check
    variables = check.mapping(hosts[pattern], hosts.where(pattern), join(at, pattern)) \
        or Node()
    names, port = host_pattern(pattern)
    try:
        expanded = expand_range(names)
    except ValueError as exc:
        check.error(hosts.key_locations.get(pattern), join(at, pattern), str(exc))
        return
    for host in expanded:
        path = join(at, host)
        inventory.add_host(host, group, port, hosts.where(pattern), path)
        for key, value in variables.items():
            inventory.set_host_var(host, key, value, variables.key_locations.get(key),
                                   variables.value_locations.get(key), path)


def resolve(inventory: Entities, files: GroupVars) -> dict[str, Node]:
    """host name -> its variables, merged in Ansible's order (this module's docstring),
    every location kept; group_vars/ and host_vars/ are recorded in `origins` as
    `group_vars.GROUP.VAR` and `host_vars.HOST.VAR`."""
    loaded: dict[str, Node] = {}

    def group_file(name: str) -> Node:
        if name not in loaded:
            loaded[name] = files.group(name) or Node()
            record_origins(loaded[name], f"group_vars.{name}", inventory.origins)
        return loaded[name]

    out: dict[str, Node] = {}
    for name, host in inventory.hosts.items():
        groups = inventory.host_groups(name)
        merged = inventory.groups["all"].vars
        for group in groups:
            merged = overlay(merged, inventory.groups[group].vars)
        for group in ("all", *groups):
            merged = overlay(merged, group_file(group))
        own = files.host(name) or Node()
        record_origins(own, f"host_vars.{name}", inventory.origins)
        merged = overlay(overlay(merged, host.vars), own)
        merged.location = host.where
        out[name] = merged
    return out


def ansible_hosts(check: Checker, inventory: Entities, files: GroupVars | None = None
                  ) -> dict[str, tuple[Node, str]]:
    """host name -> (napilab host node, key path): each host's resolved variables
    (resolve) translated to napilab's host keys."""
    resolved = resolve(inventory, files or GroupVars(None))
    if not resolved:
        check.error(inventory.where, "", "no hosts found (napilab's format has a top-level "
                    "`hosts:`; Ansible's has groups such as `all:` with `hosts:`)")
    for group in inventory.groups.values():  # a group of no host is checked too
        _unknown_names(check, group.vars, f"{group.path}.vars")
    out: dict[str, tuple[Node, str]] = {}
    for name, variables in resolved.items():
        path = inventory.hosts[name].path
        _unknown_names(check, variables, path)
        out[name] = (_translate(check, variables, path), path)
    return out


def _unknown_names(check: Checker, variables: Node, path: str) -> None:
    """A `napilab_` variable napilab does not read is a mistake, not Ansible's."""
    allowed = [f"napilab_{k}" for k in sorted(NAPILAB_KEYS)]
    for key in variables:
        if not key.lower().startswith("napilab_") or key[8:] in NAPILAB_KEYS:
            continue
        where = variables.key_locations.get(key) or variables.where(key)
        if key[8:] in _WRITTEN_AS:
            check.error(where, join(path, key), f"not a napilab variable: napilab reads "
                        f"{_WRITTEN_AS[key[8:]]} for this")
        else:
            check.error(where, join(path, key), "unknown napilab variable"
                        f"{suggest(key, allowed)} (napilab reads {', '.join(allowed)})")


def _translate(check: Checker, variables: Node, path: str) -> Node:
    """Ansible variables -> a napilab host node, locations kept."""
    out = Node()
    out.location = variables.location
    names = [*ANSIBLE_KEYS.items(), *((f"napilab_{k}", k) for k in NAPILAB_KEYS)]
    for key, target in names:
        if key not in variables:
            continue
        value = variables[key]
        if target in _INTEGERS and key in ANSIBLE_KEYS and isinstance(value, str) \
                and re.fullmatch(r"\s*\+?\d+\s*", value):
            value = int(value)
        _copy(variables, key, out, target, value)
    connection = variables.get("ansible_connection")
    if connection is not None and "napilab_transport" not in variables:
        short = re.sub(r"^ansible\.(builtin|legacy)\.", "", str(connection))
        if short in CONNECTIONS:
            _copy(variables, "ansible_connection", out, "transport", CONNECTIONS[short])
        else:
            check.error(variables.where("ansible_connection"),
                        join(path, "ansible_connection"), f"{connection!r}: napilab "
                        "connects over SSH (ssh, paramiko, smart) or runs commands on this "
                        "machine (local); napilab_transport overrides it")
    if _truthy(variables.get("ansible_become")):
        method = str(variables.get("ansible_become_method", "sudo"))
        if method != "sudo":
            check.error(variables.where("ansible_become_method"), path,
                        f"ansible_become_method {method!r}: napilab supports sudo")
        out["become"] = "sudo"
    return out


def _copy(variables: Node, key: str, out: Node, target: str, value: Any) -> None:
    out[target] = value
    for source, sink in ((variables.key_locations, out.key_locations),
                         (variables.value_locations, out.value_locations)):
        if key in source:
            sink[target] = source[key]


def relocate(problems: list[Problem], origins: dict[Location, str]) -> list[Problem]:
    """Each problem under the key path of the variable as written (`lab.vars.ansible_port`,
    not once per host that inherits it), each once."""
    out: dict[tuple[Location | None, str, str], Problem] = {}
    for problem in problems:
        written = origins.get(problem.location) if problem.location else None
        if written is not None:
            problem = Problem(problem.location, written, problem.message)
        out.setdefault((problem.location, problem.key_path, problem.message), problem)
    return list(out.values())


def _truthy(value: Any) -> bool:
    """Ansible's boolean() (module_utils/parsing/convert_bool.py), not strict."""
    if isinstance(value, str):
        return value.strip().lower() in ("y", "yes", "on", "1", "true", "t")
    return value is True or (not isinstance(value, bool) and value in (1, 1.0))
