"""Pareto order of points on medians, pure: `napilab tune` ranks its candidates by it
(harness.tune.study) and recommends a front's confirmed candidates by it (reports.tune.confirm).
Every key is minimised: `signed` turns a value to maximise into one to minimise and a
missing value into the worst. (reports.ab.frontier judges a frontier beyond the noise
of repetitions; this is the plain order of single numbers.)"""

from __future__ import annotations

import math
from collections.abc import Sequence


def signed(value: float | None, direction: str) -> float:
    """VALUE as a key to minimise: DIRECTION minimise keeps it, maximise negates it."""
    if value is None:
        return math.inf
    return value if direction == "minimise" else -value


def dominates(q: Sequence[float], p: Sequence[float]) -> bool:
    """Q is no worse than P on every key and not the same point."""
    return all(a <= b for a, b in zip(q, p, strict=True)) and list(q) != list(p)


def layers(keys: Sequence[Sequence[float]]) -> list[int]:
    """Each point's Pareto layer: 0 for the points no other dominates, 1 for those only
    layer 0 dominates, and so on."""
    layer = [0] * len(keys)
    remaining = set(range(len(keys)))
    depth = 0
    while remaining:
        front = {i for i in remaining
                 if not any(dominates(keys[j], keys[i]) for j in remaining)}
        for i in front:
            layer[i] = depth
        remaining -= front
        depth += 1
    return layer
