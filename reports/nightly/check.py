"""The nightly regression gate (`napilab check`): a candidate run against a reference
(a run, or the anchor level of the series of earlier nights, or a pinned run:
reports.nightly.baselines, harness.stats.nightly).

Gated: the primary metrics (harness.stats.family) plus any named by `--max-regression`;
descriptive rows are not gated. Per gated line and variant both runs ran, the
threshold tests of harness.stats.gate (regression p Holm-adjusted across every gated
case): regression, improvement, within (the worse-side 95% bound is inside the
threshold), inconclusive (the runs cannot tell), skipped (no values to compare) or error
(an infinite value). Threshold: `--max-regression METRIC=PCT` or `METRIC=+VALUE[UNIT]`
(absolute: `cpu_time=+500ms`, `+0.1cores` for a CPU time in ms over the measured
window), else the profile's `max_regression`, else DEFAULT_MAX_REGRESSION_PCT. A gated
metric whose direction is only assumed is refused (exit 2): guessing which way is worse
would turn noise into red builds, or a regression into green ones.

One rule for a night: it is a regression (exit 3) when any gated case is one; it passes
only when *every* gated case is judged within or better; anything else (a case that is
inconclusive, skipped or in error) makes the night inconclusive (exit 5), naming the
cases and what repeat would decide them.
Host-fact differences are reported, not fatal: a nightly gate usually exists to compare
kernel builds.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from napilab.harness.errors import InputError
from napilab.harness.records import codec
from napilab.harness.stats.compare import RATIO, Comparison, Nights
from napilab.harness.stats.curves import crossing_change
from napilab.harness.stats.family import Workload, is_primary
from napilab.harness.stats.gate import (
    GATE_CONFIDENCE,
    PASSING,
    GateSamples,
    gate_metrics,
    night_status,
)
from napilab.harness.store.confounders import Confounders, diff_manifests
from napilab.reports.ab import cross_run
from napilab.reports.ab.compare import Column, RunData, build_table, column
from napilab.reports.ab.directions import Judgement, judge
from napilab.reports.ab.line_stats import not_comparable
from napilab.reports.ab.model import Line, format_ci, format_p, format_pct, p_text
from napilab.reports.ab.table_json import comparison_doc
from napilab.reports.load.curves import crossing_text, load_report
from napilab.reports.nightly.baselines import Reference, reference_column
from napilab.reports.nightly.check_record import CHECK_FILE, CheckRecord
from napilab.reports.nightly.thresholds import Threshold, parse_thresholds

__all__ = ["CHECK_FILE", "DEFAULT_MAX_REGRESSION_PCT", "GateCase", "GateReport", "gate",
           "parse_thresholds"]

DEFAULT_MAX_REGRESSION_PCT = 5.0
LOAD_METRICS = ("capacity", "knee")  # `--max-regression` names of a load ladder's
LOAD_SOURCE = "load"


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
    max_regression_pct: float  # the relative threshold (percent); absolute: see threshold
    threshold_origin: str  # cli | policy | default
    status: str  # regression | improvement | within | inconclusive | skipped | error
    comparison: Comparison | None
    reason: str
    threshold: str = ""  # as printed: "5%", "+500 ms"
    anchor: tuple[str, ...] = ()  # run directories of the reference nights (a series)
    noise: str = ""  # the series' night-to-night noise, as printed
    detail: str = ""  # a load case's two crossings and their ratio (reports.load.curves)

    @property
    def name(self) -> str:
        role = f"[{self.role}]" if self.role else ""
        return f"{self.source}.{self.metric}{role}"


@dataclass(frozen=True)
class GateReport:
    profile: str
    reference: Reference
    candidate: RunData
    cases: tuple[GateCase, ...]
    family: int
    confounders: Confounders

    @property
    def baseline(self) -> RunData:
        return self.reference.newest

    @property
    def regressions(self) -> list[GateCase]:
        return [c for c in self.cases if c.status == "regression"]

    @property
    def undecided(self) -> list[GateCase]:
        """The gated cases that keep the night from passing: not judged within or better."""
        return [c for c in self.cases if c.status not in (*PASSING, "regression")]

    @property
    def status(self) -> str:
        """One rule (module doc, harness.stats.gate.night_status)."""
        return night_status([c.status for c in self.cases])

    def _undecided(self) -> list[Comparison]:
        """The comparisons of inconclusive cases that say what n would decide them."""
        return [c.comparison for c in self.undecided
                if c.comparison is not None and c.comparison.n_needed]

    def repeat_needed(self) -> int | None:
        """Repetitions per run that would let every inconclusive case decide (the
        largest any of them asks for); None when some case says no repeat would."""
        needs = [c.n_needed for c in self._undecided() if c.n_needed]
        return max(needs, default=None)

    def undecided_hint(self) -> str:
        """What would let an inconclusive gate decide, as a clause to append: the repeat
        per run the noise asks for; when this run already had that many, the estimate
        says a verdict was likely but this night's noise left none (power is not
        certainty), so one more repetition or longer trials, not the same again."""
        need = self.repeat_needed()
        if not need:
            return ""
        have = min(min(c.baseline.n, c.variant.n) for c in self._undecided())
        if need > have:
            return f"; about repeat >= {need} per run would decide"
        return (f"; repeat {have} was estimated to decide but this run's noise left it "
                f"undecided: repeat >= {have + 1} or longer trials")

    def undecided_text(self) -> str:
        """Which gated cases kept the night from passing, and why, one line each."""
        return "\n".join(f"    {c.name} ({c.variant}): {c.status}: {c.reason}"
                         for c in self.undecided)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for case in self.cases:
            out[case.status] = out.get(case.status, 0) + 1
        return out


def _threshold(line: Line, thresholds: Mapping[str, Threshold], policy_pct: float | None,
               default_pct: float) -> tuple[Threshold, str]:
    for key in (line.key, line.metric):
        if key in thresholds:
            return thresholds[key], "cli"
    if policy_pct is not None and policy_pct > 0:
        return Threshold(policy_pct), "policy"
    return Threshold(default_pct), "default"


def _columns(ref: Reference, candidate: RunData) -> tuple[list[Column],
                                                          tuple[tuple[str, str], ...]]:
    """A (the reference's repetitions merged) and B (the candidate) per variant, and for
    a nightly reference one column per night, N<k>:<variant>, k oldest first."""
    cols: list[Column] = []
    pairs = []
    for variant in cross_run.matched_variants(ref.newest, candidate):
        cols += [reference_column(ref, variant, f"A:{variant}"),
                 column(candidate, variant, f"B:{variant}")]
        if ref.nightly:
            cols += [column(run, variant, f"N{k}:{variant}")
                     for k, run in enumerate(ref.series)
                     if variant in run.manifest.variants]
        pairs.append((f"A:{variant}", f"B:{variant}"))
    return cols, tuple(pairs)


def _series(line: Line, ref: Reference, variant: str
            ) -> tuple[tuple[list[float], ...], tuple[str, ...]]:
    """The line's values night by night (oldest first; nights without them left out)
    and those nights' run directories."""
    nights, dirs = [], []
    for k, run in enumerate(ref.series if ref.nightly else ()):
        cell = line.cells.get(f"N{k}:{variant}")
        values = [] if cell is None else [v for v in cell.values if not math.isnan(v)]
        if values and all(math.isfinite(v) for v in values):
            nights.append(values)
            dirs.append(str(run.directory))
    return tuple(nights), tuple(dirs)


def _gated(raw: Sequence[Line], policies: Mapping[str, Any], workload: Workload | None,
           thresholds: Mapping[str, Threshold], default_pct: float, named: Sequence[str] = ()
           ) -> list[tuple[Line, Judgement, Threshold, str]]:
    gated = []
    assumed = []
    asked = {*thresholds, *named}
    for line in raw:
        named_here = line.key in asked or line.metric in asked
        if not (named_here or is_primary(line.source, line.metric, policies, workload)):
            continue  # descriptive rows are not gated
        judged = judge(policies, line.source, line.metric, line.unit)
        limit, origin = _threshold(line, thresholds, judged.max_regression_pct, default_pct)
        if judged.origin == "assumed":
            assumed.append(line.metric)
            continue
        if judged.direction.value == "higher" and limit.pct is not None and limit.pct >= 100:
            raise InputError(f"{line.key}: a higher-is-better metric cannot fall by "
                             f"{limit.pct:g}% or more: use a threshold below 100")
        gated.append((line, judged, limit, origin))
    if assumed:
        lines = ", ".join(f"{m}: {{direction: lower}}" for m in dict.fromkeys(assumed))
        raise InputError(f"gated metric(s) {', '.join(dict.fromkeys(assumed))}: which way is "
                         "worse is only assumed, so a threshold on them means nothing",
                         hint=f"add to the profile's metrics: {lines} (or higher), or leave "
                              "them out of --max-regression")
    return gated


def gate(reference: Reference, candidate: RunData,
         thresholds: Mapping[str, Threshold] | None = None,
         default_pct: float = DEFAULT_MAX_REGRESSION_PCT, *,
         within: tuple[str, str] | None = None,
         only: Sequence[str] = ()) -> GateReport:
    """WITHIN (baseline, variant): the two variants of one run (the candidate, also the
    reference) instead of each variant of two runs (`napilab bisect`'s step). ONLY:
    gate these metrics (METRIC or SOURCE.METRIC) and no other."""
    thresholds = dict(thresholds or {})
    load_limits = {m: thresholds.pop(m) for m in LOAD_METRICS if m in thresholds}
    base = reference.newest
    if within is None:
        cols, pairs = _columns(reference, candidate)
    else:
        cols = [column(candidate, within[0], f"A:{within[1]}"),
                column(candidate, within[1], f"B:{within[1]}")]
        pairs = ((f"A:{within[1]}", f"B:{within[1]}"),)
    # the candidate's profile states today's thresholds (the same as the reference's
    # unless --intended profile let a changed profile through)
    policies = {**base.policies, **candidate.policies}
    workload = candidate.workload or base.workload
    raw = build_table(cross_run.specs(base, candidate), cols, pairs, policies, "A",
                      stats=False).lines
    known = {key for ln in raw for key in (ln.key, ln.metric)}
    unknown = sorted(set(thresholds) - known)
    if unknown:
        raise InputError(f"--max-regression {', '.join(unknown)}: no such metric in these runs; "
                         f"metrics are {sorted({ln.key for ln in raw})}")
    if only:
        missing = sorted(set(only) - known)
        if missing:
            raise InputError(f"--metric {', '.join(missing)}: no such metric in these runs; "
                             f"metrics are {sorted({ln.key for ln in raw})}")
        raw = [ln for ln in raw if ln.key in only or ln.metric in only]
    gated = _gated(raw, policies, workload, thresholds, default_pct, named=only)
    samples: dict[str, GateSamples] = {}
    cases: dict[str, GateCase] = {}
    dirs: dict[str, tuple[str, ...]] = {}
    for i, (line, judged, limit, origin) in enumerate(gated):
        for base_col, other in pairs:
            key = f"{i}\t{other}"
            variant = other.removeprefix("B:")
            try:
                absolute = limit.in_unit(line, lambda role: measured_window(base, role))
            except InputError as exc:
                raise InputError(f"--max-regression {line.key}: {exc.message}") from None
            case = GateCase(line.label, line.source, line.metric, line.role, line.unit,
                            variant, judged.direction.value, judged.origin,
                            limit.pct or 0.0, origin, "skipped", None, "", limit.text)
            why = not_comparable(line.cells[base_col], line.cells[other])
            if why is not None:
                cases[key] = _with(case, "error" if why.fault else "skipped", None, why.reason)
                continue
            cases[key] = case
            series, dirs[key] = _series(line, reference, variant)
            samples[key] = GateSamples(line.cells[base_col].values, line.cells[other].values,
                                       judged.direction, limit.pct or 0.0, absolute,
                                       series or None, reference.kind == "pinned")
    for key, result in gate_metrics(samples).items():
        found = result.comparison
        cases[key] = _with(cases[key], result.status.value, found, found.reason)
        if result.nights is not None:
            cases[key] = replace(cases[key], anchor=tuple(dirs[key][i] for i in
                                                          result.nights.anchor),
                                 noise=_noise_text(result.nights, found.scale))
    common = [p[1].removeprefix("B:") for p in pairs]
    found_load = _load_cases(base, candidate, load_limits)
    return GateReport(candidate.manifest.profile.name, reference, candidate,
                      (*cases.values(), *found_load), len(samples),
                      diff_manifests(base.manifest, candidate.manifest, common))


def _load_cases(base: RunData, candidate: RunData,
                limits: Mapping[str, Threshold]) -> list[GateCase]:
    """The SLO capacity of each variant of a load ladder (when the ladder states an
    SLO, or `--max-regression capacity=PCT` names it) and its knee (when
    `--max-regression knee=PCT` names it), the reference's newest run against the
    candidate: harness.stats.curves.crossing_change, higher is better."""
    new = load_report(candidate.samples, candidate.manifest)
    old = load_report(base.samples, base.manifest)
    if new is None:
        if limits:
            raise InputError(f"--max-regression {', '.join(limits)}: the candidate has no "
                             "load ladder (workload.load)")
        return []
    cases = []
    for metric in LOAD_METRICS:
        limit = limits.get(metric)
        if limit is None and (metric == "knee" or new.slo is None):
            continue
        if limit is not None and limit.pct is None:
            raise InputError(f"--max-regression {metric}: a relative threshold (PCT%), the "
                             "load's own unit differs per tool")
        pct = limit.pct if limit is not None and limit.pct is not None else new.max_regression
        what = (f"capacity at {new.metric} <= {new.slo:g} {new.metric_unit}".rstrip()
                if metric == "capacity" else f"knee ({new.metric} {new.knee_factor:g}x)")
        for curve in new.curves:
            case = GateCase(what, LOAD_SOURCE, metric, None, new.unit, curve.variant,
                            "higher", "policy", pct, "cli" if limit else "policy",
                            "skipped", None, "", f"{pct:g}%")
            mine = getattr(curve, metric)
            theirs = None if old is None else next(
                (getattr(c, metric) for c in old.curves if c.variant == curve.variant), None)
            if old is not None and (old.slo, old.knee_factor, old.metric) != (
                    new.slo, new.knee_factor, new.metric):
                cases.append(_with(case, "skipped", None, "the runs' ladders state different "
                                   "SLOs, knees or metrics"))
            elif mine is None or theirs is None:
                cases.append(_with(case, "skipped", None, f"no {metric} in "
                                   f"{'the candidate' if mine is None else 'the reference'}"))
            else:
                change = crossing_change(mine, theirs, pct)
                detail = (f"{crossing_text(theirs)} -> {crossing_text(mine)} {new.unit}; "
                          f"ratio {change.ratio:.3g} (CI {change.low:.3g}.."
                          f"{change.high:.3g})")
                cases.append(replace(case, status=change.status, reason=change.reason,
                                     detail=detail))
    return cases


def measured_window(run: RunData, role: str | None) -> float | None:
    """The median measured window (s) of a run's trials: `snapshot.interval`, of the
    role's host when the role has one."""
    frame = run.samples
    if not len(frame):
        return None
    rows = frame[(frame["source"] == "snapshot") & (frame["metric"] == "interval")]
    if role is not None and len(rows[rows["role"] == role]):
        rows = rows[rows["role"] == role]
    return float(rows["value"].median()) if len(rows) else None


def _with(case: GateCase, status: str, found: Comparison | None, reason: str) -> GateCase:
    return replace(case, status=status, comparison=found, reason=reason)


def _noise_text(nights: Nights, scale: str) -> str:
    shown = nights.noise.between_text(scale == RATIO)
    return (f"night-to-night sd {shown} beyond the repetitions' (from "
            f"{nights.noise.nights} night(s))" if nights.noise.known else
            "night-to-night noise unknown (one night)")


def case_message(case: GateCase) -> str:
    """One line with the evidence: change, CI, adjusted p, threshold, reason."""
    found = case.comparison
    if found is None:
        return f"{case.status}: {case.reason}"
    return (f"{case.status}: {case.label} ({case.variant}) "
            f"{format_pct(found.change, found.change_ci, found.scale, case.unit)} "
            f"({found.confidence:.0%} CI "
            f"{format_ci(found.change_ci, found.change, found.scale, case.unit)}), regression "
            f"{p_text(found.p_adjusted)} (Holm, {found.test_method}), threshold "
            f"{case.threshold} ({case.threshold_origin}), {case.direction} is "
            f"better; {case.reason}")


def gate_doc(report: GateReport) -> dict[str, Any]:
    ref = report.reference
    return {
        "profile": report.profile, "status": report.status,
        "candidate": {"dir": str(report.candidate.directory),
                      "run_id": report.candidate.manifest.run_id},
        "baseline": {"dir": str(ref.newest.directory),
                     "run_id": ref.newest.manifest.run_id, "kind": ref.kind,
                     "runs": [{"dir": str(r.directory), "run_id": r.manifest.run_id}
                              for r in ref.runs],
                     "damaged": [{"dir": d, "error": why} for d, why in ref.damaged]},
        "counts": report.counts(), "family": report.family, "adjust": "holm",
        "repeat_needed": report.repeat_needed() if report.status == "inconclusive" else None,
        "confounders": [d.as_dict() for d in report.confounders.confounders],
        "intended": [d.as_dict() for d in report.confounders.intended],
        "cases": [{"name": c.name, "label": c.label, "source": c.source, "metric": c.metric,
                   "role": c.role, "unit": c.unit, "variant": c.variant, "status": c.status,
                   "direction": c.direction, "direction_origin": c.direction_origin,
                   "max_regression_pct": c.max_regression_pct, "threshold": c.threshold,
                   "threshold_origin": c.threshold_origin, "reason": c.reason,
                   "anchor": list(c.anchor), "noise": c.noise, "detail": c.detail,
                   "comparison": None if c.comparison is None else comparison_doc(c.comparison)}
                  for c in report.cases],
    }


def gate_record(report: GateReport) -> CheckRecord:
    """The summary as check.json's record: gate_doc's data, checked against the type
    (the file written is one `read_check` reads)."""
    return codec.checked(gate_doc(report), CheckRecord, "check summary")


def gate_json(report: GateReport) -> str:
    return codec.encode(gate_record(report), indent=1).decode() + "\n"


def gate_text(report: GateReport) -> str:
    """Status first, then one row per case (<= 80 columns), grouped by variant."""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(report.counts().items()))
    out = [f"napilab check: {report.status.upper() if report.status != 'pass' else 'pass'}: "
           f"{counts or 'nothing gated'}",
           f"  candidate {report.candidate.directory}",
           f"  baseline  {report.reference.describe()}",
           f"  regression p Holm-adjusted over {report.family} gated comparison(s); "
           f"{GATE_CONFIDENCE:.0%} CI (two one-sided 95% bounds)"]
    anchors = {c.anchor for c in report.cases if c.anchor}
    if len(anchors) == 1:
        names = ", ".join(Path(d).name for d in next(iter(anchors)))
        out.append(f"  anchor    {names}")
    elif anchors:
        out.append("  anchor    per metric (the first nights of its level: --json)")
    for variant in dict.fromkeys(c.variant for c in report.cases):
        out.append(f"  variant {variant}:")
        for c in (c for c in report.cases if c.variant == variant):
            found = c.comparison
            change, ci, p = ("-", "-", "-") if found is None else (
                format_pct(found.change, found.change_ci, found.scale, c.unit),
                format_ci(found.change_ci, found.change, found.scale, c.unit),
                format_p(found.p_adjusted))
            out.append(f"  {c.status:<12}  {c.label[:24]:<24}  {change:>8}  {ci:>17}  "
                       f"{p:>6}  {c.threshold}".rstrip())
            if c.detail:
                out += [f"                {line}" for line in textwrap.wrap(c.detail, 64)]
    if report.status == "inconclusive":
        out.append(f"  inconclusive: {len(report.undecided)} of {len(report.cases)} gated "
                   f"case(s) not judged within{report.undecided_hint()}:")
        out.append(report.undecided_text())
    return "\n".join(out) + "\n"
