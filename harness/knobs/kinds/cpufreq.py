"""`cpufreq: {cpus: "0-3", governor: performance}`: scaling_governor of each CPU."""

from __future__ import annotations

import re

from napilab.harness.authoring import json_parts as js
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting
from napilab.harness.profile import cpus
from napilab.harness.profile.schema import Checker, join
from napilab.harness.profile.yamlsrc import Node

_GOVERNOR = re.compile(r"[a-z][a-z0-9_]{0,31}")
KEYS = ("cpus", "governor")


class Cpufreq(Kind):
    name = key = "cpufreq"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        if body is None:
            return []
        check.keys(body, path, KEYS, required=KEYS)
        cpu_list = (grammar.value(check, body, "cpus", path, values.cpu_list)
                    if "cpus" in body else None)
        governor = check.get(body, "governor", path, str)
        if governor is not None and not _GOVERNOR.fullmatch(governor):
            check.error(body.where("governor"), join(path, "governor"), "not a governor name")
            governor = None
        if not cpu_list or governor is None:
            return []
        return [Setting(role, self.name, cpu_list, governor, grammar.at(body, "cpus", path))]

    def json_schema(self) -> js.Schema:
        return js.obj({"cpus": js.CPU_LIST, "governor": js.leaf(
            {"type": "string", "pattern": js.regex(_GOVERNOR)})}, required=KEYS)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor",
                          f"cpu{cpu} governor", setting.value)
                for cpu in cpus.parse_list(setting.target)]

    def cpu_lists(self, setting: Setting) -> list[str]:
        return [setting.target]
