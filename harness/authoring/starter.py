"""`napilab init`: a starter profile and inventory a new user edits, not a blank page.

Without an inventory, both files name two placeholder lab hosts (documentation
addresses) and every choice is the common one. With an inventory, `hosts check`'s
facts decide: the workload tool both hosts have (sockperf, neper, netperf, else ping),
the interface each host reaches the other through, the CPU the workload is pinned to,
and only the knobs the server can write. Both files validate as written.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from napilab.harness.authoring import shipped
from napilab.harness.grammar import cpus

# (tool, what the client needs, what the server needs): the first both hosts have wins.
TOOL_PREFERENCE = (
    ("sockperf.ping-pong", "sockperf", "sockperf"),
    ("neper.tcp_rr", "tcp_rr", "tcp_rr"),
    ("netperf.TCP_RR", "netperf", "netserver"),
    ("ping", "ping", "ping"),
)
DEFER = {"napi_defer_hard_irqs": 2, "gro_flush_timeout": 20000}
BUSY_POLL = {"net.core.busy_poll": 50, "net.core.busy_read": 50}


@dataclass(frozen=True)
class StarterHost:
    """What init knows of one host: its inventory name, the interface that reaches the
    peer (None: unknown), its online CPUs (None: unknown), its tools and knob states
    (None: not checked: assume present)."""

    name: str
    iface: str | None = None
    iface_in_inventory: bool = False
    online_cpus: tuple[int, ...] | None = None
    tools: frozenset[str] | None = None
    knobs: dict[str, str] | None = None

    @classmethod
    def from_check(cls, report: dict[str, Any], iface: str | None,
                   iface_in_inventory: bool) -> StarterHost:
        online = report.get("online_cpus")
        try:
            cpu_ids = tuple(cpus.parse_list(online)) if isinstance(online, str) else None
        except cpus.CpuListError:
            cpu_ids = None
        tools = frozenset(t for t, ok in report.get("tools", {}).items() if ok)
        return cls(report["host"], iface, iface_in_inventory, cpu_ids, tools,
                   dict(report.get("knobs", {})))

    def has(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools

    def writable(self, path: str) -> bool:
        return self.knobs is None or self.knobs.get(path) == "writable"

    def workload_cpu(self) -> str | None:
        """The last online CPU (CPU 0 keeps the housekeeping and most IRQs), when the
        host has more than one."""
        if not self.online_cpus or len(self.online_cpus) < 2:
            return None
        return str(self.online_cpus[-1])


def choose_tool(client: StarterHost, server: StarterHost) -> str:
    for tool, on_client, on_server in TOOL_PREFERENCE:
        if client.has(on_client) and server.has(on_server):
            return tool
    return "ping"


def _role(role: str, host: StarterHost) -> str:
    iface = f", iface: {host.iface}" if host.iface and not host.iface_in_inventory else ""
    return f"  {role}: {{host: {host.name}{iface}}}"


def _process(role: str, host: StarterHost) -> str:
    cpu = host.workload_cpu()
    return f"{{role: {role}" + (f', cpus: "{cpu}"' if cpu else "") + "}"


def _variants(server: StarterHost) -> list[str]:
    lines = ["variants:", "  baseline:", "    description: the hosts as they are"]
    sysfs = f"/sys/class/net/{server.iface}/" if server.iface else None
    if server.iface is not None and sysfs and all(server.writable(sysfs + k) for k in DEFER):
        values = ", ".join(f"{k}: {v}" for k, v in DEFER.items())
        lines += ["  defer-irqs:",
                  "    description: defer hard IRQs twice, GRO flush after 20 us (server)",
                  f'    setup: {{server: {{netdev: {{"${{iface}}": {{{values}}}}}}}}}']
    if all(server.writable("/proc/sys/" + k.replace(".", "/")) for k in BUSY_POLL):
        values = ", ".join(f"{k}: {v}" for k, v in BUSY_POLL.items())
        lines += ["  busy-poll:",
                  "    description: socket busy polling for 50 us (server)",
                  f"    setup: {{server: {{sysctl: {{{values}}}}}}}"]
    if len(lines) == 3:
        lines[1:1] = ["  # hosts check found none of napi_defer_hard_irqs, gro_flush_timeout,",
                      "  # busy_poll writable on the server: add a variant that changes a knob"]
    return lines


def profile_text(client: StarterHost, server: StarterHost, *, inventory: str,
                 source: str) -> str:
    tool = choose_tool(client, server)
    collect = "{roles: [server]" + (f', cpus: "{server.workload_cpu()}"'
                                    if server.workload_cpu() else "") + "}"
    lines = [
        f"# yaml-language-server: $schema={shipped.schema_file('profile')}",
        f"# A starter A/B written by `napilab init` on {dt.date.today()} {source}.",
        "# Every key is documented in `napilab docs profiles` (docs/profiles.md);",
        "# `napilab schema profile` prints the JSON Schema editors use to complete and",
        "# check it; `napilab profiles list` shows the shipped profiles to start from.",
        f"#   napilab validate profile.yaml -i {inventory}",
        f"#   napilab plan profile.yaml -i {inventory}",
        f"#   napilab run profile.yaml -i {inventory} -o results",
        "name: starter",
        "description: the kernel's defaults against the first tuning to try",
        "hosts:",
        _role("server", server),
        _role("client", client),
        "workload:",
        f"  tool: {tool}",
        "  duration: 10",
        f"  client: {_process('client', client)}",
        f"  server: {_process('server', server)}",
        "collect:",
        f"  softnet_stat: {collect}",
        f"  interrupts: {collect}",
        f"  proc_stat: {collect}",
        *_variants(server),
        "repeat: 5",
        "order: interleaved",
    ]
    return "\n".join(lines) + "\n"


def inventory_text() -> str:
    """Two placeholder lab hosts (documentation addresses) to replace with real ones."""
    return f"""\
# yaml-language-server: $schema={shipped.schema_file('inventory')}
# A starter inventory written by `napilab init`: replace the addresses, users and keys
# with your lab's, then `napilab hosts check -i inventory.yaml` shows what each host
# has and `napilab init -i inventory.yaml DIR` writes a profile fitted to them.
# Ansible inventories (YAML, INI, `ansible-inventory --list` JSON) load as they are.
transport: ssh
host_key_policy: reject     # unknown host keys are refused; accept-new records them
hosts:
  sut:                      # the system under test: runs the server side
    address: 198.51.100.10  # where SSH connects (ssh_config aliases work too)
    user: root
    key: ~/.ssh/id_ed25519
    data_address: 192.0.2.10  # where the workload sends traffic
    iface: eth0
  peer:                     # the load generator: runs the client side
    address: 198.51.100.11
    user: root
    key: ~/.ssh/id_ed25519
    data_address: 192.0.2.11
    iface: eth0
"""


def placeholder_hosts() -> tuple[StarterHost, StarterHost]:
    """(client, server) of inventory_text(), nothing checked."""
    return (StarterHost("peer", "eth0", True), StarterHost("sut", "eth0", True))
