"""The top-level keys of a profile and of an inventory (the validators and the JSON
Schema read them from here), and telling the two kinds of file apart: a file of the
wrong kind gets one sentence, not an error for every key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import InputError, Location, Problem
from harness.profile.yamlsrc import load_file, read_file

PROFILE_KEYS = ("name", "description", "extends", "hosts", "setup", "workload", "collect",
                "report", "variants", "baseline", "repeat", "order", "seed", "cooldown",
                "on_mismatch", "metrics", "matrix", "warmup_trials", "kernel", "boot")
INVENTORY_KEYS = ("transport", "host_key_policy", "hosts", "ssh_config")
HOST_KEYS = ("address", "port", "user", "key", "known_hosts", "become", "data_address",
             "netns", "iface", "transport", "host_key_policy", "cpus", "connect_timeout",
             "boot")
ROLE_KEYS = ("host", "iface")  # a profile's `hosts:` entry: the role's host and interface
# only a profile has these (name, description and hosts are in both kinds)
_PROFILE_ONLY = tuple(k for k in PROFILE_KEYS if k not in ("name", "description", "hosts"))
_INVENTORY_ONLY = tuple(k for k in INVENTORY_KEYS if k != "hosts")
_HOST_ONLY = tuple(k for k in HOST_KEYS if k not in ROLE_KEYS)
_ANSIBLE = ("all", "_meta", "ungrouped")  # Ansible YAML inventories, --list JSON


def _inventory_signs(data: dict[str, Any]) -> list[str]:
    """The keys that make DATA an inventory: `transport:`, `all:`, `hosts.X.address`."""
    signs = [f"{k}:" for k in (*_INVENTORY_ONLY, *_ANSIBLE) if k in data]
    hosts = data.get("hosts")
    if isinstance(hosts, dict):
        for name, host in hosts.items():
            if isinstance(host, dict) and "host" not in host:
                signs += [f"hosts.{name}.{k}" for k in _HOST_ONLY if k in host][:1]
    return signs


def not_an_inventory(data: Any, path: str, where: Location | None) -> None:
    """A profile loader's check: DATA has no profile-only key and looks like an
    inventory (napilab's or Ansible's)."""
    if not isinstance(data, dict) or any(k in data for k in _PROFILE_ONLY):
        return
    signs = _inventory_signs(data)
    if signs:
        _refuse(path, where, f"this is an inventory (it has {', '.join(signs[:3])}), not a "
                "profile: give it with -i, and a profile (name, hosts, workload, variants) "
                "as the first argument")


def not_a_profile(data: Any, path: str, where: Location | None) -> None:
    """An inventory loader's check: DATA has profile-only keys (workload, variants, ...)
    and nothing of an inventory but `hosts:`."""
    if not isinstance(data, dict):
        return
    signs = [f"{k}:" for k in _PROFILE_ONLY if k in data]
    if signs and not _inventory_signs(data):
        _refuse(path, where, f"this is a profile (it has {', '.join(signs[:3])}), not an "
                "inventory: give it as the first argument, and with -i an inventory "
                "(hosts with address, user, key)")


def _refuse(path: str, where: Location | None, sentence: str) -> None:
    raise InputError([Problem(where or Location(path, 1, 1), "", sentence)])


def load_profile_document(path: Path) -> Any:
    """The file's YAML; an inventory (napilab's, Ansible's YAML, INI or --list JSON)
    given as a profile is one sentence."""
    from harness.inventory.formats import looks_like_ini

    try:
        document = load_file(path)
    except InputError:
        if looks_like_ini(read_file(path)):
            raise InputError([Problem(Location(str(path), 1, 1), "", "this is an Ansible INI "
                                      "inventory, not a profile: give it with -i, and a "
                                      "profile as the first argument")]) from None
        raise
    not_an_inventory(document, str(path), getattr(document, "location", None))
    return document
