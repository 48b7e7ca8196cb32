"""`smt: off` (or `on`): simultaneous multithreading, through
/sys/devices/system/cpu/smt/control.

`off` takes every CPU's SMT siblings offline for the trial, `on` brings them back; the
value read back is the control file's word. `forceoff` is refused: the kernel allows no
way back from it before a reboot, so napilab could not restore the host. A host whose
control reads `notsupported` (no SMT), `notimplemented` (an architecture without SMT
control) or `forceoff` is refused before any write.

CPUs that `off` takes offline lose their per-CPU files: a profile that sets `smt: off`
and names a sibling CPU elsewhere (cpufreq, cpuidle, energy_perf_bias, IRQ affinity,
pinned workloads) fails when that CPU's files are read or written. The inventory does
not know the siblings, so `napilab validate` cannot say which; `napilab hosts check`
and /sys/devices/system/cpu/cpuN/topology/thread_siblings_list on the host do.
"""

from __future__ import annotations

from napilab.harness.errors import HostError
from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.backend import read_files
from napilab.harness.knobs.kind import Item, Kind, Lookup, Session, Setting, two_state_original

CONTROL = "/sys/devices/system/cpu/smt/control"
STATES = ("on", "off")
_WHY = {"notsupported": "the CPUs have no SMT siblings",
        "notimplemented": "this architecture has no SMT control",
        "forceoff": "SMT was forced off and stays off until a reboot"}


def control(session: Session) -> str:
    """The host's SMT control word; a host that cannot switch SMT is refused."""
    word = read_files(session.transport, [CONTROL])[CONTROL]
    if word in _WHY:
        raise HostError(f"{session.name}: {CONTROL} reads {word}: {_WHY[word]}",
                        hint="drop `smt:` for this host")
    return word


class Smt(Kind):
    name = key = "smt"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        value = node.text(self.name) if node.text(self.name) is not None else node[self.name]
        if value not in STATES:
            extra = (" (forceoff cannot be undone before a reboot, so napilab cannot "
                     "restore it)" if value == "forceoff" else "")
            check.error(node.where(self.name), path,
                        f"expected on or off, got {value!r}{extra}")
            return []
        return [Setting(role, self.name, "control", str(value))]

    def json_schema(self) -> js.Schema:
        return js.leaf({"enum": ["on", "off", True, False]})

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        host.find(control, plan="on")
        return [self.item(CONTROL, "smt/control", setting.value)]

    def plan_original(self, item: Item) -> str:
        return two_state_original(item, STATES)

    def check_paths(self, iface: str | None) -> list[str]:
        return [CONTROL]
