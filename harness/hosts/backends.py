"""How knobs are read and written on a host: files (sysfs, procfs), per-NAPI netlink,
ethtool, thread scheduling, services. Each backend reads many items in one exec where
it can, writes one item at a time, and knows how two values compare.

An item's `key` is its address within the backend:
  file     /sys/class/net/eth0/gro_flush_timeout
  napi     IFINDEX/NAPI_ID/attribute            (2/291/threaded)
  ethtool  IFACE/FLAG/name                      (eth0/-c/rx-usecs, eth0/-k/gro)
  sched    PID/cpus | PID/policy                (policy value: fifo:50, other:0)
  service  irqbalance
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Protocol

from harness.errors import CommandError, HostError
from harness.profile import knobs
from harness.transport.transport import Transport
from runners.collectors.collector import split_tail


@dataclass(frozen=True)
class Item:
    """One value on a host that a setting changes, resolved to its backend address."""

    backend: str
    key: str
    target: str
    value: str


class Gone(HostError):
    """The object no longer exists (a thread exited, a NAPI instance went away): there
    is nothing left to restore."""


class Backend(Protocol):
    def read(self, transport: Transport, keys: Sequence[str]) -> dict[str, str]: ...

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        """The commands `read` runs for `keys` (shown by `napilab plan`)."""
        ...

    def write_argv(self, key: str, value: str) -> list[str]:
        """The command that writes `value` (files: its stdin is the value)."""
        ...

    def write(self, transport: Transport, key: str, value: str) -> None: ...

    def same(self, key: str, a: str, b: str) -> bool: ...


def _reason(exc: CommandError) -> str:
    lines = [ln for ln in exc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1].rpartition(": ")[2] if lines else f"exit {exc.returncode}"


def tail_argv(paths: Sequence[str]) -> list[str]:
    """One command that prints every file under a `==> PATH <==` header."""
    return ["tail", "-v", "-n", "+1", "--", *paths]


def read_present(transport: Transport, paths: Sequence[str]) -> tuple[dict[str, str], str]:
    """The content of the paths that exist (one exec), and tail's complaints."""
    result = transport.run(tail_argv(paths), check=False)
    files = split_tail(result.stdout) if result.stdout.startswith("==> ") else {}
    return files, result.stderr


def read_files(transport: Transport, paths: Sequence[str]) -> dict[str, str]:
    """Every path's content in one exec; a missing path is an error naming it."""
    files, stderr = read_present(transport, paths)
    missing = [p for p in paths if p not in files]
    if missing:
        hint = "is the interface or knob present on this host and kernel?"
        if any(p.startswith("/proc/sys/net/core/") for p in missing):
            hint = ("sysctls such as net.core.busy_poll, busy_read and skb_defer_max exist "
                    "only in the initial network namespace, not inside a container or "
                    "testbed namespace")
        raise HostError(f"{transport.host.name}: cannot read {', '.join(missing)}: "
                        f"{stderr.strip()}", hint=hint)
    return {p: files[p].strip() for p in paths}


class FileBackend:
    def read(self, transport: Transport, keys: Sequence[str]) -> dict[str, str]:
        return read_files(transport, keys)

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [tail_argv(keys)]

    def write_argv(self, key: str, value: str) -> list[str]:
        return ["tee", "--", key]

    def write(self, transport: Transport, key: str, value: str) -> None:
        try:
            transport.write_file(key, value + "\n")
        except CommandError as exc:
            raise HostError(_reason(exc)) from None

    def same(self, key: str, a: str, b: str) -> bool:
        return knobs.canonical(key, a) == knobs.canonical(key, b)


NETDEV_NL = resources.files("harness.hosts").joinpath("hostscripts/netdev_nl.py")


class NapiBackend:
    """Per-NAPI settings through the netdev netlink family: the host's `ynl` when it has
    one, else napilab's own client (harness/hostscripts/netdev_nl.py) run by the host's
    python3. Both print ynl's --output-json form."""

    def __init__(self) -> None:
        self._client: dict[str, str] = {}  # host -> "ynl" | "python3"

    def client(self, transport: Transport) -> str:
        name = transport.host.name
        if name not in self._client:
            for tool in ("ynl", "python3"):
                if transport.run(["which", tool], check=False).exit_code == 0:
                    self._client[name] = tool
                    break
            else:
                raise HostError(f"per-NAPI settings are not supported on {name}: it has "
                                "neither ynl nor python3")
        return self._client[name]

    @staticmethod
    def get_argv(ifindex: int | str, client: str = "ynl") -> list[str]:
        if client == "ynl":
            return ["ynl", "--family", "netdev", "--output-json", "--dump", "napi-get",
                    "--json", json.dumps({"ifindex": ifindex})]
        return ["python3", "-", "napi-get", str(ifindex)]

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        ifindexes = sorted({k.split("/")[0] for k in keys})
        return [self.get_argv(int(i) if i.isdigit() else i) for i in ifindexes]

    def napi_get(self, transport: Transport, ifindex: int) -> list[dict[str, object]]:
        client = self.client(transport)
        result = transport.run(self.get_argv(ifindex, client), check=False,
                               stdin=NETDEV_NL.read_text() if client == "python3" else None)
        if result.exit_code != 0:
            raise HostError(f"napi-get ifindex {ifindex}: {result.stderr.strip()}")
        try:
            napis = json.loads(result.stdout)
        except json.JSONDecodeError:
            raise HostError(f"napi-get: not JSON: {result.stdout[:200]!r}") from None
        return [n for n in napis if isinstance(n, dict)]

    def read(self, transport: Transport, keys: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        dumps: dict[int, dict[int, dict[str, object]]] = {}
        for key in keys:
            ifindex, napi_id, attr = _napi_key(key)
            if ifindex not in dumps:
                dumps[ifindex] = {int(str(n["id"])): n for n in self.napi_get(transport,
                                                                             ifindex)}
            napi = dumps[ifindex].get(napi_id)
            if napi is None:
                raise Gone(f"NAPI {napi_id} of ifindex {ifindex} is gone")
            if attr not in napi:
                raise HostError(f"the kernel does not report NAPI attribute {attr!r} "
                                "(per-NAPI threaded needs 6.17+, defer/gro/irq-suspend 6.13+)")
            out[key] = str(napi[attr])
        return out

    def write_argv(self, key: str, value: str, client: str = "ynl") -> list[str]:
        _, napi_id, attr = key.split("/")
        typed: object = value if attr == "threaded" or not value.isdigit() else int(value)
        ident: object = int(napi_id) if napi_id.isdigit() else napi_id
        request = json.dumps({"id": ident, attr: typed})
        if client == "ynl":
            return ["ynl", "--family", "netdev", "--do", "napi-set", "--json", request]
        return ["python3", "-", "napi-set", request]

    def write(self, transport: Transport, key: str, value: str) -> None:
        _, _, attr = _napi_key(key)
        client = self.client(transport)
        result = transport.run(self.write_argv(key, value, client), check=False,
                               stdin=NETDEV_NL.read_text() if client == "python3" else None)
        if result.exit_code != 0:
            reason = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
            if attr == "threaded" and value == "busy-poll" and "range" in reason:
                reason += " (this kernel has no threaded busy-poll: it came after 6.18)"
            raise HostError(reason or f"napi-set exited {result.exit_code}")

    def same(self, key: str, a: str, b: str) -> bool:
        return a.strip() == b.strip()


def _napi_key(key: str) -> tuple[int, int, str]:
    ifindex, napi_id, attr = key.split("/")
    return int(ifindex), int(napi_id), attr


_ETHTOOL_WRITE = {"-c": "-C", "-l": "-L", "-k": "-K"}


class EthtoolBackend:
    """ethtool coalesce (-c/-C), channels (-l/-L) and features (-k/-K)."""

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        shows = dict.fromkeys((k.split("/")[1], k.split("/")[0]) for k in keys)
        return [["ethtool", flag, iface] for flag, iface in shows]

    def read(self, transport: Transport, keys: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        shown: dict[tuple[str, str], dict[str, str]] = {}
        for key in keys:
            iface, flag, name = key.split("/")
            if (iface, flag) not in shown:
                result = transport.run(["ethtool", flag, iface], check=False)
                if result.exit_code != 0:
                    detail = result.stderr.strip() or result.stdout.strip()
                    raise HostError(f"`ethtool {flag} {iface}`: {detail}")
                shown[(iface, flag)] = parse_ethtool(flag, result.stdout)
            values = shown[(iface, flag)]
            if name not in values:
                raise HostError(f"`ethtool {flag} {iface}` shows no {name!r}; it shows "
                                f"{sorted(values)[:12]}")
            out[key] = values[name]
        return out

    def write_argv(self, key: str, value: str) -> list[str]:
        iface, flag, name = key.split("/")
        return ["ethtool", _ETHTOOL_WRITE[flag], iface, name, value]

    def write(self, transport: Transport, key: str, value: str) -> None:
        try:
            transport.run(self.write_argv(key, value))
        except CommandError as exc:
            raise HostError(_reason(exc)) from None

    def same(self, key: str, a: str, b: str) -> bool:
        return a.split()[0] == b.split()[0] if a.strip() and b.strip() else a == b


def parse_ethtool(flag: str, text: str) -> dict[str, str]:
    """`name: value` lines; for -l only the "Current hardware settings" block, for -k
    the value without `[fixed]`/`[requested on]` notes."""
    if flag == "-l":
        _, _, text = text.partition("Current hardware settings:")
    values = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        if sep and value.strip() and " " not in name:
            # -l prints "RX:", -L takes "rx"
            values[name.lower() if flag == "-l" else name] = value.strip().split(" [")[0].split()[0]
    return values


_AFFINITY = re.compile(r"affinity list: ([\d,-]+)")
_POLICY = re.compile(r"scheduling policy: SCHED_(\w+)")
_PRIORITY = re.compile(r"scheduling priority: (\d+)")
_CHRT = {"fifo": "-f", "rr": "-r", "other": "-o", "batch": "-b", "idle": "-i"}
# Reads affinity and policy of every PID in one exec; PIDs are positional parameters.
SCHED_READ = ["sh", "-c", 'for p do echo "== $p"; taskset -pc "$p"; chrt -p "$p"; done',
               "napilab-sched"]


class SchedBackend:
    """CPU affinity and scheduling policy of kernel threads (napi/IF-ID, backlog_napi/N)."""

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [[*SCHED_READ, *dict.fromkeys(k.split("/")[0] for k in keys)]]

    def read(self, transport: Transport, keys: Sequence[str]) -> dict[str, str]:
        result = transport.run(self.read_argvs(keys)[0], check=False)
        blocks = dict(re.findall(r"== (\d+)\n(.*?)(?=\n== |\Z)", result.stdout, re.DOTALL))
        out = {}
        for key in keys:
            pid, what = key.split("/")
            block = blocks.get(pid, "")
            if what == "cpus":
                match = _AFFINITY.search(block)
                if match is None:
                    raise Gone(f"thread {pid} is gone")
                out[key] = knobs.cpu_list(match[1])
            else:
                policy, priority = _POLICY.search(block), _PRIORITY.search(block)
                if policy is None or priority is None:
                    raise Gone(f"thread {pid} is gone")
                out[key] = f"{policy[1].lower()}:{priority[1]}"
        return out

    def write_argv(self, key: str, value: str) -> list[str]:
        pid, what = key.split("/")
        if what == "cpus":
            return ["taskset", "-pc", value, pid]
        policy, _, priority = value.partition(":")
        if policy not in _CHRT:  # `napilab plan`: the original policy
            return ["chrt", "<policy>", "-p", "<priority>", pid]
        return ["chrt", _CHRT[policy], "-p", priority, pid]

    def write(self, transport: Transport, key: str, value: str) -> None:
        pid = key.split("/")[0]
        try:
            transport.run(self.write_argv(key, value))
        except CommandError as exc:
            if "No such process" in exc.stderr:
                raise Gone(f"thread {pid} is gone") from None
            raise HostError(_reason(exc)) from None

    def same(self, key: str, a: str, b: str) -> bool:
        if key.endswith("/cpus"):
            return knobs.cpu_list(a) == knobs.cpu_list(b)
        return a == b


class ServiceBackend:
    """irqbalance: running or stopped, through systemd (it rewrites IRQ affinity, so
    experiments that pin IRQs stop it and start it again afterwards)."""

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [["pgrep", "-x", "irqbalance"]]

    def read(self, transport: Transport, keys: Sequence[str]) -> dict[str, str]:
        running = transport.run(self.read_argvs(keys)[0], check=False).exit_code == 0
        return {key: "running" if running else "stopped" for key in keys}

    def write_argv(self, key: str, value: str) -> list[str]:
        if value not in ("running", "stopped"):  # `napilab plan`: the original state
            return ["systemctl", "start|stop", key]
        return ["systemctl", "start" if value == "running" else "stop", key]

    def write(self, transport: Transport, key: str, value: str) -> None:
        action = "start" if value == "running" else "stop"
        result = transport.run(self.write_argv(key, value), check=False)
        if result.exit_code != 0:
            raise HostError(f"`systemctl {action} {key}`: {result.stderr.strip()}",
                            hint="napilab manages irqbalance only through systemd")

    def same(self, key: str, a: str, b: str) -> bool:
        return a == b


class KprobeUnavailable(HostError):
    """The kernel cannot probe this function (or has no kprobe events at all)."""


# tracefs is at /sys/kernel/tracing (4.1+) or under debugfs; scripts take it as data.
KPROBE_LIST = ["sh", "-c", 'for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do '
                'if [ -w "$d/kprobe_events" ]; then echo "$d"; cat "$d/kprobe_events"; '
                'exit 0; fi; done; exit 3', "napilab-kprobes"]
KPROBE_ADD = ["sh", "-c", 'echo "$1" >> "$3/kprobe_events" && '
               'echo 1 > "$3/events/kprobes/$2/enable"', "napilab-kprobe"]
KPROBE_DEL = ["sh", "-c", 'echo 0 > "$3/events/kprobes/$2/enable"; '
               'echo "$1" >> "$3/kprobe_events"', "napilab-kprobe"]


class KprobeBackend:
    """kprobe events napilab creates for the `kprobes` collector: key FUNCTION, value
    present | absent. Creating one is a change like any other: journalled, so a
    crashed run's probes are removed by `napilab restore`."""

    def __init__(self) -> None:
        self._tracefs: dict[str, str] = {}

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [list(KPROBE_LIST)]

    def read(self, transport: Transport, keys: Sequence[str]) -> dict[str, str]:
        from runners.collectors.kprobes import event_name

        result = transport.run(KPROBE_LIST, check=False)
        if result.exit_code != 0:
            return {key: "absent" for key in keys}
        lines = result.stdout.splitlines()
        self._tracefs[transport.host.name] = lines[0].strip()
        events = {line.split()[0].split("/")[-1] for line in lines[1:] if line.strip()}
        return {key: "present" if event_name(key) in events else "absent" for key in keys}

    def write_argv(self, key: str, value: str, tracefs: str = "<tracefs>") -> list[str]:
        from runners.collectors.kprobes import event_name

        name = event_name(key)
        if value == "present":
            return [*KPROBE_ADD, f"p:{name} {key}", name, tracefs]
        return [*KPROBE_DEL, f"-:{name}", name, tracefs]

    def write(self, transport: Transport, key: str, value: str) -> None:
        tracefs = self._tracefs.get(transport.host.name)
        if tracefs is None:
            self.read(transport, [key])
            tracefs = self._tracefs.get(transport.host.name)
        if tracefs is None:
            raise KprobeUnavailable("no writable kprobe_events (kernel without "
                                    "CONFIG_KPROBE_EVENTS, or tracefs not mounted)")
        result = transport.run(self.write_argv(key, value, tracefs), check=False)
        if result.exit_code != 0 and value == "present":
            raise KprobeUnavailable(f"the kernel cannot probe {key}: "
                                    f"{result.stderr.strip().rpartition(': ')[2]}")
        if result.exit_code != 0:
            raise HostError(f"removing the kprobe on {key}: {result.stderr.strip()}")

    def same(self, key: str, a: str, b: str) -> bool:
        return a == b


BACKENDS: dict[str, Backend] = {"file": FileBackend(), "napi": NapiBackend(),
                                "ethtool": EthtoolBackend(), "sched": SchedBackend(),
                                "service": ServiceBackend(), "kprobe": KprobeBackend()}
