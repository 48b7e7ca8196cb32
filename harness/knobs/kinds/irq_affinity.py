"""`irq_affinity:` the CPUs of an interface's IRQs, through /proc/irq/N/smp_affinity_list:

    data0: "0-3"                              # every IRQ of data0
    data0: {cpus: "0-3", match: "input"}      # those whose /proc/interrupts name matches
    data0: {queues: "0-3", cpus: "2"}         # the IRQs of queues 0-3 (rx and tx)
    data0: {spread: "0-3"}                    # queue i's IRQs on the i-th CPU of 0-3
    data0: {queues: "2-3", spread: local}     # ... of the device's NUMA-local CPUs
    data0: {map: {0: "2", 1: "3"}}

Queues are indexes (harness.knobs.per_queue); the host says which IRQs are a queue's
(harness.knobs.kinds.queue_map)."""

from __future__ import annotations

import re

from napilab.harness.errors import HostError
from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, per_queue, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting
from napilab.harness.knobs.kinds.queue_map import irqs, queue_cpus, queue_irqs

__all__ = ["IrqAffinity", "irqs"]

KEYS = ("cpus", "match", "queues", "spread", "map")
PLAN_IRQS = {0: [("<irq of queue 0>", "")], 1: [("<irq of queue 1>", "")]}


class IrqAffinity(Kind):
    name = key = "irq_affinity"
    follows_queues = True

    def attribute_names(self) -> frozenset[str]:
        return frozenset(KEYS)

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        out = []
        for iface, spec, ipath in grammar.interfaces(check, body or Node(), path, short=True):
            check.keys(spec, ipath, KEYS)
            match = check.get(spec, "match", ipath, str)
            if match is not None:
                try:
                    re.compile(match)
                except re.error as exc:
                    check.error(spec.where("match"), join(ipath, "match"), f"bad regex: {exc}")
                    continue
            for placed in per_queue.placements(check, spec, iface, ipath):
                if placed.value == "":
                    check.error(placed.at.location if placed.at else None,
                                placed.at.key_path if placed.at else ipath,
                                "an IRQ needs at least one CPU")
                    continue
                target = placed.scope.target(match or "")
                out.append(Setting(role, self.name, target, placed.value, placed.at))
        return out

    def json_schema(self) -> js.Schema:
        placement = {"cpus": js.CPUS_SOME, "match": js.leaf(js.STRING),
                     "queues": per_queue.QUEUES, "spread": per_queue.SPREAD,
                     "map": per_queue.MAP}
        # exactly one placement is what the validator takes; the schema asks for one
        one = {"anyOf": [{"required": [how]} for how in per_queue.PLACEMENTS]}
        return js.mapping_of({"anyOf": [js.CPUS_SOME, {"allOf": [js.obj(placement), one]}]},
                             keys=js.IFACE_KEY)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        scope, pattern = per_queue.scope(setting.target)
        if not scope.per_queue:
            found = host.find(irqs, scope.iface, pattern, plan=[("<irq>", scope.iface)])
            return [self._item(irq, desc, setting.value) for irq, desc in found]
        by_queue = host.find(queue_irqs, scope.iface, pattern, plan=PLAN_IRQS)
        chosen = sorted(by_queue) if scope.queue is None else [scope.queue]
        missing = [q for q in chosen if q not in by_queue]
        if missing:
            raise HostError(f"{host.name}: {scope.iface} has no IRQ for queue "
                            f"{', '.join(map(str, missing))}"
                            + (f" matching {pattern!r}" if pattern else "")
                            + f" (its queues with IRQs: {', '.join(map(str, by_queue))})")
        placed = queue_cpus(setting.value, len(chosen), scope.iface, host)
        return [self._item(irq, desc, cpu_list, queue)
                for queue, cpu_list in zip(chosen, placed, strict=True)
                for irq, desc in by_queue[queue]]

    def _item(self, irq: str, desc: str, value: str, queue: int | None = None) -> Item:
        name = desc.split()[-1] if desc.split() else ""
        what = f"irq {irq} ({desc})" if queue is None else f"queue {queue} irq {irq} ({name})"
        return self.item(f"/proc/irq/{irq}/smp_affinity_list", what, value)

    def canonical(self, key: str, value: str) -> str:
        return values.cpu_list_text(value)

    def cpu_lists(self, setting: Setting) -> list[str]:
        return per_queue.cpu_lists(setting.value)
