"""n-tuple rules of the ethtool kind: a flow steered to a queue (`ethtool -N IFACE
flow-type tcp4 dst-port 5001 action 2 [loc L]`), read back from `ethtool -n IFACE`.

An item is one flow (`eth0/-n/tcp4 dst-port 5001`); its value is `none` or the rules
that match exactly that flow, `action Q loc L` each, joined by `; `. napilab adds a rule
only for a flow that has none (a rule of someone else for the same flow would make it
unclear whose rule restore removes), and restore deletes by location exactly the rules
it added: the ones `ethtool -N` reported ("Added rule with ID N", or the `loc` given).
After a crash, `napilab restore` runs in a new session that has not seen those IDs: it
deletes the rules that match the flow, which are napilab's as the flow had none before.
Rules for other flows are never touched."""

from __future__ import annotations

from typing import Protocol

from napilab.harness.errors import HostError
from napilab.harness.knobs.kinds.ethtool import show
from napilab.runners.base import ParseError

NONE = "none"


class EthtoolBackend(Protocol):
    """What the rules ask of the ethtool backend (harness.knobs.kinds.ethtool.ethtool)."""

    @property
    def host(self) -> str: ...

    def show(self, flag: str, iface: str) -> str: ...

    def run(self, argv: list[str]) -> str: ...


def rules_of(text: str) -> dict[str, str]:
    """`ethtool -n` as {flow: `action Q loc L[; ...]`}."""
    flows: dict[str, list[str]] = {}
    for flow, action, loc in show.ntuple_rules(text):
        flows.setdefault(flow, []).append(f"action {action} loc {loc}")
    return {flow: "; ".join(rules) for flow, rules in flows.items()}


def parse_rules(value: str) -> list[tuple[str, str | None]]:
    """`action 2 loc 5; action 3` -> [("2", "5"), ("3", None)]; `none` -> []."""
    if value.strip() == NONE:
        return []
    out = []
    for rule in value.split(";"):
        words = rule.split()
        fields = dict(zip(words[::2], words[1::2], strict=False))
        out.append((fields.get("action", ""), fields.get("loc")))
    return out


def same_rules(a: str, b: str) -> bool:
    """The same queues, in order, and the same locations where both name one."""
    ra, rb = parse_rules(a), parse_rules(b)
    return len(ra) == len(rb) and all(
        qa == qb and (la is None or lb is None or la == lb)
        for (qa, la), (qb, lb) in zip(ra, rb, strict=True))


class NtupleRules:
    """The rules one host session added, by (interface, flow): their locations."""

    def __init__(self, backend: EthtoolBackend) -> None:
        self.backend = backend
        self.added: dict[tuple[str, str], list[str]] = {}

    @staticmethod
    def command(iface: str, flow: str, value: str, rule_id: str) -> list[str]:
        """`-N ... delete ID` for `none`, else the rule's insertion."""
        if value.strip() == NONE:
            return ["ethtool", "-N", iface, "delete", rule_id]
        return ["ethtool", "-N", iface, "flow-type", *flow.split(), *value.split()]

    def write(self, iface: str, flow: str, value: str) -> None:
        current = parse_rules(rules_of_safe(self.backend, iface).get(flow, NONE))
        if value.strip() == NONE:
            mine = self.added.pop((iface, flow), None)
            for _, loc in current:
                if loc is not None and (mine is None or loc in mine):
                    self.backend.run(self.command(iface, flow, value, loc))
            return
        if current:
            locs = ", ".join(loc or "?" for _, loc in current)
            raise HostError(f"{iface} has a rule for {flow} already (location {locs}); "
                            "napilab adds a rule only for a flow that has none, so that "
                            f"restore removes only its own (`ethtool -N {iface} delete "
                            f"{locs.split(',')[0]}` removes it)")
        out = self.backend.run(self.command(iface, flow, value, ""))
        loc = parse_rules(value)[0][1]
        if loc is None:
            try:
                loc = show.added_rule(out)
            except ParseError as exc:
                raise HostError(f"{iface}: {exc.message}; the rule for {flow} may be in "
                                f"place: `ethtool -n {iface}` lists it") from None
        self.added.setdefault((iface, flow), []).append(loc)


def rules_of_safe(backend: EthtoolBackend, iface: str) -> dict[str, str]:
    """The rules `ethtool -n` lists now (a parse failure is a host error naming it)."""
    text = backend.show("-n", iface)
    try:
        return rules_of(text)
    except ParseError as exc:
        raise HostError(f"{backend.host}: `ethtool -n {iface}`: {exc.message}") from None
