"""`sysctl: {net.core.busy_poll: 50, net.ipv4.tcp_rmem: [4096, 131072, 6291456]}`:
files under /proc/sys (multi-value sysctls are written tab-separated).

A value is checked against the sysctl's type on the host when its original is read,
before anything is written: a sysctl that reads integers (one, or several such as
tcp_rmem's three) takes as many integers, nothing else (`net.core.busy_poll: fast` or
`tcp_rmem: 4096` fail naming the key, the value and what the host reads). The kernel
would refuse a word with EINVAL only after the earlier settings were written, and would
take fewer integers than the sysctl has and leave the rest (the read back then differs).
A sysctl that reads anything else (a word, a list of words, nothing) is left to the
kernel; one that holds text and happens to read as digits is taken for an integer one.
"""

from __future__ import annotations

import re

from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting

# What `napilab hosts check` shows for every host.
PROBED = ("net.core.busy_poll", "net.core.busy_read", "net.core.skb_defer_max",
          "net.core.netdev_budget")


def path_of(name: str) -> str:
    return "/proc/sys/" + name.replace(".", "/")


_INTEGER = re.compile(r"-?\d+")

# `50us`, `1.5ms`, `4k`: a number with a unit, which no sysctl takes (a word such as a
# congestion control's name, `bbr`, or `cubic`, has no leading digits)
_WITH_UNIT = re.compile(r"[+-]?\d+(?:\.\d+)?[A-Za-z%]+")


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
            unit = next((p for p in (value or "").split("\t") if _WITH_UNIT.fullmatch(p)), None)
            if unit is not None:
                check.error(body.where(name), join(path, name),
                            f"{unit!r} is a number with a unit; a sysctl takes the kernel's "
                            "plain number in the sysctl's own unit (net.core.busy_poll "
                            "and busy_read count microseconds: 50, not 50us)")
            elif value is not None:
                out.append(Setting(role, self.name, name, value))
        return out

    def json_schema(self) -> js.Schema:
        word = {"anyOf": [{"type": "integer"}, js.WORD]}
        return js.mapping_of(js.leaf({"anyOf": [*word["anyOf"], {"type": "array",
                                                                 "items": word}]}),
                             keys=js.regex(values.SYSCTL))

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(path_of(setting.target), setting.target, setting.value)]

    def refuses(self, item: Item, original: str) -> str | None:
        """An integer sysctl (what the host reads is integers) takes as many integers."""
        now = original.split()
        if not now or not all(_INTEGER.fullmatch(word) for word in now):
            return None
        given = item.value.split("\t")
        reads = f"the host reads {' '.join(now)!r}"
        bad = next((word for word in given if not _INTEGER.fullmatch(word)), None)
        if bad is not None:
            return (f"{bad!r} is not an integer, and {item.target} is an integer sysctl "
                    f"({reads})")
        if len(given) != len(now):
            return (f"{item.target} holds {len(now)} integers ({reads}): give all "
                    f"{len(now)}, as a list")
        return None

    def check_paths(self, iface: str | None) -> list[str]:
        return [path_of(name) for name in PROBED]
