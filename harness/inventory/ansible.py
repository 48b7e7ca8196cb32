"""Ansible inventories: groups with `hosts`, `children` and `vars`, host variables
overriding group variables, children overriding parents (Ansible's precedence). INI
files and `ansible-inventory --list` JSON arrive here as the same group tree
(harness.inventory.formats), with group_vars/ and host_vars/ files.

    all:
      vars: {ansible_user: root}
      children:
        lab:
          hosts:
            sut: {ansible_host: 198.51.100.2, ansible_port: 22, napilab_iface: eth0}

Ansible's connection variables map to napilab's host keys; napilab-only keys are
written `napilab_<key>` (napilab_data_address, napilab_iface, ...). Other variables are
Ansible's business and are ignored.
"""

from __future__ import annotations

from typing import Any

from harness.errors import Location, Problem
from harness.inventory.formats import GroupVars, overlay, record_origins
from harness.profile.schema import Checker, join
from harness.profile.yamlsrc import Node

ANSIBLE_KEYS = {
    "ansible_host": "address",
    "ansible_ssh_host": "address",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_ssh_private_key_file": "key",
    "ansible_private_key_file": "key",
}
NAPILAB_KEYS = ("data_address", "iface", "netns", "transport", "known_hosts",
                "host_key_policy", "cpus", "boot")
_GROUP_KEYS = ("hosts", "children", "vars")


def _translate(variables: Node) -> tuple[Node, dict[str, Any]]:
    """Ansible variables -> a napilab host node (locations kept) and become flags."""
    out = Node()
    out.location = variables.location
    become: dict[str, Any] = {}
    for key, value in variables.items():
        if key in ANSIBLE_KEYS:
            target = ANSIBLE_KEYS[key]
        elif key.startswith("napilab_") and key[8:] in NAPILAB_KEYS:
            target = key[8:]
        elif key in ("ansible_become", "ansible_become_method"):
            become[key] = value
            continue
        else:
            continue
        out[target] = value
        if key in variables.key_locations:
            out.key_locations[target] = variables.key_locations[key]
        if key in variables.value_locations:
            out.value_locations[target] = variables.value_locations[key]
    return out, become


def ansible_hosts(check: Checker, data: Node, files: GroupVars | None = None,
                  origins: dict[Location, str] | None = None) -> dict[str, tuple[Node, str]]:
    """host name -> (napilab host node, key path) with inherited variables applied:
    a group's variables over its parent's, group_vars/<group> over the inventory's,
    host variables over group variables, host_vars/<host> over the inventory's.
    `origins` gets the key path where each variable was written, by its location (a
    group variable is written once for all its hosts: see `relocate`)."""
    walker = _Walker(check, files or GroupVars(None),
                     origins if origins is not None else {})
    everyone = walker.note(walker.files.group("all"), "group_vars.all")  # every host
    for name, group in data.items():
        node = check.mapping(group, data.where(name), name)
        if node is not None:
            walker.walk(node, name, everyone if name != "all" else Node(), ())
    if not walker.merged:
        check.error(data.location, "", "no hosts found (napilab's format has a top-level "
                    "`hosts:`; Ansible's has groups such as `all:` with `hosts:`)")
    out: dict[str, tuple[Node, str]] = {}
    for name, variables in walker.merged.items():
        node, become = _translate(variables)
        method = str(become.get("ansible_become_method", "sudo"))
        if _truthy(become.get("ansible_become")):
            if method != "sudo":
                check.error(variables.where("ansible_become_method"), walker.paths[name],
                            f"ansible_become_method {method!r}: napilab supports sudo")
            node["become"] = "sudo"
        out[name] = (node, walker.paths[name])
    return out


class _Walker:
    def __init__(self, check: Checker, files: GroupVars, origins: dict[Location, str]
                 ) -> None:
        self.check, self.files, self.origins = check, files, origins
        self.merged: dict[str, Node] = {}
        self.paths: dict[str, str] = {}

    def note(self, variables: Node | None, path: str) -> Node:
        """`variables`, their locations recorded as written at `path`."""
        record_origins(variables, path, self.origins)
        return variables or Node()

    def walk(self, group: Node, path: str, inherited: Node, seen: tuple[int, ...]) -> None:
        check = self.check
        if id(group) in seen:
            check.error(group.location, path, "group cycle")
            return
        check.keys(group, path, _GROUP_KEYS)
        variables = check.mapping(group.get("vars"), group.where("vars"), join(path, "vars"))
        name = path.rpartition(".")[2]
        scope = overlay(overlay(inherited, self.note(variables, join(path, "vars"))),
                        self.note(self.files.group(name), f"group_vars.{name}"))
        hosts = check.mapping(group.get("hosts"), group.where("hosts"), join(path, "hosts"))
        for host, raw in (hosts or Node()).items():
            assert hosts is not None
            at = join(path, f"hosts.{host}")
            host_vars = overlay(self.note(check.mapping(raw, hosts.where(host), at), at),
                                self.note(self.files.host(host), f"host_vars.{host}"))
            combined = overlay(self.merged.get(host, Node()), overlay(scope, host_vars))
            combined.location = combined.location or hosts.key_locations.get(host)
            self.merged[host] = combined
            self.paths.setdefault(host, at)
        children = check.mapping(group.get("children"), group.where("children"),
                                 join(path, "children"))
        for child, raw in (children or Node()).items():
            assert children is not None
            node = check.mapping(raw, children.where(child), join(path, f"children.{child}"))
            if node is not None:
                self.walk(node, join(path, f"children.{child}"), scope, (*seen, id(group)))


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
    return value is True or str(value).lower() in ("true", "yes", "1")

