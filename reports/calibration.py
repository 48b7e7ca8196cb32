"""`napilab calibrate`: what an A/A run (the baseline against itself) says about a setup.

Per line: the noise of the baseline over all its trials of both copies, in trial order
(CV, relative width of the 95% CI of the median), the smallest change a comparison with
the profile's repeat count per variant would detect (`stats_noise.calibrate`: Mann-Whitney
power by a log-normal approximation), a drift test along the trials, and the A/A verdict
itself, which should be "~": a "better" or "worse" between two copies of one variant is a
false positive and says the setup is not ready (warm-up, order effects, a noisy neighbour).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from typing import Any

from harness.stats import Comparison, StatsError
from harness.stats_noise import Calibration, calibrate
from reports.ab_model import Line, format_number, format_pct
from reports.compare import RunData, table
from reports.table_json import comparison_doc, summary_doc


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


def _cells(line: CalibrationLine) -> tuple[str, str, str, str, str]:
    cal = line.calibration
    aa = "n/a" if line.aa is None else line.aa.verdict.value
    if cal is None:
        return "-", "-", "-", "-", aa
    cv = "-" if cal.summary.cv is None else f"{cal.summary.cv:.1%}"
    width = "-" if cal.ci_rel_width is None else f"{cal.ci_rel_width:.1%}"
    mde = "n/a" if cal.mde is None else format_pct(cal.mde)
    return format_number(cal.summary.median), cv, width, mde, aa


def calibration_text(lines: list[CalibrationLine], *, profile: str, baseline: str,
                     n_per_arm: int) -> str:
    """<= 80 columns: label 22, median 9, CV 6, CI width 7, detectable 8, A/A 15."""
    out = [f"napilab calibrate {profile}: A/A, {baseline} against itself, "
           f"{n_per_arm} repetition(s) each",
           f"  {'':<22}  {'median':>9}  {'CV':>6}  {'CI wid':>7}  {'detect':>8}  A/A"]
    for line in lines:
        median, cv, width, mde, aa = _cells(line)
        out.append(f"  {line.label[:22]:<22}  {median:>9}  {cv:>6}  {width:>7}  {mde:>8}  "
                   f"{aa}")
    legend = (f"CV over both copies in trial order; CI wid: the 95% CI of the median over "
              f"the median; detect: the smallest change a run with {n_per_arm} "
              "repetition(s) per variant detects with 80% power (n/a: Mann-Whitney cannot "
              "reach p < 0.05 at that n). A/A should be ~.")
    out += textwrap.wrap(legend, 80, initial_indent="  ", subsequent_indent="  ")
    warnings = [f"{ln.label}: A/A verdict {ln.aa.verdict.value}: a false positive; "
                "check warm-up, order and interference" for ln in lines
                if ln.aa is not None and ln.aa.verdict.value in ("better", "worse")]
    warnings += [f"{ln.label}: drift along trials (Mann-Kendall p "
                 f"{ln.calibration.drift.p_value:.2g})" for ln in lines
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
                       drift=None if cal.drift is None else {
                           "tau": cal.drift.tau, "p": cal.drift.p_value,
                           "significant": cal.drift.significant})
        return doc

    return {"profile": profile, "baseline": baseline, "n_per_arm": n_per_arm,
            "alpha": 0.05, "power": 0.8, "lines": [one(ln) for ln in lines]}


def calibration_json(lines: list[CalibrationLine], **kwargs: Any) -> str:
    return json.dumps(calibration_doc(lines, **kwargs), indent=1) + "\n"
