"""Every workload tool and every parser napilab knows, by the name profiles and
`napilab parse` use. Registered explicitly: adding a tool means adding a line here."""

from __future__ import annotations

from collections.abc import Callable

from runners import interrupts, ping, proc_stat, softnet_stat
from runners.base import Value
from runners.workload import WorkloadTool

TOOLS: dict[str, WorkloadTool] = {
    "ping": ping.PingTool(),
}

# `napilab parse TOOL FILE`: text -> values. Collectors give absolute per-CPU values.
PARSERS: dict[str, Callable[[str], list[Value]]] = {
    "ping": lambda text: ping.values(ping.parse(text)),
    "softnet_stat": lambda text: softnet_stat.values(softnet_stat.parse(text)),
    "interrupts": lambda text: interrupts.values(interrupts.parse(text)),
    "proc_stat": lambda text: proc_stat.values(proc_stat.parse(text)),
}
