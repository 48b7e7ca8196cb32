"""A/B across two runs (e.g. baseline kernel vs patched kernel): run A is the baseline.

Variants are matched by name; each matched variant gives two columns, `A:<variant>` and
`B:<variant>`, compared as a pair. Lines are run A's (its `report.table` or default
lines) plus any of run B's that A lacks. Metric policies: run A's, then B's for metrics
A does not name. Whether the runs may be compared at all (host facts, knobs) is
harness.store.confounders' business; this module only builds the table.
"""

from __future__ import annotations

from harness.errors import InputError
from reports.ab.compare import Column, RunData, Spec, Table, build_table, column, line_specs


def matched_variants(a: RunData, b: RunData) -> list[str]:
    """Variants both runs completed, in run A's order; InputError when there are none."""
    common = [v for v in a.variants if v in b.variants]
    if not common:
        raise InputError(f"runs share no variant: A ({a.directory}) has {a.variants}, "
                         f"B ({b.directory}) has {b.variants}",
                         hint="variants are matched by name")
    return common


def columns(a: RunData, b: RunData) -> tuple[list[Column], tuple[tuple[str, str], ...]]:
    cols: list[Column] = []
    pairs = []
    for variant in matched_variants(a, b):
        cols += [column(a, variant, f"A:{variant}"), column(b, variant, f"B:{variant}")]
        pairs.append((f"A:{variant}", f"B:{variant}"))
    return cols, tuple(pairs)


def specs(a: RunData, b: RunData) -> list[Spec]:
    out = line_specs(a)
    seen = {(s.source, s.metric, s.role) for s in out}
    return out + [s for s in line_specs(b) if (s.source, s.metric, s.role) not in seen]


def policies(a: RunData, b: RunData) -> dict[str, object]:
    return {**b.policies, **a.policies}


def compare_runs(a: RunData, b: RunData) -> Table:
    cols, pairs = columns(a, b)
    return build_table(specs(a, b), cols, pairs, policies(a, b), "A")
