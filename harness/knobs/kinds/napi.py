"""`napi: {IFACE: {threaded: busy-poll, defer-hard-irqs: 2, gro-flush-timeout: 20000,
irq-suspend-timeout: N}}`: every NAPI instance of the interface, through the netdev
netlink family's napi-set (underscores accepted in the names).

The netlink client is the host's `ynl` when it has one, else napilab's own
(hostscripts/netdev_nl.py, sent on stdin to the host's python3); both print ynl's
--output-json form. `napilab plan` shows the ynl form."""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import Any, Self

from napilab.harness.errors import HostError, NapilabError
from napilab.harness.grammar.schema import Checker, join, suggest
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, per_queue, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.backend import Backend, Command, Gone, read_files
from napilab.harness.knobs.kind import Item, Kind, Lookup, Session, Setting
from napilab.runners.base import HOST_PYTHON

NETDEV_NL = resources.files("napilab.harness.knobs.kinds").joinpath("hostscripts/netdev_nl.py")


def hostscript(name: str) -> str:
    """The text of a script of hostscripts/ (sent on stdin to a host's python3: by this
    kind, and by the qstats collector's snapshot)."""
    found = resources.files("napilab.harness.knobs.kinds").joinpath(f"hostscripts/{name}")
    return found.read_text()


# Spellings of the napi-threaded enum, matched lower-cased (YAML true reads "true").
NAPI_THREADED = {"0": "disabled", "1": "enabled", "2": "busy-poll", "disabled": "disabled",
                 "enabled": "enabled", "busy-poll": "busy-poll", "false": "disabled",
                 "true": "enabled"}


def napi_threaded(value: object) -> str:
    """netlink napi-set `threaded`: the napi-threaded enum (busy-poll since after 6.18)."""
    key = str(value).lower()
    if key not in NAPI_THREADED:
        raise values.KnobValueError(
            f"expected one of disabled, enabled, busy-poll, got {value!r}")
    return NAPI_THREADED[key]


ATTRS: dict[str, Any] = {
    "threaded": napi_threaded,
    "defer-hard-irqs": values.integer(0, values.S32_MAX),
    "gro-flush-timeout": values.integer(0, values.U64_MAX),
    "irq-suspend-timeout": values.integer(0, values.U64_MAX),
}


def _number(text: str) -> int | str:
    """A key's numeric part as a JSON number (a plan placeholder stays text)."""
    return int(text) if text.isdigit() else text


class NapiBackend(Backend):
    """Key IFINDEX/NAPI_ID/attribute (2/291/threaded)."""

    name = "napi"
    per_boot = True

    def __init__(self, transport: Any) -> None:
        super().__init__(transport)
        self._client: str | None = None  # "ynl" | "python3", found on first use

    @classmethod
    def planned(cls) -> Self:
        backend = cls(None)
        backend._client = "ynl"
        return backend

    def client(self) -> str:
        if self._client is None:
            for tool in ("ynl", "python3"):
                if self.transport.run(["which", tool], check=False).exit_code == 0:
                    self._client = tool
                    break
            else:
                raise HostError(f"per-NAPI settings are not supported on {self.host}: it "
                                "has neither ynl nor python3")
        return self._client

    def _stdin(self) -> str | None:
        return NETDEV_NL.read_text() if self.client() == "python3" else None

    def get_command(self, ifindex: str, op: str = "napi-get") -> Command:
        """A dump of `op` (napi-get, queue-get) for one interface."""
        if self.client() == "ynl":
            return Command(["ynl", "--family", "netdev", "--output-json", "--dump",
                            op, "--json", json.dumps({"ifindex": _number(ifindex)})])
        return Command([*HOST_PYTHON, "-", op, ifindex], self._stdin())

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [self.get_command(i).argv for i in sorted({k.split("/")[0] for k in keys})]

    def napi_get(self, ifindex: str, op: str = "napi-get") -> list[dict[str, object]]:
        napis = self._json(self.get_command(ifindex, op), op, ifindex)
        return [n for n in napis if isinstance(n, dict)] if isinstance(napis, list) else []

    def _json(self, command: Command, op: str, ifindex: str) -> object:
        result = self.transport.run(command.argv, check=False, stdin=command.stdin)
        if result.exit_code != 0:
            raise HostError(f"{op} ifindex {ifindex}: {result.stderr.strip()}")
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError:
            raise HostError(f"{op}: not JSON: {result.stdout[:200]!r}") from None

    def dev_get(self, ifindex: str) -> dict[str, object]:
        """The device's netdev attributes (xdp-features, xdp-zc-max-segs), 6.3+."""
        if self.client() == "ynl":
            command = Command(["ynl", "--family", "netdev", "--output-json", "--do", "dev-get",
                               "--json", json.dumps({"ifindex": _number(ifindex)})])
        else:
            command = Command([*HOST_PYTHON, "-", "dev-get", ifindex], self._stdin())
        dev = self._json(command, "dev-get", ifindex)
        return dev if isinstance(dev, dict) else {}

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        dumps: dict[str, dict[str, dict[str, object]]] = {}
        for key in keys:
            ifindex, napi_id, attr = key.split("/")
            if ifindex not in dumps:
                dumps[ifindex] = {str(n["id"]): n for n in self.napi_get(ifindex)}
            napi = dumps[ifindex].get(napi_id)
            if napi is None:
                raise Gone(f"NAPI {napi_id} of ifindex {ifindex} is gone")
            if attr not in napi:
                raise HostError(f"the kernel does not report NAPI attribute {attr!r} "
                                "(per-NAPI threaded needs 6.17+, defer/gro/irq-suspend 6.13+)")
            out[key] = str(napi[attr])
        return out

    def write_command(self, key: str, value: str) -> Command:
        _, napi_id, attr = key.split("/")
        typed: object = value if attr == "threaded" or not value.isdigit() else int(value)
        request = json.dumps({"id": _number(napi_id), attr: typed})
        if self.client() == "ynl":
            return Command(["ynl", "--family", "netdev", "--do", "napi-set", "--json", request])
        return Command([*HOST_PYTHON, "-", "napi-set", request], self._stdin())

    def write(self, key: str, value: str) -> None:
        attr = key.split("/")[2]
        command = self.write_command(key, value)
        result = self.transport.run(command.argv, check=False, stdin=command.stdin)
        if result.exit_code != 0:
            reason = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
            if attr == "threaded" and value == "busy-poll" and "range" in reason:
                reason += " (this kernel has no threaded busy-poll: it came after 6.18)"
            raise HostError(reason or f"napi-set exited {result.exit_code}")


def napi_ids(host: Session, iface: str) -> tuple[str, list[str]]:
    """The interface's ifindex and the ids of its NAPI instances."""
    path = f"/sys/class/net/{iface}/ifindex"
    ifindex = str(int(read_files(host.transport, [path])[path]))
    ids = sorted(int(str(n["id"])) for n in host.backend(NapiBackend).napi_get(ifindex))
    if not ids:
        raise HostError(f"{host.name}: {iface} has no NAPI instance (a veth needs GRO on)")
    return ifindex, [str(i) for i in ids]


def ifindex(host: Session, iface: str) -> str:
    path = f"/sys/class/net/{iface}/ifindex"
    return str(int(read_files(host.transport, [path])[path]))


def queue_napis(host: Session, iface: str) -> dict[int, list[str]]:
    """Queue index -> the ids of its NAPI instances (its rx and its tx queue's; one id
    when they share one), from netdev netlink queue-get."""
    index = ifindex(host, iface)
    try:
        listed = host.backend(NapiBackend).napi_get(index, "queue-get")
    except NapilabError as exc:
        raise HostError(f"{host.name}: the NAPIs of {iface}'s queues are unknown: "
                        f"{exc.message}", hint="naming a queue's NAPI needs netdev "
                        "netlink queue-get (Linux 6.8+)") from None
    out: dict[int, list[str]] = {}
    for queue in listed:
        if "napi-id" in queue and "id" in queue:
            ids = out.setdefault(int(str(queue["id"])), [])
            if str(queue["napi-id"]) not in ids:
                ids.append(str(queue["napi-id"]))
    if not out and listed:
        raise HostError(f"{host.name}: {iface}'s driver does not say which NAPI serves each "
                        f"of its {len(listed)} queues (netdev queue-get gives no napi-id; "
                        "vmxnet3 on 7.2 is one such driver)", hint="a per-queue NAPI "
                        "setting cannot be addressed on it: set the interface's NAPIs "
                        "(`napi: {IFACE: {...}}` without queues)")
    if not out:
        raise HostError(f"{host.name}: {iface} reports no queue with a NAPI instance "
                        "(netdev queue-get lists none: a veth needs GRO on)")
    return out


def support(host: Session, iface: str) -> str:
    """Whether the host can set NAPI attributes on `iface`, and which it reports."""
    backend = host.backend(NapiBackend)
    try:
        path = f"/sys/class/net/{iface}/ifindex"
        ifindex = str(int(host.transport.run(["cat", "--", path]).stdout))
        napis = backend.napi_get(ifindex)
    except (NapilabError, ValueError) as exc:
        return f"unavailable: {exc}"
    if not napis:
        return f"no NAPI instances on {iface} (via {backend.client()})"
    attrs = sorted({k for n in napis for k in n} - {"id", "ifindex"})
    return f"{len(napis)} NAPI(s) via {backend.client()}; attributes: {', '.join(attrs)}"


def xdp_support(host: Session, iface: str, af_xdp: str | None) -> str:
    """What the kernel says of XDP on `iface` (netdev dev-get xdp-features, 6.3+) and
    whether it has AF_XDP sockets at all (/proc/net/protocols lists XDP)."""
    sockets = {"yes": "AF_XDP sockets", "no": "no AF_XDP sockets (the kernel lists no XDP "
               "protocol: CONFIG_XDP_SOCKETS)"}.get(af_xdp or "", "AF_XDP sockets unknown")
    try:
        path = f"/sys/class/net/{iface}/ifindex"
        ifindex = str(int(host.transport.run(["cat", "--", path]).stdout))
        dev = host.backend(NapiBackend).dev_get(ifindex)
    except (NapilabError, ValueError) as exc:
        return f"{sockets}; {iface} xdp-features unknown ({exc})"
    features = dev.get("xdp-features")
    if not isinstance(features, list):
        return f"{sockets}; {iface} xdp-features not reported (kernel before 6.3)"
    if not features:
        return f"{sockets}; {iface}: no native XDP (generic mode only: AF_XDP in copy mode)"
    zc = "zero-copy offered" if "xsk-zerocopy" in features else "copy mode only"
    return f"{sockets}; {iface} xdp-features {', '.join(map(str, features))} ({zc})"


class Napi(Kind):
    name = key = "napi"
    backend = NapiBackend
    late = True  # a veth's NAPI instances exist only once GRO is on

    def attribute_names(self) -> frozenset[str]:
        return frozenset({*ATTRS, "queues"})

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        out = []
        for iface, attrs, ipath in grammar.interfaces(check, body or Node(), path):
            spelled = {k.replace("_", "-"): k for k in attrs if k != "queues"}
            for written in spelled.values():
                if written.replace("_", "-") not in ATTRS:
                    check.error(attrs.key_locations.get(written),
                                join(path, f"{iface}.{written}"),
                                f"unknown key; expected one of {sorted([*ATTRS, 'queues'])}"
                                f"{suggest(written.replace('_', '-'), ATTRS)}")
            selected = per_queue.selection(check, attrs, ipath)
            if selected == []:
                continue
            scopes = ([per_queue.Scope(iface)] if selected is None
                      else [per_queue.Scope(iface, q) for q in selected])
            for attr, convert in ATTRS.items():
                if attr in spelled:
                    value = grammar.value(check, attrs, spelled[attr], join(path, iface),
                                          convert)
                    if value is not None:
                        out += [Setting(role, self.name, s.target(attr), value,
                                        grammar.at(attrs, spelled[attr], ipath))
                                for s in scopes]
        return out

    def json_schema(self) -> js.Schema:
        # each attribute also spelt with underscores
        return js.mapping_of(js.obj({
            "queues": per_queue.QUEUES,
            **{spelling: js.spellings(NAPI_THREADED) if attr == "threaded"
               else js.converter(convert)
               for attr, convert in ATTRS.items()
               for spelling in dict.fromkeys((attr, attr.replace("-", "_")))}}),
            keys=js.IFACE_KEY)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        scope, attr = per_queue.scope(setting.target)
        iface = scope.iface
        if scope.queue is None:
            index, ids = host.find(napi_ids, iface, plan=("<ifindex>", ["<napi-id>"]))
            return [self.item(f"{index}/{i}/{attr}", f"{iface}/napi-{i}/{attr}",
                              setting.value) for i in ids]
        index = host.find(ifindex, iface, plan="<ifindex>")
        by_queue = host.find(queue_napis, iface,
                             plan={scope.queue: [f"<napi-id of queue {scope.queue}>"]})
        if scope.queue not in by_queue:
            raise HostError(f"{host.name}: {iface} has no queue {scope.queue} with a NAPI "
                            f"(its queues: {', '.join(map(str, sorted(by_queue)))})")
        return [self.item(f"{index}/{i}/{attr}",
                          f"{iface}/queue-{scope.queue}/napi-{i}/{attr}", setting.value)
                for i in by_queue[scope.queue]]

    def canonical(self, key: str, value: str) -> str:
        return value.strip()
