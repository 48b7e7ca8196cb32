"""The opening of `napilab plan` (all of it with `--summary`): where each host really is
(the SSH endpoint ssh_config resolves to: HostName, port, user, ProxyJump chain or
ProxyCommand) and what each variant changes, per host, against the variant it is
compared with: settings written, changed or left alone, workload and collector
differences. Settings every variant writes alike are listed once. Nothing connects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from napilab.harness.profile.plan import Plan
from napilab.harness.profile.profile import Variant
from napilab.harness.transport import ssh_config

Value = str | tuple[str, ...]  # a list (an argv, a wrapper) stays a list of words


@dataclass(frozen=True)
class Change:
    host: str  # a host name, or "" for what is not one host's (tool, duration)
    what: str  # "sysctl net.core.busy_poll", "workload client.args.R", ...
    old: Value | None  # in the variant compared with; None: not set there
    new: Value | None  # in this variant; None: not set (the host keeps its own value)

    def text(self) -> str:
        if self.old is None:
            return f"+ {self.what} = {_show(self.new)}"
        if self.new is None:
            keeps = "; the host keeps its own value" if _is_setting(self.what) else ""
            return f"- {self.what} (was {_show(self.old)}{keeps})"
        if isinstance(self.old, tuple) and isinstance(self.new, tuple):
            return f"~ {self.what}: {_words_diff(self.old, self.new)}"
        return f"~ {self.what}: {_show(self.old)} -> {_show(self.new)}"


def _is_setting(what: str) -> bool:
    return not what.startswith(("workload ", "collect "))


def _show(value: Value | None) -> str:
    if isinstance(value, tuple):
        return " ".join(value)
    return "none" if value == "" else str(value)


def _words_diff(old: tuple[str, ...], new: tuple[str, ...]) -> str:
    """Only the words that differ, after the option they belong to when a value changed:
    `-q 5 -> -q 20`, `+ -B -b 8`, `--main-lcore=1 -> --main-lcore=0`."""
    out = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        first = (old[i1:i2] or new[j1:j2])[0]
        before = old[i1 - 1:i1] if not first.startswith("-") else ()
        was, now = " ".join((*before, *old[i1:i2])), " ".join((*before, *new[j1:j2]))
        out.append({"replace": f"{was} -> {now}", "delete": f"- {was}",
                    "insert": f"+ {now}"}[tag])
    return "; ".join(out)


def endpoint(plan: Plan, name: str) -> dict[str, Any]:
    """Where commands for host NAME run: local (in a namespace), or the SSH endpoint
    after ssh_config (the hops of a ProxyJump chain first)."""
    host = plan.hosts[name]
    out: dict[str, Any] = {"transport": host.transport}
    if host.become:
        out["become"] = host.become
    if host.transport == "local":
        return out | ({"netns": host.netns} if host.netns else {})
    resolved = ssh_config.resolve(host, ssh_config.load_config(host.ssh_config))
    out |= {"alias": host.address or host.name, "hostname": resolved.hostname,
            "port": resolved.port, "user": resolved.user}
    jumps = ssh_config.hops(resolved)[:-1]
    if jumps:
        out["proxy_jump"] = [f"{j.user}@{j.hostname}:{j.port}" for j in jumps]
    if resolved.proxy_command:
        out["proxy_command"] = resolved.proxy_command
    return out


def endpoint_text(found: Mapping[str, Any]) -> str:
    if found["transport"] == "local":
        text = "local" + (f", netns {found['netns']}" if "netns" in found else "")
    else:
        text = f"ssh {found['user']}@{found['hostname']}:{found['port']}"
        if found["alias"] != found["hostname"]:
            text += f" (ssh_config Host {found['alias']})"
        if "proxy_jump" in found:
            text += " via ProxyJump " + " -> ".join(found["proxy_jump"])
        if "proxy_command" in found:
            text += f" via ProxyCommand {found['proxy_command']!r}"
    return text + (f", become {found['become']}" if "become" in found else "")


def _settings(plan: Plan, variant: Variant) -> dict[tuple[str, str], Value]:
    """(host, "kind target") -> value; the kernel a booted host runs too."""
    out: dict[tuple[str, str], Value] = {
        (host, "kernel"): spec.describe() if spec else "its own"
        for host in plan.booted_hosts for spec in [plan.kernels(variant).get(host)]}
    return out | {(host, s.kind if s.target == s.kind else f"{s.kind} {s.target}"): s.value
                  for host, settings in plan.settings(variant).items() for s in settings}


def _flat(prefix: str, value: Any, out: dict[str, Value]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flat(f"{prefix}.{key}", item, out)
    elif value is None or value == () or value == {}:
        return
    elif isinstance(value, (list, tuple)):
        out[prefix] = tuple(str(v) for v in value)
    else:
        out[prefix] = _one(value)


def _workload(plan: Plan, variant: Variant) -> dict[tuple[str, str], Value]:
    """(host, "workload client.args.R") -> value; the tool, the durations and the host
    each side runs on under host ""."""
    spec = variant.workload
    out: dict[tuple[str, str], Value] = {
        ("", f"workload {key}"): _one(getattr(spec, key))
        for key in ("tool", "duration", "timeout", "idle", "warmup")}
    sides = [("client", spec.client), ("server", spec.server)] if not spec.others else \
        [*((f"clients.{p.role}", p) for p in spec.clients), ("server", spec.server)]
    for side, process in sides:
        host = plan.host_of(process.role).name
        out[("", f"workload {side} on")] = host
        flat: dict[str, Value] = {}
        _flat(side, {"cpus": process.cpus, "args": plan.process_args(process),
                     "wrapper": process.wrapper, "env": process.env}, flat)
        out |= {(host, f"workload {key}"): text for key, text in flat.items()}
    for collect in variant.collect:
        for role in collect.roles:
            host = plan.host_of(role).name
            flat = {}
            _flat(collect.name, {"cpus": collect.cpus, **collect.options}, flat)
            out[(host, f"collect {collect.name}")] = "on"
            out |= {(host, f"collect {key}"): text for key, text in flat.items()}
    return out


def _one(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _state(plan: Plan, variant: Variant) -> dict[tuple[str, str], Value]:
    return _settings(plan, variant) | _workload(plan, variant)


def _diff(old: Mapping[tuple[str, str], Value],
          new: Mapping[tuple[str, str], Value]) -> list[Change]:
    keys = list(dict.fromkeys([*new, *old]))
    return [Change(host, what, old.get((host, what)), new.get((host, what)))
            for host, what in keys if old.get((host, what)) != new.get((host, what))]


@dataclass(frozen=True)
class VariantSummary:
    name: str
    description: str
    parameters: Mapping[str, Any]
    against: str | None  # the variant it is compared with; None: the baseline
    changes: tuple[Change, ...]  # the baseline: its settings beyond the common ones
    group: str | None = None  # the first of this comparison group: compared with nothing
    traced_of: str | None = None  # a traced twin (Variant.traced_of): not compared


def summarize(plan: Plan) -> tuple[list[Change], list[VariantSummary]]:
    """(settings every variant writes alike, each variant's changes)."""
    profile = plan.profile
    states = {v.name: _state(plan, v) for v in profile.variants}
    settings = {v.name: _settings(plan, v) for v in profile.variants}
    common = {k: value for k, value in settings[profile.baseline].items()
              if all(s.get(k) == value for s in settings.values())}
    against = {variant: base for base, variant in profile.comparisons}
    out = []
    for variant in profile.variants:
        base = against.get(variant.name) or variant.traced_of
        first = base is None and variant.name != profile.baseline
        if first:
            base = profile.baseline  # the first of its group: shown against the baseline
        if base is None:
            own = {k: v for k, v in settings[variant.name].items() if k not in common}
            changes = _diff({}, own)
        else:
            changes = _diff(states[base], states[variant.name])
        out.append(VariantSummary(variant.name, variant.description, variant.parameters,
                                  base, tuple(changes), variant.group if first else None,
                                  variant.traced_of))
    return _diff({}, common), out


def summary_json(plan: Plan) -> dict[str, Any]:
    common, variants = summarize(plan)
    return {
        "endpoints": {name: endpoint(plan, name) for name in plan.hosts},
        "common": [c.__dict__ for c in common],
        "variants": [{"name": v.name, "against": v.against, "parameters": dict(v.parameters),
                      "changes": [c.__dict__ for c in v.changes]} for v in variants],
    }


def summary_lines(plan: Plan) -> list[str]:
    common, variants = summarize(plan)
    width = max([8, *(len(n) for n in plan.hosts)])
    lines = ["hosts (as ssh_config resolves them):"]
    lines += [f"  {name:<{width}} {endpoint_text(endpoint(plan, name))}" for name in plan.hosts]

    def changes(items: tuple[Change, ...] | list[Change], indent: str) -> list[str]:
        return [f"{indent}{c.host or 'all':<{width}} {c.text()}" for c in items]

    if common:
        lines += ["every variant sets:", *changes(common, "  ")]
    lines.append("variants (each against the variant it is compared with):")
    for v in variants:
        head = f"  {v.name}"
        values = ", ".join(f"{k}={x}" for k, x in v.parameters.items())
        if values and f"({values})" not in v.description:
            head += f" ({values})"
        head += " (baseline)" if v.against is None else \
            f" ({v.traced_of} with the trace collector, not compared)" if v.traced_of else \
            f" (baseline of group {v.group}; its changes shown against {v.against})" \
            if v.group else f" against {v.against}"
        lines.append(head + (f": {v.description}" if v.description else ""))
        lines += changes(v.changes, "    ") or [
            "    nothing beyond what every variant sets" if v.against is None
            else "    no difference"]
    return lines
