"""`napi_threads: {IFACE: {cpus: "2", policy: fifo, priority: 50}}`: CPU affinity and
scheduling policy of the interface's napi/IFACE-ID kthreads (`backlog:` for the
backlog_napi/N threads), which exist once `threaded` is on."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

from napilab.harness.errors import CommandError, HostError
from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, per_queue, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.backend import Backend, Command, Gone, reason
from napilab.harness.knobs.kind import Item, Kind, Lookup, Session, Setting

POLICIES = ("fifo", "rr", "other", "batch", "idle")
KEYS = ("cpus", "policy", "priority")
QUEUE_KEYS = (*KEYS, "queues", "spread", "map")  # an interface's: per queue too
_AFFINITY = re.compile(r"affinity list: ([\d,-]+)")
_POLICY = re.compile(r"scheduling policy: SCHED_(\w+)")
_PRIORITY = re.compile(r"scheduling priority: (\d+)")
# Reads affinity and policy of every PID in one exec; PIDs are positional parameters.
SCHED_READ = ["sh", "-c", 'for p do echo "== $p"; taskset -pc "$p"; chrt -p "$p"; done',
              "napilab-sched"]
# Sets a policy written as one word, POLICY:PRIORITY (fifo:50, other:0), as read back:
# chrt --fifo -p 50 PID. The value and the PID are positional parameters.
SCHED_POLICY = ["sh", "-c", 'exec chrt "--${1%%:*}" -p "${1#*:}" "$2"', "napilab-chrt"]


class SchedBackend(Backend):
    """Key PID/cpus or PID/policy (policy value fifo:50, other:0)."""

    name = "sched"
    per_boot = True
    scripts: ClassVar[dict[str, str]] = {"sched-read": SCHED_READ[2],
                                         "sched-policy": SCHED_POLICY[2]}

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [[*SCHED_READ, *dict.fromkeys(k.split("/")[0] for k in keys)]]

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        result = self.transport.run(self.read_argvs(keys)[0], check=False)
        blocks = dict(re.findall(r"== (\d+)\n(.*?)(?=\n== |\Z)", result.stdout, re.DOTALL))
        out = {}
        for key in keys:
            pid, what = key.split("/")
            block = blocks.get(pid, "")
            if what == "cpus":
                match = _AFFINITY.search(block)
                if match is None:
                    raise Gone(f"thread {pid} is gone")
                out[key] = values.cpu_list(match[1])
            else:
                policy, priority = _POLICY.search(block), _PRIORITY.search(block)
                if policy is None or priority is None:
                    raise Gone(f"thread {pid} is gone")
                out[key] = f"{policy[1].lower()}:{priority[1]}"
        return out

    def write_command(self, key: str, value: str) -> Command:
        pid, what = key.split("/")
        if what == "cpus":
            return Command(["taskset", "-pc", value, pid])
        return Command([*SCHED_POLICY, value, pid])

    def write(self, key: str, value: str) -> None:
        try:
            self.transport.run(self.write_command(key, value).argv)
        except CommandError as exc:
            if "No such process" in exc.stderr:
                raise Gone(f"thread {key.split('/')[0]} is gone") from None
            raise HostError(reason(exc)) from None


def threads(host: Session, pattern: str) -> list[tuple[str, str]]:
    """(PID, name) of the kernel threads whose name matches `pattern`."""
    result = host.transport.run(["ps", "-e", "-o", "pid=,comm="])
    out = []
    for line in result.stdout.splitlines():
        pid, _, comm = line.strip().partition(" ")
        if re.fullmatch(pattern, comm.strip()):
            out.append((pid, comm.strip()))
    return out


class NapiThreads(Kind):
    name = key = "napi_threads"
    backend = SchedBackend
    late = True  # the kthreads appear once `threaded` is on

    def attribute_names(self) -> frozenset[str]:
        return frozenset(QUEUE_KEYS)

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        out = []
        for owner, spec, opath in grammar.interfaces(check, body or Node(), path,
                                                     also=("backlog",)):
            check.keys(spec, opath, KEYS if owner == "backlog" else QUEUE_KEYS)
            placed = per_queue.placements(check, spec, owner, opath, required=False)
            out += [Setting(role, self.name, p.scope.target("cpus"), p.value, p.at)
                    for p in placed if p.value]
            scopes = list(dict.fromkeys(p.scope for p in placed))
            if not scopes and owner != "backlog":
                selected = per_queue.selection(check, spec, opath)
                scopes = [per_queue.Scope(owner, q) for q in selected or []]
            scopes = scopes or [per_queue.Scope(owner)]
            policy = check.choice(spec, "policy", opath, POLICIES)
            if "policy" in spec and policy is None:
                continue  # a misspelt policy is one error: its priority cannot be judged
            if "priority" in spec and policy is None:
                check.error(spec.where("priority"), join(opath, "priority"),
                            "a priority needs a policy (fifo or rr)")
                continue
            realtime = policy in ("fifo", "rr")
            priority = check.number(spec, "priority", opath, integer=True,
                                    minimum=1 if realtime else 0,
                                    maximum=99 if realtime else 0,
                                    default=50 if realtime else 0)
            if policy is not None and priority is not None:
                out += [Setting(role, self.name, scope.target("policy"), f"{policy}:{priority}")
                        for scope in scopes]
        return out

    def json_schema(self) -> js.Schema:
        return js.mapping_of(js.obj({
            "cpus": js.CPU_LIST, "policy": js.leaf({"enum": list(POLICIES)}),
            "priority": js.leaf({"type": "integer", "minimum": 0, "maximum": 99}),
            "queues": per_queue.QUEUES, "spread": per_queue.SPREAD, "map": per_queue.MAP}),
            keys=js.regex(f"{values.IFACE.pattern}|backlog", placeholder=True))

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        scope, what = per_queue.scope(setting.target)
        owner = scope.iface
        if scope.per_queue:
            return self._per_queue(setting, scope, what, host)
        pattern = r"backlog_napi/\d+" if owner == "backlog" else rf"napi/{re.escape(owner)}-\d+"
        found = host.find(threads, pattern, plan=[("<pid>", pattern)])
        if not found:
            raise HostError(f"{host.name}: no thread matches {pattern!r}"
                            + ("" if owner == "backlog" else
                               f" (set threaded on {owner} in this variant first)"))
        return [self.item(f"{pid}/{what}", f"{comm}/{what}", setting.value)
                for pid, comm in found]

    def _per_queue(self, setting: Setting, scope: per_queue.Scope, what: str,
                   host: Lookup) -> list[Item]:
        """The threads of the NAPIs of one queue, or of every queue for a spread."""
        from napilab.harness.knobs.kinds import queue_map
        from napilab.harness.knobs.kinds.napi import queue_napis

        iface = scope.iface
        plan = {scope.queue if scope.queue is not None else 0: ["<napi-id>"]}
        by_queue = host.find(queue_napis, iface, plan=plan)
        chosen = [scope.queue] if scope.queue is not None else sorted(by_queue)
        missing = [q for q in chosen if q not in by_queue]
        if missing:
            raise HostError(f"{host.name}: {iface} has no queue {missing[0]} with a NAPI "
                            f"(its queues: {', '.join(map(str, sorted(by_queue)))})")
        placed = queue_map.queue_cpus(setting.value, len(chosen), iface, host, plan="0")
        found = host.find(threads, rf"napi/{re.escape(iface)}-\d+", plan=[
            ("<pid>", f"napi/{iface}-{i}") for q in chosen for i in by_queue[q]])
        pids = {comm: pid for pid, comm in found}
        items = []
        for queue, value in zip(chosen, placed, strict=True):
            for napi_id in by_queue[queue]:
                comm = f"napi/{iface}-{napi_id}"
                if comm not in pids:
                    raise HostError(f"{host.name}: no thread {comm} for queue {queue} of "
                                    f"{iface} (set threaded on its NAPI first)")
                items.append(self.item(f"{pids[comm]}/{what}", f"{comm}/queue-{queue}/{what}",
                                       value))
        return items

    def canonical(self, key: str, value: str) -> str:
        return values.cpu_list_text(value) if key.endswith("/cpus") else value

    def cpu_lists(self, setting: Setting) -> list[str]:
        return per_queue.cpu_lists(setting.value) if setting.target.endswith("/cpus") else []
