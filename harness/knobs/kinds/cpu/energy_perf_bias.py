"""`energy_perf_bias: {cpus: "0-15", value: performance}`: the Intel Performance and
Energy Bias Hint (EPB) of each listed CPU, /sys/devices/system/cpu/cpuN/power/
energy_perf_bias (Documentation/admin-guide/pm/intel_epb.rst).

The value is 0 (highest performance) .. 15 (most energy saving), or one of the kernel's
names for its steps, written as their numbers (arch/x86/include/asm/msr-index.h:
performance 0, balance-performance 4, normal 6, balance-power 8, power 15): the file
always reads back a number. The register may be shared by SMT siblings or a package, so
writing one CPU's value can change another's; a CPU without EPB (not Intel, or
offline) lacks the file and the apply fails before any write, naming it.
"""

from __future__ import annotations

from napilab.harness.grammar import cpus
from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting

CPU = "/sys/devices/system/cpu"
NAMES = {"performance": 0, "balance-performance": 4, "normal": 6, "balance-power": 8,
         "power": 15}
KEYS = ("cpus", "value")
_NUMBER = values.integer(0, 15)


def bias(value: object) -> str:
    """An EPB value as the number the file reads: 0..15 or one of the kernel's names."""
    if isinstance(value, str) and value in NAMES:
        return str(NAMES[value])
    try:
        return _NUMBER(value)
    except values.KnobValueError:
        raise values.KnobValueError(f"expected 0..15 or one of {', '.join(NAMES)}, got "
                                    f"{value!r}") from None


class EnergyPerfBias(Kind):
    name = key = "energy_perf_bias"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        if body is None:
            return []
        check.keys(body, path, KEYS, required=KEYS)
        cpu_list = (grammar.value(check, body, "cpus", path, values.cpu_list)
                    if "cpus" in body else None)
        number = grammar.value(check, body, "value", path, bias) if "value" in body else None
        if not cpu_list or number is None:
            return []
        return [Setting(role, self.name, cpu_list, number, grammar.at(body, "cpus", path))]

    def json_schema(self) -> js.Schema:
        return js.obj({"cpus": js.CPU_LIST, "value": js.leaf({"anyOf": [
            {"type": "integer", "minimum": 0, "maximum": 15}, {"enum": list(NAMES)}]})},
            required=KEYS)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(f"{CPU}/cpu{cpu}/power/energy_perf_bias",
                          f"cpu{cpu} energy_perf_bias", setting.value)
                for cpu in cpus.parse_list(setting.target)]

    def cpu_lists(self, setting: Setting) -> list[str]:
        return [setting.target]

    def check_paths(self, iface: str | None) -> list[str]:
        return [f"{CPU}/cpu0/power/energy_perf_bias"]
