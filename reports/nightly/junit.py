"""JUnit XML of a gate (`napilab check --junit FILE`), as CI systems read it (Jenkins,
GitLab, GitHub test reporters): one testcase per metric x variant; a regression is a
<failure> whose message carries change, CI, adjusted p and threshold; inconclusive and
skipped cases are <skipped>, an infinite value is an <error>, and an inconclusive night
(a gated case not judged within or better: harness.stats.gate.night_status) gets one
more testcase, `gate`, whose <failure type="inconclusive"> names the cases: a gate that
could not judge never looks green."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from napilab.reports.nightly.check import GateReport, case_message


def junit_xml(report: GateReport) -> str:
    counts = report.counts()
    inconclusive = report.status == "inconclusive"
    failures = counts.get("regression", 0) + inconclusive
    skipped = counts.get("inconclusive", 0) + counts.get("skipped", 0)
    name = f"napilab check {report.profile}"
    attrs = {"name": name, "tests": str(len(report.cases) + inconclusive),
             "failures": str(failures), "errors": str(counts.get("error", 0)),
             "skipped": str(skipped), "time": "0"}
    suites = ET.Element("testsuites", attrs)
    suite = ET.SubElement(suites, "testsuite", attrs)
    props = ET.SubElement(suite, "properties")
    for key, value in (("candidate", str(report.candidate.directory)),
                       ("baseline", report.reference.describe()),
                       ("candidate_run_id", report.candidate.manifest.run_id),
                       ("baseline_run_id", report.baseline.manifest.run_id),
                       ("adjust", f"holm over {report.family}")):
        ET.SubElement(props, "property", {"name": key, "value": value})
    for case in report.cases:
        element = ET.SubElement(suite, "testcase", {
            "classname": f"napilab.{report.profile}.{case.variant}", "name": case.name,
            "time": "0"})
        message = case_message(case)
        if case.status == "regression":
            failure = ET.SubElement(element, "failure", {"message": message,
                                                         "type": "regression"})
            failure.text = case.reason
        elif case.status in ("inconclusive", "skipped"):
            ET.SubElement(element, "skipped", {"message": message})
        elif case.status == "error":
            ET.SubElement(element, "error", {"message": message, "type": "error"})
        else:
            ET.SubElement(element, "system-out").text = message
    if inconclusive:
        element = ET.SubElement(suite, "testcase", {
            "classname": f"napilab.{report.profile}", "name": "gate", "time": "0"})
        ET.SubElement(element, "failure", {
            "type": "inconclusive",
            "message": f"inconclusive: {len(report.undecided)} of {len(report.cases)} gated "
                       "case(s) not judged within or better, so the night is no pass ("
                       + ", ".join(f"{c.name} ({c.variant})" for c in report.undecided)
                       + ")" + report.undecided_hint()})
    if report.confounders.confounders:
        ET.SubElement(suite, "system-err").text = "host or knob differences besides the " \
            "intended ones:\n" + "\n".join(str(d) for d in report.confounders.confounders)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"
