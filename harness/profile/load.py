"""`workload.load`: a ladder of offered loads, each rung a trial group of every variant.

    workload:
      tool: sockperf.under-load
      load: [10k, 50k, 100k, max]          # short form: the rates
      load:
        rates: [10k, 50k, 100k, 200k, max] # ascending; `max`: as fast as the tool can
        tolerance: 5%       # achieved below offered by more: the rung is saturated
        knee: 2             # the knee: the lowest load whose p99 passes 2x its first rung's
        slo: 50             # capacity: the highest load whose `metric` stays at most this
        metric: latency_p99 # default: the tool's (runners' LoadAxis.latency)
        max_regression: 10% # what `napilab check` tolerates of capacity and knee
        unit: req/s         # the command tool only: what its `${rate}` counts
        achieved: [rps]     # the command tool only: the metric with the achieved rate

Each variant V becomes one variant per rung, `V+10k`, in comparison group `load-10k`
(with V's own group: `G+load-10k`), so verdicts compare variants at equal offered load,
never across rungs. The rung's rate is written into the tool's load argument (sockperf
`mps`, iperf3 `b`, mutilate `qps`, pktgen `rate`) and fills `${rate}` anywhere in the
profile's strings. Variants are ordered rung by rung, so `order: interleaved` runs every
variant of a rung before the next rung, repetition after repetition.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from napilab.harness.grammar.schema import Checker, join, type_name
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.runners.workloads.workload import ArgValue, LoadAxis

LOAD_KEYS = ("rates", "tolerance", "knee", "slo", "metric", "max_regression", "unit",
             "achieved")
MAX = "max"
RATE_PARAMETER = "rate"
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*([kKmMgG]?)")
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}


@dataclass(frozen=True)
class Rung:
    """One offered load: its rate in the ladder's unit (None: `max`) and its label."""

    rate: float | None
    label: str  # as written, normalised: 10k, 1.5M, max

    @property
    def name(self) -> str:
        return self.label


@dataclass(frozen=True)
class Ladder:
    rungs: tuple[Rung, ...]
    unit: str
    arg: str | None  # the client argument a rung's rate goes to (None: `${rate}` only)
    maximum: ArgValue | None  # what that argument takes for `max`
    achieved: tuple[str, ...]  # metrics with the achieved rate, first found first
    tolerance: float  # percent
    knee: float  # the knee's factor over the first rung's value
    slo: float | None  # the capacity's bound on `metric` (its unit)
    metric: str | None
    max_regression: float  # percent: what `check` tolerates of capacity and knee

    def argument(self, rung: Rung) -> ArgValue:
        """What the tool's argument (and `${rate}`) takes for RUNG."""
        if rung.rate is None:
            return self.maximum if self.maximum is not None else MAX
        return int(rung.rate) if rung.rate.is_integer() else rung.rate

    def record(self) -> dict[str, Any]:
        """The ladder as the manifest keeps it (reports read it from there)."""
        return {"unit": self.unit, "achieved": list(self.achieved),
                "tolerance": self.tolerance, "knee": self.knee, "slo": self.slo,
                "metric": self.metric, "max_regression": self.max_regression,
                "rungs": [[r.label, r.rate] for r in self.rungs]}


def parse_rate(value: Any) -> float | str | None:
    """A rate: a number, `10k`, `1.5M`, `2G` (powers of 1000), or `max` (None).
    Returns the error text when VALUE is none of them."""
    if isinstance(value, bool):
        return f"expected a rate like 10000, 10k or max, got {value!r}"
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and value.strip().lower() == MAX:
        return None
    elif isinstance(value, str) and (m := _RATE.fullmatch(value.strip())):
        number = float(m[1]) * _SCALE[m[2].lower()]
    else:
        return f"expected a rate like 10000, 10k, 1.5M or max, got {type_name(value)} " \
               f"{value!r}"
    if not math.isfinite(number) or number <= 0:
        return f"a rate is above 0, got {value!r}"
    return number


def label(rate: float | None) -> str:
    if rate is None:
        return MAX
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if rate >= scale and (rate / scale) * 100 == int((rate / scale) * 100):
            return f"{rate / scale:g}{suffix}"
    return f"{rate:g}"


def parse_load(check: Checker, node: Any, where: Any, path: str, tool: str,
               axis: LoadAxis | None, percent: Any) -> Ladder | None:
    """The ladder of `workload.load` (PATH) for TOOL, whose LoadAxis is AXIS."""
    if isinstance(node, Seq):
        spec = Node({"rates": node})
        spec.value_locations["rates"] = where
        spec.location = where
    else:
        found = check.mapping(node, where, path)
        if found is None:
            return None
        spec = found
        check.keys(spec, path, LOAD_KEYS, required=("rates",))
    if axis is None:
        check.error(where, path, f"{tool} runs a closed loop (each request waits for the "
                    "last): it takes no offered load; open-loop tools: sockperf.under-load, "
                    "iperf3 (-u), mutilate, pktgen, command (${rate})")
        return None
    rungs = _rungs(check, spec, join(path, "rates"))
    command = axis.arg is None
    for key in ("unit", "achieved"):
        if key in spec and not command:
            check.error(spec.where(key), join(path, key), f"{tool} says its own {key}; "
                        "`unit` and `achieved` are for the command tool")
    unit = (check.get(spec, "unit", path, str) if command else axis.unit) or "ops/s"
    achieved = tuple(check.string_list(spec, "achieved", path) or ()) if command \
        else axis.achieved
    knee = check.number(spec, "knee", path, minimum=1.0, default=2.0)
    if knee is not None and knee <= 1:
        check.error(spec.where("knee"), join(path, "knee"), f"a factor above 1, got {knee}")
    slo = check.number(spec, "slo", path, minimum=0.0)
    metric = check.get(spec, "metric", path, str) or axis.latency
    if metric is None and ("slo" in spec or "knee" in spec):
        check.error(spec.where("slo") or spec.where("knee"), join(path, "metric"),
                    f"{tool} has no latency metric of its own: name the one the knee and "
                    "the SLO read")
    tolerance = percent(check, spec, "tolerance", path)
    regression = percent(check, spec, "max_regression", path)
    if not rungs:
        return None
    return Ladder(tuple(rungs), unit, axis.arg, axis.maximum, achieved,
                  5.0 if tolerance is None else tolerance, float(knee or 2.0),
                  None if slo is None else float(slo), metric,
                  10.0 if regression is None else regression)


def _rungs(check: Checker, spec: Node, path: str) -> list[Rung]:
    rates = spec.get("rates")
    where = spec.where("rates")
    if not isinstance(rates, Seq) or not rates:
        check.error(where, path, f"expected a non-empty list of rates, got "
                    f"{type_name(rates)}")
        return []
    rungs: list[Rung] = []
    for i, value in enumerate(rates):
        at = rates.item_locations[i] if i < len(rates.item_locations) else where
        rate = parse_rate(value)
        if isinstance(rate, str):
            check.error(at, f"{path}[{i}]", rate)
            return []
        if rungs and (rungs[-1].rate is None or (rate is not None
                                                  and rate <= rungs[-1].rate)):
            check.error(at, f"{path}[{i}]", f"{value!r} after {rungs[-1].label}: the rates "
                        "go up, each once, `max` last")
            return []
        rungs.append(Rung(rate, label(rate)))
    return rungs


def rung_name(variant: str, rung: Rung) -> str:
    return f"{variant}+{rung.label}"


def rung_group(group: str | None, rung: Rung) -> str:
    own = f"load-{rung.label}"
    return f"{group}+{own}" if group else own
