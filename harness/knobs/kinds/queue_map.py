"""What a queue index is on a host: its NAPI instances (netdev netlink queue-get,
6.8+), its IRQs (the NAPI's `irq` attribute where the driver reports it, else the
device's IRQs named after the queue), and the CPUs a `spread: local|all` means there.

IRQ names by driver, as /proc/interrupts shows them: virtio-net `virtio0-input.3`,
`virtio0-output.3`; e1000e, igb, ixgbe `eth0-rx-3`, `eth0-tx-3`, `eth0-TxRx-3`; ice,
i40e `ice-eth0-TxRx-3`; vmxnet3 `eth0-rxtx-3`; mlx5 `mlx5_comp3@pci:0000:08:00.0`.
A device's other IRQs (config, link, `eth0` alone, `-event-`) belong to no queue.
"""

from __future__ import annotations

import re

from napilab.harness.errors import HostError, NapilabError
from napilab.harness.grammar import cpus
from napilab.harness.knobs import per_queue
from napilab.harness.knobs.backend import read_files
from napilab.harness.knobs.kind import Lookup, Session
from napilab.harness.knobs.kinds.napi import NapiBackend, ifindex, queue_napis

# the queue index at the end of an IRQ's name, after a word that says it is a queue's
QUEUE_IRQ = re.compile(r"(?:input|output|rx|tx|txrx|rxtx|combined|comp|queue|q)"
                       r"[-._]?(\d+)(?:@\S*)?$", re.IGNORECASE)


# IRQ numbers of a NIC: its PCI function's msi_irqs (virtio-net: the parent device's).
MSI_IRQS = ["sh", "-c", 'ls "$1/device/msi_irqs" 2>/dev/null || ls "$1/device/../msi_irqs"',
            "napilab-irqs"]


def irqs(host: Session, iface: str, pattern: str) -> list[tuple[str, str]]:
    """(IRQ number, its /proc/interrupts description) of the interface's IRQs."""
    msi = host.transport.run([*MSI_IRQS, f"/sys/class/net/{iface}"], check=False)
    numbers = {int(n) for n in msi.stdout.split() if n.isdigit()}
    table = read_files(host.transport, ["/proc/interrupts"])["/proc/interrupts"]
    found = []
    for line in table.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if not name.strip().isdigit():
            continue
        irq, description = int(name), " ".join(t for t in rest.split() if not t.isdigit())
        ours = irq in numbers if numbers else re.search(rf"\b{re.escape(iface)}\b",
                                                           description)
        if ours and (not pattern or re.search(pattern, description)):
            found.append((str(irq), description))
    if not found:
        raise HostError(f"{host.name}: no IRQs found for {iface}"
                        + (f" matching {pattern!r}" if pattern else "")
                        + " (a virtual device such as veth has none)")
    return found


def irq_queue(name: str) -> int | None:
    """The queue index an IRQ's name says (None for the device's other IRQs)."""
    match = QUEUE_IRQ.search(name.split()[-1] if name.split() else "")
    return int(match[1]) if match else None


def queue_irqs(host: Session, iface: str, pattern: str) -> dict[int, list[tuple[str, str]]]:
    """Queue index -> its IRQs (number, /proc/interrupts description), those matching
    `pattern` when given. The NAPI's `irq` attribute decides where the kernel reports
    it; an IRQ no NAPI reports goes by its name."""
    found = irqs(host, iface, pattern)
    by_irq = dict(found)
    out: dict[int, list[tuple[str, str]]] = {}
    napi_irq: dict[str, str] = {}
    napis: dict[int, list[str]] = {}
    try:
        index = ifindex(host, iface)
        napi_irq = {str(n["id"]): str(n["irq"])
                    for n in host.backend(NapiBackend).napi_get(index) if "irq" in n}
        if napi_irq:
            napis = queue_napis(host, iface)
    except NapilabError:
        napi_irq = {}
    for queue, ids in napis.items():
        for napi_id in ids:
            irq = napi_irq.get(napi_id)
            if irq in by_irq and (irq, by_irq[irq]) not in out.get(queue, []):
                out.setdefault(queue, []).append((irq, by_irq[irq]))
    named = {irq for listed in out.values() for irq, _ in listed}
    for irq, description in found:  # IRQs no NAPI reports: by their name
        by_name = irq_queue(description)
        if irq not in named and by_name is not None:
            out.setdefault(by_name, []).append((irq, description))
    if not out:
        raise HostError(f"{host.name}: no IRQ of {iface} names a queue (its IRQs: "
                        + ", ".join(f"{n} {d.split()[-1] if d.split() else ''}"
                                    for n, d in found) + ")")
    return dict(sorted(out.items()))


def queue_cpus(value: str, count: int, iface: str, host: Lookup,
               plan: str | None = None) -> list[str]:
    """Each of `count` queues' CPUs for a setting's value: a plain list for every queue;
    a spread over a list, or over the host's local or all CPUs, gives the k-th queue the
    k-th CPU (one queue of several chosen ones: its position's). `plan` is what
    `napilab plan` stands in for local/all CPUs; by default a placeholder, shown per
    queue (`<local CPUs>[1]`)."""
    found = per_queue.spread_source(value)
    if found is None:
        return [value] * count
    source, position = found
    if source in per_queue.SPREAD_WORDS:
        source = host.find(spread_cpus, iface, source,
                           plan=f"<{source} CPUs>" if plan is None else plan)
        if source.startswith("<"):  # napilab plan: the host decides
            return [f"{source}[{position if position is not None else k}]"
                    for k in range(count)]
    if position is not None:
        return [per_queue.spread(source, position + 1)[position]]
    return per_queue.spread(source, count)


def spread_cpus(host: Session, iface: str, source: str) -> str:
    """The CPUs of `spread: local` (the device's NUMA node's, its local_cpulist; every
    online CPU where the device has none, as on a machine of one node) or `all`."""
    online = "/sys/devices/system/cpu/online"
    if source == "all":
        return read_files(host.transport, [online])[online]
    result = host.transport.run(
        ["sh", "-c", 'cat "$1/device/local_cpulist" 2>/dev/null || '
         'cat "$1/device/../local_cpulist" 2>/dev/null || cat "$2"', "napilab-local",
         f"/sys/class/net/{iface}", online], check=False)
    text = result.stdout.strip()
    try:
        cpus.parse_list(text)
    except cpus.CpuListError:
        raise HostError(f"{host.name}: cannot read the local CPUs of {iface}: "
                        f"{result.stderr.strip() or text!r}") from None
    return text
