"""Ansible YAML inventories: groups with `hosts`, `children` and `vars`, host variables
overriding group variables, children overriding parents (Ansible's precedence).

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
                "host_key_policy", "cpus")
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


def ansible_hosts(check: Checker, data: Node) -> dict[str, tuple[Node, str]]:
    """host name -> (napilab host node, key path) with inherited variables applied."""
    merged: dict[str, Node] = {}
    paths: dict[str, str] = {}

    def walk(group: Node, path: str, inherited: Node, seen: tuple[int, ...]) -> None:
        if id(group) in seen:
            check.error(group.location, path, "group cycle")
            return
        check.keys(group, path, _GROUP_KEYS)
        variables = check.mapping(group.get("vars"), group.where("vars"), join(path, "vars"))
        scope = _overlay(inherited, variables or Node())
        hosts = check.mapping(group.get("hosts"), group.where("hosts"), join(path, "hosts"))
        for name, raw in (hosts or Node()).items():
            assert hosts is not None
            host_vars = check.mapping(raw, hosts.where(name), join(path, f"hosts.{name}"))
            combined = _overlay(merged.get(name, Node()), _overlay(scope, host_vars or Node()))
            combined.location = combined.location or hosts.key_locations.get(name)
            merged[name] = combined
            paths.setdefault(name, join(path, f"hosts.{name}"))
        children = check.mapping(group.get("children"), group.where("children"),
                                 join(path, "children"))
        for child, raw in (children or Node()).items():
            assert children is not None
            node = check.mapping(raw, children.where(child), join(path, f"children.{child}"))
            if node is not None:
                walk(node, join(path, f"children.{child}"), scope, (*seen, id(group)))

    for name, group in data.items():
        node = check.mapping(group, data.where(name), name)
        if node is not None:
            walk(node, name, Node(), ())
    if not merged:
        check.error(data.location, "", "no hosts found (napilab's format has a top-level "
                    "`hosts:`; Ansible's has groups such as `all:` with `hosts:`)")
    out: dict[str, tuple[Node, str]] = {}
    for name, variables in merged.items():
        node, become = _translate(variables)
        method = str(become.get("ansible_become_method", "sudo"))
        if _truthy(become.get("ansible_become")):
            if method != "sudo":
                check.error(variables.where("ansible_become_method"), paths[name],
                            f"ansible_become_method {method!r}: napilab supports sudo")
            node["become"] = "sudo"
        out[name] = (node, paths[name])
    return out


def _overlay(base: Node, top: Node) -> Node:
    out = Node({**base, **top})
    out.location = top.location or base.location
    out.key_locations = {**base.key_locations, **top.key_locations}
    out.value_locations = {**base.value_locations, **top.value_locations}
    return out


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "yes", "1")

