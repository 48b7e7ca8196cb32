"""`cpuidle: {cpus: "0-3", disable: [C6, C1E]}` or `cpuidle: {cpus: "0-3",
max_latency_us: 10}`: the idle states each listed CPU may enter, through
/sys/devices/system/cpu/cpuN/cpuidle/stateK/disable.

`disable` names the states to disable (1), by the name the kernel gives them (the
state's `name` file: POLL, C1, C1E, C6...) or by index (`3` or `state3`); the CPUs'
other states are left as they are. `max_latency_us: X` disables every state whose exit
latency (the state's `latency` file, in microseconds) is above X and enables (0) every
other one, so the CPUs end in the same states whatever the host had. Exactly one of the
two. The states are read from each host when the trial starts; a CPU without cpuidle
(no driver, or `cpuidle.off=1`) or without a named state is refused before any write,
listing the states it has. Every item is journalled and restored like a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from napilab.harness.errors import HostError
from napilab.harness.grammar import cpus
from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.backend import read_files
from napilab.harness.knobs.kind import Item, Kind, Lookup, Session, Setting

CPU = "/sys/devices/system/cpu"
KEYS = ("cpus", "disable", "max_latency_us")
_STATE_DIR = re.compile(r"state(\d{1,2})")
# a state's name as the kernel spells it (CPUIDLE_NAME_LEN is 16; haltpoll's has a space)
_NAME = re.compile(r"[A-Za-z0-9_.+-][A-Za-z0-9_. +-]{0,31}")
MAX_LATENCY = values.integer(0, 10_000_000)


@dataclass(frozen=True)
class State:
    """One idle state of one CPU: its directory (state3), name and exit latency (us)."""

    directory: str
    name: str
    latency: int | None  # None: unknown (`napilab plan`)


def state_word(value: object) -> str:
    """A state named in `disable:`: its name, or `stateK` for index K."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 100:
        return f"state{value}"
    if isinstance(value, str) and (_STATE_DIR.fullmatch(value) or _NAME.fullmatch(value)):
        return value
    raise values.KnobValueError(f"expected an idle state's name (C6, C1E, POLL) or index "
                                f"(3 or state3), got {value!r}")


def idle_states(session: Session, cpu_list: str) -> dict[int, list[State]]:
    """Each CPU's idle states, read from the host (two commands)."""
    numbers = cpus.parse_list(cpu_list)
    first = f"{CPU}/cpu{numbers[0]}/cpuidle"
    listing = session.transport.run(["ls", "--", first], check=False)
    directories = sorted((n for n in listing.stdout.split() if _STATE_DIR.fullmatch(n)),
                         key=lambda n: int(n[5:]))
    if listing.exit_code != 0 or not directories:
        raise HostError(f"{session.name}: cpu{numbers[0]} has no cpuidle states ({first} "
                        "is absent or empty)",
                        hint="the kernel has no cpuidle driver for this CPU, or was booted "
                        "with cpuidle.off=1; drop `cpuidle:` for this host")
    paths = [f"{CPU}/cpu{c}/cpuidle/{d}/{f}" for c in numbers for d in directories
             for f in ("name", "latency")]
    files = read_files(session.transport, paths)
    return {c: [State(d, files[f"{CPU}/cpu{c}/cpuidle/{d}/name"],
                      int(files[f"{CPU}/cpu{c}/cpuidle/{d}/latency"]))
                for d in directories] for c in numbers}


def _find(host: str, cpu: int, states: list[State], word: str) -> State:
    for state in states:
        if word in (state.directory, state.name):
            return state
    have = ", ".join(f"{s.name} ({s.directory}, {s.latency} us)" for s in states)
    raise HostError(f"{host}: cpu{cpu} has no idle state {word!r}; it has {have}",
                    hint="name a state as its `name` file spells it, or by index")


class Cpuidle(Kind):
    name = key = "cpuidle"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        if body is None:
            return []
        check.keys(body, path, KEYS, required=("cpus",))
        cpu_list = (grammar.value(check, body, "cpus", path, values.cpu_list)
                    if "cpus" in body else None)
        chosen = [k for k in ("disable", "max_latency_us") if k in body]
        if len(chosen) != 1:
            check.error(body.location, path, "expected exactly one of disable (a list of "
                        "idle states) and max_latency_us (disable the states above it)")
            return []
        value = (self._states(check, body, path) if chosen[0] == "disable" else
                 grammar.value(check, body, "max_latency_us", path, MAX_LATENCY))
        if not cpu_list or value is None:
            return []
        return [Setting(role, self.name, f"{cpu_list}/{chosen[0]}", value,
                        grammar.at(body, "cpus", path))]

    @staticmethod
    def _states(check: Checker, body: Node, path: str) -> str | None:
        raw = body["disable"]
        items = list(raw) if isinstance(raw, Seq | list) else [raw]
        words = []
        for index, item in enumerate(items):
            try:
                words.append(state_word(item))
            except values.KnobValueError as exc:
                check.error(body.where("disable"), join(join(path, "disable"), index), str(exc))
        if not items:
            check.error(body.where("disable"), join(path, "disable"), "names no idle state")
        return ",".join(words) if words and len(words) == len(items) else None

    def json_schema(self) -> js.Schema:
        state = {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 99},
                           {"type": "string", "pattern": js.regex(_NAME)}]}
        return js.obj({"cpus": js.CPU_LIST,
                       "disable": js.leaf(js.one_or_list(state)),
                       "max_latency_us": js.converter(MAX_LATENCY)}, required=("cpus",))

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        cpu_list, _, how = setting.target.partition("/")
        numbers = cpus.parse_list(cpu_list)
        if how == "disable":
            words = setting.value.split(",")
            plan = {c: [State(w if _STATE_DIR.fullmatch(w) else f"<{w}>", w, None)
                        for w in words] for c in numbers}
            found = host.find(idle_states, cpu_list, plan=plan)
            return [self._item(c, _find(host.name, c, found[c], w), "1")
                    for c in numbers for w in words]
        limit = int(setting.value)
        plan = {c: [State("<each state>", "each state", None)] for c in numbers}
        found = host.find(idle_states, cpu_list, plan=plan)
        return [self._item(c, s, f"<1 if its latency > {limit} us, else 0>"
                           if s.latency is None else "1" if s.latency > limit else "0")
                for c in numbers for s in found[c]]

    def _item(self, cpu: int, state: State, value: str) -> Item:
        return self.item(f"{CPU}/cpu{cpu}/cpuidle/{state.directory}/disable",
                         f"cpu{cpu} {state.name} disable", value)

    def cpu_lists(self, setting: Setting) -> list[str]:
        return [setting.target.partition("/")[0]]

    def check_paths(self, iface: str | None) -> list[str]:
        return [f"{CPU}/cpuidle/current_driver", f"{CPU}/cpu0/cpuidle/state1/disable"]
