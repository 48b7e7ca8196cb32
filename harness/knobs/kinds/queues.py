"""`rps:` and `xps:` per interface queue: `{IFACE: CPULIST}` or `{IFACE: {cpus: CPULIST,
queues: [rx-0], flow_cnt: N}}` (flow_cnt for rps only); without `queues`, every rx (tx
for xps) queue of the interface, as the host lists them in its turn. `queues` also takes
indexes (`"0-3"`, [0, 2]); `spread: LIST|local|all` puts the k-th queue on the k-th CPU
and `map: {0: "2"}` names each queue's CPUs (harness.knobs.per_queue); xps's
`rxqs: LIST|paired` sets xps_rxqs, the rx queues whose traffic picks the tx queue
(`paired`: tx-i for rx-i). Four kinds share the grammar: rps (rps_cpus), rps_flow_cnt,
xps (xps_cpus) and xps_rxqs."""

from __future__ import annotations

from typing import ClassVar

from napilab.harness.errors import HostError
from napilab.harness.grammar import cpus
from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, per_queue, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.kind import Item, Kind, Lookup, Session, Setting

PLAN_QUEUES = ["rx-*", "tx-*"]  # `napilab plan`: every queue of a direction
QUEUE_KEYS = {"rps": ("cpus", "queues", "flow_cnt", "spread", "map"),
              "xps": ("cpus", "queues", "spread", "map", "rxqs")}
PAIRED = "paired"  # xps_rxqs of tx-i: rx-i
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
            selected = sorted((q for q in found if q.startswith(self.direction)),
                              key=_queue_order)
        else:
            selected = [queue]
        each = self.each(setting.value, selected, iface, host)
        return [self.item(f"/sys/class/net/{iface}/queues/{q}/{self.leaf}", f"{iface}/{q}",
                          self.written(value)) for q, value in zip(selected, each, strict=True)]

    def each(self, value: str, selected: list[str], iface: str, host: Lookup) -> list[str]:
        """Each selected queue's value: a spread over CPUs gives the k-th queue the
        k-th CPU; `paired` gives tx-i rx queue i."""
        if value == PAIRED:  # a plan's tx-* stays a placeholder
            return [q.partition("-")[2] if q.partition("-")[2].isdigit()
                    else f"<rx queue of {q}>" for q in selected]
        from napilab.harness.knobs.kinds import queue_map

        return queue_map.queue_cpus(value, len(selected), iface, host, plan="0")

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

    def attribute_names(self) -> frozenset[str]:
        return frozenset(QUEUE_KEYS.get(self.name, ()))

    def cpu_lists(self, setting: Setting) -> list[str]:
        return per_queue.cpu_lists(setting.value)

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        spec_node = grammar.body(check, node, self.name, path)
        return parse_queues(check, spec_node, path, role, self.name) if spec_node else []

    def json_schema(self) -> js.Schema:
        keys = QUEUE_KEYS[self.name]
        queue = js.leaf({"type": "string", "pattern": r"^(?:rx|tx)-(?:\d{1,4}|\*)$"})
        properties: js.Schema = {"cpus": js.CPU_LIST, "queues": {"anyOf": [
            js.one_or_list(queue), per_queue.QUEUES]}, "spread": per_queue.SPREAD,
            "map": per_queue.MAP}
        if "flow_cnt" in keys:
            properties["flow_cnt"] = js.converter(FLOW_CNT)
        if "rxqs" in keys:
            properties["rxqs"] = js.leaf({"anyOf": [per_queue.QUEUES, {"enum": [PAIRED]}]})
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


class XpsRxqs(QueueKind):
    """Made by `xps: {IFACE: {rxqs: LIST|paired}}`: the rx queues (a list of their
    indexes, written as a mask) whose traffic maps to each tx queue (xps_rxqs)."""

    name = "xps_rxqs"
    leaf, direction = "xps_rxqs", "tx-"

    def written(self, value: str) -> str:
        if value.startswith("<"):  # `napilab plan`: the host numbers the queues
            return value
        return cpus.to_mask(cpus.parse_list(value))

    def canonical(self, key: str, value: str) -> str:
        return values.cpu_mask_text(value)


class Xps(CpuMaskKind):
    """`xps: {IFACE: CPULIST}` or `{IFACE: {cpus: CPULIST, queues: [tx-0]}}`: transmit
    packet steering, the CPUs that send on each tx queue (xps_cpus); without `queues`,
    every tx queue of the interface."""

    name = key = "xps"
    leaf, direction = "xps_cpus", "tx-"


def _queue_order(name: str) -> tuple[int, str]:
    """rx-2 before rx-10 (a plan's `rx-*` last)."""
    index = name.partition("-")[2]
    return (int(index), "") if index.isdigit() else (1 << 30, index)


def parse_queues(check: Checker, node: Node, path: str, role: str,
                 kind: str) -> list[Setting]:
    out = []
    direction = "rx" if kind == "rps" else "tx"
    for iface, spec, ipath in grammar.interfaces(check, node, path, short=True):
        check.keys(spec, ipath, QUEUE_KEYS[kind])
        names = _queue_names(check, spec, ipath, direction)
        if names is None:
            continue
        placed = per_queue.placements(check, spec, iface, ipath, required=False) \
            if any(k in spec for k in ("spread", "map")) or (
                "cpus" in spec and "queues" not in spec) else []
        if "cpus" in spec and not placed and "queues" in spec:
            value = grammar.value(check, spec, "cpus", ipath, values.cpu_list)
            if value is not None:
                out += [Setting(role, kind, f"{iface}/{q}", value,
                                grammar.at(spec, "cpus", ipath)) for q in names]
        for p in placed:
            queue = (f"{direction}-{p.scope.queue}" if p.scope.queue is not None
                     else names[0] if len(names) == 1 else f"{direction}-*")
            out.append(Setting(role, kind, f"{iface}/{queue}", p.value, p.at))
        if "flow_cnt" in spec:
            value = grammar.value(check, spec, "flow_cnt", ipath, FLOW_CNT)
            if value is not None:
                out += [Setting(role, "rps_flow_cnt", f"{iface}/{q}", value) for q in names]
        if "rxqs" in spec:
            out += _rxqs(check, spec, ipath, role, iface, names)
    return out


def _queue_names(check: Checker, spec: Node, ipath: str, direction: str) -> list[str] | None:
    """`queues:` as queue names of the kind's direction (every queue: `rx-*`)."""
    if "queues" not in spec:
        return [f"{direction}-*"]
    raw = spec["queues"]
    listed = list(raw) if isinstance(raw, list) else [raw]
    wrong = [q for q in listed if isinstance(q, str) and q[:3] in ("rx-", "tx-")
             and not q.startswith(direction)]
    if wrong:
        check.error(spec.where("queues"), join(ipath, "queues"),
                    f"{wrong[0]!r}: this kind sets {direction} queues")
        return None
    selected = per_queue.selection(check, spec, ipath)
    return [f"{direction}-{q}" for q in selected] if selected else None


def _rxqs(check: Checker, spec: Node, ipath: str, role: str, iface: str,
          names: list[str]) -> list[Setting]:
    raw = spec["rxqs"]
    if raw == PAIRED:
        value = PAIRED
    else:
        try:
            value = cpus.format_list(per_queue.queue_indexes(
                list(raw) if isinstance(raw, list) else raw))
        except values.KnobValueError as exc:
            check.error(spec.where("rxqs"), join(ipath, "rxqs"),
                        f"{exc} (or `paired`: tx-i for rx-i)")
            return []
    return [Setting(role, "xps_rxqs", f"{iface}/{q}", value, grammar.at(spec, "rxqs", ipath))
            for q in names]
