"""`irqbalance: stopped | running`: the irqbalance service, through systemd (it rewrites
IRQ affinity, so experiments that pin IRQs stop it and start it again afterwards)."""

from __future__ import annotations

from collections.abc import Sequence

from napilab.harness.errors import HostError
from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.backend import Backend, Command
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting, two_state_original

STATES = ("running", "stopped")


class ServiceBackend(Backend):
    """Key: the service's name; value running | stopped."""

    name = "service"

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [["pgrep", "-x", "irqbalance"]]

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        running = self.transport.run(self.read_argvs(keys)[0], check=False).exit_code == 0
        return {key: "running" if running else "stopped" for key in keys}

    def write_command(self, key: str, value: str) -> Command:
        if value not in STATES:
            raise HostError(f"a service is running or stopped, not {value!r}")
        return Command(["systemctl", "start" if value == "running" else "stop", key])

    def write(self, key: str, value: str) -> None:
        command = self.write_command(key, value)
        result = self.transport.run(command.argv, check=False)
        if result.exit_code != 0:
            raise HostError(f"`{' '.join(command.argv)}`: {result.stderr.strip()}",
                            hint="napilab manages irqbalance only through systemd")


class Irqbalance(Kind):
    name = key = "irqbalance"
    backend = ServiceBackend

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        value = node[self.name]
        if value not in STATES:
            check.error(node.where(self.name), path,
                        f"expected stopped or running, got {value!r}")
            return []
        return [Setting(role, self.name, "irqbalance", str(value))]

    def json_schema(self) -> js.Schema:
        return js.leaf({"enum": ["stopped", "running"]})

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item("irqbalance", "irqbalance", setting.value)]

    def canonical(self, key: str, value: str) -> str:
        return value

    def plan_original(self, item: Item) -> str:
        return two_state_original(item, STATES)
