"""Per-queue addressing, shared by the kinds that have queues (irq_affinity, napi,
napi_threads, rps, xps, xps_rxqs): under an interface, `queues:` selects queues by
index and one placement says where each goes.

    irq_affinity:
      data0: "0-3"                          # every IRQ of data0 on CPUs 0-3 (as before)
      data0: {queues: "0-3", cpus: "2"}     # the IRQs of queues 0-3, each on CPU 2
      data0: {spread: "0-3"}                # queue i's IRQs on the i-th CPU of 0-3
      data0: {queues: "4-7", spread: local} # ... of the device's NUMA-local CPUs
      data0: {map: {0: "2", 1: "3"}}        # an explicit queue -> CPUs map
    napi:
      data0: {queues: "3", threaded: busy-poll}   # queue 3's NAPI(s) only

Queue indexes, not NAPI ids or IRQ numbers, are what a profile names: the host resolves
them in the kind's turn (harness.knobs.kinds.queue_map). `spread` gives the k-th
selected queue the k-th CPU of its list, wrapping around (what vendors'
set_irq_affinity scripts do); `local` is the device's NUMA node's CPUs and `all` every
online CPU, both read on the host.

A setting's target says which queues: `data0` (the whole interface, as before),
`data0 queue 3` (one queue), `data0 queues` (every queue, for a spread over queues the
host counts); a kind may add `/ATTR` after it. Its value is a CPU list, or
`spread LIST|local|all` where the host decides each queue's CPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from napilab.harness.errors import Written
from napilab.harness.grammar import cpus
from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs import json_parts as js
from napilab.runners.base import unresolved

SPREAD_WORDS = ("local", "all")
PLACEMENTS = ("cpus", "spread", "map")
_INDEXES = {"type": "string", "pattern": r"^\s*(?:(?:rx|tx)-)?\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*\s*$"}
# JSON Schema of `queues:` and of the placements, for the kinds' schemas
QUEUES: js.Schema = js.leaf({"anyOf": [{"type": "integer", "minimum": 0}, _INDEXES,
                                       {"type": "array", "items": {"anyOf": [
                                           {"type": "integer", "minimum": 0}, _INDEXES]}}]})
SPREAD: js.Schema = {"anyOf": [js.CPUS_SOME, {"enum": list(SPREAD_WORDS)}]}
MAP: js.Schema = {"type": "object", "additionalProperties": js.CPUS_SOME,
                  "propertyNames": {"pattern": r"^\d+$"}}


@dataclass(frozen=True)
class Scope:
    """Which queues of an interface a setting addresses."""

    iface: str
    queue: int | None = None  # one queue
    every: bool = False  # every queue (a spread the host counts)

    def target(self, attr: str = "") -> str:
        head = (f"{self.iface} queue {self.queue}" if self.queue is not None
                else f"{self.iface} queues" if self.every else self.iface)
        return f"{head}/{attr}" if attr else head

    @property
    def per_queue(self) -> bool:
        return self.queue is not None or self.every


def scope(target: str) -> tuple[Scope, str]:
    """A target back into its scope and what follows the first `/`."""
    head, _, rest = target.partition("/")
    iface, _, which = head.partition(" ")
    if which == "queues":
        return Scope(iface, every=True), rest
    if which.startswith("queue "):
        return Scope(iface, queue=int(which.split()[1])), rest
    return Scope(iface), rest


def spread_value(source: str) -> str:
    return f"spread {source}"


def spread_source(value: str) -> tuple[str, int | None] | None:
    """`spread SOURCE [K]` -> (SOURCE, K): a CPU list, `local` or `all`, and for one
    queue of several chosen ones its position K; None for a plain CPU list."""
    if not value.startswith("spread "):
        return None
    words = value.split()
    return words[1], int(words[2]) if len(words) > 2 else None


def cpu_lists(value: str) -> list[str]:
    """The CPU lists a value names, for the checks against a host's CPUs (a spread over
    the host's local or all CPUs names none the profile can check)."""
    found = spread_source(value)
    if found is None:
        return [value]
    return [] if found[0] in SPREAD_WORDS else [found[0]]


def spread(cpu_list: str, count: int) -> list[str]:
    """The CPU list of each of `count` queues: the k-th on the k-th CPU, wrapping."""
    listed = cpus.parse_list(cpu_list)
    if not listed:
        raise values.KnobValueError("a spread needs at least one CPU")
    return [str(listed[k % len(listed)]) for k in range(count)]


def queue_indexes(value: object) -> list[int]:
    """`queues:` as indexes: 3, "0-3,6", [0, 2]; names rx-N/tx-N name their index."""
    items = list(value) if isinstance(value, list) else [value]
    out: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise values.KnobValueError(f"expected queue indexes like '0-3' or [0, 2], "
                                        f"got {item!r}")
        text = str(item).strip()
        if text[:3] in ("rx-", "tx-") and text[3:].isdigit():
            text = text[3:]
        elif text[:1].isalpha():
            raise values.KnobValueError(f"{text!r} is not a queue name like rx-0 nor an "
                                        "index list like '0-3'")
        try:
            out += cpus.parse_list(text)
        except cpus.CpuListError as exc:
            raise values.KnobValueError(f"{exc} (queues are indexes like '0-3' or [0, 2], "
                                        "or names like rx-0)") from None
    if not out:
        raise values.KnobValueError("no queue selected")
    return sorted(set(out))


@dataclass(frozen=True)
class Placed:
    """One setting's worth of a placement: its scope, value and where it was written."""

    scope: Scope
    value: str
    at: Written | None


def placements(check: Checker, spec: Node, iface: str, ipath: str, *,
               required: bool = True) -> list[Placed]:
    """`queues` with one of `cpus`, `spread`, `map` under an interface, as settings'
    scopes and values (CPU lists, or a spread the host resolves). Problems go to
    `check` at the user's line; [] when there is nothing valid."""
    given = [k for k in PLACEMENTS if k in spec]
    if len(given) > 1:
        check.error(spec.where(given[1]), join(ipath, given[1]),
                    f"{' and '.join(given)} both place the queues: give one")
        return []
    if not given:
        if required:
            check.error(spec.location, ipath, "say where the queues go: cpus: LIST, "
                        "spread: LIST|local|all, or map: {QUEUE: LIST}")
        return []
    selected = selection(check, spec, ipath)
    if selected == []:  # invalid, and said so
        return []
    how = given[0]
    at = grammar.at(spec, how, ipath)
    if how == "cpus":
        value = grammar.value(check, spec, "cpus", ipath, values.cpu_list)
        if value is None:
            return []
        scopes = [Scope(iface)] if selected is None else [Scope(iface, q) for q in selected]
        return [Placed(s, value, at) for s in scopes]
    if how == "map":
        if selected is not None:
            check.error(spec.where("queues"), join(ipath, "queues"),
                        "map names its queues itself: leave queues out")
            return []
        return _map(check, spec, iface, ipath)
    source = _spread_source(check, spec, ipath)
    if source is None:
        return []
    if selected is None or source in SPREAD_WORDS:
        scopes = ([Scope(iface, every=True)] if selected is None
                  else [Scope(iface, q) for q in selected])
        if selected is not None:  # local/all on chosen queues: k-th of them, on the host
            return [Placed(s, spread_value(f"{source} {k}"), at) for k, s in enumerate(scopes)]
        return [Placed(scopes[0], spread_value(source), at)]
    return [Placed(Scope(iface, q), cpu, at)
            for q, cpu in zip(selected, spread(source, len(selected)), strict=True)]


def selection(check: Checker, spec: Node, ipath: str) -> list[int] | None:
    """The `queues:` indexes; None when absent, [] when invalid (and recorded)."""
    if "queues" not in spec:
        return None
    raw = spec["queues"]
    try:
        return queue_indexes(list(raw) if isinstance(raw, Seq) else raw)
    except values.KnobValueError as exc:
        if not unresolved(raw):
            check.error(spec.where("queues"), join(ipath, "queues"), str(exc))
        return []


def _spread_source(check: Checker, spec: Node, ipath: str) -> str | None:
    raw = spec["spread"]
    if isinstance(raw, str) and raw.strip() in SPREAD_WORDS:
        return raw.strip()
    value = grammar.value(check, spec, "spread", ipath, values.cpu_list)
    if value == "":
        check.error(spec.where("spread"), join(ipath, "spread"),
                    "a spread needs at least one CPU (or local, all)")
        return None
    return value


def _map(check: Checker, spec: Node, iface: str, ipath: str) -> list[Placed]:
    body = check.mapping(spec["map"], spec.where("map"), join(ipath, "map"))
    if not body:
        if body is not None:
            check.error(spec.where("map"), join(ipath, "map"), "an empty map places nothing")
        return []
    out = []
    mpath = join(ipath, "map")
    for key in body:
        try:
            (queue,) = queue_indexes(key)
        except (values.KnobValueError, ValueError):
            check.error(body.key_locations.get(key), join(mpath, str(key)),
                        f"{key!r} is not one queue index")
            continue
        value = grammar.value(check, body, key, mpath, values.cpu_list)
        if value is not None:
            out.append(Placed(Scope(iface, queue), value, grammar.at(body, key, mpath)))
    return out
