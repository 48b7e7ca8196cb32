"""`ethtool: {IFACE: {coalesce: {rx-usecs: 0}, channels: {combined: 1}, features: {gro:
on}}}`: ethtool -C / -L / -K, read back with -c / -l / -k. Channels decide which queues
and NAPI instances exist, so ethtool is applied before the kinds that follow them."""

from __future__ import annotations

import re
from collections.abc import Sequence

from napilab.harness.authoring import json_parts as js
from napilab.harness.errors import HostError
from napilab.harness.knobs import grammar
from napilab.harness.knobs.backend import Backend, Command
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting
from napilab.harness.profile.schema import Checker, join
from napilab.harness.profile.yamlsrc import Node

GROUPS = ("coalesce", "channels", "features")
FLAGS = {"coalesce": "-c", "channels": "-l", "features": "-k"}
_WRITE = {"-c": "-C", "-l": "-L", "-k": "-K"}
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
FEATURE_NAMES = {
    "gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload", "lro": "large-receive-offload",
    "rx": "rx-checksumming", "tx": "tx-checksumming", "sg": "scatter-gather",
    "rxhash": "receive-hashing", "ntuple": "ntuple-filters", "rxvlan": "rx-vlan-offload",
    "txvlan": "tx-vlan-offload", "rx-gro-hw": "rx-gro-hw", "rx-gro-list": "rx-gro-list",
}


class EthtoolBackend(Backend):
    """Key IFACE/FLAG/name (eth0/-c/rx-usecs, eth0/-k/generic-receive-offload)."""

    name = "ethtool"

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        shows = dict.fromkeys((k.split("/")[1], k.split("/")[0]) for k in keys)
        return [["ethtool", flag, iface] for flag, iface in shows]

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        shown: dict[tuple[str, str], dict[str, str]] = {}
        for key in keys:
            iface, flag, name = key.split("/")
            if (iface, flag) not in shown:
                result = self.transport.run(["ethtool", flag, iface], check=False)
                if result.exit_code != 0:
                    detail = result.stderr.strip() or result.stdout.strip()
                    raise HostError(f"`ethtool {flag} {iface}`: {detail}")
                shown[(iface, flag)] = parse_ethtool(flag, result.stdout)
            found = shown[(iface, flag)]
            if name not in found:
                raise HostError(f"`ethtool {flag} {iface}` shows no {name!r}; it shows "
                                f"{sorted(found)[:12]}")
            out[key] = found[name]
        return out

    def write_command(self, key: str, value: str) -> Command:
        iface, flag, name = key.split("/")
        return Command(["ethtool", _WRITE[flag], iface, name, value])


def parse_ethtool(flag: str, text: str) -> dict[str, str]:
    """`name: value` lines; for -l only the "Current hardware settings" block, for -k
    the value without `[fixed]`/`[requested on]` notes."""
    if flag == "-l":
        _, _, text = text.partition("Current hardware settings:")
    found = {}
    for line in text.splitlines():
        adaptive = re.match(r"Adaptive RX: (\S+)\s+TX: (\S+)", line.strip())
        if flag == "-c" and adaptive:  # -C takes adaptive-rx / adaptive-tx
            found["adaptive-rx"], found["adaptive-tx"] = adaptive.groups()
            continue
        name, sep, value = line.strip().partition(":")
        if sep and value.strip() and " " not in name:
            # -l prints "RX:", -L takes "rx"
            found[name.lower() if flag == "-l" else name] = value.strip().split(" [")[0].split()[0]
    return found


def _value(group: str, value: object) -> str | None:
    """features: on/off; coalesce: integers, or on/off (adaptive-rx); channels: integers."""
    switches = {True: "on", False: "off", "on": "on", "off": "off"}
    if group != "channels" and isinstance(value, bool | str):
        return switches.get(value)
    if group == "features" or isinstance(value, bool) or not isinstance(value, int):
        return None
    return str(value) if value >= 0 else None


class Ethtool(Kind):
    name = key = "ethtool"
    backend = EthtoolBackend
    changes_queues = True

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        out = []
        for iface, groups, _ in grammar.interfaces(check, body or Node(), path):
            check.keys(groups, join(path, iface), GROUPS)
            for group in GROUPS:
                names = check.mapping(groups.get(group), groups.where(group),
                                      join(path, f"{iface}.{group}")) if group in groups else None
                for name, value in (names or Node()).items():
                    assert names is not None
                    where, key_path = names.where(name), join(path, f"{iface}.{group}.{name}")
                    if not _NAME.fullmatch(name):
                        check.error(names.key_locations.get(name), key_path,
                                    "not an ethtool name")
                        continue
                    text = _value(group, value)
                    if text is None:
                        expected = {"features": "on or off", "channels": "an integer"}.get(
                            group, "an integer, or on or off")
                        check.error(where, key_path, f"expected {expected}, got {value!r}")
                        continue
                    out.append(Setting(role, self.name, f"{iface}/{group}/{name}", text))
        return out

    def json_schema(self) -> js.Schema:
        on_off = {"enum": ["on", "off", True, False]}
        name = js.regex(_NAME)
        return js.mapping_of(js.obj({
            "coalesce": js.mapping_of(js.leaf({"anyOf": [{"type": "integer", "minimum": 0},
                                                         on_off]}), keys=name),
            "channels": js.mapping_of(js.leaf({"type": "integer", "minimum": 0}), keys=name),
            "features": js.mapping_of(js.leaf(on_off), keys=name)}), keys=js.IFACE_KEY)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        iface, group, name = setting.target.split("/")
        if group == "features":
            name = FEATURE_NAMES.get(name, name)
        return [self.item(f"{iface}/{FLAGS[group]}/{name}", setting.target, setting.value)]

    def canonical(self, key: str, value: str) -> str:
        """ethtool prints a value's first word (`on [fixed]` reads as `on`)."""
        words = value.split()
        return words[0] if words else value
