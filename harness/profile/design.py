"""Say it before the run: can this profile's design reach a verdict?

`napilab validate` and `napilab plan` print these warnings (`--strict` makes them exit
2). The family is counted as the A/B table will count it: primary lines
(`harness.stats.family`) times the compared pairs (each variant with the baseline, or
with the first variant of its comparison group), where both variants produce the
line's source (a netperf line is not compared with an xdpsock variant). Pure: reads the
Profile only.
"""

from __future__ import annotations

from dataclasses import asdict

from napilab.harness.profile.profile import Profile, Variant
from napilab.harness.profile.sections import ALL, traced_mode
from napilab.harness.stats.family import (
    POOLED_SOURCE,
    Workload,
    default_direction,
    is_primary,
    named_primary,
)
from napilab.harness.stats.power import Reach, reachability
from napilab.runners.registry import headline

# The CPU cost lines (source `cpu`: busy cores, CPU-us per operation) are derived from
# proc_stat's per-CPU rows and follow every table (reports.ab.cpu_cost).
COST_SOURCE, COST_FROM = "cpu", "proc_stat"


def _sources(variant: Variant) -> set[str]:
    found = {variant.workload.source, POOLED_SOURCE, *(c.name for c in variant.collect)}
    return found | {COST_SOURCE} if COST_FROM in found else found


def _produced(source: str, variant: Variant) -> bool:
    return source.split(".")[0] in _sources(variant)


def primary_lines(profile: Profile) -> list[tuple[str, str]]:
    """(source, metric) of each primary line of the A/B table."""
    policies = {name: asdict(policy) for name, policy in profile.metrics.items()}
    source = profile.variants[0].workload.source
    workload = Workload(source, headline(source))
    if profile.table:
        rows = [(row.source, row.metric) for row in profile.table
                if is_primary(row.source, row.metric, policies, workload)]
        costs = [(COST_SOURCE, n.removeprefix(f"{COST_SOURCE}."))
                 for n in sorted(named_primary(policies)) if n.startswith(f"{COST_SOURCE}.")]
        return rows + [c for c in costs if c not in rows]
    named = named_primary(policies)
    if named:
        return [_split(n, profile.variants[0]) for n in sorted(named)]
    return [(source, m) for m in workload.headline]


def _split(name: str, variant: Variant) -> tuple[str, str]:
    """`source.metric` or a bare metric (names may hold dots: latency_p99.9)."""
    for source in sorted(_sources(variant), key=len, reverse=True):
        if name.startswith(f"{source}."):
            return source, name[len(source) + 1:]
    return variant.workload.source, name


def family_size(profile: Profile) -> int:
    """Primary lines x the compared pairs (each variant with its comparison group's
    first, `Profile.comparisons`), where both variants produce the line's source."""
    lines = primary_lines(profile)
    return sum(1 for base, other in profile.comparisons for source, _ in lines
               if _produced(source, profile.variant(base))
               and _produced(source, profile.variant(other)))


def reach(profile: Profile) -> Reach:
    return reachability(profile.repeat, family_size(profile))


def traced_lines(profile: Profile) -> list[str]:
    """What the trace collector's twins cost (collect.trace.traced: twins), for validate
    and plan: twice the trials, and why; empty without twins."""
    twins = profile.twins
    if not twins:
        return []
    shown = ", ".join(list(twins)[:4]) + (", ..." if len(twins) > 4 else "")
    return [f"traced twins (collect.trace.traced: twins): {shown}: each variant runs "
            "again with the tracer, beside it in every repetition, so the run has twice "
            "the trials; verdicts come from the untraced trials, the traced ones give the "
            "per-stage breakdown and the tracer's overhead"]


def traced_warnings(profile: Profile) -> list[str]:
    """`collect.trace.traced: all`: what it costs (empty otherwise). A choice the
    profile made, said but not a design problem (`--strict` ignores it)."""
    every = [v.name for v in profile.variants if traced_mode(v.collect) == ALL]
    if not every:
        return []
    return [f"collect.trace.traced: all ({', '.join(every[:4])}"
            f"{', ...' if len(every) > 4 else ''}): every trial is traced, so the "
            "verdicts' latencies include the tracer's overhead, and this run cannot "
            "measure that overhead (it has no untraced trials); the default, twins, "
            "judges untraced trials and measures it at twice the trials"]


def design_warnings(profile: Profile) -> list[str]:
    """What keeps this profile's table or gate from reaching a verdict, in words."""
    out = []
    found = reach(profile)
    if len(profile.variants) > 1 or found.n < 2:
        message = found.message()
        if message:
            out.append(message)
    for name, policy in profile.metrics.items():
        if not policy.primary:
            continue
        rows = [(row.source, row.metric) for row in profile.table
                if name in (row.metric, f"{row.source}.{row.metric}")]
        if name.startswith(f"{COST_SOURCE}."):
            if not any(COST_FROM in {c.name for c in v.collect} for v in profile.variants):
                out.append(f"metrics: {name} is the CPU cost napilab derives from the "
                           f"{COST_FROM} collector, which this profile does not enable: it "
                           "is not judged")
        elif profile.table and not rows:
            out.append(f"metrics: {name} is primary but not a row of report.table: it is "
                       "not judged")
        source, metric = rows[0] if rows else _split(name, profile.variants[0])
        if policy.direction is None and default_direction(source, metric) is None:
            out.append(f"metrics: {name}: which way is better is unknown (no rule matches "
                       f"its name): add direction: lower or higher")
    return out
