"""The nightly regression gate (`napilab check`): a candidate run against a baseline run.

Per line of the table and variant both runs ran: `harness.stats.stats.check_regression`'s
rule, with the p-values Holm-adjusted across every gated (metric x variant) pair, so a
nightly job gating 20 metrics does not go red on one in twenty by chance:
  regression       significantly worse (adjusted p < 0.05, CI excludes 0) by more than
                   the metric's threshold;
  improvement      significantly better by more than it;
  noise            neither;
  not-enough-data  the runs could not have detected a change of the threshold's size;
  skipped          no comparison possible (no values, baseline median 0), or the metric's
                   direction is unknown and no threshold was given for it.
Threshold: `--max-regression METRIC=PCT`, else the profile's `max_regression`, else
DEFAULT_MAX_REGRESSION_PCT. Host-fact differences are reported, not fatal: a nightly gate
usually exists to compare kernel builds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.stats.stats import Comparison
from harness.store.confounders import Confounders, diff_manifests
from harness.store.store import load_manifest
from reports.ab import cross_run
from reports.ab.compare import RunData, build_table
from reports.ab.directions import judge
from reports.ab.line_stats import with_stats
from reports.ab.model import Line, format_ci, format_p, format_pct
from reports.ab.table_json import comparison_doc

DEFAULT_MAX_REGRESSION_PCT = 5.0
CHECK_FILE = "check.json"  # gate_json of the last check, kept in the candidate's RUN_DIR
_STATUS = {"worse": "regression", "better": "improvement", "~": "noise",
           "not-enough-data": "not-enough-data"}


@dataclass(frozen=True)
class GateCase:
    label: str
    source: str
    metric: str
    role: str | None
    unit: str
    variant: str
    direction: str
    direction_origin: str
    max_regression_pct: float
    threshold_origin: str  # cli | policy | default
    status: str  # regression | improvement | noise | not-enough-data | skipped
    comparison: Comparison | None
    reason: str

    @property
    def name(self) -> str:
        role = f"[{self.role}]" if self.role else ""
        return f"{self.source}.{self.metric}{role}"


@dataclass(frozen=True)
class GateReport:
    profile: str
    baseline: RunData
    candidate: RunData
    cases: tuple[GateCase, ...]
    family: int
    confounders: Confounders

    @property
    def regressions(self) -> list[GateCase]:
        return [c for c in self.cases if c.status == "regression"]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for case in self.cases:
            out[case.status] = out.get(case.status, 0) + 1
        return out


def parse_thresholds(items: Sequence[str]) -> dict[str, float]:
    """`METRIC=PCT` (PCT as 5 or 5%) -> {METRIC: 5.0}; METRIC is `metric` or
    `source.metric`, as in the profile's `metrics:`."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            pct = float(value.strip().removesuffix("%")) if sep and name.strip() else None
        except ValueError:
            pct = None
        if pct is None or not 0 < pct <= 1000:
            raise InputError(f"--max-regression {item!r}: expected METRIC=PCT with PCT in "
                             "(0, 1000], e.g. latency_p99=5 or ping.rtt_avg=3%")
        out[name.strip()] = pct
    return out


def find_baseline(path: Path, candidate: RunData) -> Path:
    """A run directory as given, or the newest complete run of the candidate's profile
    under a results directory (RESULTS or RESULTS/<profile>), never the candidate."""
    mine = candidate.directory.resolve()
    if (path / "manifest.json").exists():
        if path.resolve() == mine:
            raise InputError(f"--baseline {path} is the run being checked")
        return path
    name = str(candidate.manifest.get("profile", {}).get("name", ""))
    found: list[tuple[float, str, Path]] = []
    nested = path.glob(f"{name}/*/manifest.json") if name else iter(())
    for manifest_path in [*path.glob("*/manifest.json"), *nested]:
        run_dir = manifest_path.parent
        try:
            manifest = load_manifest(run_dir)
        except InputError:
            continue  # not a run of this napilab, or half written: not a baseline
        if (run_dir.resolve() == mine or manifest.get("status") != "complete"
                or manifest.get("profile", {}).get("name") != name
                or manifest.get("run_id") == candidate.manifest.get("run_id")):
            continue
        found.append((float(manifest.get("started") or 0), run_dir.name, run_dir))
    if not found:
        raise InputError(f"--baseline {path}: no complete run of profile {name!r} there "
                         f"(other than {candidate.directory})",
                         hint="pass a run directory, or the results directory of earlier runs")
    return max(found)[2]


def _threshold(line: Line, thresholds: Mapping[str, float], policy_pct: float | None,
               default_pct: float) -> tuple[float, str]:
    for key in (line.key, line.metric):
        if key in thresholds:
            return thresholds[key], "cli"
    if policy_pct is not None and policy_pct > 0:
        return policy_pct, "policy"
    return default_pct, "default"


def gate(baseline: RunData, candidate: RunData, thresholds: Mapping[str, float] | None = None,
         default_pct: float = DEFAULT_MAX_REGRESSION_PCT) -> GateReport:
    thresholds = dict(thresholds or {})
    cols, pairs = cross_run.columns(baseline, candidate)
    policies = cross_run.policies(baseline, candidate)
    raw = build_table(cross_run.specs(baseline, candidate), cols, pairs, policies, "A",
                      stats=False).lines
    known = {key for ln in raw for key in (ln.key, ln.metric)}
    unknown = sorted(set(thresholds) - known)
    if unknown:
        raise InputError(f"--max-regression {', '.join(unknown)}: no such metric in these runs; "
                         f"metrics are {sorted({ln.key for ln in raw})}")
    gated: list[Line] = []
    limits: list[tuple[float, str]] = []
    skipped: list[GateCase] = []
    for line in raw:
        judged = judge(policies, line.source, line.metric, line.unit)
        pct, origin = _threshold(line, thresholds, judged.max_regression_pct, default_pct)
        if judged.origin == "assumed" and origin == "default":
            # Guessing which way is worse would turn noise in e.g. `processed` into a red
            # nightly; such metrics are gated only when someone states a direction or limit.
            skipped += [_case(line, judged.direction.value, judged.origin, pct, origin, variant,
                              "skipped", None, "direction unknown: set metrics: {"
                              f"{line.metric}: {{direction: lower|higher}}}} in the profile")
                        for _, variant in pairs]
            continue
        gated.append(line)
        limits.append((pct, origin))
    lines, family = with_stats(gated, pairs, policies,
                               min_effect={i: pct / 100 for i, (pct, _) in enumerate(limits)})
    cases: list[GateCase] = []
    for line, (pct, origin) in zip(lines, limits, strict=True):
        for _, variant in pairs:
            found = line.comparisons.get(variant)
            status = "skipped" if found is None else _STATUS[found.verdict.value]
            reason = line.notes.get(variant, "") if found is None else found.reason
            cases.append(_case(line, line.direction, line.direction_origin, pct, origin,
                               variant, status, found, reason))
    common = [p[1].removeprefix("B:") for p in pairs]
    return GateReport(str(candidate.manifest.get("profile", {}).get("name", "")), baseline,
                      candidate, tuple(cases + skipped), family,
                      diff_manifests(baseline.manifest, candidate.manifest, common))


def _case(line: Line, direction: str, direction_origin: str, pct: float, origin: str,
          column: str, status: str, found: Comparison | None, reason: str) -> GateCase:
    return GateCase(line.label, line.source, line.metric, line.role, line.unit,
                    column.removeprefix("B:"), direction, direction_origin, pct, origin,
                    status, found, reason)


def case_message(case: GateCase) -> str:
    """One line with the evidence: change, CI, adjusted p, threshold, reason."""
    found = case.comparison
    if found is None:
        return f"{case.status}: {case.reason}"
    return (f"{case.status}: {case.label} ({case.variant}) {format_pct(found.change)} "
            f"(95% CI {format_ci(found.change_ci)}), p={format_p(found.p_adjusted)} "
            f"(Holm), threshold {case.max_regression_pct:g}% ({case.threshold_origin}), "
            f"{case.direction} is better; {case.reason}")


def gate_doc(report: GateReport) -> dict[str, Any]:
    return {
        "profile": report.profile, "status": "regression" if report.regressions else "pass",
        "candidate": {"dir": str(report.candidate.directory),
                      "run_id": report.candidate.manifest.get("run_id")},
        "baseline": {"dir": str(report.baseline.directory),
                     "run_id": report.baseline.manifest.get("run_id")},
        "counts": report.counts(), "family": report.family, "adjust": "holm",
        "confounders": [d.as_dict() for d in report.confounders.confounders],
        "intended": [d.as_dict() for d in report.confounders.intended],
        "cases": [{"name": c.name, "label": c.label, "source": c.source, "metric": c.metric,
                   "role": c.role, "unit": c.unit, "variant": c.variant, "status": c.status,
                   "direction": c.direction, "direction_origin": c.direction_origin,
                   "max_regression_pct": c.max_regression_pct,
                   "threshold_origin": c.threshold_origin, "reason": c.reason,
                   "comparison": None if c.comparison is None else comparison_doc(c.comparison)}
                  for c in report.cases],
    }


def gate_json(report: GateReport) -> str:
    return json.dumps(gate_doc(report), indent=1, default=str) + "\n"


def gate_text(report: GateReport) -> str:
    """Status first, then one row per case (<= 80 columns), grouped by variant."""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(report.counts().items()))
    out = [f"napilab check: {'REGRESSION' if report.regressions else 'pass'}: {counts}",
           f"  candidate {report.candidate.directory}",
           f"  baseline  {report.baseline.directory}",
           f"  p Holm-adjusted over {report.family} gated comparison(s)"]
    for variant in dict.fromkeys(c.variant for c in report.cases):
        out.append(f"  variant {variant}:")
        for c in (c for c in report.cases if c.variant == variant):
            found = c.comparison
            change, ci, p = ("-", "-", "-") if found is None else (
                format_pct(found.change), format_ci(found.change_ci), format_p(found.p_adjusted))
            out.append(f"  {c.status:<15}  {c.label[:24]:<24}  {change:>8}  {ci:>17}  "
                       f"{p:>5}".rstrip())
    return "\n".join(out) + "\n"
