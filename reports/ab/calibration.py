"""`napilab calibrate`: what an A/A run (the baseline against itself) says about a setup.

Per line: the noise of the baseline over all its trials of both copies, in trial order
(CV, relative width of the 95% CI of the median), the smallest change a comparison with
the profile's repeat count per variant would detect (`stats_noise.calibrate`: power of
the test that applies at that n, by a log-normal approximation), a drift test along the
trials, and the A/A verdict itself, which should be "~": a "better" or "worse" between
two copies of one variant is a false positive and says the setup is not ready (warm-up,
order effects, a noisy neighbour).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

import msgspec

from napilab.harness.records import codec
from napilab.harness.records.codec import FrozenRecord
from napilab.harness.stats.compare import Comparison
from napilab.harness.stats.noise import Calibration, calibrate
from napilab.harness.stats.power import Noise, n_per_arm_needed
from napilab.harness.stats.stats import StatsError
from napilab.reports.ab.compare import RunData, table
from napilab.reports.ab.model import Line, format_number, format_pct, p_text, verdict_text
from napilab.reports.ab.table_json import (
    ComparisonRecord,
    SummaryRecord,
    comparison_doc,
    summary_doc,
)

TARGET_CHANGE = 0.05  # the "n@5%" column: a change worth detecting in most tuning work


@dataclass(frozen=True)
class CalibrationLine:
    label: str
    source: str
    metric: str
    unit: str
    calibration: Calibration | None
    aa: Comparison | None  # the second copy against the first
    note: str


def _trial_ordered(line: Line) -> list[float]:
    pairs = [(t, v) for cell in line.cells.values() for t, v in zip(cell.trials, cell.values,
                                                                       strict=True)]
    return [v for _, v in sorted(pairs)]


def calibrate_run(run: RunData, n_per_arm: int) -> list[CalibrationLine]:
    tab = table(run)
    copy = tab.compared[0] if tab.compared else None
    out = []
    for line in tab.lines:
        values = _trial_ordered(line)
        found = line.comparisons.get(copy) if copy else None
        note = line.notes.get(copy, "") if copy else ""
        result = None
        if len(values) >= 2:
            try:
                result = calibrate(values, n_per_arm=n_per_arm)
            except StatsError as exc:
                note = str(exc)
        else:
            note = f"{len(values)} value(s): nothing to calibrate"
        out.append(CalibrationLine(line.label, line.source, line.metric, line.unit, result,
                                   found, note))
    return out


def _ratio(value: float) -> str:
    return f"{value:,.0%}" if value >= 1 else f"{value:.1%}"


def n_for(line: CalibrationLine, change: float = TARGET_CHANGE) -> int | None:
    """Repetitions per variant that would detect `change` at this noise (80% power)."""
    cal = line.calibration
    if cal is None or cal.log_sd is None or cal.summary.median == 0:
        return None  # a counter that stays 0 has no relative change to detect
    # stats_power.pooled_noise works on logs exactly when every value is positive
    noise = Noise(cal.log_sd, log_scale=cal.summary.minimum > 0)
    return n_per_arm_needed(noise, change, cal.alpha, cal.power)


def _cells(line: CalibrationLine) -> tuple[str, str, str, str, str, str]:
    cal = line.calibration
    aa = "n/a"
    if line.aa is not None:
        verdict, need = verdict_text(line.aa)
        aa = (f"need {need}" if need else "need more n") if verdict == "not-enough-data" \
            else verdict
    if cal is None:
        return "-", "-", "-", "-", "-", aa
    cv = "-" if cal.summary.cv is None else _ratio(cal.summary.cv)
    width = "-" if cal.ci_rel_width is None else _ratio(cal.ci_rel_width)
    mde = "n/a" if cal.mde is None else format_pct(cal.mde)
    needed = n_for(line)
    return (format_number(cal.summary.median), cv, width, mde,
            "-" if needed is None else str(needed), aa)


def calibration_text(lines: list[CalibrationLine], *, profile: str, baseline: str,
                     n_per_arm: int) -> str:
    """<= 80 columns: label 20, median 9, CV 6, CI width 7, detect 7, n@5% 5, A/A 12."""
    out = [f"napilab calibrate {profile}: A/A, {baseline} against itself, "
           f"{n_per_arm} repetition(s) each",
           f"  {'':<20}  {'median':>9}  {'CV':>6}  {'CI wid':>7}  {'detect':>7}  "
           f"{'n@5%':>5}  A/A"]
    for line in lines:
        median, cv, width, mde, needed, aa = _cells(line)
        out.append(f"  {line.label[:20]:<20}  {median:>9}  {cv:>6}  {width:>7}  {mde:>7}  "
                   f"{needed:>5}  {aa}")
    legend = (f"CV over both copies in trial order; CI wid: the 95% CI of the median over "
              f"the median; detect: the smallest change a run with {n_per_arm} "
              "repetition(s) per variant detects with 80% power (n/a: fewer than 2 "
              f"repetitions); n@5%: repetitions per variant to detect a "
              f"{TARGET_CHANGE:.0%} change. A/A should be ~.")
    out += textwrap.wrap(legend, 80, initial_indent="  ", subsequent_indent="  ")
    warnings = [f"{ln.label}: A/A verdict {ln.aa.verdict.value}: a false positive; "
                "check warm-up, order and interference" for ln in lines
                if ln.aa is not None and ln.aa.verdict.value in ("better", "worse")]
    warnings += [f"{ln.label}: drift along trials (Mann-Kendall "
                 f"{p_text(ln.calibration.drift.p_value)})" for ln in lines
                 if ln.calibration and ln.calibration.drift and
                 ln.calibration.drift.significant]
    out += [f"  warning: {w}" for w in warnings]
    return "\n".join(out) + "\n"


def calibration_doc(lines: list[CalibrationLine], *, profile: str, baseline: str,
                    n_per_arm: int) -> dict[str, Any]:
    def one(line: CalibrationLine) -> dict[str, Any]:
        cal = line.calibration
        doc: dict[str, Any] = {"label": line.label, "source": line.source,
                               "metric": line.metric, "unit": line.unit, "note": line.note,
                               "aa": None if line.aa is None else comparison_doc(line.aa)}
        if cal is not None:
            doc.update(summary=summary_doc(cal.summary), ci_rel_width=cal.ci_rel_width,
                       log_sd=cal.log_sd, n_per_arm=cal.n_per_arm, detectable_change=cal.mde,
                       detectable_by_n={str(n): m for n, m in cal.mde_by_n},
                       n_for_target_change=n_for(line), target_change=TARGET_CHANGE,
                       drift=None if cal.drift is None else {
                           "tau": cal.drift.tau, "p": cal.drift.p_value,
                           "significant": cal.drift.significant})
        return doc

    return {"profile": profile, "baseline": baseline, "n_per_arm": n_per_arm,
            "alpha": 0.05, "power": 0.8, "lines": [one(ln) for ln in lines]}


class CalibrationDrift(FrozenRecord, frozen=True, omit_defaults=False):
    WHAT = "a calibration line's drift"

    tau: float | None = None
    p: float | None = None
    significant: bool = False


class CalibrationLineRecord(FrozenRecord, frozen=True, omit_defaults=False):
    """One line of calibration.json; the noise keys only where the line was measured."""

    WHAT = "a calibration line"

    label: str
    source: str
    metric: str
    unit: str
    note: str | None = None
    aa: ComparisonRecord | None = None  # the baseline against its copy
    summary: SummaryRecord | msgspec.UnsetType | None = msgspec.UNSET
    ci_rel_width: float | msgspec.UnsetType | None = msgspec.UNSET
    log_sd: float | msgspec.UnsetType | None = msgspec.UNSET
    n_per_arm: int | msgspec.UnsetType | None = msgspec.UNSET
    detectable_change: float | msgspec.UnsetType | None = msgspec.UNSET
    detectable_by_n: dict[str, float | None] | msgspec.UnsetType = msgspec.UNSET
    n_for_target_change: int | msgspec.UnsetType | None = msgspec.UNSET
    target_change: float | msgspec.UnsetType | None = msgspec.UNSET
    drift: CalibrationDrift | msgspec.UnsetType | None = msgspec.UNSET


class CalibrationRecord(FrozenRecord, frozen=True, omit_defaults=False):
    """RUN_DIR/calibration.json (`napilab calibrate`)."""

    WHAT = "a calibration (calibration.json)"

    profile: str
    baseline: str
    n_per_arm: int
    alpha: float
    power: float
    lines: list[CalibrationLineRecord] = msgspec.field(default_factory=list)


def calibration_json(lines: list[CalibrationLine], **kwargs: Any) -> str:
    record = codec.checked(calibration_doc(lines, **kwargs), CalibrationRecord,
                           "calibration")
    return codec.encode(record, indent=1).decode() + "\n"
