"""`intel_pstate: {no_turbo: 1, max_perf_pct: 100, min_perf_pct: 100}`: the intel_pstate
driver's host-wide limits, /sys/devices/system/cpu/intel_pstate/{no_turbo,max_perf_pct,
min_perf_pct} (Documentation/admin-guide/pm/intel_pstate.rst).

`no_turbo` is 0 or 1; the two limits are percentages of the maximum (turbo) P-state,
0..100. Written in that order (no_turbo, max_perf_pct, min_perf_pct) and restored in
the reverse one. The driver clamps `min_perf_pct` to at most `max_perf_pct` and
`max_perf_pct` to at least `min_perf_pct`: a limit it clamped reads back as a mismatch,
never as taken. A host without intel_pstate (AMD, a VM, `intel_pstate=disable`) lacks
the directory and is refused before any write, naming the file.
"""

from __future__ import annotations

from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting

DIRECTORY = "/sys/devices/system/cpu/intel_pstate"
ATTRIBUTES = {"no_turbo": values.integer(0, 1), "max_perf_pct": values.integer(0, 100),
              "min_perf_pct": values.integer(0, 100)}  # in write order


class IntelPstate(Kind):
    name = key = "intel_pstate"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        if body is None:
            return []
        check.keys(body, path, ATTRIBUTES)
        if not body:
            check.error(body.location, path, f"expected at least one of {', '.join(ATTRIBUTES)}")
        out = []
        for attr, convert in ATTRIBUTES.items():
            if attr in body:
                value = grammar.value(check, body, attr, path, convert)
                if value is not None:
                    out.append(Setting(role, self.name, attr, value,
                                       grammar.at(body, attr, path)))
        return out

    def json_schema(self) -> js.Schema:
        return js.obj({attr: js.converter(convert) for attr, convert in ATTRIBUTES.items()})

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(f"{DIRECTORY}/{setting.target}", f"intel_pstate/{setting.target}",
                          setting.value)]

    def check_paths(self, iface: str | None) -> list[str]:
        return [f"{DIRECTORY}/{attr}" for attr in ATTRIBUTES]
