"""Which way is better for a metric, and the thresholds it is judged by.

The profile's `metrics:` policies (recorded in manifest["metrics"], keyed "metric" or
"source.metric") win; without a direction there, napilab's default rule decides
(harness.stats.family.default_direction, shared with `napilab validate`);
a metric no rule recognises is judged as "lower is better" and marked `assumed`, so the
report can say so (docs/statistics.md lists the rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from napilab.harness.stats.family import Direction, default_direction

__all__ = ["Judgement", "default_direction", "judge", "policy_for"]

@dataclass(frozen=True)
class Judgement:
    """How one table line is judged."""

    direction: Direction
    origin: str  # "policy" (profile metrics:), "default" (a rule matched), "assumed"
    min_effect_pct: float | None  # from the policy; None: any significant change counts
    max_regression_pct: float | None  # from the policy; None: the gate's default


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
