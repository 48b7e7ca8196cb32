"""`napilab hosts check`: what each host is and which knobs and tools it has, read
without changing anything (three or four commands per host)."""

from __future__ import annotations

import json
from typing import Any

from napilab.harness.hosts import facts as host_facts
from napilab.harness.hosts import queues, tracers
from napilab.harness.hosts.session import HostSession
from napilab.harness.inventory.inventory import Host
from napilab.harness.knobs import registry
from napilab.harness.knobs.kinds import napi
from napilab.harness.transport.transport import Transport
from napilab.runners.registry import programs as registry_programs

# what napilab itself runs, after every workload tool's programs (runners.registry)
OWN = ("ynl", "python3", "ethtool", "taskset", "chrt", "ss", "timeout", "bpftrace")


def tools() -> tuple[str, ...]:
    """What `hosts check` looks for, read from the registry when asked."""
    return (*registry_programs(), *OWN)


# One exec each; names are positional parameters, never part of the script.
_WHICH = ["sh", "-c", 'for t do if command -v "$t" >/dev/null 2>&1; then echo "$t yes"; '
          'else echo "$t no"; fi; done', "napilab-which"]
_MODES = ["sh", "-c", 'for f do if [ -e "$f" ]; then stat -c "%n %A" "$f"; '
          'else echo "$f absent"; fi; done', "napilab-stat"]


def check_host(host: Host, session: HostSession) -> dict[str, Any]:
    transport = session.transport
    facts = host_facts.gather(transport, [host.iface] if host.iface else [])
    names = tools()
    found_tools = dict(line.split() for line in
                       transport.run([*_WHICH, *names]).stdout.splitlines())
    paths = [p for kind in registry.kinds() for p in kind.check_paths(host.iface)]
    knobs: dict[str, str] = {}
    for line in transport.run([*_MODES, *paths]).stdout.splitlines():
        path, _, mode = line.rpartition(" ")
        knobs[path] = "absent" if mode == "absent" else ("writable" if mode[2] == "w"
                                                          else "read-only")
    per_napi = "no iface in the inventory"
    xdp = "no iface in the inventory"
    found: list[queues.Queue] = []
    notes: list[str] = []
    channels: dict[str, str] = {}
    if host.iface:
        per_napi = napi.support(session, host.iface)
        xdp = napi.xdp_support(session, host.iface, facts.get("af_xdp"))
        found, notes = queues.device_queues(session, host.iface)
        channels = queues.channels(session, host.iface)
    tracer, other_tracers = tracers.running(transport)
    return {
        "host": host.name, "transport": host.transport,
        "tracers": {"napilab": tracer, "other_bpftrace": other_tracers},
        "kernel": facts.get("kernel_release"), "cpu_model": facts.get("cpu_model"),
        "online_cpus": facts.get("online_cpus"), "irqbalance": facts.get("irqbalance"),
        "user_hz": facts.get("user_hz"), "iface": host.iface,
        "nic": facts.get("nics", {}).get(host.iface or "", {}),
        "tools": {t: found_tools.get(t) == "yes" for t in names},
        "knobs": knobs, "per_napi_netlink": per_napi, "xdp": xdp,
        "channels": channels, "queues": [q.to_json() for q in found], "queue_notes": notes,
        "virtualization": facts.get("virtualization"),
    }


def render(reports: list[dict[str, Any]]) -> str:
    lines = []
    for r in reports:
        nic = r["nic"]
        lines += [
            f"host {r['host']} ({r['transport']})",
            f"  kernel       {r['kernel']}",
            f"  CPUs         online {r['online_cpus']}, {r['cpu_model']}, USER_HZ {r['user_hz']}",
            f"  irqbalance   {r['irqbalance']}",
            f"  iface        {r['iface'] or '-'}"
            + (f" (driver {nic.get('driver', '?')} {nic.get('version', '')})".rstrip()
               if nic and "driver" in nic else ""),
            f"  per-NAPI     {r['per_napi_netlink']}",
            f"  XDP          {r['xdp']}",
        ]
        if r.get("virtualization"):
            lines.insert(-4, f"  machine      {r['virtualization']}")
        lines += _queue_lines(r)
        lines.append(f"  tracers      {_tracer_line(r['tracers'])}")
        lines.append("  knobs")
        lines += [f"    {state:<10} {path}" for path, state in r["knobs"].items()]
        have = [t for t, ok in r["tools"].items() if ok]
        missing = [t for t, ok in r["tools"].items() if not ok]
        lines += [f"  tools        {' '.join(have)}", f"  missing      {' '.join(missing) or '-'}"]
    return "\n".join(lines) + "\n"


def _tracer_line(found: dict[str, Any]) -> str:
    """What is attached: napilab's bpftrace (a live run's, or a dead run's that
    `napilab restore` stops) and any other bpftrace running on the host."""
    mine = (f"napilab's bpftrace pid {found['napilab']} attached (a live run's, or "
            "`napilab restore` stops it)" if found["napilab"] else "none of napilab's")
    others = found["other_bpftrace"]
    return mine + (f"; {others} other bpftrace process(es)" if others else "")


def _queue_lines(r: dict[str, Any]) -> list[str]:
    if not r["queues"] and not r["queue_notes"]:
        return []
    chan = r["channels"]
    counts = ", ".join(f"{k} {v}" for k, v in chan.items() if not k.startswith("max "))
    maxima = ", ".join(f"{k[4:]} {v}" for k, v in chan.items() if k.startswith("max "))
    head = f"{len([q for q in r['queues'] if q['queue'].startswith('rx')])} rx, " \
        f"{len([q for q in r['queues'] if q['queue'].startswith('tx')])} tx"
    if counts:
        head += f"; ethtool -l: {counts}" + (f" (max {maxima})" if maxima else "")
    lines = [f"  queues       {head}"]
    for q in r["queues"]:
        napi_id = q["napi_id"] if q["napi_id"] is not None else "-"
        irq = f"IRQ {q['irq']} {q['irq_name'] or ''}".rstrip() if q["irq"] else "no IRQ"
        lines.append(f"    {q['queue']:<10} NAPI {napi_id:<6} {irq}")
    lines += [f"    ({note})" for note in r["queue_notes"]]
    return lines


def as_json(reports: list[dict[str, Any]]) -> str:
    return json.dumps(reports, indent=1)


def route_iface(transport: Transport, address: str) -> str | None:
    """The interface this host sends to `address` through (`ip route get`), or None."""
    result = transport.run(["ip", "-o", "route", "get", "--", address], check=False)
    words = result.stdout.split()
    if result.exit_code != 0 or "dev" not in words[:-1]:
        return None
    return words[words.index("dev") + 1]
