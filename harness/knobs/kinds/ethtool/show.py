"""Pure parsers of what ethtool prints for the ring, RSS, n-tuple and private-flag
settings (`-g`, `-x`, `-n`, `--show-priv-flags`, and `-N`'s "Added rule with ID N"), and
the RSS indirection table arithmetic of `ethtool -X equal N | weight W...`.

Every parser is tested against captured or source-derived outputs under
tests/data/ethtool/ (tests/unit/test_ethtool_groups.py). Formats, from ethtool's source:
- `-g` (netlink/rings.c, ethtool >= 5.9): a "Current hardware settings:" block of
  `Label:<tabs>value` lines; a value the driver does not report is `n/a`.
- `-x` (common.c print_indir_table, the same in the ioctl and the netlink paths):
  "RX flow hash indirection table for IFACE with N RX ring(s):", rows of 8 entries
  `%5u: ` + ` %5u`..., then "RSS hash key:" and "RSS hash function:" with one
  `    NAME: on|off` line per function the kernel knows (or "Operation not supported").
- `-n` (rxclass.c): "N RX rings available", "Total N rules", then per rule a
  "Filter: LOC" block; a field the rule does not match prints the mask of all ones.
- `--show-priv-flags` (netlink/privflags.c): "Private flags for IFACE:" then
  `%-*s: on|off`.
"""

from __future__ import annotations

import re

from napilab.runners.base import ParseError

TOOL = "ethtool"

# -g's labels and the names -G takes (ethtool 6.1 .. 6.14 rings.c)
RING_LABELS = {
    "RX": "rx", "RX Mini": "rx-mini", "RX Jumbo": "rx-jumbo", "TX": "tx",
    "RX Buf Len": "rx-buf-len", "CQE Size": "cqe-size", "TX Push": "tx-push",
    "RX Push": "rx-push", "TX push buff len": "tx-push-buf-len",
    "TCP data split": "tcp-data-split",
}
NOT_REPORTED = "n/a"


def rings(text: str) -> dict[str, str]:
    """The current ring settings by -G's names; a setting the driver lacks is `n/a`."""
    head, sep, current = text.partition("Current hardware settings:")
    if not sep or not head.startswith("Ring parameters for "):
        raise ParseError(TOOL, "no `Current hardware settings:` block of `ethtool -g`", text)
    found = {}
    for line in current.splitlines():
        label, colon, value = line.partition(":")
        if not colon or not line.strip():
            continue
        name = RING_LABELS.get(label.strip())
        if name is None:
            continue  # a label of a newer ethtool: settable only once napilab knows it
        found[name] = value.strip()
    if "rx" not in found:
        raise ParseError(TOOL, "`ethtool -g` shows no current RX ring size", text)
    return found


_INDIR_HEAD = re.compile(r"RX flow hash indirection table for \S+ with (\d+) RX ring\(s\):")
_INDIR_ROW = re.compile(r"\s*(\d+):((?:\s+\d+)+)\s*")


def rss(text: str) -> dict[str, str]:
    """`rings` (the RX rings the driver reports), `indir` (the table, entries separated
    by one space) and `hfunc` (the function that is on, or `n/a` when the driver does
    not say)."""
    lines = text.splitlines()
    head = _INDIR_HEAD.fullmatch(lines[0].strip()) if lines else None
    if head is None:
        raise ParseError(TOOL, "no indirection table heading of `ethtool -x`", text)
    table: list[str] = []
    rest = iter(lines[1:])
    for line in rest:
        row = _INDIR_ROW.fullmatch(line)
        if row is None:
            break
        if int(row.group(1)) != len(table):
            raise ParseError(TOOL, f"indirection table row {row.group(1)} follows "
                             f"{len(table)} entries", line)
        table += row.group(2).split()
    else:
        line = ""
    if line.strip() == "Operation not supported" or not table:
        raise ParseError(TOOL, "the driver shows no RSS indirection table", text)
    hfuncs: dict[str, str] = {}
    in_hfunc = False
    for line in rest:
        if not line.startswith(" "):
            in_hfunc = line.strip() == "RSS hash function:"
            continue
        name, colon, state = line.strip().partition(": ")
        if in_hfunc and colon and state in ("on", "off"):
            hfuncs[name] = state
    on = [name for name, state in hfuncs.items() if state == "on"]
    return {"rings": head.group(1), "indir": " ".join(table),
            "hfunc": on[0] if len(on) == 1 else NOT_REPORTED}


def equal_table(size: int, queues: int, start: int = 0) -> list[int]:
    """`ethtool -X equal N [start K]`: entry i is K + i mod N (ethtool.c fill_indir_table)."""
    return [start + i % queues for i in range(size)]


def weight_table(size: int, weights: list[int], start: int = 0) -> list[int]:
    """`ethtool -X weight W0 W1...`: queue j gets a contiguous share of the entries in
    proportion to Wj (ethtool.c fill_indir_table: entry i goes to the first j with
    i < size * (W0 + ... + Wj) / sum, integer division)."""
    total = sum(weights)
    table, partial, j = [], 0, -1
    for i in range(size):
        while i >= size * partial // total:
            j += 1
            partial += weights[j]
        table.append(start + j)
    return table


def table_spec(table: list[int]) -> list[str] | None:
    """The shortest `ethtool -X` arguments that write `table` back exactly (`equal N`,
    `weight W...`, with `start K` when the first queue is not 0), or None when neither
    form gives this table (it was written by another tool: ethtool cannot restore it)."""
    low, high = min(table), max(table)
    start = ["start", str(low)] if low else []
    queues = high - low + 1
    if table == equal_table(len(table), queues, low):
        return ["equal", str(queues), *start]
    weights = [table.count(q) for q in range(low, high + 1)]
    if table == weight_table(len(table), weights, low):
        return ["weight", *map(str, weights), *start]
    return None


def spec_table(spec: str, size: int) -> list[int] | None:
    """The table an `equal N` / `weight W...` request gives a table of `size` entries;
    None for a table of numbers (already a table) or a request that fits no table."""
    words = spec.split()
    if not words or words[0] not in ("equal", "weight"):
        return None
    start = 0
    if "start" in words:
        start = int(words[words.index("start") + 1])
        words = words[:words.index("start")]
    numbers = [int(w) for w in words[1:]]
    if words[0] == "equal":
        return equal_table(size, numbers[0], start)
    if not 0 < sum(numbers) <= size:
        return None  # ethtool refuses: "Total weight exceeds the size of the table"
    return weight_table(size, numbers, start)


# --- n-tuple rules (-n, -N) ----------------------------------------------------------

RULE_TYPES = {"TCP over IPv4": "tcp4", "UDP over IPv4": "udp4", "SCTP over IPv4": "sctp4",
              "TCP over IPv6": "tcp6", "UDP over IPv6": "udp6", "SCTP over IPv6": "sctp6"}
# -n's field labels and -N's words for them; a field whose mask is all ones is not matched
_FIELDS = {"Src IP addr": "src-ip", "Dest IP addr": "dst-ip", "Src port": "src-port",
           "Dest port": "dst-port"}
_FIELD_ORDER = ("src-ip", "dst-ip", "src-port", "dst-port")
_ANY_MASKS = ("255.255.255.255", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "0xffff")


def flow_key(flow_type: str, fields: dict[str, str]) -> str:
    """A flow as napilab names it, in -N's words and a fixed order (`tcp4 dst-port 5001`)."""
    return " ".join([flow_type, *(f"{f} {fields[f]}" for f in _FIELD_ORDER if f in fields)])


def ntuple_rules(text: str) -> list[tuple[str, str, str]]:
    """Each rule of `ethtool -n` as (flow, action, location); the action is the queue
    (`Direct to queue N`) or `drop`; a rule of another kind (raw IP, ether, a VLAN or
    user-def match) is kept with flow `other ...` so no napilab flow ever matches it."""
    total = re.search(r"^Total (\d+) rules$", text, re.M)
    if total is None:
        raise ParseError(TOOL, "no `Total N rules` line of `ethtool -n`", text)
    rules = []
    for block in re.split(r"^(?=Filter: )", text, flags=re.M)[1:]:
        lines = block.splitlines()
        loc = lines[0].removeprefix("Filter: ").strip()
        flow_type, fields, action, other = "", {}, "", False
        for line in lines[1:]:
            label, _, value = line.strip().partition(": ")
            if label == "Rule Type":
                flow_type = RULE_TYPES.get(value, "")
                other = other or not flow_type
            elif label in _FIELDS:
                match, _, mask = value.partition(" mask: ")
                if mask.lower() not in _ANY_MASKS:
                    fields[_FIELDS[label]] = match
            elif label in ("TOS", "Traffic Class"):
                other = other or value.partition(" mask: ")[2] != "0xff"
            elif label == "Action":
                queue = re.fullmatch(r"Direct to queue (\d+)", value)
                action = queue.group(1) if queue else "drop" if value == "Drop" else value
            elif label in ("VLAN EtherType", "VLAN", "User-defined", "Dest MAC addr",
                           "Flow Type", "Protocol", "L4 bytes", "SPI", "RSS Context ID"):
                other = True
        if not loc.isdigit() or not action:
            raise ParseError(TOOL, "a rule without a location or an action", block)
        flow = flow_key(flow_type, fields)
        rules.append((f"other {loc}" if other else flow, action, loc))
    if len(rules) != int(total.group(1)):
        raise ParseError(TOOL, f"`Total {total.group(1)} rules` but {len(rules)} listed", text)
    return rules


def added_rule(text: str) -> str:
    """The location `ethtool -N ... ` chose (its "Added rule with ID N" line)."""
    found = re.search(r"^Added rule with ID (\d+)$", text, re.M)
    if found is None:
        raise ParseError(TOOL, "no `Added rule with ID N` from `ethtool -N`", text)
    return found.group(1)


# --- private flags -------------------------------------------------------------------

def priv_flags(text: str) -> dict[str, str]:
    """`--show-priv-flags`: each flag's on or off."""
    head, sep, body = text.partition(":\n")
    if not sep or not head.startswith("Private flags for "):
        raise ParseError(TOOL, "no `Private flags for IFACE:` heading", text)
    found = {}
    for line in body.splitlines():
        name, colon, state = line.rpartition(":")
        if not colon or state.strip() not in ("on", "off"):
            raise ParseError(TOOL, "a private flag line that is not `NAME: on|off`", line)
        found[name.strip()] = state.strip()
    return found
