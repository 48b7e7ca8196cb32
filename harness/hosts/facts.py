"""Host facts recorded in the manifest: what a comparison must know to be honest
(kernel, command line, CPUs, NIC driver and firmware, irqbalance, USER_HZ)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.hosts.backends import read_present
from harness.profile import cpus
from harness.transport.transport import Transport
from runners.collectors.collector import HostInfo

FILES = {
    "boot_id": "/proc/sys/kernel/random/boot_id",
    "kernel_release": "/proc/sys/kernel/osrelease",
    "kernel_version": "/proc/sys/kernel/version",
    "cmdline": "/proc/cmdline",
    "online_cpus": "/sys/devices/system/cpu/online",
    "cpuinfo": "/proc/cpuinfo",
}


def gather(transport: Transport, ifaces: Iterable[str] = ()) -> dict[str, Any]:
    files, _ = read_present(transport, list(FILES.values()))
    facts: dict[str, Any] = {}
    for name, path in FILES.items():
        if name != "cpuinfo" and path in files:
            facts[name] = files[path].strip()
    facts["cpu_model"] = _cpu_model(files.get(FILES["cpuinfo"], ""))
    hz = transport.run(["getconf", "CLK_TCK"], check=False)
    facts["user_hz"] = int(hz.stdout) if hz.exit_code == 0 and hz.stdout.strip().isdigit() else 100
    irqbalance = transport.run(["pgrep", "-x", "irqbalance"], check=False)
    facts["irqbalance"] = "running" if irqbalance.exit_code == 0 else "not running"
    facts["nics"] = {iface: _driver(transport, iface) for iface in sorted(set(ifaces))}
    return facts


def identity(transport: Transport) -> dict[str, str]:
    """Boot id, kernel and command line: read again at the end of a run to flag a host
    that rebooted or changed kernel mid-run."""
    keys = ("boot_id", "kernel_release", "kernel_version", "cmdline")
    files, _ = read_present(transport, [FILES[k] for k in keys])
    return {k: files[FILES[k]].strip() for k in keys if FILES[k] in files}


def _cpu_model(cpuinfo: str) -> str | None:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "CPU part"):
            return value.strip()
    return None


def _driver(transport: Transport, iface: str) -> dict[str, str]:
    result = transport.run(["ethtool", "-i", iface], check=False)
    if result.exit_code != 0:
        return {"error": (result.stderr.strip() or f"ethtool exit {result.exit_code}")[:200]}
    info = {}
    for line in result.stdout.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("driver", "version", "firmware-version", "bus-info"):
            info[key.strip()] = value.strip()
    return info


def host_info(facts: dict[str, Any]) -> HostInfo:
    online = facts.get("online_cpus")
    try:
        online_cpus = cpus.parse_list(online) if isinstance(online, str) else None
    except cpus.CpuListError:
        online_cpus = None
    return HostInfo(user_hz=int(facts.get("user_hz", 100)), online_cpus=online_cpus)
