"""`tune:`: the space `napilab tune` searches, its goal, its budget. No host is touched.

    variants:
      default: {}                          # the baseline: the hosts as they are
      tuned:                               # the template: ${...} are the search's
        setup: {server: {rps: {"${iface}": "${rps}"},
                         netdev: {"${iface}": {napi_defer_hard_irqs: "${defer}",
                                               gro_flush_timeout: "${gro}"}}}}
    baseline: default
    tune:
      variant: tuned               # default: the one variant that is not the baseline
      parameters:
        rps: {choices: [none, "1"]}
        defer: {low: 0, high: 100}                 # integers (step 1; `step:` to change)
        gro: {low: 0, high: 200000, log: true}     # log scale; 0 is its bottom (value + 1)
      goal:                        # one objective, with bounds on other metrics ...
        minimise: busy_cores       # or maximise:; METRIC or METRIC@ROLE
        subject_to: {latency_p99: 100}             # at most (max:/min: in a mapping)
      # goal: {front: [latency_p99, busy_cores]}   # ... or a two-objective front
      budget: {trials: 20, time: 30m}              # whichever comes first
      duration: 2                  # each search trial's workload duration (s)
      confirm: {top: 3}            # re-measured with the baseline at the profile's repeat
      sampler: tpe                 # tpe | nsga2 | random (Optuna's)
      seed: 1
      guard: {num_transactions: {min: 1}}   # default: the tool's operation count > 0

A parameter is `${name}` in the template variant, as a matrix parameter is (a string
that is exactly `${name}` takes the value with its type). The baseline and other
variants may not use them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from napilab.harness.grammar.schema import Checker, join, suggest, type_name
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.harness.profile.matrix import substitute_string, substitute_text
from napilab.runners.base import RESERVED

TUNE_KEYS = ("variant", "parameters", "goal", "budget", "duration", "confirm", "sampler",
             "seed", "guard")
PARAM_KEYS = ("low", "high", "log", "step", "choices")
GOAL_KEYS = ("minimise", "maximise", "subject_to", "front")
BUDGET_KEYS = ("trials", "time")
CONFIRM_KEYS = ("top", "repeat")
BOUND_KEYS = ("min", "max")
SAMPLERS = ("tpe", "nsga2", "random")
MAX_TRIALS = 10_000
_RESERVED = (*RESERVED, "rate")
_TIME = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h)?")
_SECONDS = {"s": 1, "m": 60, "h": 3600, None: 1}


@dataclass(frozen=True)
class Param:
    """One searched parameter: a range (ints when low and high are, `step` apart) or a
    list of choices."""

    name: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] | None = None

    @property
    def integer(self) -> bool:
        return self.choices is None and all(
            isinstance(v, int) for v in (self.low, self.high)) and (
            self.step is None or float(self.step).is_integer())

    def corners(self) -> list[Any]:
        """The values that bound the space: each choice, or low and high."""
        return list(self.choices) if self.choices is not None else [self.low, self.high]

    def describe(self) -> str:
        if self.choices is not None:
            return "{" + ", ".join(_text(c) for c in self.choices) + "}"
        step = f" step {_text(self.step)}" if self.step is not None else ""
        return f"{_text(self.low)}..{_text(self.high)}{' log' if self.log else ''}{step}"

    def size(self) -> int | None:
        """How many values it takes (None: a continuous range)."""
        if self.choices is not None:
            return len(self.choices)
        if self.integer:
            step = int(self.step or 1)
            return int((int(self.high or 0) - int(self.low or 0)) // step) + 1
        return None


@dataclass(frozen=True)
class Objective:
    metric: str
    role: str | None
    direction: str  # minimise | maximise

    @property
    def label(self) -> str:
        return self.metric + (f"@{self.role}" if self.role else "")

    @property
    def policy(self) -> str:
        """Its direction as a profile's `metrics:` writes it."""
        return "lower" if self.direction == "minimise" else "higher"


@dataclass(frozen=True)
class Bound:
    metric: str
    role: str | None
    low: float | None
    high: float | None

    @property
    def label(self) -> str:
        return self.metric + (f"@{self.role}" if self.role else "")

    def violation(self, value: float) -> float:
        """How far VALUE is outside the bound (<= 0: inside), Optuna's constraint."""
        return max((value - self.high) if self.high is not None else -math.inf,
                   (self.low - value) if self.low is not None else -math.inf)

    def describe(self) -> str:
        parts = ([f">= {_text(self.low)}"] if self.low is not None else []) + (
            [f"<= {_text(self.high)}"] if self.high is not None else [])
        return f"{self.label} {' and '.join(parts)}"


@dataclass(frozen=True)
class Tune:
    variant: str
    parameters: tuple[Param, ...]
    objectives: tuple[Objective, ...]  # one, or two for a front
    constraints: tuple[Bound, ...]
    trials: int | None
    seconds: float | None
    duration: float | None
    top: int
    repeat: int | None  # the confirmation's repetitions (None: the profile's)
    sampler: str
    seed: int | None
    guard: tuple[Bound, ...] = field(default_factory=tuple)

    @property
    def front(self) -> bool:
        return len(self.objectives) > 1

    def corner(self) -> dict[str, Any]:
        """The values `validate` and `plan` show the template with: each parameter's
        first choice or its low end."""
        return {p.name: p.corners()[0] for p in self.parameters}

    def record(self) -> dict[str, Any]:
        return {"variant": self.variant,
                "parameters": {p.name: p.describe() for p in self.parameters},
                "objectives": [[o.label, o.direction] for o in self.objectives],
                "constraints": [c.describe() for c in self.constraints],
                "bounds": [[c.label, c.low, c.high] for c in self.constraints],
                "trials": self.trials, "seconds": self.seconds, "duration": self.duration,
                "top": self.top, "repeat": self.repeat, "sampler": self.sampler,
                "seed": self.seed, "guard": [g.describe() for g in self.guard]}


@dataclass(frozen=True)
class Tuning:
    """How `napilab tune` loads a tuned profile: its template variant once per candidate
    (name, parameter values), the baseline with them or not, and the search's own
    repetitions and workload duration in place of the profile's."""

    candidates: tuple[tuple[str, dict[str, Any]], ...]
    baseline: bool = True
    repeat: int | None = None
    duration: float | None = None
    primary: tuple[tuple[str, str], ...] = ()  # (metric, lower|higher): `metrics:` itself

    def override(self, document: Node) -> None:
        if self.repeat is not None:
            document["repeat"] = self.repeat
        if self.primary:  # the goal's metrics are the family its verdicts are judged in
            document["metrics"] = Node({m: Node({"direction": d}) for m, d in self.primary})
        workload = document.get("workload")
        if self.duration is not None and isinstance(workload, Node):
            workload["duration"] = self.duration


def filled(value: Any, values: dict[str, Any]) -> Any:
    """A plain document (dicts, lists) with `${param}` replaced as the loader does: a
    string that is exactly one placeholder takes the value with its type."""
    if isinstance(value, str):
        return substitute_string(value, values)
    if isinstance(value, dict):
        return {substitute_text(str(k), values): filled(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [filled(v, values) for v in value]
    return value


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def parse_tune(check: Checker, node: Any, where: Any, variants: list[str],
               baseline: str | None) -> Tune | None:
    spec = check.mapping(node, where, "tune")
    if spec is None:
        return None
    check.keys(spec, "tune", TUNE_KEYS, required=("parameters", "goal"))
    variant = _template(check, spec, variants, baseline)
    params = _parameters(check, spec)
    objectives, constraints = _goal(check, spec)
    budget = check.mapping(spec.get("budget"), spec.where("budget"), "tune.budget") or Node()
    check.keys(budget, "tune.budget", BUDGET_KEYS)
    trials = check.number(budget, "trials", "tune.budget", minimum=1, maximum=MAX_TRIALS,
                          integer=True)
    seconds = _seconds(check, budget, "time", "tune.budget")
    if trials is None and seconds is None:
        check.error(spec.where("budget") or spec.location, "tune.budget",
                    "say when the search stops: trials: N, time: 30m, or both")
    duration = check.number(spec, "duration", "tune", minimum=0.1, maximum=86400)
    confirm = check.mapping(spec.get("confirm"), spec.where("confirm"), "tune.confirm") or Node()
    check.keys(confirm, "tune.confirm", CONFIRM_KEYS)
    top = check.number(confirm, "top", "tune.confirm", minimum=1, maximum=20, integer=True,
                       default=3)
    repeat = check.number(confirm, "repeat", "tune.confirm", minimum=2, maximum=1000,
                          integer=True)
    sampler = check.choice(spec, "sampler", "tune", SAMPLERS, default="tpe")
    seed = check.number(spec, "seed", "tune", minimum=0, integer=True)
    guard = _bounds(check, spec.get("guard"), spec.where("guard"), "tune.guard")
    if variant is None or not params or not objectives:
        return None
    return Tune(variant, tuple(params), tuple(objectives), tuple(constraints), trials,
                seconds, None if duration is None else float(duration), int(top), repeat,
                sampler, seed, tuple(guard))


def _template(check: Checker, spec: Node, variants: list[str],
              baseline: str | None) -> str | None:
    others = [v for v in variants if v != baseline]
    name = check.get(spec, "variant", "tune", str)
    if name is not None:
        if name not in variants:
            check.error(spec.where("variant"), "tune.variant", f"no variant named {name!r}"
                        f"{suggest(name, variants)}")
            return None
        if name == baseline:
            check.error(spec.where("variant"), "tune.variant", f"{name!r} is the baseline: "
                        "the search fills in another variant, compared with it")
            return None
        return str(name)
    if baseline is None or len(others) != 1:
        check.error(spec.location, "tune.variant", "name the variant the search fills in "
                    f"(variants: {', '.join(variants) or 'none'}) and a `baseline:` it is "
                    "compared with")
        return None
    return others[0]


def _parameters(check: Checker, spec: Node) -> list[Param]:
    node = check.mapping(spec.get("parameters"), spec.where("parameters"), "tune.parameters")
    if node is None:
        return []
    if not node:
        check.error(spec.where("parameters"), "tune.parameters", "name at least one parameter")
    out = []
    for name, raw in node.items():
        path = join("tune.parameters", name)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in _RESERVED:
            check.error(node.key_locations.get(name), path, "not a usable parameter name"
                        + (f" ({name!r} is filled in by napilab)" if name in _RESERVED else ""))
            continue
        if isinstance(raw, Seq):  # short form: the choices
            short = Node({"choices": raw})
            if (at := node.where(name)) is not None:
                short.value_locations["choices"] = at
                short.location = at
            raw = short
        item = check.mapping(raw, node.where(name), path)
        if item is None:
            continue
        check.keys(item, path, PARAM_KEYS)
        param = _param(check, name, item, path)
        if param is not None:
            out.append(param)
    return out


def _param(check: Checker, name: str, item: Node, path: str) -> Param | None:
    if "choices" in item:
        extra = [k for k in ("low", "high", "log", "step") if k in item]
        if extra:
            check.error(item.where(extra[0]), join(path, extra[0]), "a parameter is either "
                        "choices or a low..high range, not both")
            return None
        choices = item["choices"]
        if not isinstance(choices, Seq) or not choices or any(
                isinstance(v, dict | list) or v is None for v in choices):
            check.error(item.where("choices"), join(path, "choices"), "expected a non-empty "
                        f"list of values, got {type_name(choices)}")
            return None
        if len({repr(v) for v in choices}) != len(choices):
            check.error(item.where("choices"), join(path, "choices"), "a choice is listed twice")
            return None
        return Param(name, choices=tuple(choices))
    for key in ("low", "high"):
        if key not in item:
            check.error(item.location, join(path, key), "required key is missing (or give "
                        "`choices: [...]`)")
            return None
    low = check.number(item, "low", path)
    high = check.number(item, "high", path)
    log = check.get(item, "log", path, bool, default=False)
    step = check.number(item, "step", path, minimum=0)
    if low is None or high is None:
        return None
    if high <= low:
        check.error(item.where("high"), join(path, "high"), f"{high} is not above low {low}")
        return None
    if low < 0 and log:
        check.error(item.where("low"), join(path, "low"), "a log scale starts at 0 or above")
        return None
    if step is not None and (step <= 0 or log):
        check.error(item.where("step"), join(path, "step"), "a step above 0, and no step "
                    "on a log scale" if log else f"a step above 0, got {step}")
        return None
    return Param(name, low, high, bool(log), step)


def _goal(check: Checker, spec: Node) -> tuple[list[Objective], list[Bound]]:
    node = check.mapping(spec.get("goal"), spec.where("goal"), "tune.goal")
    if node is None:
        return [], []
    check.keys(node, "tune.goal", GOAL_KEYS)
    single = [k for k in ("minimise", "maximise") if k in node]
    if "front" in node:
        if single or "subject_to" in node:
            check.error(node.where("front"), "tune.goal.front", "a front is its own goal: "
                        "no minimise/maximise/subject_to beside it")
            return [], []
        names = check.string_list(node, "front", "tune.goal") or []
        if len(names) != 2:
            check.error(node.where("front"), "tune.goal.front", "a front of two metrics, "
                        f"e.g. [latency_p99, busy_cores]; got {len(names)}")
            return [], []
        return [Objective(*_metric(n), "minimise") for n in names], []
    if len(single) != 1:
        check.error(node.location, "tune.goal", "one of minimise: METRIC, maximise: METRIC "
                    "or front: [METRIC, METRIC]")
        return [], []
    metric = check.get(node, single[0], "tune.goal", str)
    if metric is None:
        return [], []
    bounds = _bounds(check, node.get("subject_to"), node.where("subject_to"),
                     "tune.goal.subject_to")
    return [Objective(*_metric(metric), single[0])], bounds


def _metric(text: str) -> tuple[str, str | None]:
    metric, _, role = text.partition("@")
    return metric, role or None


def _bounds(check: Checker, raw: Any, where: Any, path: str) -> list[Bound]:
    if raw is None:
        return []
    node = check.mapping(raw, where, path)
    if node is None:
        return []
    out = []
    for name, value in node.items():
        inner = join(path, name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(Bound(*_metric(name), None, float(value)))
            continue
        item = check.mapping(value, node.where(name), inner)
        if item is None:
            continue
        check.keys(item, inner, BOUND_KEYS)
        low, high = check.number(item, "min", inner), check.number(item, "max", inner)
        if low is None and high is None:
            check.error(node.where(name), inner, "a bound: a number (at most), or "
                        "{min: X}, {max: Y}")
            continue
        out.append(Bound(*_metric(name), None if low is None else float(low),
                         None if high is None else float(high)))
    return out


def _seconds(check: Checker, node: Node, key: str, path: str) -> float | None:
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    match = _TIME.fullmatch(str(value).strip()) if isinstance(value, str) else None
    if match and float(match[1]) > 0:
        return float(match[1]) * _SECONDS[match[2]]
    check.error(node.where(key), join(path, key), f"expected a time like 600, 30m or 2h, "
                f"got {value!r}")
    return None

