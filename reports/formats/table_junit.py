"""One run's A/B table as the cases CI systems show (`napilab report RUN_DIR --format
junit|ktap|nipa`, reports.ci): one case per metric and compared variant (a "worse"
verdict is a failure; not-enough-data, exploratory or no comparison is skipped, so a
table that could not judge does not look green) and one per failed trial (an error).
The nightly gate across two runs has its own cases (reports.nightly.junit, `napilab
check`)."""

from __future__ import annotations

from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Line, Table, format_ci, format_pct, p_text
from napilab.reports.ci import junit
from napilab.reports.ci.suite import CiCase, CiSuite, Outcome, trial_seconds
from napilab.reports.formats import run_facts

_OUTCOMES: dict[str, Outcome] = {"worse": "failure", "not-enough-data": "skipped",
                                 "exploratory": "skipped"}


def _message(line: Line, column: str) -> tuple[Outcome, str]:
    """(outcome, message) of one comparison."""
    found = line.comparisons.get(column)
    if found is None:
        return "skipped", f"no comparison: {line.notes.get(column, 'no values')}"
    verdict = found.verdict.value
    # exploratory rows are not judged: skipped, so they never count as a pass
    outcome = _OUTCOMES.get(verdict, "passed")
    # one p rule for every format: an exploratory row shows no p (as the tables; the
    # JSON keeps its unadjusted p with adjust "none"), a primary row its Holm p
    p = "" if verdict == "exploratory" else f"{p_text(found.p_adjusted)} (Holm), "
    return outcome, (f"{verdict}: {line.label} ({column}) "
                     f"{format_pct(found.change, found.change_ci, found.scale, line.unit)} "
                     f"(95% CI "
                     f"{format_ci(found.change_ci, found.change, found.scale, line.unit)}), "
                     f"{p}{line.direction} is better; {found.reason}")


def table_suite(run: RunData, tab: Table) -> CiSuite:
    profile = run.manifest.profile.name or "?"
    trials = run.manifest.trials
    cases = []
    for line in tab.lines:
        role = f"[{line.role}]" if line.role else ""
        for column in tab.compared:
            outcome, message = _message(line, column)
            cases.append(CiCase(column, f"{line.key}{role}", outcome, message,
                                "worse" if outcome == "failure" else "",
                                seconds=trial_seconds(trials, column)))
    for failure in run_facts.failures(run):
        cases.append(CiCase(
            "trials", f"trial {failure.trial} ({failure.variant} rep {failure.rep})", "error",
            failure.error, "trial",
            "\n\n".join(f"{path}:\n{text}" for path, text in failure.stderr),
            path=f"raw/{failure.trial}"))
    return CiSuite(
        f"napilab report {profile}", profile, run.directory,
        (("run_dir", str(run.directory)), ("run_id", run.manifest.run_id),
         ("status", str(run.manifest.status)), ("baseline", tab.baseline),
         ("adjust", f"holm over {tab.family}")),
        tuple(cases), started=run.manifest.started, ended=run.manifest.ended)


def junit_xml(run: RunData, tab: Table) -> str:
    return junit.junit_xml(table_suite(run, tab))
