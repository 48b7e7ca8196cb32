"""Every workload tool and every parser napilab knows, by the name profiles and
`napilab parse` use. Registered explicitly: adding a tool means adding a line here."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from napilab.runners.base import ParseError, Value
from napilab.runners.collectors import (
    dmesg,
    ethtool_stats,
    interrupts,
    kprobes,
    napi_threads,
    netstat,
    proc_stat,
    softirqs,
    softnet_stat,
)
from napilab.runners.workloads import (
    command,
    iperf3,
    neper,
    neper_options,
    netperf,
    ping,
    sockperf,
)
from napilab.runners.workloads.workload import WorkloadTool


def _neper_all_samples(text: str) -> list[Value]:
    # Imported here: neper_samples is numpy through and through, and the CLI imports
    # this registry for `napilab parse`'s choices on every start (benchmarks/startup.py).
    from napilab.runners.workloads import neper_samples

    return neper_samples.values(neper_samples.parse(text))


TOOLS: dict[str, WorkloadTool] = {
    "ping": ping.PingTool(),
    **{f"neper.{binary}": neper.NeperTool(binary) for binary in neper_options.BINARIES},
    "iperf3": iperf3.Iperf3Tool(),
    **{f"sockperf.{mode}": sockperf.SockperfTool(mode) for mode in sockperf.MODES},
    **{f"netperf.{test}": netperf.NetperfTool(test) for test in netperf.TESTS},
    "command": command.CommandTool(),
}

# `napilab parse TOOL FILE`: text -> values. Collectors give absolute per-CPU values.
PARSERS: dict[str, Callable[[str], list[Value]]] = {
    "ping": lambda text: ping.values(ping.parse(text)),
    "softnet_stat": lambda text: softnet_stat.values(softnet_stat.parse(text)),
    "interrupts": lambda text: interrupts.values(interrupts.parse(text)),
    "proc_stat": lambda text: proc_stat.values(proc_stat.parse(text)),
    "softirqs": lambda text: softirqs.values(softirqs.parse(text)),
    "neper": lambda text: neper.values(neper.parse(text)),
    "neper.all_samples": _neper_all_samples,
    "iperf3": lambda text: iperf3.values(iperf3.parse(text)),
    "sockperf": lambda text: sockperf.values(sockperf.parse(text)),
    "sockperf.full_log": lambda text: sockperf.full_log_values(sockperf.parse_full_log(text)),
    "netperf": lambda text: netperf.values(netperf.parse(text)),
    "dmesg": lambda text: dmesg.values(dmesg.parse(text)),
    "napi_threads": lambda text: napi_threads.values(napi_threads.parse(text)),
    "kprobes": lambda text: kprobes.values(kprobes.parse(text)),
    "netstat": lambda text: netstat.values(netstat.parse(text)),
    "ethtool_stats": lambda text: ethtool_stats.values(ethtool_stats.parse(text)),
    "xdpsock": command.preset_parser("xdpsock"),
    "testpmd": command.preset_parser("testpmd"),
}
# A workload tool's name parses its output too (`napilab parse neper.tcp_rr FILE`).
PARSERS |= {name: PARSERS[name.split(".")[0]] for name in TOOLS
            if name not in PARSERS and name.split(".")[0] in PARSERS}


def metrics_json(tool: str, values: Iterable[Value]) -> dict[str, Any]:
    """The `napilab parse TOOL FILE --json` document: {"tool", "metrics", "units"},
    per-CPU values named `metric.cpuN`. Two values with one name are a parser bug."""
    metrics: dict[str, float] = {}
    units: dict[str, str] = {}
    for value in values:
        name = value.metric if value.cpu is None else f"{value.metric}.cpu{value.cpu}"
        if name in metrics:
            raise ParseError(tool, f"two values named {name!r}")
        metrics[name] = value.value
        units[name] = value.unit
    return {"tool": tool, "metrics": metrics, "units": units}
