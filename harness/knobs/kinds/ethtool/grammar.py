"""The profile grammar of ethtool's `rings`, `rss`, `ntuple` and `priv-flags` groups
(harness.knobs.kinds.ethtool.ethtool): each group's mapping (or, for ntuple, list of rules) into
(name, value) pairs in ethtool's own words, every problem recorded at its file:line with
the allowed keys or values named."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.kinds.ethtool import show

SWITCH = {True: "on", False: "off", "on": "on", "off": "off"}
# -G's settings: a ring size (an integer) or a switch
RING_SIZES = ("rx", "rx-mini", "rx-jumbo", "tx", "rx-buf-len", "cqe-size", "tx-push-buf-len")
RING_SWITCHES = ("tx-push", "rx-push", "tcp-data-split")
HFUNCS = ("toeplitz", "xor", "crc32")  # the kernel's ETH_SS_RSS_HASH_FUNCS names
RSS_KEYS = ("equal", "weight", "start", "hfunc")
FLOW_TYPES = ("tcp4", "udp4", "sctp4", "tcp6", "udp6", "sctp6")
RULE_KEYS = ("flow-type", "src-ip", "dst-ip", "src-port", "dst-port", "action", "loc")
PRIV_FLAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")  # ETH_GSTRING_LEN is 32
_U32 = 2**32 - 1


def _integer(check: Checker, node: Node, key: str, path: str, low: int, high: int
             ) -> int | None:
    value = node[key]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        check.error(node.where(key), join(path, key),
                    f"expected an integer {low}..{high}, got {value!r}")
        return None
    return value


def rings(check: Checker, node: Node, path: str) -> list[tuple[str, str]]:
    """`rings: {rx: 1024, tx: 512, tx-push: on}`."""
    check.keys(node, path, (*RING_SIZES, *RING_SWITCHES))
    out = []
    for name in (*RING_SIZES, *RING_SWITCHES):
        if name not in node:
            continue
        if name in RING_SWITCHES:
            text = SWITCH.get(node[name]) if isinstance(node[name], bool | str) else None
            if text is None:
                check.error(node.where(name), join(path, name),
                            f"expected on or off, got {node[name]!r}")
                continue
        else:
            number = _integer(check, node, name, path, 0, _U32)
            if number is None:
                continue
            text = str(number)
        out.append((name, text))
    return out


def rss(check: Checker, node: Node, path: str) -> list[tuple[str, str]]:
    """`rss: {equal: 4}` or `{weight: [1, 1, 2, 0], start: 0}`, and `hfunc: toeplitz`:
    (`indir`, the -X arguments) and (`hfunc`, the function)."""
    check.keys(node, path, RSS_KEYS)
    out = []
    spec: list[str] = []
    if "equal" in node and "weight" in node:
        check.error(node.key_locations.get("weight"), join(path, "weight"),
                    "give either equal or weight, not both")
    elif "equal" in node:
        queues = _integer(check, node, "equal", path, 1, 4096)
        spec = ["equal", str(queues)] if queues else []
    elif "weight" in node:
        spec = _weights(check, node, path)
    if "start" in node:
        start = _integer(check, node, "start", path, 0, 4095)
        if not ("equal" in node or "weight" in node):
            check.error(node.key_locations.get("start"), join(path, "start"),
                        "start shifts an equal or weight table: give one of them")
        elif start and spec:
            spec += ["start", str(start)]
    if spec:
        out.append(("indir", " ".join(spec)))
    if "hfunc" in node:
        hfunc = check.choice(node, "hfunc", path, HFUNCS)
        if hfunc:
            out.append(("hfunc", hfunc))
    return out


def _weights(check: Checker, node: Node, path: str) -> list[str]:
    weights = node["weight"]
    ok = isinstance(weights, list) and weights and all(
        isinstance(w, int) and not isinstance(w, bool) and 0 <= w <= 65535 for w in weights)
    if not ok:
        check.error(node.where("weight"), join(path, "weight"),
                    f"expected a list of integers 0..65535 (one per RX queue), got {weights!r}")
        return []
    if not any(weights):
        check.error(node.where("weight"), join(path, "weight"),
                    "at least one weight must be non-zero")
        return []
    return ["weight", *map(str, weights)]


def ntuple(check: Checker, raw: Any, where: Any, path: str) -> list[tuple[str, str]]:
    """`ntuple: [{flow-type: tcp4, dst-port: 5001, action: 2}, ...]`: (flow, `action Q
    [loc L]`) per rule, the flow in -N's words (`tcp4 dst-port 5001`)."""
    if not isinstance(raw, list):
        check.error(where, path, "expected a list of rules like {flow-type: tcp4, dst-port: "
                    "5001, action: 1}")
        return []
    out: list[tuple[str, str]] = []
    for index, rule in enumerate(raw):
        at = join(path, index)
        located = raw.item_locations[index] if isinstance(raw, Seq) else where
        node = check.mapping(rule, located, at)
        if node is None:
            continue
        check.keys(node, at, RULE_KEYS, required=("flow-type", "action"))
        if "flow-type" not in node or "action" not in node:
            continue
        found = _rule(check, node, at)
        if found is None:
            continue
        if found[0] in [flow for flow, _ in out]:
            check.error(node.location, at, f"a second rule for {found[0]}")
            continue
        out.append(found)
    return out


def _rule(check: Checker, node: Node, path: str) -> tuple[str, str] | None:
    flow_type = check.choice(node, "flow-type", path, FLOW_TYPES)
    fields: dict[str, str] = {}
    ok = flow_type is not None
    for key in ("src-ip", "dst-ip"):
        if key in node:
            try:
                address = ipaddress.ip_address(str(node[key]))
            except ValueError:
                address = None
            family = 6 if (flow_type or "").endswith("6") else 4
            if address is None or address.version != family:
                check.error(node.where(key), join(path, key),
                            f"expected an IPv{family} address, got {node[key]!r}")
                ok = False
                continue
            fields[key] = str(address)
    for key in ("src-port", "dst-port"):
        if key in node:
            port = _integer(check, node, key, path, 0, 65535)
            ok = ok and port is not None
            fields[key] = str(port)
    queue = _integer(check, node, "action", path, 0, 4095)
    loc = _integer(check, node, "loc", path, 0, _U32 - 1) if "loc" in node else None
    if not ok or queue is None or ("loc" in node and loc is None) or flow_type is None:
        return None
    action = f"action {queue}" + (f" loc {loc}" if loc is not None else "")
    return show.flow_key(flow_type, fields), action


def priv_flags(check: Checker, node: Node, path: str) -> list[tuple[str, str]]:
    """`priv-flags: {legacy-rx: on}`: the driver's own flag names."""
    out = []
    for name, value in node.items():
        if not PRIV_FLAG.fullmatch(name):
            check.error(node.key_locations.get(name), join(path, name),
                        "not a private flag name (letters, digits, - _ .; at most 32)")
            continue
        text = SWITCH.get(value) if isinstance(value, bool | str) else None
        if text is None:
            check.error(node.where(name), join(path, name), f"expected on or off, got {value!r}")
            continue
        out.append((name, text))
    return out


def json_schemas() -> dict[str, js.Schema]:
    """The JSON Schema of each group, for `napilab schema` and editors."""
    on_off = js.leaf({"enum": ["on", "off", True, False]})
    size = js.leaf({"type": "integer", "minimum": 0, "maximum": _U32})
    port = {"type": "integer", "minimum": 0, "maximum": 65535}
    return {
        "rings": js.obj({**{n: size for n in RING_SIZES}, **{n: on_off for n in RING_SWITCHES}}),
        "rss": js.obj({
            "equal": js.leaf({"type": "integer", "minimum": 1, "maximum": 4096}),
            "weight": {"type": "array", "minItems": 1,
                       "items": {"type": "integer", "minimum": 0, "maximum": 65535}},
            "start": js.leaf({"type": "integer", "minimum": 0, "maximum": 4095}),
            "hfunc": {"enum": list(HFUNCS)}}),
        "ntuple": {"type": "array", "items": js.obj({
            "flow-type": {"enum": list(FLOW_TYPES)}, "src-ip": js.STRING,
            "dst-ip": js.STRING, "src-port": port, "dst-port": port,
            "action": {"type": "integer", "minimum": 0, "maximum": 4095},
            "loc": {"type": "integer", "minimum": 0}}, required=("flow-type", "action"))},
        "priv-flags": js.mapping_of(on_off, keys=js.regex(PRIV_FLAG)),
    }
