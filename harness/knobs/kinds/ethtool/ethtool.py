"""`ethtool: {IFACE: {coalesce: {rx-usecs: 0}, channels: {combined: 4}, features: {gro: on},
rings: {rx: 1024}, rss: {equal: 4}, ntuple: [{flow-type: tcp4, dst-port: 5001, action:
1}], priv-flags: {legacy-rx: on}}}`: ethtool -C / -L / -K / -G / -X / -N /
--set-priv-flags, read back with -c / -l / -k / -g / -x / -n / --show-priv-flags.
Channels decide which queues and NAPI instances exist, so ethtool is applied before the
kinds that follow them, and within it channels before rings, rss and ntuple."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence

from napilab.harness.errors import HostError
from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.backend import Backend, Command
from napilab.harness.knobs.kind import ORIGINAL, Item, Kind, Lookup, Setting, Verdict
from napilab.harness.knobs.kinds.ethtool import grammar as eg
from napilab.harness.knobs.kinds.ethtool import show
from napilab.harness.knobs.kinds.ethtool.ntuple import NtupleRules, rules_of, same_rules
from napilab.runners.base import ParseError

GROUPS = ("coalesce", "channels", "features", "rings", "rss", "ntuple", "priv-flags")
FLAGS = {"coalesce": "-c", "channels": "-l", "features": "-k", "rings": "-g", "rss": "-x",
         "ntuple": "-n", "priv-flags": "--show-priv-flags"}
_WRITE = {"-c": "-C", "-l": "-L", "-k": "-K", "-g": "-G", "--show-priv-flags":
          "--set-priv-flags"}
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
FEATURE_NAMES = {
    "gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload", "lro": "large-receive-offload",
    "rx": "rx-checksumming", "tx": "tx-checksumming", "sg": "scatter-gather",
    "rxhash": "receive-hashing", "ntuple": "ntuple-filters", "rxvlan": "rx-vlan-offload",
    "txvlan": "tx-vlan-offload", "rx-gro-hw": "rx-gro-hw", "rx-gro-list": "rx-gro-list",
}
_PARSERS: dict[str, Callable[[str], dict[str, str]]] = {
    "-g": show.rings, "-x": show.rss, "--show-priv-flags": show.priv_flags}
_TABLE = re.compile(r"\d+( \d+)*")
_LACKS = ("the interface's driver does not offer this setting (`ethtool -i IFACE` names "
          "the driver); leave it out of the profile for this host")


class EthtoolBackend(Backend):
    """Key IFACE/FLAG/name (eth0/-c/rx-usecs, eth0/-k/generic-receive-offload, eth0/-g/rx,
    eth0/-x/indir, eth0/-x/hfunc, eth0/-n/tcp4 dst-port 5001, eth0/--show-priv-flags/NAME).
    The RSS table is its entries separated by spaces; an n-tuple flow's value is `none` or
    its rules, `action Q loc L` each (harness.knobs.kinds.ethtool.ntuple)."""

    name = "ethtool"

    def __init__(self, transport: object) -> None:
        super().__init__(transport)  # type: ignore[arg-type]
        self.ntuple = NtupleRules(self)

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        shows = dict.fromkeys((k.split("/")[1], k.split("/")[0]) for k in keys)
        return [["ethtool", flag, iface] for flag, iface in shows]

    def show(self, flag: str, iface: str) -> str:
        """What `ethtool FLAG IFACE` prints; its failure names the host, the command and
        what ethtool said."""
        argv = ["ethtool", flag, iface]
        result = self.transport.run(argv, check=False)
        if result.exit_code != 0:
            said = " ".join((result.stderr.strip() or result.stdout.strip()).split("\n"))
            raise HostError(f"{self.host}: `{shlex.join(argv)}` failed: {said}", hint=_LACKS)
        return result.stdout

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        shown: dict[tuple[str, str], dict[str, str]] = {}
        for key in keys:
            iface, flag, name = key.split("/", 2)
            if (iface, flag) not in shown:
                text = self.show(flag, iface)
                try:
                    shown[(iface, flag)] = _parse(flag, text)
                except ParseError as exc:
                    raise HostError(f"{self.host}: `ethtool {flag} {iface}`: {exc.message}",
                                    hint=_LACKS) from None
            found = shown[(iface, flag)]
            if flag == "-n":
                out[key] = found.get(name, "none")
                continue
            if found.get(name, show.NOT_REPORTED) == show.NOT_REPORTED:
                raise HostError(f"{self.host}: `ethtool {flag} {iface}` shows no {name!r} "
                                f"(n/a or absent); it shows {sorted(found)[:12]}", hint=_LACKS)
            if name == "indir" and show.table_spec(_numbers(found[name])) is None:
                raise HostError(f"{self.host}: {iface}'s RSS indirection table "
                                f"({found[name][:60]}...) is not one `ethtool -X equal` or "
                                "`weight` can write back, so napilab cannot restore it",
                                hint="set it with `ethtool -X IFACE equal N` or `weight ...` "
                                "(or `default`) first")
            out[key] = found[name]
        return out

    def write_command(self, key: str, value: str) -> Command:
        iface, flag, name = key.split("/", 2)
        if flag == "-n":
            return Command(self.ntuple.command(iface, name, value, "<rule-id>"))
        if flag == "-x":
            words = value.split()
            if name == "indir" and _TABLE.fullmatch(value):
                words = show.table_spec(_numbers(value)) or ["<not-writable>"]
            elif name == "indir" and value == ORIGINAL:  # `napilab plan`
                words = ["<equal-or-weight-of-the-original-table>"]
            return Command(["ethtool", "-X", iface, *(words if name == "indir"
                                                      else [name, value])])
        return Command(["ethtool", _WRITE[flag], iface, name, value])

    def write(self, key: str, value: str) -> None:
        iface, flag, name = key.split("/", 2)
        if flag == "-n":
            self.ntuple.write(iface, name, value)
            return
        self.run(self.write_command(key, value).argv)

    def run(self, argv: list[str]) -> str:
        """A write; its failure says the command and ethtool's words (settings adds the
        host and the item)."""
        result = self.transport.run(argv, check=False)
        if result.exit_code != 0:
            said = "; ".join(ln.strip() for ln in (result.stderr or result.stdout)
                             .strip().splitlines() if ln.strip()) or f"exit {result.exit_code}"
            raise HostError(f"`{shlex.join(argv)}`: {said}")
        return result.stdout


def _parse(flag: str, text: str) -> dict[str, str]:
    if flag == "-n":
        return rules_of(text)
    parser = _PARSERS.get(flag)
    return parser(text) if parser else parse_ethtool(flag, text)


def _numbers(table: str) -> list[int]:
    return [int(n) for n in table.split()]


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

    def attribute_names(self) -> frozenset[str]:
        return frozenset(GROUPS)

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        out = []
        for iface, groups, _ in grammar.interfaces(check, body or Node(), path):
            check.keys(groups, join(path, iface), GROUPS)
            for group in GROUPS:
                if group not in groups:
                    continue
                gpath = join(path, f"{iface}.{group}")
                out += [Setting(role, self.name, f"{iface}/{group}/{name}", value)
                        for name, value in self._group(check, groups, group, gpath)]
        return out

    def _group(self, check: Checker, groups: Node, group: str, path: str
               ) -> list[tuple[str, str]]:
        if group == "ntuple":
            return eg.ntuple(check, groups[group], groups.where(group), path)
        names = check.mapping(groups.get(group), groups.where(group), path)
        if names is None:
            return []
        if group in ("rings", "rss", "priv-flags"):
            parse = {"rings": eg.rings, "rss": eg.rss, "priv-flags": eg.priv_flags}[group]
            return parse(check, names, path)
        out = []
        for name, value in names.items():
            if not _NAME.fullmatch(name):
                check.error(names.key_locations.get(name), join(path, name),
                            "not an ethtool name")
                continue
            text = _value(group, value)
            if text is None:
                expected = {"features": "on or off", "channels": "an integer"}.get(
                    group, "an integer, or on or off")
                check.error(names.where(name), join(path, name),
                            f"expected {expected}, got {value!r}")
                continue
            out.append((name, text))
        return out

    def json_schema(self) -> js.Schema:
        on_off = {"enum": ["on", "off", True, False]}
        name = js.regex(_NAME)
        return js.mapping_of(js.obj({
            "coalesce": js.mapping_of(js.leaf({"anyOf": [{"type": "integer", "minimum": 0},
                                                         on_off]}), keys=name),
            "channels": js.mapping_of(js.leaf({"type": "integer", "minimum": 0}), keys=name),
            "features": js.mapping_of(js.leaf(on_off), keys=name),
            **eg.json_schemas()}), keys=js.IFACE_KEY)

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        iface, group, name = setting.target.split("/", 2)
        if group == "features":
            name = FEATURE_NAMES.get(name, name)
        return [self.item(f"{iface}/{FLAGS[group]}/{name}", setting.target, setting.value)]

    def canonical(self, key: str, value: str) -> str:
        """ethtool prints a value's first word (`on [fixed]` reads as `on`); an RSS table
        and n-tuple rules are compared whole (`same`)."""
        if "/-x/indir" in key or "/-n/" in key:
            return " ".join(value.split())
        words = value.split()
        return words[0] if words else value

    def same(self, key: str, a: str, b: str) -> bool:
        """An RSS request (`equal 4`) is the table it gives at the size of the table it
        is compared with; n-tuple rules compare by queue, and by location where both
        name one (the driver picks it when the profile does not)."""
        if "/-n/" in key:
            return same_rules(a, b)
        if "/-x/indir" in key:
            return _as_table(a, b) == _as_table(b, a)
        return super().same(key, a, b)

    def verdict(self, key: str, requested: str, effective: str) -> Verdict:
        if "/-x/indir" in key or "/-n/" in key:
            state = "taken" if self.same(key, requested, effective) else "mismatch"
            return Verdict(state, self.canonical(key, requested),
                           self.canonical(key, effective))
        return super().verdict(key, requested, effective)

    def plan_original(self, item: Item) -> str:
        """n-tuple: restore deletes the rule napilab added (the flow had none)."""
        return "none" if "/-n/" in item.key else super().plan_original(item)

    def shown(self, value: str) -> str:
        """An RSS table as the `ethtool -X` arguments that write it, with its size."""
        if _TABLE.fullmatch(value) and value.count(" ") >= 7:
            spec = show.table_spec(_numbers(value))
            return f"{' '.join(spec or ['table'])} ({value.count(' ') + 1} entries)"
        return value


def _as_table(value: str, other: str) -> str:
    """`value` as a table of the size of `other` when value is a request and other a
    table; else value itself."""
    if _TABLE.fullmatch(other.strip()) and not _TABLE.fullmatch(value.strip()):
        table = show.spec_table(value, len(other.split()))
        return " ".join(map(str, table)) if table is not None else value
    return " ".join(value.split())
