"""What `napilab tune` reads from stored runs: a candidate's numbers in a search run, and
the verdicts of the confirmation run (the best candidates re-measured, interleaved with
the baseline, at the profile's repeat).

A metric is named as in `tune.goal`: `latency_p99`, or `latency_p99@server` for one
role. Over several roles, cores add up (busy_cores is the cores every host of the run
kept busy); any other metric written by two roles must name its role. A candidate's
search number is the median over its trials (the search runs one).

The confirmation is judged with the A/B table (reports.ab.compare: its Holm family, its
intervals): a candidate is *confirmed* when every objective is `better` than the
baseline or, for a front, one is `better` and none `worse`, and the median of every
bounded metric (`subject_to`) is inside its bound. Only confirmed candidates are
recommended; among them, the best median objective (the others confirmed are listed,
not compared with it), or, for a front, every confirmed candidate not dominated by
another on the medians.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from napilab.harness.store.manifest import Manifest
from napilab.harness.tune import pareto
from napilab.reports.ab.compare import RunData, load_run, table
from napilab.reports.ab.model import Line, Table

CORES = "cores"
BUSY = "busy_cores"  # what each candidate costs, shown whatever the goal


class MetricError(Exception):
    """A goal metric the run cannot give one number for (said to the user)."""


@dataclass(frozen=True)
class Named:
    metric: str
    role: str | None

    @property
    def label(self) -> str:
        return self.metric + (f"@{self.role}" if self.role else "")


def values(frame: pd.DataFrame, variant: str, named: Named) -> float | None:
    """The median over VARIANT's trials of NAMED (cores summed over roles)."""
    rows = frame[(frame["variant"] == variant) & (frame["metric"] == named.metric)]
    if "cpu" in rows:
        rows = rows[rows["cpu"].isna()]
    if named.role is not None:
        rows = rows[rows["role"] == named.role]
    if rows.empty:
        return None
    roles = sorted({str(r) for r in rows["role"].dropna()})
    units = set(rows["unit"])
    if len(roles) > 1 and not units <= {CORES}:
        raise MetricError(f"{named.metric} is written by roles {', '.join(roles)}: name one "
                          f"({named.metric}@{roles[0]})")
    sources = sorted(set(rows["source"]))
    if len(sources) > 1 and named.metric != "busy_cores":
        rows = rows[rows["source"] == sources[0]]
    per_trial = rows.groupby("trial")["value"].sum()
    return float(per_trial.median()) if len(per_trial) else None


def candidate(run_dir: str | Path, variant: str, objectives: Sequence[Named],
              bounds: Sequence[Named]) -> dict[str, float | None]:
    """A search run's numbers for VARIANT: each objective and bounded metric by label,
    and `operations`: the count of the workload's work (its tool's first operation
    metric found; 0 is a broken workload)."""
    run = load_run(run_dir)
    out = {n.label: values(run.samples, variant, n) for n in [*objectives, *bounds]}
    out["operations"] = operations(run, variant)
    return out


def operations(run: RunData, variant: str) -> float | None:
    """How much work the workload did in VARIANT's trials (None: its tool counts none)."""
    source = run.manifest.workload_source
    for names in run.manifest.operation(source).values():
        for metric in names:
            found = values(run.samples[run.samples["source"] == source], variant,
                           Named(metric, None)) if len(run.samples) else None
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class Verdicts:
    """One confirmed-or-not candidate of the confirmation run."""

    name: str
    verdicts: dict[str, str]  # objective label -> better | worse | ~ | not-enough-data
    changes: dict[str, str]  # objective label -> the change with its interval, as printed
    medians: dict[str, float | None]  # every goal metric's median over the repetitions
    inside: dict[str, bool]  # bounded metric -> its median is inside the bound
    confirmed: bool
    why: str


@dataclass(frozen=True)
class Confirmation:
    baseline: str
    baseline_medians: dict[str, float | None]
    candidates: list[Verdicts]
    recommended: list[str]  # names, best first
    table: Table | None = None
    notes: list[str] = field(default_factory=list)
    cost: dict[str, float | None] = field(default_factory=dict)  # name -> busy cores


def judge(run_dir: str | Path, objectives: Sequence[tuple[Named, str]],
          bounds: Sequence[tuple[Named, float | None, float | None]],
          candidates: Sequence[str]) -> Confirmation:
    """The confirmation run's verdicts: OBJECTIVES (named, minimise|maximise) against the
    baseline with the A/B table's statistics; BOUNDS (named, min, max) on the medians."""
    run = load_run(run_dir)
    tab = table(run)
    base = run.baseline
    goal = [n for n, _ in objectives] + [n for n, _, _ in bounds]
    medians = {c: {n.label: values(run.samples, c, n) for n in goal}
               for c in [base, *candidates]}
    out = []
    for name in candidates:
        verdicts: dict[str, str] = {}
        changes: dict[str, str] = {}
        for named, _ in objectives:
            line = _line(tab, run.manifest, named)
            comparison = line.comparisons.get(name) if line is not None else None
            verdicts[named.label] = str(comparison.verdict) if comparison is not None \
                else "not-enough-data"
            changes[named.label] = _change(line, name)
        inside = {named.label: _inside(medians[name][named.label], low, high)
                  for named, low, high in bounds}
        confirmed, why = _confirmed(verdicts, inside, len(objectives) > 1)
        out.append(Verdicts(name, verdicts, changes, medians[name], inside, confirmed, why))
    recommended = _recommend([v for v in out if v.confirmed], objectives)
    cost = {c: values(run.samples, c, Named(BUSY, None)) for c in [base, *candidates]}
    return Confirmation(base, medians[base], out, recommended, tab,
                        cost=cost if any(v is not None for v in cost.values()) else {})


def _line(tab: Table, manifest: Manifest, named: Named) -> Line | None:
    """The A/B table's line for NAMED: its metric, its role when named (cores: the line
    over every role when there is one, else the first)."""
    found = [ln for ln in tab.lines if ln.metric == named.metric
             and (named.role is None or ln.role == named.role)]
    if named.role is None and len(found) > 1:
        total = [ln for ln in found if ln.role in (None, "")]
        found = total or found
    return found[0] if found else None


def _change(line: Line | None, name: str) -> str:
    from napilab.reports.ab.model import format_ci, format_pct

    comparison = line.comparisons.get(name) if line is not None else None
    if comparison is None:
        return "-"
    return f"{format_pct(comparison.change, comparison.change_ci)} " \
           f"{format_ci(comparison.change_ci, comparison.change)}"


def _inside(value: float | None, low: float | None, high: float | None) -> bool:
    if value is None or math.isnan(value):
        return False
    return (low is None or value >= low) and (high is None or value <= high)


def _confirmed(verdicts: dict[str, str], inside: dict[str, bool],
               front: bool) -> tuple[bool, str]:
    outside = [label for label, ok in inside.items() if not ok]
    if outside:
        return False, f"median {', '.join(outside)} outside its bound"
    better = [k for k, v in verdicts.items() if v == "better"]
    worse = [k for k, v in verdicts.items() if v == "worse"]
    if front:
        if worse:
            return False, f"worse on {', '.join(worse)}"
        if not better:
            return False, "better on no objective with the stated confidence"
        return True, f"better on {', '.join(better)}"
    label, verdict = next(iter(verdicts.items()))
    if verdict == "better":
        return True, f"better on {label}"
    reason = {"worse": "worse on", "~": "not shown better (~) on",
              "not-enough-data": "could not judge"}
    return False, f"{reason.get(verdict, verdict)} {label}"


def _recommend(confirmed: list[Verdicts], objectives: Sequence[tuple[Named, str]]
               ) -> list[str]:
    def key(v: Verdicts, named: Named, direction: str) -> float:
        return pareto.signed(v.medians.get(named.label), direction)

    if len(objectives) == 1:  # the best; the other confirmed ones are in the table
        named, direction = objectives[0]
        return [v.name for v in sorted(confirmed, key=lambda v: key(v, named, direction))][:1]
    layer = pareto.layers([[key(v, n, d) for n, d in objectives] for v in confirmed])
    front = [v for v, depth in zip(confirmed, layer, strict=True) if depth == 0]
    first, direction = objectives[0]
    return [v.name for v in sorted(front, key=lambda v: key(v, first, direction))]

