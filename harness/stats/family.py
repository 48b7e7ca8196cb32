"""Which metrics form the multiple-comparison family, and which way each is better.

Pure. The family is the metrics that matter, not every table row: a line is *primary*
when the profile's `metrics:` names it (key `metric` or `source.metric`, unless it says
`primary: false`); when `metrics:` names none, the workload's headline latency
percentiles and its rate (the tool's `headline`, recorded in the manifest: `Workload`).
Pooled per-transaction percentile lines
(source `pooled`) are primary only when named `pooled.<metric>`: they re-test the same
repetitions as the tool's own percentiles. Every other line is descriptive: change and CI
shown, marked exploratory, never a verdict that claims family-wise control.

Directions: the profile's `direction` wins; else `default_direction`'s rules, first
match wins (docs/statistics.md lists them); a metric no rule recognises is judged as
lower-is-better and marked *assumed*.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Direction(StrEnum):
    """Which way is an improvement for a metric."""

    LOWER = "lower"  # latency, cpu, drops
    HIGHER = "higher"  # throughput, transactions


POOLED_SOURCE = "pooled"


@dataclass(frozen=True)
class Workload:
    """A run's workload as the family sees it: the `source` of its rows (`neper` for
    neper.tcp_rr) and its tool's headline metrics (runners.registry; the manifest keeps
    them with the run)."""

    source: str
    headline: tuple[str, ...] = ()

# Time units: per-transaction latency (us) and CPU time from /proc/stat (ms) are both
# "less is better". Seconds are left out: `snapshot.interval` is the measured window.
_TIME_UNITS = ("us", "ms", "ns")
# Counters that only ever count trouble or overhead.
_LOWER_NAMES = ("dropped", "drops", "time_squeeze", "retransmits", "loss", "errors",
                "duplicates", "cpu_collision", "flow_limit_count")
_LOWER_PATTERN = re.compile(r"latency|^rtt|_(ms|us|ns)$|interrupts|(^|_)ipis?($|_)|^irq_|^cpu_")
_HIGHER_PATTERN = re.compile(r"throughput|transactions|received|_per_second$|(^|_)rate($|_)"
                             r"|bandwidth|(^|_)[mkg]?pps($|_)|(^|_)[mkg]?bps($|_)")
# A rate unit: packets/s, bits/s, trans/s, msg/s, 1/s, Mbit/s, pps, Mpps, bps
_RATE_UNIT = re.compile(r"/s$|^[mkg]?pps$|^[mkg]?bps$", re.IGNORECASE)
# proc_stat reports CPU time per state; all of it is cost except idle time. `cpu` is
# the CPU cost derived from it (busy cores, CPU-us per operation: reports.ab.cpu_cost).
_CPU_TIME_SOURCES = ("proc_stat", "softirqs", "cpu")


def default_direction(source: str, metric: str, unit: str = "") -> Direction | None:
    """napilab's rule for a metric without a policy; None when no rule matches."""
    if source == "cpu" and metric == "ipc":  # more instructions per cycle: a busy-polling
        return None                           # spin has a high one; no rule says better
    if source in _CPU_TIME_SOURCES or source.startswith(tuple(f"{s}." for s in
                                                            _CPU_TIME_SOURCES)):
        return Direction.HIGHER if metric == "idle" else Direction.LOWER
    if metric in _LOWER_NAMES or unit in _TIME_UNITS or _LOWER_PATTERN.search(metric):
        return Direction.LOWER
    if _RATE_UNIT.search(unit) or _HIGHER_PATTERN.search(metric):
        return Direction.HIGHER
    return None


def named_primary(policies: Mapping[str, Any]) -> set[str]:
    """The `metrics:` keys that make a metric primary (all but `primary: false`)."""
    return {name for name, policy in policies.items()
            if not (isinstance(policy, Mapping) and policy.get("primary") is False)}


def is_primary(source: str, metric: str, policies: Mapping[str, Any],
               workload: Workload | None) -> bool:
    """Is this line in the family? (module doc)"""
    named = named_primary(policies)
    if named:
        if source == POOLED_SOURCE:
            return f"{source}.{metric}" in named
        return f"{source}.{metric}" in named or metric in named
    return workload is not None and source == workload.source and metric in workload.headline
