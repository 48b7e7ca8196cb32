"""`netdev: {IFACE: {napi_defer_hard_irqs: 2, gro_flush_timeout: 20000, ...}}`: the
interface's own sysfs attributes under /sys/class/net/IFACE."""

from __future__ import annotations

from collections.abc import Callable

from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting

# Spellings of sysfs `threaded`, matched lower-cased (YAML true reads "true").
SYSFS_THREADED = {"0": "0", "1": "1", "disabled": "0", "enabled": "1", "false": "0",
                  "true": "1"}


def threaded_sysfs(value: object) -> str:
    """sysfs `threaded` takes only 0/1; busy-poll exists only through netlink napi-set."""
    key = str(value).lower()
    if key == "busy-poll":
        raise values.KnobValueError(
            "threaded busy-poll is set per NAPI through netlink: use "
            "`napi: {IFACE: {threaded: busy-poll}}`; sysfs takes only 0/1")
    if key not in SYSFS_THREADED:
        raise values.KnobValueError(f"expected one of 0, 1, disabled, enabled, got {value!r}")
    return SYSFS_THREADED[key]


# netdev sysfs attributes napilab writes: name -> value converter.
ATTRS: dict[str, Callable[[object], str]] = {
    "threaded": threaded_sysfs,
    "napi_defer_hard_irqs": values.integer(0, values.S32_MAX),  # > S32_MAX refused (5.7+)
    "gro_flush_timeout": values.integer(0, values.U64_MAX),  # ns
    "tx_queue_len": values.integer(0, values.U32_MAX),
    "mtu": values.integer(68, 65535),
}
PROBED = ("threaded", "napi_defer_hard_irqs", "gro_flush_timeout", "tx_queue_len")


class Netdev(Kind):
    name = key = "netdev"

    def attribute_names(self) -> frozenset[str]:
        return frozenset(ATTRS)

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, "netdev", path)
        if body is None:
            return []
        return [Setting(role, self.name, f"{iface}/{attr}", value)
                for iface, attr, value in grammar.attributes(check, body, path, ATTRS)]

    def json_schema(self) -> js.Schema:
        return js.mapping_of(js.obj({
            attr: js.spellings(SYSFS_THREADED) if attr == "threaded" else js.converter(convert)
            for attr, convert in ATTRS.items()}), keys=js.IFACE_KEY)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        iface, _, attr = setting.target.partition("/")
        return [self.item(f"/sys/class/net/{iface}/{attr}", setting.target, setting.value)]

    def check_paths(self, iface: str | None) -> list[str]:
        return [f"/sys/class/net/{iface}/{attr}" for attr in PROBED] if iface else []
