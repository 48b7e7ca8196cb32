"""The `setup` section: per role, the knobs of every kind, validated into Settings.

The keys are the knob kinds of harness.knobs.registry (sysctl, netdev, napi, rps, xps,
irq_affinity, ethtool, napi_threads, irqbalance, cpufreq, sysfs); each kind parses its
own key. Values are typed and names confined before any host is touched;
docs/profiles.md has an example of each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from napilab.harness.errors import Problem
from napilab.harness.grammar.schema import Checker, join, suggest
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import registry
from napilab.harness.knobs.kind import Kind, Setting


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
        before = len(check.problems)
        check.keys(keys, role_path, kinds)
        for key, kind in kinds.items():
            if key in keys:
                settings += kind.parse(check, keys, join(role_path, key), role)
        check.problems[before:] = [_owner(p, role_path, kinds)
                                   for p in check.problems[before:]]
    return settings


def _spelt(name: str) -> str:
    return name.replace("-", "_")


def _owner(problem: Problem, role_path: str, kinds: Mapping[str, Kind]) -> Problem:
    """An unknown key that another kind takes names that kind: `netdev: {eth0:
    {irq_suspend_timeout: 1}}` is napi's (per NAPI), `napi: {eth0: {rps: ...}}` is
    a kind of its own."""
    if not problem.message.startswith("unknown key") or \
            not problem.key_path.startswith(role_path + "."):
        return problem
    parts = problem.key_path[len(role_path) + 1:].split(".")
    written, here = parts[-1], parts[0]
    if len(parts) == 1:  # under the role: a key of a kind's own
        owners = [k for k, kind in kinds.items()
                  if _spelt(written) in {_spelt(a) for a in kind.attribute_names()}]
        where = [f"{k}: {{IFACE: {{{written}: ...}}}}" for k in owners]
    else:
        owners = [k for k, kind in kinds.items() if k != here and _spelt(written) in
                  {_spelt(a) for a in kind.attribute_names()}]
        owners += [k for k in kinds if k != here and _spelt(k) == _spelt(written)]
        where = [f"{k}: {{{parts[1]}: {{{written}: ...}}}}" if k != written
                 else f"{k}: {{...}} beside {here}" for k in owners]
    if not owners:
        return problem
    message = re.sub(r"; did you mean '[^']*'\?", "", problem.message)  # not a near miss
    return Problem(problem.location, problem.key_path, f"{message}; "
                   f"{written} belongs to {' or '.join(dict.fromkeys(where))}")
