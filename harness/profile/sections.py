"""Parsers of a profile's sections (setup, workload, collect, report) into frozen specs.

Each parser reads one located YAML mapping with a `Checker`, records every problem it
finds and returns what it could build; `harness.profile.profile` raises them all at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from napilab.harness import redact
from napilab.harness.errors import Written
from napilab.harness.grammar import cpus
from napilab.harness.grammar.schema import Checker, Number, join, suggest, type_name
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.harness.knobs import values
from napilab.runners.base import PLACEHOLDER, unresolved
from napilab.runners.collectors import netstat
from napilab.runners.collectors.trace import program as trace_program
from napilab.runners.registry import COLLECTORS, TOOLS
from napilab.runners.workloads.workload import (
    EACH,
    MASTER,
    ArgSpec,
    WorkloadTool,
    several_clients,
)

WORKLOAD_KEYS = ("tool", "duration", "timeout", "client", "clients", "server", "idle",
                 "warmup", "load")
WORKLOAD_NUMBERS = {"duration": Number(0.1, 86400), "timeout": Number(1, 172800),
                    "idle": Number(0, 3600), "warmup": Number(0, 3600)}
PROCESS_KEYS = ("role", "cpus", "args", "wrapper", "env", "show_env")
TABLE_ROW_KEYS = ("label", "source", "metric", "role")
SINCE = ("trial", "boot")
TRACE = "trace"  # the collector whose trials are traced (runners.collectors.trace)
# `collect.trace.traced`, the default first: twins (each variant also runs traced, beside
# it, never compared: harness.profile.profile._with_twins) or all (every trial traced)
TRACED = TWINS, ALL = ("twins", "all")
COLLECT_KEYS = ("roles", "cpus")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,100}")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class ProcessSpec:
    role: str
    cpus: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict)
    wrapper: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    # where `cpus` and `args` were written (for the checks of harness.profile.plan)
    written: Mapping[str, Written] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class WorkloadSpec:
    tool: str
    duration: float
    timeout: float
    client: ProcessSpec
    server: ProcessSpec
    idle: float = 0.0  # seconds of counters measured with no load, before it
    warmup: float = 0.0  # seconds of unmeasured load before the measured window
    # `clients:` past the first (`client` is the first): started together with it
    others: tuple[ProcessSpec, ...] = ()

    @property
    def clients(self) -> tuple[ProcessSpec, ...]:
        """Every client, the first (`client`; a master's) first."""
        return (self.client, *self.others)

    @property
    def source(self) -> str:
        """The `source` column of the tool's rows: `neper.tcp_rr` -> `neper`."""
        return self.tool.split(".")[0]


@dataclass(frozen=True)
class CollectSpec:
    name: str
    roles: tuple[str, ...]
    cpus: tuple[int, ...] | None
    options: Mapping[str, Any] = field(default_factory=dict)
    cpus_at: Written | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TableRow:
    label: str
    source: str
    metric: str
    role: str | None = None


def cpu_text(check: Checker, node: Node, key: str, path: str) -> str | None:
    value = node.get(key)
    if value is None:
        return None
    try:
        return values.cpu_list(value)
    except values.KnobValueError as exc:
        if not unresolved(value):
            check.error(node.where(key), join(path, key), str(exc))
        return None


def parse_workload(check: Checker, node: Node, path: str,
                   roles: Mapping[str, Any]) -> WorkloadSpec | None:
    several = "clients" in node
    check.keys(node, path, WORKLOAD_KEYS,
               required=("tool", "clients" if several else "client"))
    tool_name = check.choice(node, "tool", path, TOOLS)
    duration = check.num(node, "duration", path, WORKLOAD_NUMBERS["duration"], default=10)
    timeout = check.num(node, "timeout", path, WORKLOAD_NUMBERS["timeout"],
                        default=duration * 2 + 30)
    tool = TOOLS.get(tool_name) if tool_name else None
    sides: dict[str, ProcessSpec | None] = {}
    for side in ("client", "server"):
        if side == "client" and several:
            continue
        spec_node = check.mapping(node.get(side), node.where(side), join(path, side))
        allowed_args = (tool.client_args if side == "client" else tool.server_args) if tool \
            else None
        if spec_node is not None and (side in node or side == "client"):
            sides[side] = _process(check, spec_node, join(path, side), roles, allowed_args)
    clients = parse_clients(check, node, path, roles, tool) if several else \
        [sides.get("client")]
    if tool_name is None or not clients or None in clients:
        return None
    first = clients[0]
    assert first is not None
    server = sides.get("server") or ProcessSpec(role=first.role)
    if several:
        _server_apart(check, node, path, [c for c in clients if c], server, "server" in node)
    idle = check.num(node, "idle", path, WORKLOAD_NUMBERS["idle"], default=0)
    warmup = check.num(node, "warmup", path, WORKLOAD_NUMBERS["warmup"], default=0)
    return WorkloadSpec(tool_name, float(duration), float(timeout), first, server,
                        float(idle), float(warmup), tuple(c for c in clients[1:] if c))


def parse_clients(check: Checker, node: Node, path: str, roles: Mapping[str, Any],
                  tool: WorkloadTool | None) -> list[ProcessSpec | None]:
    """`clients: {ROLE: {cpus, args, wrapper, env, show_env}, ...}`: several client roles,
    in order (a master tool's first is the master, harness.engine.workload_exec)."""
    cpath = join(path, "clients")
    if "client" in node:
        check.error(node.key_locations.get("client"), join(path, "client"),
                    "write `client:` (one client) or `clients:` (several), not both")
    found = check.mapping(node.get("clients"), node.where("clients"), cpath)
    if found is None:
        return []
    if not found:
        check.error(node.where("clients"), cpath, "no client: name at least one role")
        return []
    rule = several_clients(tool) if tool is not None else None
    if rule is not None and len(found) > 1 and not rule.merge:
        check.error(node.key_locations.get("clients"), cpath,
                    f"{tool.name if tool else ''} takes one client: {rule.why}")
        return []
    out: list[ProcessSpec | None] = []
    for i, (role, raw) in enumerate(found.items()):
        rpath = join(cpath, str(role))
        if not isinstance(role, str) or role not in roles:
            check.error(found.key_locations.get(role), rpath,
                        f"no such role; roles are {sorted(roles)}{suggest(str(role), roles)}")
            out.append(None)
            continue
        spec = check.mapping(raw if raw is not None else Node(), found.where(role), rpath)
        if spec is None:
            out.append(None)
            continue
        allowed = None
        if tool is not None and rule is not None:
            allowed = rule.agent_args if (i and rule.merge == MASTER) else tool.client_args
        out.append(_process(check, spec, rpath, roles, allowed, role=role))
    return out


def _server_apart(check: Checker, node: Node, path: str, clients: list[ProcessSpec],
                  server: ProcessSpec, named: bool) -> None:
    """With several clients the server is a role of its own, named."""
    if not named:
        check.error(node.key_locations.get("clients"), join(path, "clients"),
                    "several clients need `server: {role: ...}`: the role they load")
        return
    if server.role in {c.role for c in clients}:
        server_node = node.get("server")
        where = server_node.where("role") if isinstance(server_node, Node) else None
        check.error(where, join(path, "server.role"),
                    f"role {server.role!r} is both a client and the server: give the server "
                    "a role of its own (two roles may name one host)")


def _process(check: Checker, node: Node, path: str, roles: Mapping[str, Any],
             allowed_args: Mapping[str, ArgSpec] | None,
             role: str | None = None) -> ProcessSpec | None:
    """One process (`client`, `server`, or one of `clients`, whose key is its `role`)."""
    if role is None:
        check.keys(node, path, PROCESS_KEYS, required=("role",))
        role = check.get(node, "role", path, str)
    else:
        check.keys(node, path, PROCESS_KEYS[1:])
    if role is not None and role not in roles:
        check.error(node.where("role"), join(path, "role"),
                    f"no such role; roles are {sorted(roles)}{suggest(role, roles)}")
        role = None
    cpu_list = cpu_text(check, node, "cpus", path)
    args = check.mapping(node.get("args"), node.where("args"), join(path, "args")) or Node()
    if allowed_args is not None:
        _check_args(check, args, join(path, "args"), allowed_args)
    wrapper = check.string_list(node, "wrapper", path) or []
    env = check.mapping(node.get("env"), node.where("env"), join(path, "env")) or Node()
    for name, value in env.items():
        if not _ENV.fullmatch(name):
            check.error(env.key_locations.get(name), join(path, f"env.{name}"),
                        "not a valid environment variable name")
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            check.error(env.where(name), join(path, f"env.{name}"),
                        f"expected a string or number, got {type_name(value)}")
    show = check.string_list(node, "show_env", path) or []
    for name in show:
        if name not in env:
            check.error(node.where("show_env"), join(path, "show_env"),
                        f"{name!r} is not in this process's env; expected some of "
                        f"{sorted(env)}")
    if role is None:
        return None
    written = {key: Written(node.where(key), join(path, key)) for key in ("cpus", "args")
               if key in node}
    return ProcessSpec(role, cpu_list, dict(args), tuple(wrapper),
                       redact.env_values(env, show), written)


def _check_args(check: Checker, args: Node, path: str, allowed: Mapping[str, ArgSpec]) -> None:
    for key, value in args.items():
        spec = allowed.get(key)
        if spec is None:
            check.error(args.key_locations.get(key), join(path, key),
                        f"unknown argument; expected one of {sorted(allowed)}"
                        f"{suggest(key, allowed)}")
            continue
        kinds = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
        if isinstance(value, str) and PLACEHOLDER.search(value):
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(k.__name__ for k in kinds)
            check.error(args.where(key), join(path, key),
                        f"expected {names}, got {type_name(value)} {value!r}")
        elif spec.choices and str(value) not in spec.choices:
            check.error(args.where(key), join(path, key), f"{value!r} is not one of "
                        f"{list(spec.choices)}{suggest(str(value), spec.choices)}")


def parse_collect(check: Checker, node: Node, path: str,
                  roles: Mapping[str, Any]) -> list[CollectSpec]:
    out = []
    for name, raw in node.items():
        cpath = join(path, name)
        if name not in COLLECTORS:
            check.error(node.key_locations.get(name), cpath, f"unknown collector; expected one "
                        f"of {sorted(COLLECTORS)}{suggest(name, COLLECTORS)}")
            continue
        options = check.mapping(raw, node.where(name), cpath)
        if options is None:
            continue
        check.keys(options, cpath, (*COLLECT_KEYS, *COLLECTORS[name].options))
        chosen = check.string_list(options, "roles", cpath) or list(roles)
        for role in chosen:
            if role not in roles:
                check.error(options.where("roles"), join(cpath, "roles"),
                            f"no such role {role!r}; roles are {sorted(roles)}"
                            f"{suggest(role, roles)}")
        cpu_list = cpu_text(check, options, "cpus", cpath)
        extra = {key: _OWN_PARSERS.get(kind, _option)(check, options, key, kind,
                                                        join(cpath, key))
                 for key, kind in COLLECTORS[name].options.items() if key in options}
        out.append(CollectSpec(name, tuple(r for r in chosen if r in roles),
                               cpus.parse_list(cpu_list) if cpu_list is not None else None,
                               extra, Written(options.where("cpus"), join(cpath, "cpus"))
                               if cpu_list else None))
    return out


def _option(check: Checker, node: Node, key: str, kind: str, path: str) -> Any:
    """A collector's option (its class names the kind): regex, names (a list of words),
    patterns (name -> regex), functions (kernel function names), since (trial | boot:
    dmesg counts the lines of the trial, or every line since the host booted), traced
    (twins | all: trace's traced trials, `traced_mode`); netstat's `fields` are
    _fields'."""
    value, where = node[key], node.where(key)

    def regex(text: Any, at: str) -> bool:
        if not isinstance(text, str):
            check.error(where, at, f"expected a regex (a string), got {type_name(text)}")
            return False
        try:
            re.compile(text)
            return True
        except re.error as exc:
            check.error(where, at, f"bad regex: {exc}")
            return False

    if kind == "regex":
        return value if regex(value, path) else None
    if kind in ("since", "traced"):
        allowed = SINCE if kind == "since" else TRACED
        if value not in allowed:
            check.error(where, path, f"expected one of {list(allowed)}, got {value!r}"
                        f"{suggest(str(value), allowed)}")
            return None
        return value
    if kind == "patterns":
        if not isinstance(value, dict) or not value:
            check.error(where, path, "expected a mapping of metric name -> regex")
            return {}
        for metric, pattern in value.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", metric):
                check.error(where, join(path, metric), "metric names are snake_case")
            regex(pattern, join(path, metric))
        return dict(value)
    words = [value] if isinstance(value, str) else value
    if not isinstance(words, list) or not words or not all(
            isinstance(w, str) and _WORD.fullmatch(w) for w in words):
        what = "kernel function names" if kind == "functions" else "names"
        check.error(where, path, f"expected a list of {what}, got {value!r}")
        return []
    return list(words)


def traced_mode(collect: Sequence[CollectSpec]) -> str | None:
    """How a variant whose collectors are COLLECT is traced: twins, all, or None (no
    trace collector)."""
    spec = next((c for c in collect if c.name == TRACE), None)
    return None if spec is None else str(spec.options.get("traced") or TWINS)


def _stages(check: Checker, node: Node, key: str, kind: str, path: str) -> list[str]:
    """trace's `stages`: names of runners.collectors.trace's stages (a misspelt one would
    trace nothing of it, quietly)."""
    value, where = node[key], node.where(key)
    known = trace_program.stages()
    names = value if isinstance(value, list) else [value]
    wrong = [n for n in names if not (isinstance(n, str) and n in known)]
    if wrong or not names:
        shown = wrong[0] if wrong else value
        check.error(where, path, f"{shown!r} is not a stage; stages are {list(known)}"
                    f"{suggest(str(shown), known)}")
        return []
    return list(names)


def _fields(check: Checker, node: Node, key: str, kind: str, path: str) -> list[str]:
    """netstat's `names`: each `Protocol` or `Protocol.Field`. Fields differ by kernel and
    are not checked; a protocol is one of the files' (a misspelt one would select nothing,
    as quietly as a field this kernel lacks)."""
    value, where = node[key], node.where(key)
    words = [value] if isinstance(value, str) else value
    if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
        check.error(where, path, f"expected a list of `Protocol` or `Protocol.Field` names, "
                    f"got {value!r}")
        return []
    for word in words:
        if not netstat.NAME.fullmatch(word):
            protocol = word.partition(".")[0]
            check.error(where, path, f"{word!r} is not `Protocol` or `Protocol.Field` with "
                        f"a protocol of {list(netstat.PROTOCOLS)}"
                        f"{suggest(protocol, netstat.PROTOCOLS)}")
    return list(words)


def parse_table(check: Checker, value: Any, where: Any, path: str,
                roles: Mapping[str, Any]) -> list[TableRow]:
    if value is None:
        return []
    if not isinstance(value, Seq):
        check.error(where, path, f"expected a list of rows, got {type_name(value)}")
        return []
    rows = []
    for i, raw in enumerate(value):
        rpath = join(path, i)
        row = check.mapping(raw, value.item_locations[i], rpath)
        if row is None:
            continue
        check.keys(row, rpath, TABLE_ROW_KEYS, required=("source", "metric"))
        source = check.get(row, "source", rpath, str)
        metric = check.get(row, "metric", rpath, str)
        role = check.get(row, "role", rpath, str)
        if role is not None and role not in roles:
            check.error(row.where("role"), join(rpath, "role"),
                        f"no such role; roles are {sorted(roles)}{suggest(role, roles)}")
        if source and metric:
            label = check.get(row, "label", rpath, str) or f"{source} {metric}"
            rows.append(TableRow(label, source, metric, role))
    return rows


# Values of one client that several clients' values do not add up to (reports.ab.compare
# adds a role-less row over every role): latency statistics and percentiles.
_PER_CLIENT = re.compile(r"latency|rtt|jitter|(^|_)p\d|(^|_)(mean|min|max|stddev|median)"
                         r"($|_)")


def check_roleless_rows(check: Checker, value: Any, workloads: list[WorkloadSpec]) -> None:
    """A `report.table` row without `role` adds its metric over every role: refused for a
    latency statistic of a tool whose several clients each report (a sum of two clients'
    p99 is nothing); it names the roles to choose from."""
    several = {w.source: [c.role for c in w.clients] for w in workloads
               if w.others and several_clients(TOOLS[w.tool]).merge == EACH}
    if not several or not isinstance(value, Seq):
        return
    for i, raw in enumerate(value):
        if not isinstance(raw, Node) or raw.get("role") is not None:
            continue
        source, metric = raw.get("source"), raw.get("metric")
        roles = several.get(str(source))
        if roles and isinstance(metric, str) and _PER_CLIENT.search(metric):
            check.error(value.item_locations[i], f"report.table.{i}",
                        f"{source} {metric} is measured by each of the clients {roles}: a "
                        "row without `role` would add them up; name the `role` (one row "
                        "per client), or use the `pooled` source for percentiles of every "
                        "client's transactions")


# option kinds with a parser of their own; every other kind is _option's
_OWN_PARSERS: dict[str, Callable[[Checker, Node, str, str, str], Any]] = {
    "fields": _fields, "stages": _stages}
