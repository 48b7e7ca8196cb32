"""The `setup` section: per role, the knobs of every kind, validated into Settings.

The keys are the knob kinds of harness.knobs.registry (sysctl, netdev, napi, rps, xps,
irq_affinity, ethtool, napi_threads, irqbalance, cpufreq, sysfs); each kind parses its
own key. Values are typed and names confined before any host is touched;
docs/profiles.md has an example of each.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from napilab.harness.knobs import registry
from napilab.harness.knobs.kind import Setting
from napilab.harness.profile.schema import Checker, join, suggest
from napilab.harness.profile.yamlsrc import Node


def known_roles(check: Checker, node: Node, path: str, roles: Mapping[str, Any]
                ) -> Iterator[tuple[str, Any, str]]:
    """(role, its value, its key path) of a section keyed by the profile's roles; an
    unknown role is an error at its key, and skipped."""
    for role, raw in node.items():
        role_path = join(path, role)
        if role not in roles:
            check.error(node.key_locations.get(role), role_path,
                        f"no such role; roles are {sorted(roles)}{suggest(role, roles)}")
            continue
        yield role, raw, role_path


def parse_setup(check: Checker, node: Node, path: str, roles: Mapping[str, Any]
                ) -> list[Setting]:
    """Settings in apply order (the registry's), role by role."""
    settings: list[Setting] = []
    kinds = registry.profile_keys()
    for role, raw, role_path in known_roles(check, node, path, roles):
        keys = check.mapping(raw, node.where(role), role_path)
        if keys is None:
            continue
        check.keys(keys, role_path, kinds)
        for key, kind in kinds.items():
            if key in keys:
                settings += kind.parse(check, keys, join(role_path, key), role)
    return settings
