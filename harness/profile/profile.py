"""Profiles: load YAML, resolve `extends`, apply variant overlays, validate, and build a
frozen `Profile`. No I/O beyond reading the profile files; no host is touched.

    name, description, extends, hosts, setup, workload, collect, report, variants,
    baseline, repeat, order, seed, cooldown, on_mismatch, metrics, tune

See docs/profiles.md for every key with an example.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from napilab.harness.errors import Location
from napilab.harness.grammar import keys
from napilab.harness.grammar.names import unsafe
from napilab.harness.grammar.schema import Checker, Number, join, suggest, type_name
from napilab.harness.grammar.scope import Scope
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs.kind import Setting
from napilab.harness.knobs.values import KnobValueError, check_iface
from napilab.harness.profile.kernel import BOOT_MODES, KernelSpec, parse_kernel
from napilab.harness.profile.load import (
    RATE_PARAMETER,
    Ladder,
    Rung,
    parse_load,
    rung_group,
    rung_name,
)
from napilab.harness.profile.matrix import (
    check_name,
    combinations,
    declared_parameters,
    parse_matrix,
    placeholders,
    substitute,
    substitute_text,
    unknown_placeholders,
)
from napilab.harness.profile.merge import (
    clone,
    deep_merge,
    plain,
    resolve_extends,
    without_other_tool,
)
from napilab.harness.profile.metric_names import check_metric_names, sources_of
from napilab.harness.profile.sections import (
    TRACE,
    TWINS,
    CollectSpec,
    TableRow,
    WorkloadSpec,
    check_roleless_rows,
    parse_collect,
    parse_table,
    parse_workload,
    traced_mode,
)
from napilab.harness.profile.setup import parse_setup
from napilab.harness.profile.tune import Tune, Tuning, parse_tune
from napilab.runners.base import PLACEHOLDER, RESERVED, unresolved
from napilab.runners.registry import TOOLS
from napilab.runners.workloads.workload import MASTER, several_clients

TOP_KEYS = keys.PROFILE_KEYS
VARIANT_KEYS = ("description", "group", "cores", "setup", "workload", "collect", "kernel")
ORDERS = ("interleaved", "randomized", "blocked")
MAX_VARIANTS = 20_000  # explicit or from a matrix, counted before a matrix is expanded
ON_MISMATCH = ("fail", "warn")
ROLE_KEYS = keys.ROLE_KEYS
METRIC_KEYS = ("direction", "min_effect", "max_regression", "primary")
REPORT_KEYS = ("table", "columns")
DIRECTIONS = ("lower", "higher")
TOP_NUMBERS = {"repeat": Number(1, 10000, integer=True), "seed": Number(0, integer=True),
               "cooldown": Number(0, 3600), "warmup_trials": Number(0, 100, integer=True)}
_GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]*")
TRACED_SUFFIX = "+traced"  # a traced twin's name: VARIANT+traced


@dataclass(frozen=True)
class RoleSpec:
    name: str
    host: str
    iface: str | None = None
    where: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class MetricPolicy:
    """How a metric is judged: which direction is better, the smallest change that
    matters, and the regression the nightly gate tolerates (percent)."""

    direction: str | None = None  # lower | higher; None: napilab's default for the metric
    min_effect: float | None = None  # percent
    max_regression: float | None = None  # percent
    primary: bool = True  # in the multiple-comparison family (harness.stats.family)


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    settings: tuple[Setting, ...]
    workload: WorkloadSpec
    collect: tuple[CollectSpec, ...]
    parameters: dict[str, Any] = field(default_factory=dict)  # matrix values
    group: str | None = None  # compared with its group's first variant, not the baseline
    kernels: tuple[KernelSpec, ...] = ()  # per role; a role without one: its own kernel
    cores: dict[str, float] = field(default_factory=dict)  # budget per role, "" for all
    rung: Rung | None = None  # its offered load, in a profile with a `load:` ladder
    base: str | None = None  # the variant of the profile this rung is of
    # the variant this is the traced twin of (_with_twins): never compared
    traced_of: str | None = None

    def kernel(self, role: str) -> KernelSpec | None:
        return next((k for k in self.kernels if k.role == role), None)


@dataclass(frozen=True)
class Trial:
    index: int  # 1-based position in execution order
    variant: str
    rep: int  # 1-based repetition of this variant

    @property
    def id(self) -> str:
        return f"{self.index:03d}"


@dataclass(frozen=True)
class Profile:
    name: str
    path: str
    description: str
    roles: dict[str, RoleSpec]
    variants: tuple[Variant, ...]  # the baseline first
    repeat: int
    order: str
    seed: int | None
    cooldown: float
    on_mismatch: str
    warmup_trials: int
    metrics: dict[str, MetricPolicy]  # "metric" or "source.metric" -> direction, thresholds
    table: tuple[TableRow, ...]
    document: dict[str, Any]  # the resolved profile (extends merged), for the manifest
    digest: str  # sha256 of the resolved document: `--resume` refuses a changed profile
    boot: str = "per-kernel"  # per-kernel | per-trial (harness.profile.kernel)
    load: Ladder | None = None  # the offered-load ladder (harness.profile.load)
    tune: Tune | None = None  # `napilab tune`'s search (harness.profile.tune)
    tuning: Tuning | None = None  # the candidates it was loaded with (None: as written)
    # `napilab bisect`'s tree, build and image (`bisect:`; docs/bisect.md)
    bisect: dict[str, str] = field(default_factory=dict)

    @property
    def baseline(self) -> str:
        return self.variants[0].name

    @property
    def comparisons(self) -> tuple[tuple[str, str], ...]:
        """(baseline, variant) of every compared variant: a variant with a `group` is
        compared with the first variant of its group, one without with the first variant
        without (the profile's baseline unless that one has a group). Traced twins are
        never compared (_with_twins)."""
        firsts: dict[str | None, str] = {}
        pairs = []
        for variant in self.variants:
            if variant.traced_of is not None:
                continue
            first = firsts.setdefault(variant.group, variant.name)
            if first != variant.name:
                pairs.append((first, variant.name))
        return tuple(pairs)

    @property
    def twins(self) -> dict[str, str]:
        """Each traced twin -> the variant it is the traced copy of, in order."""
        return {v.name: v.traced_of for v in self.variants if v.traced_of is not None}

    def variant(self, name: str) -> Variant:
        return self._by_name[name]

    @functools.cached_property
    def _by_name(self) -> dict[str, Variant]:
        return {v.name: v for v in self.variants}

    def trials(self) -> list[Trial]:
        """Execution order: interleaved ABAB..., blocked AAA...BBB..., or a seeded shuffle
        of the interleaved order (the seed is in the profile or chosen and recorded)."""
        names = [v.name for v in self.variants]
        if self.order == "blocked":
            pairs = [(name, rep) for name in names for rep in range(1, self.repeat + 1)]
        else:
            pairs = [(name, rep) for rep in range(1, self.repeat + 1) for name in names]
            if self.order == "randomized":
                random.Random(self.seed).shuffle(pairs)
        if self.boot == "per-kernel" and any(v.kernels for v in self.variants):
            # one boot per kernel: the trials of one set of kernels run together, in the
            # order above within the set (a stable sort)
            sets = {v.name: frozenset(v.kernels) for v in self.variants}
            first = {s: i for i, s in reversed(list(enumerate(sets[n] for n, _ in pairs)))}
            pairs.sort(key=lambda pair: first[sets[pair[0]]])
        return [Trial(i, name, rep) for i, (name, rep) in enumerate(pairs, start=1)]


def load_profile(path: str | Path, tuning: Tuning | None = None) -> Profile:
    """Read, resolve and validate a profile; every problem is reported at once.

    A profile with `tune:` loads with its template variant filled in at the space's
    corner (validate, plan), or, with TUNING, once per candidate (`napilab tune`)."""
    document = resolve_extends(Path(path), [])
    if tuning is not None:
        tuning.override(document)
    check = Checker(document.location)
    check.keys(document, "", TOP_KEYS, required=("hosts", "workload"))
    roles = _roles(check, document)
    base = clone(document)
    for key in ("variants", "baseline", "extends", "matrix"):
        base.pop(key, None)
    ladder = _ladder(check, document, base)
    arms = _arms(check, document)
    names = [arm[0] for arm in arms]
    for name in sorted(n for n, count in Counter(names).items() if count > 1):
        check.error(document.where("matrix"), "matrix", f"two variants are named {name!r}; "
                    "make matrix.name tell them apart")
    baseline = check.get(document, "baseline", "", str)
    if baseline is not None and baseline not in names:
        declared = document.get("variants")
        source = declared.get(baseline) if isinstance(declared, Node) else None
        made = [name for name, overlay, _ in arms if overlay is source]
        check.error(document.where("baseline"), "baseline", f"{baseline!r} is crossed by "
                    f"the matrix: name one of the variants made of it, {made}" if made else
                    f"no variant named {baseline!r}{suggest(baseline, names)}")
        baseline = None
    tune = None
    if "tune" in document:
        tune, arms = _tune_arms(check, document, arms, baseline or (names or [""])[0], tuning)
        if tuning is not None and not tuning.baseline:
            baseline = None
    variants = _variants(check, document, base, arms, roles, ladder)
    if baseline is not None:
        # rung by rung (they are in ladder order already), the baseline first in each
        rungs = ladder.rungs if ladder else ()
        variants.sort(key=lambda v: (rungs.index(v.rung) if v.rung else 0,
                                     (v.base or v.name) != baseline))
    variants = _with_twins(check, variants)
    report = check.mapping(document.get("report"), document.where("report"), "report") or Node()
    check.keys(report, "report", REPORT_KEYS)
    table = parse_table(check, report.get("table"), report.where("table"), "report.table", roles)
    check_roleless_rows(check, report.get("table"), [v.workload for v in variants])
    _columns(check, report, [v.name for v in variants])
    _like_with_like(check, variants, {name: overlay for name, overlay, _ in arms},
                    document.where("variants"))
    if variants:
        check_metric_names(check, document, sources_of(variants))
    profile_fields = _top_level(check, document)
    if document.get("name") is None and (why := unsafe(Path(path).stem)):
        check.error(document.location, "name", f"no `name:`, and the file's name {why}: "
                    "write one")
    _dedupe(check)
    check.raise_if_any()
    resolved = plain(document)
    digest = hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()
    return Profile(
        name=str(document.get("name") or Path(path).stem), path=str(path),
        description=str(document.get("description") or ""), roles=roles,
        variants=tuple(variants), table=tuple(table), document=resolved, digest=digest,
        load=ladder, tune=tune, tuning=tuning, **profile_fields,
    )


def _with_twins(check: Checker, variants: list[Variant]) -> list[Variant]:
    """`collect.trace.traced: twins` (the default; docs/profiles.md): tracing perturbs
    what it measures, so each variant V with the trace collector runs as V without it,
    whose trials the verdicts come from, and its twin V+traced with it (same settings,
    workload, kernels), right after V: `order: interleaved` runs A, A+traced, B,
    B+traced in each repetition, a load ladder's rung V+10k has V+10k+traced, a blocked
    order runs V's block then its twin's, and one boot serves both. A twin is never
    compared (`comparisons`); its trials give the per-stage breakdown and the tracer's
    overhead (reports.trace). With `traced: all` there is no twin: every trial is traced
    (harness.profile.design says what that costs)."""
    names = {v.name for v in variants}
    out: list[Variant] = []
    for variant in variants:
        if traced_mode(variant.collect) != TWINS:
            out.append(variant)
            continue
        name = variant.name + TRACED_SUFFIX
        if name in names:
            check.error(None, f"variants.{name}", f"{name!r} is the name of "
                        f"{variant.name}'s traced twin (collect.trace.traced: twins): name "
                        "the variant otherwise")
        elif why := unsafe(name):
            check.error(None, f"variants.{variant.base or variant.name}", f"its traced twin "
                        f"{name!r} {why}: shorten the variant's name")
        untraced = tuple(c for c in variant.collect if c.name != TRACE)
        out += [replace(variant, collect=untraced),
                replace(variant, name=name, traced_of=variant.name)]
    return out


def _tune_arms(check: Checker, document: Node, arms: list[tuple[str, Node, dict[str, Any]]],
               baseline: str, tuning: Tuning | None
               ) -> tuple[Tune | None, list[tuple[str, Node, dict[str, Any]]]]:
    """`tune:` read, and the arms with the template variant filled in: at the space's
    corner, or once per candidate of TUNING (after the baseline unless it leaves it out)."""
    names = [name for name, _, _ in arms]
    tune = parse_tune(check, document["tune"], document.where("tune"), names, baseline)
    if "matrix" in document:
        check.error(document.where("matrix"), "matrix", "a profile is searched (tune:) or "
                    "swept (matrix:), not both: a grid of the same space is a matrix profile")
    if tune is None:
        return None, arms
    if len(arms) != 2:
        check.error(document.where("variants"), "variants", "a tuned profile has two variants, "
                    f"the baseline and the one `tune` fills in; it has {len(arms)}")
    template = next(overlay for name, overlay, _ in arms if name == tune.variant)
    params = {p.name for p in tune.parameters}
    used = placeholders(template)
    for name in sorted(params - used):
        check.error(document["tune"]["parameters"].key_locations.get(name),
                    f"tune.parameters.{name}", f"not used: write ${{{name}}} in variants."
                    f"{tune.variant}")
    outside = {k: v for k, v in document.items() if k not in ("variants", "tune")}
    outside["variants"] = {n: o for n, o, _ in arms if n != tune.variant}
    for name in sorted(params & placeholders(outside)):
        check.error(document.where("tune"), f"tune.parameters.{name}", f"${{{name}}} is used "
                    f"outside variants.{tune.variant}: only the variant the search fills in "
                    "may use the parameters")
    kept = [arm for arm in arms if arm[0] == baseline and (tuning is None or tuning.baseline)]
    filled = [(name, template, dict(values)) for name, values in tuning.candidates] \
        if tuning is not None else [(tune.variant, template, tune.corner())]
    for name, _, _ in filled:
        check_name(check, name, document.where("tune"), "tune")
    return tune, kept + filled


def _variants(check: Checker, document: Node, base: Node,
              arms: list[tuple[str, Node, dict[str, Any]]], roles: dict[str, RoleSpec],
              ladder: Ladder | None) -> list[Variant]:
    """Every variant: each arm (an explicit variant or a matrix combination) merged onto
    the profile, once per rung of the load ladder when there is one."""
    variants = []
    declared = document.get("variants")
    written = {id(node): name for name, node in declared.items()} \
        if isinstance(declared, dict) else {}
    rungs: tuple[Rung | None, ...] = ladder.rungs if ladder else (None,)
    if ladder and any(RATE_PARAMETER in values for _, _, values in arms):
        check.error(document.where("matrix"), f"matrix.{RATE_PARAMETER}", "`rate` is the "
                    "load ladder's: name the parameter otherwise")
    for rung in rungs:
        for name, overlay, values in arms:
            if rung is rungs[0] and "load" in _workload_of(overlay):
                check.error(_workload_of(overlay).where("load"), join(join(
                    "variants", written.get(id(overlay), name)), "workload.load"),
                    "the load ladder is the profile's (workload.load): every variant runs "
                    "every rung")
            merged = deep_merge(without_other_tool(base, overlay), Node(
                {k: v for k, v in overlay.items()
                 if k not in ("description", "group", "cores")}))
            filled = dict(values)
            if rung is not None and ladder is not None:
                filled[RATE_PARAMETER] = ladder.argument(rung)
                _rung_argument(merged, ladder, rung)
            merged = substitute(merged, filled) if filled else merged  # deep_merge copied
            start = len(check.problems)
            unknown_placeholders(check, merged, filled, declared_parameters(document))
            variant = _variant(check, name, merged, overlay, roles, values,
                               written.get(id(overlay), name), filled)
            scope = Scope(join("variants", written.get(id(overlay), name)), overlay)
            check.problems[start:] = scope.problems(check.problems[start:])
            if variant is not None and rung is not None:
                variant = replace(variant, name=rung_name(name, rung), rung=rung, base=name,
                                  group=rung_group(variant.group, rung))
            if variant is not None:
                variants.append(scope.variant(variant))
    return variants


def _workload_of(node: Node) -> Node:
    found = node.get("workload")
    return found if isinstance(found, Node) else Node()


def _ladder(check: Checker, document: Node, base: Node) -> Ladder | None:
    """The profile's `workload.load`, taken out of BASE (each rung writes its own rate)."""
    workload = _workload_of(document)
    if "load" not in workload:
        return None
    tool_name = workload.get("tool")
    tool = TOOLS.get(tool_name) if isinstance(tool_name, str) else None
    _workload_of(base).pop("load", None)
    if tool is None:
        return None  # the unknown tool is its own error
    several = workload.get("clients")
    if isinstance(several, Node) and len(several) > 1 and \
            several_clients(tool).merge != MASTER:
        check.error(workload.key_locations.get("load"), "workload.load",
                    f"a load ladder drives one client, and these are {len(several)}: each "
                    f"{tool.name} client would offer the rung's rate (a master tool's, "
                    "mutilate's, --qps is the aggregate of all)")
        return None
    return parse_load(check, workload["load"], workload.where("load"), "workload.load",
                      tool.name, tool.load, _percent)


def _rung_argument(merged: Node, ladder: Ladder, rung: Rung) -> None:
    """Write RUNG's rate into the client argument of the tool's load axis."""
    if ladder.arg is None:
        return
    workload = merged.setdefault("workload", Node())
    several = workload.get("clients") if isinstance(workload, Node) else None
    if isinstance(several, Node) and several:  # a master's --qps is everyone's
        first = next(iter(several))
        client = several[first] = several[first] if isinstance(several[first], Node) \
            else Node()
    else:
        client = workload.setdefault("client", Node()) if isinstance(workload, Node) \
            else None
    if not isinstance(client, Node):
        return  # malformed: parse_workload says so
    args = client.get("args")
    if args is None:
        args = client["args"] = Node()
    if isinstance(args, Node):
        args[ladder.arg] = ladder.argument(rung)


def _unused_parameters(check: Checker, document: Node, matrix: Node,
                       parameters: dict[str, list[Any]]) -> None:
    used = placeholders({k: v for k, v in document.items() if k != "matrix"})
    misspelt = used - set(RESERVED) - set(parameters)  # reported where written
    params_node = matrix.get("parameters", matrix)
    for param in parameters:
        if param not in used and not suggest(param, misspelt):
            check.error(params_node.key_locations.get(param) if isinstance(params_node, Node)
                        else None, f"matrix.{param}",
                        f"parameter never used: write ${{{param}}} where its value goes")


def _too_many(check: Checker, count: int, where: Location | None, path: str) -> bool:
    if count <= MAX_VARIANTS:
        return False
    check.error(where, path, f"{count:,} variants: a profile has at most {MAX_VARIANTS:,} "
                "(docs/profiles.md, Limits)")
    return True


def _arms(check: Checker, document: Node) -> list[tuple[str, Node, dict[str, Any]]]:
    """(name, overlay, matrix values) of every variant: the explicit ones, each crossed
    with the matrix combinations when there is a matrix."""
    variants_node = check.mapping(document.get("variants"), document.where("variants"),
                                  "variants") or Node()
    if _too_many(check, len(variants_node), document.where("variants"), "variants"):
        return []
    overlays: list[tuple[str, Node]] = []
    for name, raw in variants_node.items():
        overlay = check.mapping(raw, variants_node.where(name), join("variants", name))
        check_name(check, name, variants_node.key_locations.get(name), join("variants", name))
        if overlay is not None:
            check.keys(overlay, join("variants", name), VARIANT_KEYS)
            overlays.append((name, overlay))
    matrix = check.mapping(document.get("matrix"), document.where("matrix"), "matrix")
    if not matrix:
        return [(name, overlay, {}) for name, overlay in overlays] or [
            ("default", Node(), {})]
    names = [n for n, _ in overlays]
    spec = parse_matrix(check, matrix, variant_names=names)
    crossed = spec.variants if spec.variants is not None else names
    combos = math.prod(len(values) for values in spec.parameters.values())
    count = combos * max(1, len(set(crossed) & set(names))) + len(set(names) - set(crossed))
    if _too_many(check, count, matrix.location, "matrix"):  # before expanding it
        return []
    for wanted in crossed:
        if wanted not in names:
            check.error(matrix.where("variants"), "matrix.variants", f"no variant {wanted!r}"
                        f"{suggest(wanted, names)}")
    _unused_parameters(check, document, matrix, spec.parameters)
    arms: list[tuple[str, Node, dict[str, Any]]] = []
    implicit: list[tuple[str | None, Node]] = [(None, Node())]
    for arm, overlay in overlays or implicit:
        if arm is not None and arm not in crossed:
            arms.append((arm, overlay, {}))
            continue
        for combo in combinations(spec, arm):
            check_name(check, combo.name, matrix.location, "matrix.name")
            arms.append((combo.name, overlay, combo.values))
    if not arms:
        check.error(matrix.location, "matrix", "every combination is excluded")
    return arms


def _roles(check: Checker, document: Node) -> dict[str, RoleSpec]:
    hosts = check.mapping(document.get("hosts"), document.where("hosts"), "hosts")
    roles = {}
    for role, raw in (hosts or Node()).items():
        assert hosts is not None
        path = join("hosts", role)
        if role in hosts.texts:  # `sender: off`: YAML 1.1 reads a boolean
            check.error(hosts.where(role), path, f"{hosts.texts[role]} is read as "
                        f"{type_name(raw)} {raw!r}, not a host name: quote it "
                        f"(\"{hosts.texts[role]}\")")
            continue
        if isinstance(raw, str):
            roles[role] = RoleSpec(role, raw, where=hosts.where(role))
            continue
        node = check.mapping(raw, hosts.where(role), path)
        if node is None:
            continue
        check.keys(node, path, ROLE_KEYS, required=("host",))
        host = check.get(node, "host", path, str)
        iface = check.get(node, "iface", path, str)
        if iface is not None:
            try:
                check_iface(iface)
            except KnobValueError as exc:
                check.error(node.where("iface"), join(path, "iface"), str(exc))
        # a role whose host is missing or wrong is still a role: one error, not one more
        # for every section that names it
        roles[role] = RoleSpec(role, host or "", iface, where=node.where("host"))
    if hosts is not None and not hosts:
        check.error(document.where("hosts"), "hosts", "no roles defined")
    return roles


def _cores_budget(check: Checker, overlay: Node, path: str,
                  roles: dict[str, RoleSpec]) -> dict[str, float]:
    """`cores: N` (every role together, key "") or `cores: {ROLE: N}`: the cores a
    variant may use, which the report weighs its busy cores against
    (reports.ab.tradeoff)."""
    if "cores" not in overlay:
        return {}
    budget: dict[str, float] = {}
    found = overlay["cores"]
    where = overlay.where("cores")
    wanted = "a number of cores above 0, or ROLE: cores for some of " + ", ".join(roles)
    items = found.items() if isinstance(found, dict) else [("", found)]
    if isinstance(found, dict) and not found:
        check.error(where, join(path, "cores"), f"an empty mapping; expected {wanted}")
    for role, number in items:
        key = join(path, "cores") if not role else join(join(path, "cores"), str(role))
        if role and isinstance(found, Node):
            where = found.where(role)
        if role and role not in roles:
            check.error(where, key, f"unknown role {role!r}; expected one of "
                                    f"{', '.join(roles)}{suggest(str(role), list(roles))}")
        elif isinstance(number, bool) or not isinstance(number, int | float) or number <= 0:
            check.error(where, key, f"{number!r}; expected {wanted}")
        else:
            budget[str(role)] = float(number)
    return budget


def _variant(check: Checker, name: str, doc: Node, overlay: Node,
             roles: dict[str, RoleSpec], values: dict[str, Any], written: str,
             filled: dict[str, Any]) -> Variant | None:
    """One variant; its `group` takes the matrix's placeholders as its name does, and a
    problem of what the overlay wrote is reported once at `variants.WRITTEN`."""
    setup = check.mapping(doc.get("setup"), doc.where("setup"), "setup") or Node()
    settings = parse_setup(check, setup, "setup", roles)
    workload_node = check.mapping(doc.get("workload"), doc.where("workload"), "workload")
    workload = parse_workload(check, workload_node, "workload", roles) \
        if workload_node is not None and "workload" in doc else None
    collect_node = check.mapping(doc.get("collect"), doc.where("collect"), "collect") or Node()
    collect = parse_collect(check, collect_node, "collect", roles)
    kernel_node = check.mapping(doc.get("kernel"), doc.where("kernel"), "kernel") or Node()
    kernels = parse_kernel(check, kernel_node, "kernel", roles)
    description = str(overlay.get("description") or "")
    path = join("variants", written)
    group = check.get(overlay, "group", path, str)
    if group is not None:
        filled_group = substitute_text(group, {**filled, "variant": written})
        if unresolved(filled_group) or PLACEHOLDER.search(filled_group):
            check.error(overlay.where("group"), join(path, "group"), f"unknown placeholder "
                        f"in {group!r}; a group takes ${{variant}} and the matrix "
                        f"parameters {sorted(filled)}")
        elif not _GROUP.fullmatch(filled_group):
            check.error(overlay.where("group"), join(path, "group"),
                        f"group name {group!r}: use letters, digits and . _ = + -")
        group = filled_group
    cores = _cores_budget(check, overlay, path, roles)
    if values:
        swept = ", ".join(f"{k}={v}" for k, v in values.items())
        description = f"{description} ({swept})" if description else swept
    if workload is None:
        return None
    return Variant(name, description, tuple(settings), workload, tuple(collect), values, group,
                   tuple(kernels), cores)


def _like_with_like(check: Checker, variants: list[Variant], overlays: dict[str, Node],
                    where: Location | None) -> None:
    """A variant is compared with a baseline that runs its tool (netperf.UDP_RR is not
    judged against a netperf.TCP_RR baseline): else `group:` splits them by tool."""
    firsts: dict[str | None, Variant] = {}
    for variant in variants:
        first = firsts.setdefault(variant.group, variant)
        tool, base_tool = variant.workload.tool, first.workload.tool
        if tool == base_tool:
            continue
        overlay = overlays.get(variant.base or variant.name, Node())
        workload = overlay.get("workload")
        at = workload.where("tool") if isinstance(workload, Node) and "tool" in workload \
            else overlay.location or where
        check.error(at, join("variants", variant.base or variant.name), f"runs {tool} and "
                    f"would be compared with {first.name}, which runs {base_tool}: give the "
                    f"variants of each tool their own `group:` (e.g. group: "
                    f"{tool.replace('.', '-')})")


def _top_level(check: Checker, document: Node) -> dict[str, Any]:
    seed = check.num(document, "seed", "", TOP_NUMBERS["seed"])
    order = check.choice(document, "order", "", ORDERS, default="interleaved")
    if order == "randomized" and seed is None:
        seed = random.SystemRandom().randrange(2**31)  # recorded in the manifest
    for key in ("name", "description"):
        check.get(document, key, "", str)
    name = document.get("name")
    if isinstance(name, str) and (why := unsafe(name)):
        check.error(document.where("name"), "name", f"profile name {why}")
    return {
        "repeat": check.num(document, "repeat", "", TOP_NUMBERS["repeat"], default=1),
        "order": order,
        "seed": seed,
        "cooldown": float(check.num(document, "cooldown", "", TOP_NUMBERS["cooldown"],
                                    default=0)),
        "on_mismatch": check.choice(document, "on_mismatch", "", ON_MISMATCH, default="fail"),
        "warmup_trials": check.num(document, "warmup_trials", "", TOP_NUMBERS["warmup_trials"],
                                   default=0),
        "metrics": _metrics(check, document),
        "boot": check.choice(document, "boot", "", BOOT_MODES, default="per-kernel"),
        "bisect": _bisect(check, document),
    }


BISECT_KEYS = ("tree", "build", "image")


def _bisect(check: Checker, document: Node) -> dict[str, str]:
    """`bisect: {tree: ../linux, build: "make -j$(nproc) bzImage", image:
    arch/x86/boot/bzImage}`: strings, every key optional."""
    node = check.mapping(document.get("bisect"), document.where("bisect"), "bisect")
    if node is None:
        return {}
    check.keys(node, "bisect", BISECT_KEYS)
    out = {}
    for key in BISECT_KEYS:
        value = check.get(node, key, "bisect", str)
        if value is not None:
            out[key] = value
    return out


def _metrics(check: Checker, document: Node) -> dict[str, MetricPolicy]:
    """`metrics: {latency_p99: {direction: lower, min_effect: 2%, max_regression: 5%}}`;
    keys are a metric name or `source.metric`; percentages may be written 5 or "5%". A
    metric named here is primary (judged in the Holm family) unless `primary: false`."""
    node = check.mapping(document.get("metrics"), document.where("metrics"), "metrics")
    out: dict[str, MetricPolicy] = {}
    for name, raw in (node or Node()).items():
        assert node is not None
        path = join("metrics", name)
        spec = check.mapping(raw, node.where(name), path)
        if spec is None:
            continue
        check.keys(spec, path, METRIC_KEYS)
        primary = check.get(spec, "primary", path, bool)
        out[name] = MetricPolicy(
            direction=check.choice(spec, "direction", path, DIRECTIONS),
            min_effect=_percent(check, spec, "min_effect", path),
            max_regression=_percent(check, spec, "max_regression", path),
            primary=primary is not False,
        )
    return out


def _percent(check: Checker, node: Node, key: str, path: str) -> float | None:
    if key not in node:
        return None
    value = node[key]
    text = value.strip().removesuffix("%") if isinstance(value, str) else value
    try:
        number = float(text) if not isinstance(text, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or not 0 <= number <= 1000:
        check.error(node.where(key), join(path, key),
                    f"expected a percentage like 5 or '5%', got {value!r}")
        return None
    return number


def _columns(check: Checker, report: Node, names: list[str]) -> None:
    """`report.columns: {Baseline: [rps, defer], Patched: [...]}`: the A/B table's
    columns, each joining variants that measure different rows (a cover letter's column
    per kernel); a row's cell comes from the first of them that measured it."""
    if "columns" not in report:
        return
    node = check.mapping(report.get("columns"), report.where("columns"), "report.columns")
    seen: dict[str, str] = {}
    for column in node or Node():
        assert node is not None
        path = join("report.columns", column)
        members = check.string_list(node, column, "report.columns") or []
        if not members:
            check.error(node.where(column), path, "a column joins one variant or more")
        for name in members:
            if name not in names:
                check.error(node.where(column), path, f"no variant {name!r}"
                            f"{suggest(name, names)}")
            elif name in seen:
                check.error(node.where(column), path, f"variant {name!r} is already in "
                            f"column {seen[name]!r}")
            seen.setdefault(name, column)
    if node is not None and len(node) < 2:
        check.error(report.where("columns"), "report.columns", "two columns or more: the "
                    "first is the baseline the others are compared with")


def _dedupe(check: Checker) -> None:
    """Variants re-parse the base document: report each base problem once."""
    seen = set()
    unique = []
    for problem in check.problems:
        key = (problem.location, problem.key_path, problem.message)
        if key not in seen:
            seen.add(key)
            unique.append(problem)
    check.problems = unique
