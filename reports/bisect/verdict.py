"""A bisect step's reading, by the nightly gate (reports.nightly.check, harness.stats.gate):
the candidate against the good endpoint in the step's run, on the gated metrics (the
profile's primary ones, or those `--metric` names) with the gate's threshold
(`--max-regression`, the profile's `max_regression`, else 5%).

The endpoints' step (the bad endpoint as the candidate) says which way each metric
changed between the endpoints: regression or improvement. A metric that did neither is
not what the bisection looks for and is left out of the steps. A step is then

  bad           every such metric changed the endpoints' way, beyond the threshold;
  good          every such metric is within the threshold of the good endpoint on both
                sides (the gate's `within` bounds the worse side only: a CI that reaches
                beyond the threshold on the better side is inconclusive here);
  inconclusive  any metric the gate cannot decide (more repetitions, then a skip);
  other         the metrics disagree, or one changed the other way (skipped, said why).

With `--against both` the candidate is also compared with the bad endpoint (the bad
endpoint as the reference): bad needs it within the threshold of the bad endpoint too,
good needs it to differ from the bad endpoint as the good one does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from napilab.harness.bisect.record import Case
from napilab.harness.stats.compare import ABSOLUTE, Comparison
from napilab.harness.stats.family import Direction
from napilab.reports.ab.compare import load_run
from napilab.reports.ab.model import format_ci, format_pct
from napilab.reports.nightly.baselines import Reference
from napilab.reports.nightly.check import DEFAULT_MAX_REGRESSION_PCT, gate
from napilab.reports.nightly.thresholds import Threshold

CHANGED = ("regression", "improvement")
GOOD, BAD, INCONCLUSIVE, OTHER = "good", "bad", "inconclusive", "other"


def cases(run_dir: Path, reference: str, candidate: str, metrics: Sequence[str],
          thresholds: Mapping[str, Threshold]) -> list[Case]:
    """The gate's cases of CANDIDATE against REFERENCE, two variants of one run."""
    run = load_run(run_dir)
    report = gate(Reference("run", (run,)), run, thresholds, DEFAULT_MAX_REGRESSION_PCT,
                  within=(reference, candidate), only=metrics)
    out = []
    for c in report.cases:
        found = c.comparison
        status, reason = c.status, c.reason
        if status == "within" and found is not None and not _both_sides(found):
            status = "inconclusive"
            reason = (f"within {c.threshold} on the worse side, but the CI reaches beyond it "
                      "on the better side: unchanged is not shown")
        out.append(Case(
            metric=c.name, status=status, reason=reason, against=reference,
            change="-" if found is None else format_pct(found.change, found.change_ci,
                                                        found.scale, c.unit),
            ci="-" if found is None else format_ci(found.change_ci, found.change,
                                                   found.scale, c.unit),
            good=None if found is None else found.baseline.median,
            candidate=None if found is None else found.variant.median))
    return out


def _both_sides(found: Comparison) -> bool:
    """The gate's `within` bounds the worse side only (a pass of the nightly gate); a
    bisect step is like the good endpoint only when the CI is inside the threshold on
    both sides: an improvement beyond it is a change too (the one a bisection may hunt).
    The bounds and the threshold are on the comparison's own scale (harness.stats.gate:
    a relative change cannot pass -100%, so the better side of a decrease is bounded at
    -min(T, 0.99))."""
    low, high = found.change_ci
    threshold = found.min_effect
    if not threshold or not math.isfinite(low) or not math.isfinite(high):
        return low == high == 0.0 and threshold == 0.0
    floor = threshold if found.scale == ABSOLUTE else min(threshold, 0.99)
    return -floor < low and high < threshold if found.direction is Direction.LOWER \
        else -threshold < low and high < floor


def direction(endpoints: Sequence[Case]) -> dict[str, str]:
    """The metrics that changed between the endpoints, and which way."""
    return {c.metric: c.status for c in endpoints if c.status in CHANGED}


def reading(found: Sequence[Case], changed: Mapping[str, str]) -> tuple[str, str]:
    """(good | bad | inconclusive | other, why) of one round (module doc)."""
    mine = [c for c in found if c.metric in changed]
    if not mine:
        return OTHER, "none of the metrics that changed between the endpoints was measured"
    per = []
    for c in mine:
        want_bad = changed[c.metric]
        if c.against == GOOD:
            per.append((c, BAD if c.status == want_bad else GOOD if c.status == "within"
                        else INCONCLUSIVE if c.status == "inconclusive" else OTHER))
        else:  # against the bad endpoint: the endpoints' change the other way round
            undo = "improvement" if want_bad == "regression" else "regression"
            per.append((c, GOOD if c.status == undo else BAD if c.status == "within"
                        else INCONCLUSIVE if c.status == "inconclusive" else OTHER))
    kinds = {k for _, k in per}
    if kinds == {BAD} or kinds == {GOOD}:
        (kind,) = kinds
        return kind, "; ".join(f"{c.metric} against {c.against}: {c.status} {c.change}"
                               for c, _ in per)
    if INCONCLUSIVE in kinds and kinds <= {INCONCLUSIVE, GOOD, BAD}:
        return INCONCLUSIVE, "; ".join(f"{c.metric} against {c.against}: {c.reason}"
                                       for c, k in per if k == INCONCLUSIVE)
    return OTHER, "the metrics disagree: " + "; ".join(
        f"{c.metric} against {c.against}: {c.status} {c.change}" for c, _ in per)
