"""Inventories: which hosts exist and how to reach them.

napilab's own format:

    transport: ssh            # ssh | local; `--transport` overrides
    host_key_policy: reject   # reject | accept-new
    hosts:
      sut: {address: 198.51.100.2, port: 22, user: root, key: ~/.ssh/id_ed25519,
            known_hosts: ~/.ssh/known_hosts, data_address: 192.0.2.2, iface: eth0,
            netns: napilab-b, become: sudo, connect_timeout: 10,
            boot: {method: kexec, timeout: 600}}

    replicas:                 # optional: the same experiment on several host sets
      pair1: {a: lab1-a, b: lab1-b}
      pair2: {a: lab2-a, b: lab2-b}

`replicas` binds the host names a profile's roles name (`hosts: {sender: {host: a}}`) to
hosts of this inventory, once per replica: `napilab run` drives every replica through
the same schedule at once (harness.cli.fleet) and pools their verdicts. A replica binds
every host name the profile uses; no host is in two replicas.

`address` is where SSH connects (management network); `data_address` is what
workloads send traffic to (defaults to `address`). `netns` names the network
namespace a local-transport host lives in. `connect_timeout` (seconds; else ssh_config's
ConnectTimeout, else 10) is how long SSH waits for a host that does not answer
(harness.transport.ssh). `boot` says how napilab boots the host into a profile's
`kernel:` and back (harness.hosts.boot): `kexec` (kexec -l, then kexec -e), `grub-reboot`
or `bootctl` (a one-time boot entry, then reboot), or `vm` (a guest of the VM testbed,
restarted by the controller; `testbed` names its state directory); `timeout` is how
long the host gets to answer SSH again (seconds, default 600).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from napilab.harness.errors import InputError
from napilab.harness.grammar import keys
from napilab.harness.grammar.keys import looks_like_ini
from napilab.harness.grammar.schema import Checker, Number, join
from napilab.harness.grammar.yamlsrc import Node, load_text, read_file
from napilab.harness.inventory.ansible import GroupVars, ansible_hosts, read_yaml, relocate, resolve
from napilab.harness.inventory.formats import (
    Entities,
    from_list_json,
    is_list_json,
    parse_ini,
)

TRANSPORTS = ("ssh", "local")
HOST_KEY_POLICIES = ("reject", "accept-new")
_HOST_KEYS = keys.HOST_KEYS
INVENTORY_KEYS = keys.INVENTORY_KEYS
HOST_NUMBERS = {"port": Number(1, 65535, integer=True), "cpus": Number(1, 8192, integer=True),
                "connect_timeout": Number(0.5, 3600)}
BECOME = ("sudo",)
HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9-]{1,63})*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_IFACE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
_NAME_RULE = ("host names are letters, digits, '.', '_' and '-', starting with a letter "
              "or digit, at most 64")
_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}\$?")
BOOT_METHODS = ("kexec", "grub-reboot", "bootctl", "vm")
BOOT_KEYS = ("method", "testbed", "guest", "timeout")
BOOT_TIMEOUT = Number(10, 7200)


@dataclass(frozen=True)
class Boot:
    """How the host is booted into another kernel (inventory `boot:`)."""

    method: str
    testbed: str | None = None  # vm: the VM testbed's state directory
    guest: str | None = None  # vm: the guest's name in that testbed
    timeout: float = 600.0  # seconds for the host to answer SSH again

    def public(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Host:
    name: str
    transport: str = "ssh"
    address: str | None = None
    port: int = 22
    user: str | None = None
    key: str | None = None
    known_hosts: str | None = None
    host_key_policy: str = "reject"
    become: str | None = None
    data_address: str | None = None
    netns: str | None = None
    iface: str | None = None
    cpus: int | None = None  # CPU count, when known: CPU lists are checked against it
    ssh_config: str | None = None
    connect_timeout: float | None = None  # seconds; None: ssh_config's, else 10
    boot: Boot | None = None  # how to boot it into a profile's kernel
    port_set: bool = field(default=False, compare=False)  # port written in the inventory

    @property
    def target_address(self) -> str:
        """The address workloads use to reach this host."""
        return self.data_address or self.address or "127.0.0.1"

    def public(self) -> dict[str, Any]:
        """What the manifest records: no key material, just where it is."""
        return {k: v.public() if isinstance(v, Boot) else v for k, v in self.__dict__.items()
                if v is not None and k != "port_set"}


@dataclass(frozen=True)
class Inventory:
    path: str
    hosts: dict[str, Host]
    # replica -> {a profile's host name -> a host of `hosts`} (inventory `replicas:`)
    replicas: dict[str, dict[str, str]] = field(default_factory=dict)

    def host(self, name: str) -> Host:
        return self.hosts[name]

    def with_transport(self, transport: str | None) -> Inventory:
        if transport is None:
            return self
        if transport not in TRANSPORTS:
            raise InputError(f"--transport {transport!r}: expected one of {list(TRANSPORTS)}")
        return replace(self, hosts={n: replace(h, transport=transport)
                                    for n, h in self.hosts.items()})


def _parse(path: str | Path) -> Any:
    """The inventory's data: YAML or JSON, or an INI inventory as Ansible reads it."""
    text = read_file(path)
    name = "<stdin>" if str(path) == "-" else str(path)
    if Path(name).suffix not in (".yaml", ".yml", ".json") and looks_like_ini(text):
        return parse_ini(text, name)
    return load_text(text, name)


def load_inventory(path: str | Path) -> Inventory:
    """napilab's own inventory format (a top-level `hosts:`), or an Ansible inventory:
    YAML (groups such as `all:`), INI, or `ansible-inventory --list` JSON, with
    `group_vars/` and `host_vars/` beside the file. `-` reads standard input."""
    data = _parse(path)
    check = Checker()
    if not isinstance(data, Node | Entities):
        raise InputError(f"{path}: an inventory is a mapping with a `hosts:` key")
    if isinstance(data, Node):
        keys.not_a_profile(data, str(path), data.location)
    if isinstance(data, Entities) or ("hosts" not in data and data):
        return Inventory(str(path), _ansible(check, path, data))
    check.keys(data, "", INVENTORY_KEYS, required=("hosts",))
    defaults = {
        "transport": check.choice(data, "transport", "", TRANSPORTS, default="ssh"),
        "host_key_policy": check.choice(data, "host_key_policy", "", HOST_KEY_POLICIES,
                                        default="reject"),
        "ssh_config": check.get(data, "ssh_config", "", str),
    }
    hosts_node = check.mapping(data.get("hosts"), data.where("hosts"), "hosts")
    hosts: dict[str, Host] = {}
    for name, raw in (hosts_node or {}).items():
        path_ = join("hosts", name)
        assert hosts_node is not None
        if not _NAME.fullmatch(name):
            check.error(hosts_node.key_locations.get(name), path_, _NAME_RULE)
        node = check.mapping(raw, hosts_node.where(name), path_)
        if node is not None:
            hosts[name] = _host(check, name, node, path_, defaults)
    if hosts_node is not None and not hosts_node:
        check.error(data.where("hosts"), "hosts", "no hosts defined")
    replicas = _replicas(check, data, hosts)
    check.raise_if_any()
    return Inventory(str(path), hosts, replicas)


def _replicas(check: Checker, data: Node, hosts: dict[str, Host]) -> dict[str, dict[str, str]]:
    """`replicas:`: NAME -> {host name -> inventory host}; each inventory host in one
    replica at most (two replicas' runs would take the same host's lock)."""
    node = check.mapping(data.get("replicas"), data.where("replicas"), "replicas") \
        if "replicas" in data else None
    out: dict[str, dict[str, str]] = {}
    owner: dict[str, str] = {}
    for name, raw in (node or {}).items():
        path = join("replicas", name)
        assert node is not None
        if not _NAME.fullmatch(name):
            check.error(node.key_locations.get(name), path, "replica names are letters, "
                        "digits, '.', '_' and '-', starting with a letter or digit, at most 64")
            continue
        binding = check.mapping(raw, node.where(name), path)
        if binding is None:
            continue
        if not binding:
            check.error(node.where(name), path, "a replica binds at least one host name, "
                        "e.g. {a: lab1-a, b: lab1-b}")
        out[name] = {}
        for alias, target in binding.items():
            where = binding.where(alias)
            if not isinstance(target, str):
                check.error(where, join(path, alias), f"{target!r}: the name of a host of "
                            "this inventory")
            elif target not in hosts:
                check.error(where, join(path, alias), f"no host {target!r} in this "
                            f"inventory; hosts are {sorted(hosts)}")
            elif target in owner:
                check.error(where, join(path, alias), f"host {target!r} is in replica "
                            f"{owner[target]!r} too: a host serves one replica")
            else:
                owner[target] = name
                out[name][str(alias)] = target
    return out


def ansible_variables(path: str | Path) -> dict[str, Node]:
    """Each host's variables as napilab resolves them from the Ansible inventory at
    `path` (what `ansible-inventory -i PATH --list` shows as `_meta.hostvars`), before
    napilab's host keys are taken from them."""
    check = Checker()
    inventory = _entities(check, _parse(path))
    resolved = resolve(inventory, _group_vars(path))
    check.problems = relocate(check.problems, inventory.origins)
    check.raise_if_any()
    return resolved


def _ansible(check: Checker, path: str | Path, data: Any) -> dict[str, Host]:
    inventory = _entities(check, data)
    defaults = {"transport": "ssh", "host_key_policy": "reject", "ssh_config": None}
    found = {}
    for name, (host_node, key_path) in ansible_hosts(check, inventory,
                                                     _group_vars(path)).items():
        if not _NAME.fullmatch(name):  # it names files (raw/<trial>/<host>/)
            check.error(host_node.location, key_path, f"{name!r}: " + _NAME_RULE)
            continue
        found[name] = _host(check, name, host_node, key_path, defaults)
    check.problems = relocate(check.problems, inventory.origins)
    check.raise_if_any()
    return found


def _entities(check: Checker, data: Any) -> Entities:
    if isinstance(data, Entities):
        return data
    if not isinstance(data, Node):
        raise InputError("an Ansible inventory is a mapping of groups")
    return from_list_json(check, data) if is_list_json(data) else read_yaml(check, data)


def _group_vars(path: str | Path) -> GroupVars:
    return GroupVars(Path(path) if str(path) != "-" else None)


def _host(check: Checker, name: str, node: Node, path: str, defaults: dict[str, Any]) -> Host:
    check.keys(node, path, _HOST_KEYS)
    fields: dict[str, Any] = {
        "transport": check.choice(node, "transport", path, TRANSPORTS,
                                  default=defaults["transport"]),
        "host_key_policy": check.choice(node, "host_key_policy", path, HOST_KEY_POLICIES,
                                        default=defaults["host_key_policy"]),
        "port": check.num(node, "port", path, HOST_NUMBERS["port"], default=22),
        "port_set": "port" in node,
        "become": check.choice(node, "become", path, BECOME),
        "cpus": check.num(node, "cpus", path, HOST_NUMBERS["cpus"]),
        "connect_timeout": check.num(node, "connect_timeout", path,
                                     HOST_NUMBERS["connect_timeout"]),
        "ssh_config": (str(Path(defaults["ssh_config"]).expanduser())
                       if defaults.get("ssh_config") else None),
    }
    for key in ("address", "data_address"):
        value = check.get(node, key, path, str)
        if value is not None and not _valid_address(value):
            check.error(node.where(key), join(path, key), f"{value!r} is not an IP address "
                        "or host name")
            value = None
        fields[key] = value
    for key, pattern in (("user", _USER), ("netns", _NAME), ("iface", _IFACE)):
        value = check.get(node, key, path, str)
        if value is not None and not pattern.fullmatch(value):
            check.error(node.where(key), join(path, key), f"{value!r} is not a valid {key}")
            value = None
        fields[key] = value
    for key in ("key", "known_hosts"):
        value = check.get(node, key, path, str)
        fields[key] = str(Path(value).expanduser()) if value else None
    fields["boot"] = _boot(check, node, path)
    if fields["transport"] == "ssh" and not fields["address"]:
        fields["address"] = name  # resolved through DNS or ~/.ssh/config
    return Host(name=name, **fields)


def _boot(check: Checker, node: Node, path: str) -> Boot | None:
    if "boot" not in node:
        return None
    bpath = join(path, "boot")
    spec = check.mapping(node.get("boot"), node.where("boot"), bpath)
    if spec is None:
        return None
    check.keys(spec, bpath, BOOT_KEYS, required=("method",))
    method = check.choice(spec, "method", bpath, BOOT_METHODS)
    testbed = check.get(spec, "testbed", bpath, str)
    guest = check.get(spec, "guest", bpath, str)
    timeout = check.num(spec, "timeout", bpath, BOOT_TIMEOUT, default=600.0)
    for key, value in (("testbed", testbed), ("guest", guest)):
        if method == "vm" and not value:
            check.error(spec.where("method"), join(bpath, key), f"method vm needs `{key}` "
                        "(`napilab testbed up --vm` writes both: the testbed's state "
                        "directory and the guest's name)")
        elif method != "vm" and value:
            check.error(spec.where(key), join(bpath, key), f"only method vm has a {key}, "
                        f"not {method}")
    if method is None:
        return None
    return Boot(method, testbed, guest, float(timeout))


def _valid_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return bool(HOSTNAME.fullmatch(text))
