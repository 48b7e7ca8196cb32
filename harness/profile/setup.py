"""The `setup` section: per role, every kind of knob, validated into Settings.

Kinds: sysctl, netdev (sysfs), napi (per-NAPI netlink), rps, xps, irq_affinity,
ethtool (coalesce/channels/features), napi_threads (affinity and scheduling of NAPI
kthreads), irqbalance, cpufreq. Values are typed and names confined before any host
is touched; docs/profiles.md has an example of each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from harness.errors import Written
from harness.profile import knobs
from harness.profile.matrix import unresolved
from harness.profile.schema import Checker, join, suggest
from harness.profile.sections import PLACEHOLDER
from harness.profile.yamlsrc import Node

SETUP_KINDS = ("sysctl", "irqbalance", "cpufreq", "netdev", "napi", "ethtool", "rps", "xps",
               "irq_affinity", "napi_threads")
NAPI_ATTRS: dict[str, Any] = {
    "threaded": knobs.napi_threaded,
    "defer-hard-irqs": knobs.integer(0, knobs.S32_MAX),
    "gro-flush-timeout": knobs.integer(0, knobs.U64_MAX),
    "irq-suspend-timeout": knobs.integer(0, knobs.U64_MAX),
}
ETHTOOL_GROUPS = ("coalesce", "channels", "features")
POLICIES = ("fifo", "rr", "other", "batch", "idle")
QUEUE_KEYS = {"rps": ("cpus", "queues", "flow_cnt"), "xps": ("cpus", "queues")}
IRQ_AFFINITY_KEYS = ("cpus", "match")
NAPI_THREAD_KEYS = ("cpus", "policy", "priority")
CPUFREQ_KEYS = ("cpus", "governor")
IRQBALANCE = ("stopped", "running")
RPS_FLOW_CNT = knobs.integer(0, 2**31)
_ETHTOOL_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_GOVERNOR = re.compile(r"[a-z][a-z0-9_]{0,31}")


def parse_setup(check: Checker, node: Node, path: str, roles: Mapping[str, Any]
                ) -> list[knobs.Setting]:
    settings: list[knobs.Setting] = []
    for role, raw in node.items():
        role_path = join(path, role)
        if role not in roles:
            check.error(node.key_locations.get(role), role_path,
                        f"no such role; roles are {sorted(roles)}{suggest(role, roles)}")
            continue
        kinds = check.mapping(raw, node.where(role), role_path)
        if kinds is None:
            continue
        check.keys(kinds, role_path, SETUP_KINDS)
        for kind in SETUP_KINDS:
            if kind not in kinds:
                continue
            kind_path = join(role_path, kind)
            if kind == "irqbalance":
                settings += _irqbalance(check, kinds[kind], kinds.where(kind), kind_path, role)
                continue
            body = check.mapping(kinds[kind], kinds.where(kind), kind_path)
            if body is not None:
                settings += _KIND_PARSERS[kind](check, body, kind_path, role)
    return settings


def _value(check: Checker, node: Node, key: str, path: str,
           convert: Any) -> str | None:
    try:
        return str(convert(node[key]))
    except knobs.KnobValueError as exc:
        if not unresolved(node[key]):
            check.error(node.where(key), _at(node, key, path).key_path, str(exc))
        return None


def _at(node: Node, key: str, path: str) -> Written:
    """Where node[key] was written; a short form (`rps: {eth0: "1"}`) is its own key."""
    return Written(node.where(key), join(path, key) if key in node.key_locations else path)


def _iface(check: Checker, node: Node, key: str, path: str) -> bool:
    if PLACEHOLDER.fullmatch(key):
        return True
    try:
        knobs.check_iface(key)
        return True
    except knobs.KnobValueError as exc:
        check.error(node.key_locations.get(key), join(path, key), str(exc))
        return False


def _interfaces(check: Checker, node: Node, path: str, *, short: bool = False,
                also: tuple[str, ...] = ()) -> Iterator[tuple[str, Node, str]]:
    """(iface, its mapping, its key path) for each valid interface key of `node`.
    `short`: a bare value stands for `{cpus: VALUE}`; `also`: other allowed keys."""
    for iface, raw in node.items():
        if iface not in also and not _iface(check, node, iface, path):
            continue
        ipath = join(path, iface)
        if short and not isinstance(raw, Node):
            bare = Node({"cpus": raw})
            bare.value_locations["cpus"] = node.where(iface)  # type: ignore[assignment]
            yield iface, bare, ipath
            continue
        spec = check.mapping(raw, node.where(iface), ipath)
        if spec is not None:
            yield iface, spec, ipath


def _sysctl(check: Checker, node: Node, path: str, role: str) -> list[knobs.Setting]:
    out = []
    for name in node:
        try:
            knobs.check_sysctl(name)
        except knobs.KnobValueError as exc:
            check.error(node.key_locations.get(name), join(path, name), str(exc))
            continue
        value = _value(check, node, name, path, knobs.sysctl_value)
        if value is not None:
            out.append(knobs.Setting(role, "sysctl", name, value))
    return out


def _netdev(check: Checker, node: Node, path: str, role: str) -> list[knobs.Setting]:
    out = []
    for iface, attrs, _ in _interfaces(check, node, path):
        check.keys(attrs, join(path, iface), knobs.NETDEV_ATTRS)
        for attr, convert in knobs.NETDEV_ATTRS.items():
            if attr in attrs:
                value = _value(check, attrs, attr, join(path, iface), convert)
                if value is not None:
                    out.append(knobs.Setting(role, "netdev", f"{iface}/{attr}", value))
    return out


def _queues_kind(kind: str) -> Any:
    """rps / xps: `{IFACE: CPULIST}` or `{IFACE: {cpus: CPULIST, queues: [rx-0],
    flow_cnt: N}}`; without `queues`, every rx (tx for xps) queue of the interface."""

    def parse(check: Checker, node: Node, path: str, role: str) -> list[knobs.Setting]:
        out = []
        allowed = QUEUE_KEYS[kind]
        for iface, spec, ipath in _interfaces(check, node, path, short=True):
            check.keys(spec, ipath, allowed)
            queues = check.string_list(spec, "queues", ipath) or [
                ("rx-*" if kind == "rps" else "tx-*")]
            for queue in queues:
                if queue.endswith("*"):
                    continue
                try:
                    knobs.check_queue(queue)
                except knobs.KnobValueError as exc:
                    check.error(spec.where("queues"), join(ipath, "queues"), str(exc))
            if "cpus" in spec:
                value = _value(check, spec, "cpus", ipath, knobs.cpu_list)
                if value is not None:
                    out += [knobs.Setting(role, kind, f"{iface}/{q}", value,
                                          _at(spec, "cpus", ipath)) for q in queues]
            if "flow_cnt" in spec:
                value = _value(check, spec, "flow_cnt", ipath, RPS_FLOW_CNT)
                if value is not None:
                    out += [knobs.Setting(role, "rps_flow_cnt", f"{iface}/{q}", value)
                            for q in queues]
        return out

    return parse


def _napi(check: Checker, node: Node, path: str, role: str) -> list[knobs.Setting]:
    """`napi: {IFACE: {threaded: busy-poll, defer-hard-irqs: 2, ...}}`: every NAPI
    instance of the interface, through netlink napi-set (underscores accepted)."""
    out = []
    for iface, attrs, _ in _interfaces(check, node, path):
        spelled = {k.replace("_", "-"): k for k in attrs}
        for written in attrs:
            if written.replace("_", "-") not in NAPI_ATTRS:
                check.error(attrs.key_locations.get(written), join(path, f"{iface}.{written}"),
                            f"unknown key; expected one of {sorted(NAPI_ATTRS)}"
                            f"{suggest(written.replace('_', '-'), NAPI_ATTRS)}")
        for attr, convert in NAPI_ATTRS.items():
            if attr in spelled:
                value = _value(check, attrs, spelled[attr], join(path, iface), convert)
                if value is not None:
                    out.append(knobs.Setting(role, "napi", f"{iface}/{attr}", value))
    return out


def _ethtool(check: Checker, node: Node, path: str, role: str) -> list[knobs.Setting]:
    """`ethtool: {IFACE: {coalesce: {rx-usecs: 0}, channels: {combined: 1},
    features: {gro: on}}}` (ethtool -C / -L / -K, read back with -c / -l / -k)."""
    out = []
    for iface, groups, _ in _interfaces(check, node, path):
        check.keys(groups, join(path, iface), ETHTOOL_GROUPS)
        for group in ETHTOOL_GROUPS:
            body = check.mapping(groups.get(group), groups.where(group),
                                 join(path, f"{iface}.{group}")) if group in groups else None
            for name, value in (body or Node()).items():
                assert body is not None
                where, key_path = body.where(name), join(path, f"{iface}.{group}.{name}")
                if not _ETHTOOL_NAME.fullmatch(name):
                    check.error(body.key_locations.get(name), key_path, "not an ethtool name")
                    continue
                text = _ethtool_value(group, value)
                if text is None:
                    expected = {"features": "on or off", "channels": "an integer"}.get(
                        group, "an integer, or on or off")
                    check.error(where, key_path, f"expected {expected}, got {value!r}")
                    continue
                out.append(knobs.Setting(role, "ethtool", f"{iface}/{group}/{name}", text))
    return out


def _ethtool_value(group: str, value: object) -> str | None:
    """features: on/off; coalesce: integers, or on/off (adaptive-rx); channels: integers."""
    switches = {True: "on", False: "off", "on": "on", "off": "off"}
    if group != "channels" and isinstance(value, bool | str):
        return switches.get(value)
    if group == "features" or isinstance(value, bool) or not isinstance(value, int):
        return None
    return str(value) if value >= 0 else None


def _irq_affinity(check: Checker, node: Node, path: str, role: str) -> list[knobs.Setting]:
    """`irq_affinity: {IFACE: CPULIST}` or `{IFACE: {cpus: CPULIST, match: REGEX}}`:
    every IRQ of the interface (or those whose /proc/interrupts name matches)."""
    out = []
    for iface, spec, ipath in _interfaces(check, node, path, short=True):
        check.keys(spec, ipath, IRQ_AFFINITY_KEYS, required=("cpus",))
        match = check.get(spec, "match", ipath, str)
        if match is not None:
            try:
                re.compile(match)
            except re.error as exc:
                check.error(spec.where("match"), join(ipath, "match"), f"bad regex: {exc}")
                match = None
        value = _value(check, spec, "cpus", ipath, knobs.cpu_list) if "cpus" in spec else None
        if value == "":
            check.error(spec.where("cpus"), _at(spec, "cpus", ipath).key_path,
                        "an IRQ needs at least one CPU")
        elif value is not None:
            target = f"{iface}/{match}" if match else iface
            out.append(knobs.Setting(role, "irq_affinity", target, value,
                                     _at(spec, "cpus", ipath)))
    return out


def _napi_threads(check: Checker, node: Node, path: str, role: str) -> list[knobs.Setting]:
    """`napi_threads: {IFACE: {cpus: "2", policy: fifo, priority: 50}}` for the
    interface's napi/IFACE-ID kthreads; `backlog:` for backlog_napi/N threads."""
    out = []
    for owner, spec, opath in _interfaces(check, node, path, also=("backlog",)):
        check.keys(spec, opath, NAPI_THREAD_KEYS)
        if "cpus" in spec:
            value = _value(check, spec, "cpus", opath, knobs.cpu_list)
            if value:
                out.append(knobs.Setting(role, "napi_threads", f"{owner}/cpus", value,
                                         _at(spec, "cpus", opath)))
        policy = check.choice(spec, "policy", opath, POLICIES)
        if "policy" in spec and policy is None:
            continue  # a misspelt policy is one error: its priority cannot be judged
        if "priority" in spec and policy is None:
            check.error(spec.where("priority"), join(opath, "priority"),
                        "a priority needs a policy (fifo or rr)")
            continue
        realtime = policy in ("fifo", "rr")
        priority = check.number(spec, "priority", opath, integer=True,
                                minimum=1 if realtime else 0, maximum=99 if realtime else 0,
                                default=50 if realtime else 0)
        if policy is not None and priority is not None:
            out.append(knobs.Setting(role, "napi_threads", f"{owner}/policy",
                                     f"{policy}:{priority}"))
    return out


def _irqbalance(check: Checker, value: Any, where: Any, path: str,
                role: str) -> list[knobs.Setting]:
    if value not in IRQBALANCE:
        check.error(where, path, f"expected stopped or running, got {value!r}")
        return []
    return [knobs.Setting(role, "irqbalance", "irqbalance", str(value))]


def _cpufreq(check: Checker, node: Node, path: str, role: str) -> list[knobs.Setting]:
    """`cpufreq: {cpus: "0-3", governor: performance}` (scaling_governor per CPU)."""
    check.keys(node, path, CPUFREQ_KEYS, required=CPUFREQ_KEYS)
    cpu_list = _value(check, node, "cpus", path, knobs.cpu_list) if "cpus" in node else None
    governor = check.get(node, "governor", path, str)
    if governor is not None and not _GOVERNOR.fullmatch(governor):
        check.error(node.where("governor"), join(path, "governor"), "not a governor name")
        governor = None
    if not cpu_list or governor is None:
        return []
    return [knobs.Setting(role, "cpufreq", cpu_list, governor, _at(node, "cpus", path))]


_KIND_PARSERS = {"sysctl": _sysctl, "netdev": _netdev, "napi": _napi, "ethtool": _ethtool,
                 "rps": _queues_kind("rps"), "xps": _queues_kind("xps"),
                 "irq_affinity": _irq_affinity, "napi_threads": _napi_threads,
                 "cpufreq": _cpufreq}
