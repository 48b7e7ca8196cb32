"""A/B across two or more runs, each under a label (e.g. Baseline and Patched kernel, as a
cover letter's table names its columns); the first run is the baseline.

Variants are matched by name (those every run has, in the first run's order, or the
ones asked for). Columns are label x variant, the runs of one variant side by side:
`Baseline:rps`, `Patched:rps`, `Baseline:local`, ...; when one variant is compared the
columns are the labels alone (`Baseline`, `Patched`: seed 001's layout). Each later
run's column is compared with the first run's column of the same variant. Lines are the
first run's (its `report.table` or default lines) plus any of the other runs' that it
lacks; metric policies likewise. Whether the runs may be compared at all (host facts,
knobs) is harness.store.confounders' business; this module only builds the table.
The nightly gate (reports.nightly.check) uses the two-run forms: `A:`/`B:` columns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from napilab.harness.errors import InputError
from napilab.harness.records.codec import FrozenRecord
from napilab.reports.ab.compare import Column, RunData, Spec, Table, build_table, column, line_specs
from napilab.reports.ab.table_json import TableRecord

LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.+-]{0,39}")
DEFAULT_LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class LabelledRun:
    label: str
    run: RunData


def check_labels(labels: Sequence[str | None]) -> list[str]:
    """The labels given, unlabelled runs named A, B, C... by position; InputError for a
    label that is not a short name or is given twice."""
    out = []
    for index, label in enumerate(labels):
        if label is None:
            label = DEFAULT_LABELS[index] if index < len(DEFAULT_LABELS) else f"run{index + 1}"
        elif not LABEL.fullmatch(label):
            raise InputError(f"label {label!r}: use up to 40 letters, digits, spaces and "
                             "_ . + - (LABEL=RUN_DIR)")
        out.append(label)
    twice = sorted({label for label in out if out.count(label) > 1})
    if twice:
        raise InputError(f"label {twice[0]!r} names two runs; give each run its own "
                         "(LABEL=RUN_DIR)")
    return out


def common_variants(runs: Sequence[LabelledRun], wanted: Sequence[str] = ()) -> list[str]:
    """Variants every run has, in the first run's order (or `wanted`, each checked);
    InputError when there are none."""
    first = runs[0]
    common = [v for v in first.run.variants if all(v in r.run.variants for r in runs[1:])]
    for name in wanted:
        if name not in common:
            lacking = [r.label for r in runs if name not in r.run.variants]
            raise InputError(f"variant {name!r} is not in every run ({', '.join(lacking)} "
                             f"lack it); variants all runs have: {common}")
    if wanted:
        return [v for v in common if v in wanted]
    if not common:
        listed = "; ".join(f"{r.label} ({r.run.directory}) has {r.run.variants}" for r in runs)
        raise InputError(f"the runs share no variant: {listed}",
                         hint="variants are matched by name")
    return common


def column_name(label: str, variant: str, variants: Sequence[str]) -> str:
    return label if len(variants) == 1 else f"{label}:{variant}"


def label_columns(runs: Sequence[LabelledRun], variants: Sequence[str]
                  ) -> tuple[list[Column], tuple[tuple[str, str], ...]]:
    cols: list[Column] = []
    pairs = []
    for variant in variants:
        names = [column_name(r.label, variant, variants) for r in runs]
        cols += [column(r.run, variant, name) for r, name in zip(runs, names, strict=True)]
        pairs += [(names[0], name) for name in names[1:]]
    return cols, tuple(pairs)


def specs(*runs: RunData) -> list[Spec]:
    """The first run's lines, then any of the others' it lacks."""
    out: list[Spec] = []
    seen: set[tuple[str, str, str | None]] = set()
    for run in runs:
        for spec in line_specs(run):
            if (spec.source, spec.metric, spec.role) not in seen:
                seen.add((spec.source, spec.metric, spec.role))
                out.append(spec)
    return out


def policies(*runs: RunData) -> dict[str, object]:
    merged: dict[str, object] = {}
    for run in reversed(runs):  # the first run's policy wins
        merged.update(run.policies)
    return merged


def compare_labelled(runs: Sequence[LabelledRun], variants: Sequence[str] = ()) -> Table:
    chosen = common_variants(runs, variants)
    cols, pairs = label_columns(runs, chosen)
    plain = [r.run for r in runs]
    return build_table(specs(*plain), cols, pairs, policies(*plain),
                       column_name(runs[0].label, chosen[0], chosen),
                       workload=next((r.workload for r in plain if r.workload), None))


# --- two runs, A the baseline (the nightly gate) -----------------------------------------

def matched_variants(a: RunData, b: RunData) -> list[str]:
    """Variants both runs completed, in run A's order; InputError when there are none."""
    return common_variants([LabelledRun("A", a), LabelledRun("B", b)])


def columns(a: RunData, b: RunData) -> tuple[list[Column], tuple[tuple[str, str], ...]]:
    cols: list[Column] = []
    pairs = []
    for variant in matched_variants(a, b):
        cols += [column(a, variant, f"A:{variant}"), column(b, variant, f"B:{variant}")]
        pairs.append((f"A:{variant}", f"B:{variant}"))
    return cols, tuple(pairs)


class RunRef(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a compared run"

    label: str
    dir: str
    run_id: str


class CompareRecord(FrozenRecord, frozen=True, omit_defaults=False):
    """`napilab compare --format json`: the runs under their labels, how they differ
    (each difference: kind, where, key, a, b, note and the run it is in) and the table."""

    WHAT = "a comparison of runs (compare --format json)"

    baseline: str
    table: TableRecord
    runs: list[RunRef] = msgspec.field(default_factory=list)
    variants: list[str] = msgspec.field(default_factory=list)
    confounders: list[dict[str, Any]] = msgspec.field(default_factory=list)
    intended: list[dict[str, Any]] = msgspec.field(default_factory=list)
    allow_mismatch: bool = False
