"""The search space of a `tune:` section as Optuna distributions, and back.

A range is Optuna's IntDistribution (integers: low, high and step are) or
FloatDistribution, log-scaled where `log: true`; a log range that starts at 0 (e.g.
gro_flush_timeout 0..200000) is searched as value + 1 on 1..high + 1, so 0 is its
bottom and 1, 10, 100 ... are as likely as 10000, 100000. Choices are a
CategoricalDistribution. Optuna stores the searched number; `decode` gives the value the
profile takes.
"""

from __future__ import annotations

from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from napilab.harness.profile.tune import Param, Tune


def shifted(param: Param) -> bool:
    """A log range from 0: searched as value + 1."""
    return param.log and param.choices is None and param.low == 0


def distribution(param: Param) -> BaseDistribution:
    if param.choices is not None:
        return CategoricalDistribution(list(param.choices))
    low, high = float(param.low or 0), float(param.high or 0)
    shift = 1 if shifted(param) else 0
    if param.integer:
        return IntDistribution(int(low) + shift, int(high) + shift, log=param.log,
                               step=int(param.step or 1))
    return FloatDistribution(low + shift, high + shift, log=param.log, step=param.step)


def distributions(tune: Tune) -> dict[str, BaseDistribution]:
    return {p.name: distribution(p) for p in tune.parameters}


def decode(tune: Tune, params: dict[str, Any]) -> dict[str, Any]:
    """Optuna's parameters -> the values the template variant is filled in with."""
    out = {}
    for p in tune.parameters:
        value = params[p.name]
        if shifted(p):
            value = value - 1
        if p.integer and not isinstance(value, bool):
            value = int(value)
        out[p.name] = value
    return out


def encode(tune: Tune, values: dict[str, Any]) -> dict[str, Any]:
    """The values of a candidate -> Optuna's parameters (to enqueue it again)."""
    return {p.name: values[p.name] + 1 if shifted(p) else values[p.name]
            for p in tune.parameters}


def grid_size(tune: Tune) -> int | None:
    """How many points the space has (None: a continuous range)."""
    total = 1
    for p in tune.parameters:
        size = p.size()
        if size is None:
            return None
        total *= size
    return total
