"""From a profile's settings to the concrete items on one host: an interface's queues,
its NAPI instances, its IRQs, the PIDs of its NAPI threads. Queries go through the
transport and are cached for one apply. Kinds resolve in KIND_ORDER, each after the
previous kinds were written (NAPI threads exist only once `threaded` is on)."""

from __future__ import annotations

import re

from harness.errors import HostError
from harness.hosts.backends import BACKENDS, Item, NapiBackend, read_files
from harness.profile import cpus, knobs
from harness.transport.transport import Transport

# ethtool first: channels (-L) and GRO (-K) decide which queues and NAPIs exist.
KIND_ORDER = ("sysctl", "irqbalance", "cpufreq", "ethtool", "netdev", "napi", "rps",
              "rps_flow_cnt", "xps", "irq_affinity", "napi_threads", "kprobe")
# Kinds whose items appear only after earlier kinds are written; queue kinds join them
# when ethtool settings may change the queues.
DYNAMIC = ("napi", "napi_threads")
QUEUE_KINDS = ("rps", "rps_flow_cnt", "xps", "irq_affinity")
FEATURE_NAMES = {
    "gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload", "lro": "large-receive-offload",
    "rx": "rx-checksumming", "tx": "tx-checksumming", "sg": "scatter-gather",
    "rxhash": "receive-hashing", "ntuple": "ntuple-filters", "rxvlan": "rx-vlan-offload",
    "txvlan": "tx-vlan-offload", "rx-gro-hw": "rx-gro-hw", "rx-gro-list": "rx-gro-list",
}
_ETHTOOL_FLAGS = {"coalesce": "-c", "channels": "-l", "features": "-k"}
# IRQ numbers of a NIC: its PCI function's msi_irqs (virtio-net: the parent device's).
MSI_IRQS = ["sh", "-c", 'ls "$1/device/msi_irqs" 2>/dev/null || ls "$1/device/../msi_irqs"',
             "napilab-irqs"]


class HostQuery:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._queues: dict[str, list[str]] = {}

    @property
    def name(self) -> str:
        return self.transport.host.name

    def queues(self, iface: str) -> list[str]:
        if iface not in self._queues:
            result = self.transport.run(["ls", "-1", f"/sys/class/net/{iface}/queues"],
                                        check=False)
            if result.exit_code != 0:
                raise HostError(f"{self.name}: no interface {iface!r}: {result.stderr.strip()}")
            self._queues[iface] = result.stdout.split()
        return list(self._queues[iface])

    def ifindex(self, iface: str) -> int:
        path = f"/sys/class/net/{iface}/ifindex"
        return int(read_files(self.transport, [path])[path])

    def napi_ids(self, iface: str) -> tuple[int, list[int]]:
        ifindex = self.ifindex(iface)
        backend = BACKENDS["napi"]
        assert isinstance(backend, NapiBackend)
        ids = sorted(int(str(n["id"])) for n in backend.napi_get(self.transport, ifindex))
        if not ids:
            raise HostError(f"{self.name}: {iface} has no NAPI instance (a veth needs GRO on)")
        return ifindex, ids

    def irqs(self, iface: str, pattern: str | None) -> list[tuple[int, str]]:
        msi = self.transport.run([*MSI_IRQS, f"/sys/class/net/{iface}"], check=False)
        numbers = {int(n) for n in msi.stdout.split() if n.isdigit()}
        table = read_files(self.transport, ["/proc/interrupts"])["/proc/interrupts"]
        found = []
        for line in table.splitlines()[1:]:
            name, _, rest = line.partition(":")
            if not name.strip().isdigit():
                continue
            irq, description = int(name), " ".join(t for t in rest.split() if not t.isdigit())
            ours = irq in numbers if numbers else re.search(rf"\b{re.escape(iface)}\b",
                                                               description)
            if ours and (pattern is None or re.search(pattern, description)):
                found.append((irq, description))
        if not found:
            raise HostError(f"{self.name}: no IRQs found for {iface}"
                            + (f" matching {pattern!r}" if pattern else "")
                            + " (a virtual device such as veth has none)")
        return found

    def threads(self, pattern: str) -> list[tuple[int, str]]:
        result = self.transport.run(["ps", "-e", "-o", "pid=,comm="])
        out = []
        for line in result.stdout.splitlines():
            pid, _, comm = line.strip().partition(" ")
            if re.fullmatch(pattern, comm.strip()):
                out.append((int(pid), comm.strip()))
        return out


def resolve(setting: knobs.Setting, query: HostQuery) -> list[Item]:
    kind, target, value = setting.kind, setting.target, setting.value
    if kind in ("sysctl", "netdev", "rps", "rps_flow_cnt", "xps"):
        queues = query.queues(target.partition("/")[0]) if knobs.needs_queues(setting) else []
        return [Item("file", w.path, w.target, w.value) for w in knobs.files(setting, queues)]
    if kind == "napi":
        iface, _, attr = target.partition("/")
        ifindex, ids = query.napi_ids(iface)
        return [Item("napi", f"{ifindex}/{i}/{attr}", f"{iface}/napi-{i}/{attr}", value)
                for i in ids]
    if kind == "ethtool":
        iface, group, name = target.split("/")
        if group == "features":
            name = FEATURE_NAMES.get(name, name)
        return [Item("ethtool", f"{iface}/{_ETHTOOL_FLAGS[group]}/{name}", target, value)]
    if kind == "irq_affinity":
        iface, _, pattern = target.partition("/")
        return [Item("file", f"/proc/irq/{irq}/smp_affinity_list", f"irq {irq} ({desc})",
                     value) for irq, desc in query.irqs(iface, pattern or None)]
    if kind == "napi_threads":
        owner, _, what = target.partition("/")
        pattern = r"backlog_napi/\d+" if owner == "backlog" else rf"napi/{re.escape(owner)}-\d+"
        threads = query.threads(pattern)
        if not threads:
            raise HostError(f"{query.name}: no thread matches {pattern!r}"
                            + ("" if owner == "backlog" else
                               f" (set threaded on {owner} in this variant first)"))
        return [Item("sched", f"{pid}/{what}", f"{comm}/{what}", value)
                for pid, comm in threads]
    if kind == "irqbalance":
        return [Item("service", "irqbalance", "irqbalance", value)]
    if kind == "kprobe":
        return [Item("kprobe", target, f"kprobe {target}", value)]
    if kind == "cpufreq":
        return [Item("file", f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor",
                     f"cpu{cpu} governor", value) for cpu in cpus.parse_list(target)]
    raise HostError(f"unknown knob kind {kind!r}")


class PlanQuery(HostQuery):
    """Resolution without a host, for `napilab plan`: what exists only on the host is a
    placeholder (every rx queue `rx-*`, `<napi-id>`, `<irq>`, `<pid>`)."""

    def __init__(self, host: str) -> None:
        self._host = host
        self._queues = {}

    @property
    def name(self) -> str:
        return self._host

    def queues(self, iface: str) -> list[str]:
        return ["rx-*", "tx-*"]

    def napi_ids(self, iface: str) -> tuple[int, list[int]]:
        return -1, [-1]

    def irqs(self, iface: str, pattern: str | None) -> list[tuple[int, str]]:
        return [(-1, iface)]

    def threads(self, pattern: str) -> list[tuple[int, str]]:
        return [(-1, pattern)]


def plan_items(setting: knobs.Setting, host: str) -> list[Item]:
    """The items of `setting` as `napilab plan` shows them, placeholders for numbers
    only the host knows."""
    items = resolve(setting, PlanQuery(host))
    placeholders = {"napi": ("-1/-1/", "<ifindex>/<napi-id>/"),
                    "file": ("/proc/irq/-1/", "/proc/irq/<irq>/"),
                    "sched": ("-1/", "<pid>/")}
    out = []
    for item in items:
        old, new = placeholders.get(item.backend, ("", ""))
        key = item.key.replace(old, new) if old else item.key
        out.append(Item(item.backend, key, item.target, item.value))
    return out
