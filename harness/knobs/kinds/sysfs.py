"""`sysfs: {IFACE: {power/control: "on"}}`: any attribute of the interface's device
under /sys/class/net/IFACE/device/ (the PCI function for a NIC): runtime power
management, driver attributes. The attribute is a relative path of plain names; the
value an integer or a word, compared with what the file reads back (whitespace
collapsed). A virtual interface (veth) has no device directory: the apply fails before
any write, naming the file."""

from __future__ import annotations

import re

from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting

_ATTRIBUTE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}){0,2}")


def attribute(name: str) -> str:
    if not _ATTRIBUTE.fullmatch(name):
        raise values.KnobValueError(f"{name!r} is not a device attribute like power/control "
                                    "(up to three names of letters, digits, _ . -)")
    return name


class Sysfs(Kind):
    name = key = "sysfs"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        out = []
        for iface, attrs, ipath in grammar.interfaces(check, body or Node(), path):
            for name in attrs:
                try:
                    attribute(name)
                except values.KnobValueError as exc:
                    check.error(attrs.key_locations.get(name), join(ipath, name), str(exc))
                    continue
                value = grammar.value(check, attrs, name, ipath,
                                      lambda v: values.word(v, "a sysfs value"))
                if value is not None:
                    out.append(Setting(role, self.name, f"{iface}/device/{name}", value))
        return out

    def json_schema(self) -> js.Schema:
        return js.mapping_of(js.mapping_of(js.leaf({"anyOf": [{"type": "integer"}, js.WORD]}),
                                           keys=js.regex(_ATTRIBUTE)), keys=js.IFACE_KEY)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(f"/sys/class/net/{setting.target}", setting.target, setting.value)]
