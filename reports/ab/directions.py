"""Which way is better for a metric, and the thresholds it is judged by.

The profile's `metrics:` policies (recorded in manifest["metrics"], keyed "metric" or
"source.metric") win; without a direction there, napilab's default rule below decides;
a metric no rule recognises is judged as "lower is better" and marked `assumed`, so the
report can say so (docs/statistics.md lists the rules).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.stats.stats import Direction

# Time units: per-transaction latency (us) and CPU time from /proc/stat (ms) are both
# "less is better". Seconds are left out: `snapshot.interval` is the measured window.
_TIME_UNITS = ("us", "ms", "ns")
# Counters that only ever count trouble or overhead.
_LOWER_NAMES = ("dropped", "drops", "time_squeeze", "retransmits", "loss", "errors",
                "duplicates", "cpu_collision", "flow_limit_count")
_LOWER_PATTERN = re.compile(r"latency|^rtt|_(ms|us|ns)$|interrupts|(^|_)ipis?($|_)|^irq_|^cpu_")
_HIGHER_PATTERN = re.compile(r"throughput|transactions|received|_per_second$|(^|_)rate($|_)"
                             r"|bandwidth")
# proc_stat reports CPU time per state; all of it is cost except idle time.
_CPU_TIME_SOURCES = ("proc_stat", "softirqs")


@dataclass(frozen=True)
class Judgement:
    """How one table line is judged."""

    direction: Direction
    origin: str  # "policy" (profile metrics:), "default" (a rule matched), "assumed"
    min_effect_pct: float | None  # from the policy; None: any significant change counts
    max_regression_pct: float | None  # from the policy; None: the gate's default


def default_direction(source: str, metric: str, unit: str = "") -> Direction | None:
    """napilab's rule for a metric without a policy; None when no rule matches."""
    if source in _CPU_TIME_SOURCES:
        return Direction.HIGHER if metric == "idle" else Direction.LOWER
    if metric in _LOWER_NAMES or unit in _TIME_UNITS or _LOWER_PATTERN.search(metric):
        return Direction.LOWER
    if _HIGHER_PATTERN.search(metric):
        return Direction.HIGHER
    return None


def policy_for(policies: Mapping[str, Any], source: str, metric: str) -> Mapping[str, Any]:
    """The profile's policy for a metric: "source.metric" first, then "metric"."""
    for key in (f"{source}.{metric}", metric):
        found = policies.get(key)
        if isinstance(found, Mapping):
            return found
    return {}


def judge(policies: Mapping[str, Any], source: str, metric: str, unit: str = "") -> Judgement:
    policy = policy_for(policies, source, metric)
    wanted = policy.get("direction")
    if wanted in ("lower", "higher"):
        direction, origin = Direction(wanted), "policy"
    else:
        found = default_direction(source, metric, unit)
        direction, origin = (found, "default") if found else (Direction.LOWER, "assumed")
    return Judgement(direction, origin, _pct(policy.get("min_effect")),
                     _pct(policy.get("max_regression")))


def _pct(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None
