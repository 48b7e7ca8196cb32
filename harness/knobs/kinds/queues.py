"""`rps:` and `xps:` per interface queue: `{IFACE: CPULIST}` or `{IFACE: {cpus: CPULIST,
queues: [rx-0], flow_cnt: N}}` (flow_cnt for rps only); without `queues`, every rx (tx
for xps) queue of the interface, as the host lists them in its turn. Three kinds share
the grammar: rps (rps_cpus), rps_flow_cnt and xps (xps_cpus)."""

from __future__ import annotations

from typing import ClassVar

from napilab.harness.authoring import json_parts as js
from napilab.harness.errors import HostError
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs.kind import Item, Kind, Lookup, Session, Setting
from napilab.harness.profile import cpus
from napilab.harness.profile.schema import Checker, join
from napilab.harness.profile.yamlsrc import Node

PLAN_QUEUES = ["rx-*", "tx-*"]  # `napilab plan`: every queue of a direction
QUEUE_KEYS = {"rps": ("cpus", "queues", "flow_cnt"), "xps": ("cpus", "queues")}
FLOW_CNT = values.integer(0, 2**31)


def queues(host: Session, iface: str) -> list[str]:
    """The interface's queue names (rx-0, tx-0, ...)."""
    result = host.transport.run(["ls", "-1", f"/sys/class/net/{iface}/queues"], check=False)
    if result.exit_code != 0:
        raise HostError(f"{host.name}: no interface {iface!r}: {result.stderr.strip()}")
    return result.stdout.split()


class QueueKind(Kind):
    """A per-queue file: `leaf` under queues/<rx|tx>-N/ of the interface."""

    leaf: ClassVar[str]
    direction: ClassVar[str]  # rx- | tx-
    follows_queues = True

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        iface, _, queue = setting.target.partition("/")
        if queue.endswith("*"):
            found = host.find(queues, iface, plan=PLAN_QUEUES)
            selected = [q for q in found if q.startswith(self.direction)]
        else:
            selected = [queue]
        text = self.written(setting.value)
        return [self.item(f"/sys/class/net/{iface}/queues/{q}/{self.leaf}", f"{iface}/{q}",
                          text) for q in selected]

    def written(self, value: str) -> str:
        return value

    def check_paths(self, iface: str | None) -> list[str]:
        return [f"/sys/class/net/{iface}/queues/{self.direction}0/{self.leaf}"] if iface else []


class CpuMaskKind(QueueKind):
    """rps_cpus, xps_cpus: a CPU list in the profile, a hex mask in the file."""

    def written(self, value: str) -> str:
        return cpus.to_mask(cpus.parse_list(value))

    def canonical(self, key: str, value: str) -> str:
        return values.cpu_mask_text(value)

    def cpu_lists(self, setting: Setting) -> list[str]:
        return [setting.value]

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        spec_node = grammar.body(check, node, self.name, path)
        return parse_queues(check, spec_node, path, role, self.name) if spec_node else []

    def json_schema(self) -> js.Schema:
        keys = QUEUE_KEYS[self.name]
        queue = js.leaf({"type": "string", "pattern": r"^(?:rx|tx)-(?:\d{1,4}|\*)$"})
        properties: js.Schema = {"cpus": js.CPU_LIST, "queues": js.one_or_list(queue)}
        if "flow_cnt" in keys:
            properties["flow_cnt"] = js.converter(FLOW_CNT)
        return js.mapping_of({"anyOf": [js.CPU_LIST, js.obj(properties)]}, keys=js.IFACE_KEY)


class Rps(CpuMaskKind):
    """`rps: {IFACE: CPULIST}` or `{IFACE: {cpus: CPULIST, queues: [rx-0], flow_cnt: N}}`:
    receive packet steering, the CPUs that process each rx queue's packets (rps_cpus);
    without `queues`, every rx queue of the interface."""

    name = key = "rps"
    leaf, direction = "rps_cpus", "rx-"


class RpsFlowCnt(QueueKind):
    """Made by `rps: {IFACE: {flow_cnt: N}}`."""

    name = "rps_flow_cnt"
    leaf, direction = "rps_flow_cnt", "rx-"


class Xps(CpuMaskKind):
    """`xps: {IFACE: CPULIST}` or `{IFACE: {cpus: CPULIST, queues: [tx-0]}}`: transmit
    packet steering, the CPUs that send on each tx queue (xps_cpus); without `queues`,
    every tx queue of the interface."""

    name = key = "xps"
    leaf, direction = "xps_cpus", "tx-"


def parse_queues(check: Checker, node: Node, path: str, role: str,
                 kind: str) -> list[Setting]:
    out = []
    for iface, spec, ipath in grammar.interfaces(check, node, path, short=True):
        check.keys(spec, ipath, QUEUE_KEYS[kind])
        names = check.string_list(spec, "queues", ipath) or [
            ("rx-*" if kind == "rps" else "tx-*")]
        for queue in names:
            if queue.endswith("*"):
                continue
            try:
                values.check_queue(queue)
            except values.KnobValueError as exc:
                check.error(spec.where("queues"), join(ipath, "queues"), str(exc))
        if "cpus" in spec:
            value = grammar.value(check, spec, "cpus", ipath, values.cpu_list)
            if value is not None:
                out += [Setting(role, kind, f"{iface}/{q}", value,
                                grammar.at(spec, "cpus", ipath)) for q in names]
        if "flow_cnt" in spec:
            value = grammar.value(check, spec, "flow_cnt", ipath, FLOW_CNT)
            if value is not None:
                out += [Setting(role, "rps_flow_cnt", f"{iface}/{q}", value) for q in names]
    return out
