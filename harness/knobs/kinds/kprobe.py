"""kprobe events napilab creates for the `kprobes` collector (`collect: {kprobes:
{functions: [...]}}`): key FUNCTION, value present | absent. Creating one is a change like
any other: journalled, so a crashed run's probes are removed by `napilab restore`. A
function this kernel cannot probe reads back `absent`: a result, reported as such."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

from napilab.harness.errors import HostError
from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs.backend import Backend, Command, Unavailable
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting, two_state_original
from napilab.runners.collectors.kprobes import event_name

STATES = ("present", "absent")
# tracefs is at /sys/kernel/tracing (4.1+) or under debugfs; scripts take it as data.
KPROBE_LIST = ["sh", "-c", 'for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do '
               'if [ -w "$d/kprobe_events" ]; then echo "$d"; cat "$d/kprobe_events"; '
               'exit 0; fi; done; exit 3', "napilab-kprobes"]
KPROBE_ADD = ["sh", "-c", 'echo "$1" >> "$3/kprobe_events" && '
              'echo 1 > "$3/events/kprobes/$2/enable"', "napilab-kprobe"]
KPROBE_DEL = ["sh", "-c", 'echo 0 > "$3/events/kprobes/$2/enable"; '
              'echo "$1" >> "$3/kprobe_events"', "napilab-kprobe"]


class KprobeBackend(Backend):
    name = "kprobe"
    scripts: ClassVar[dict[str, str]] = {"kprobe-list": KPROBE_LIST[2], "kprobe-add": KPROBE_ADD[2],
               "kprobe-del": KPROBE_DEL[2]}

    def __init__(self, transport: Any) -> None:
        super().__init__(transport)
        self.tracefs: str | None = None  # found by the first read

    @classmethod
    def planned(cls) -> Self:
        backend = cls(None)
        backend.tracefs = "<tracefs>"
        return backend

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [list(KPROBE_LIST)]

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        result = self.transport.run(KPROBE_LIST, check=False)
        if result.exit_code != 0:
            return {key: "absent" for key in keys}
        lines = result.stdout.splitlines()
        self.tracefs = lines[0].strip()
        events = {line.split()[0].split("/")[-1] for line in lines[1:] if line.strip()}
        return {key: "present" if event_name(key) in events else "absent" for key in keys}

    def write_command(self, key: str, value: str) -> Command:
        if self.tracefs is None:
            raise Unavailable("no writable kprobe_events (kernel without "
                              "CONFIG_KPROBE_EVENTS, or tracefs not mounted)")
        name = event_name(key)
        if value == "present":
            return Command([*KPROBE_ADD, f"p:{name} {key}", name, self.tracefs])
        return Command([*KPROBE_DEL, f"-:{name}", name, self.tracefs])

    def write(self, key: str, value: str) -> None:
        if self.tracefs is None:
            self.read([key])
        result = self.transport.run(self.write_command(key, value).argv, check=False)
        if result.exit_code != 0 and value == "present":
            raise Unavailable(f"the kernel cannot probe {key}: "
                              f"{result.stderr.strip().rpartition(': ')[2]}")
        if result.exit_code != 0:
            raise HostError(f"removing the kprobe on {key}: {result.stderr.strip()}")


class Kprobe(Kind):
    name = "kprobe"
    backend = KprobeBackend
    refusal_is_result = True

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        raise NotImplementedError("kprobe settings come from the kprobes collector")

    def for_collector(self, collector: str, options: Mapping[str, Any],
                      role: str) -> list[Setting]:
        if collector != "kprobes":
            return []
        return [Setting(role, self.name, function, "present")
                for function in options.get("functions", [])]

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(setting.target, f"kprobe {setting.target}", setting.value)]

    def canonical(self, key: str, value: str) -> str:
        return value

    def plan_original(self, item: Item) -> str:
        return two_state_original(item, STATES)
