"""`irq_affinity: {IFACE: CPULIST}` or `{IFACE: {cpus: CPULIST, match: REGEX}}`: every IRQ
of the interface (or those whose /proc/interrupts name matches), through
/proc/irq/N/smp_affinity_list."""

from __future__ import annotations

import re

from napilab.harness.authoring import json_parts as js
from napilab.harness.errors import HostError
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs.backend import read_files
from napilab.harness.knobs.kind import Item, Kind, Lookup, Session, Setting
from napilab.harness.profile.schema import Checker, join
from napilab.harness.profile.yamlsrc import Node

KEYS = ("cpus", "match")
# IRQ numbers of a NIC: its PCI function's msi_irqs (virtio-net: the parent device's).
MSI_IRQS = ["sh", "-c", 'ls "$1/device/msi_irqs" 2>/dev/null || ls "$1/device/../msi_irqs"',
            "napilab-irqs"]


def irqs(host: Session, iface: str, pattern: str) -> list[tuple[str, str]]:
    """(IRQ number, its /proc/interrupts description) of the interface's IRQs."""
    msi = host.transport.run([*MSI_IRQS, f"/sys/class/net/{iface}"], check=False)
    numbers = {int(n) for n in msi.stdout.split() if n.isdigit()}
    table = read_files(host.transport, ["/proc/interrupts"])["/proc/interrupts"]
    found = []
    for line in table.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if not name.strip().isdigit():
            continue
        irq, description = int(name), " ".join(t for t in rest.split() if not t.isdigit())
        ours = irq in numbers if numbers else re.search(rf"\b{re.escape(iface)}\b",
                                                           description)
        if ours and (not pattern or re.search(pattern, description)):
            found.append((str(irq), description))
    if not found:
        raise HostError(f"{host.name}: no IRQs found for {iface}"
                        + (f" matching {pattern!r}" if pattern else "")
                        + " (a virtual device such as veth has none)")
    return found


class IrqAffinity(Kind):
    name = key = "irq_affinity"
    follows_queues = True

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        out = []
        for iface, spec, ipath in grammar.interfaces(check, body or Node(), path, short=True):
            check.keys(spec, ipath, KEYS, required=("cpus",))
            match = check.get(spec, "match", ipath, str)
            if match is not None:
                try:
                    re.compile(match)
                except re.error as exc:
                    check.error(spec.where("match"), join(ipath, "match"), f"bad regex: {exc}")
                    match = None
            value = (grammar.value(check, spec, "cpus", ipath, values.cpu_list)
                     if "cpus" in spec else None)
            if value == "":
                check.error(spec.where("cpus"), grammar.at(spec, "cpus", ipath).key_path,
                            "an IRQ needs at least one CPU")
            elif value is not None:
                target = f"{iface}/{match}" if match else iface
                out.append(Setting(role, self.name, target, value,
                                   grammar.at(spec, "cpus", ipath)))
        return out

    def json_schema(self) -> js.Schema:
        return js.mapping_of({"anyOf": [js.CPUS_SOME, js.obj(
            {"cpus": js.CPUS_SOME, "match": js.leaf(js.STRING)}, required=("cpus",))]},
            keys=js.IFACE_KEY)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        iface, _, pattern = setting.target.partition("/")
        found = host.find(irqs, iface, pattern, plan=[("<irq>", iface)])
        return [self.item(f"/proc/irq/{irq}/smp_affinity_list", f"irq {irq} ({desc})",
                          setting.value) for irq, desc in found]

    def canonical(self, key: str, value: str) -> str:
        return values.cpu_list_text(value)

    def cpu_lists(self, setting: Setting) -> list[str]:
        return [setting.value]
