"""A bisect step's reading, by the nightly gate (reports.nightly.check, harness.stats.gate):
the candidate against the good endpoint in the step's run, on the gated metrics (the
profile's primary ones, or those `--metric` names) with the gate's threshold
(`--max-regression`, the profile's `max_regression`, else 5%).

The endpoints' step (the bad endpoint as the candidate) says which way each metric
changed between the endpoints: regression or improvement. A metric that did neither is
not what the bisection looks for and is left out of the steps. A step is then

  bad           every such metric changed the endpoints' way, beyond the threshold;
  good          every such metric is within the threshold of the good endpoint;
  inconclusive  any metric the gate cannot decide (more repetitions, then a skip);
  other         the metrics disagree, or one changed the other way (skipped, said why).

With `--against both` the candidate is also compared with the bad endpoint (the bad
endpoint as the reference): bad needs it within the threshold of the bad endpoint too,
good needs it to differ from the bad endpoint as the good one does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from napilab.harness.bisect.record import Case
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
        out.append(Case(
            metric=c.name, status=c.status, reason=c.reason, against=reference,
            change="-" if found is None else format_pct(found.change, found.change_ci,
                                                        found.scale, c.unit),
            ci="-" if found is None else format_ci(found.change_ci, found.change,
                                                   found.scale, c.unit),
            good=None if found is None else found.baseline.median,
            candidate=None if found is None else found.variant.median))
    return out


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
