"""A gate (`napilab check`) as the cases CI systems show (reports.ci: `--junit`,
`--ktap`, `--nipa`): one case per metric x variant; a regression is a failure whose
message carries change, CI, adjusted p and threshold; inconclusive and skipped cases are
skipped, an infinite value is an error, and an inconclusive night (a gated case not
judged within or better: harness.stats.gate.night_status) gets one more case, `gate`,
a failure of kind "inconclusive" that names the cases: a gate that could not judge never
looks green."""

from __future__ import annotations

from napilab.reports.ci import junit
from napilab.reports.ci.suite import CiCase, CiSuite, Outcome, trial_seconds
from napilab.reports.nightly.check import GateReport, case_message


def _case(case_status: str) -> tuple[Outcome, str]:
    """(outcome, kind) of a gated case's status."""
    if case_status == "regression":
        return "failure", "regression"
    if case_status in ("inconclusive", "skipped"):
        return "skipped", ""
    if case_status == "error":
        return "error", "error"
    return "passed", ""  # within, improvement


def gate_suite(report: GateReport) -> CiSuite:
    trials = report.candidate.manifest.trials
    cases = []
    for case in report.cases:
        outcome, kind = _case(case.status)
        cases.append(CiCase(case.variant, case.name, outcome,
                            case_message(case), kind,
                            case.reason if outcome == "failure" else "",
                            seconds=trial_seconds(trials, case.variant)))
    if report.status == "inconclusive":
        cases.append(CiCase(
            "", "gate", "failure",
            f"inconclusive: {len(report.undecided)} of {len(report.cases)} gated "
            "case(s) not judged within or better, so the night is no pass ("
            + ", ".join(f"{c.name} ({c.variant})" for c in report.undecided)
            + ")" + report.undecided_hint(), "inconclusive"))
    notes = ("host or knob differences besides the intended ones:\n"
             + "\n".join(str(d) for d in report.confounders.confounders)
             if report.confounders.confounders else "")
    manifest = report.candidate.manifest
    return CiSuite(
        f"napilab check {report.profile}", report.profile, report.candidate.directory,
        (("candidate", str(report.candidate.directory)),
         ("baseline", report.reference.describe()),
         ("candidate_run_id", manifest.run_id),
         ("baseline_run_id", report.baseline.manifest.run_id),
         ("adjust", f"holm over {report.family}")),
        tuple(cases), notes, manifest.started, manifest.ended)


def junit_xml(report: GateReport) -> str:
    return junit.junit_xml(gate_suite(report))
