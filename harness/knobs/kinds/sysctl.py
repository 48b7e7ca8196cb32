"""`sysctl: {net.core.busy_poll: 50, net.ipv4.tcp_rmem: [4096, 131072, 6291456]}`:
files under /proc/sys (multi-value sysctls are written tab-separated)."""

from __future__ import annotations

from napilab.harness.authoring import json_parts as js
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting
from napilab.harness.profile.schema import Checker, join
from napilab.harness.profile.yamlsrc import Node

# What `napilab hosts check` shows for every host.
PROBED = ("net.core.busy_poll", "net.core.busy_read", "net.core.skb_defer_max",
          "net.core.netdev_budget")


def path_of(name: str) -> str:
    return "/proc/sys/" + name.replace(".", "/")


class Sysctl(Kind):
    name = key = "sysctl"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, "sysctl", path)
        out = []
        for name in body or ():
            assert body is not None
            try:
                values.check_sysctl(name)
            except values.KnobValueError as exc:
                check.error(body.key_locations.get(name), join(path, name), str(exc))
                continue
            value = grammar.value(check, body, name, path, values.sysctl_value)
            if value is not None:
                out.append(Setting(role, self.name, name, value))
        return out

    def json_schema(self) -> js.Schema:
        word = {"anyOf": [{"type": "integer"}, js.WORD]}
        return js.mapping_of(js.leaf({"anyOf": [*word["anyOf"], {"type": "array",
                                                                 "items": word}]}),
                             keys=js.regex(values.SYSCTL))

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(path_of(setting.target), setting.target, setting.value)]

    def check_paths(self, iface: str | None) -> list[str]:
        return [path_of(name) for name in PROBED]
