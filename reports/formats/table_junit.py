"""JUnit XML of one run's A/B table (`napilab report RUN_DIR --format junit`), for CI
systems that show test results: one testcase per metric and compared variant (a
"worse" verdict is a <failure>; not-enough-data, exploratory or no comparison is
<skipped>, so a table that could not judge does not look green) and one per failed
trial (<error>).
The nightly gate across two runs has its own JUnit (reports.nightly.junit, `napilab check`)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from napilab.reports.ab.compare import RunData
from napilab.reports.ab.model import Line, Table, format_ci, format_pct, p_text
from napilab.reports.formats import run_facts

# XML 1.0 has no way to write most control characters (a tool's ANSI colour codes, say):
# ElementTree would write them anyway and the file would not parse.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _message(line: Line, column: str) -> tuple[str, str]:
    """(status, message) of one comparison."""
    found = line.comparisons.get(column)
    if found is None:
        return "skipped", f"no comparison: {line.notes.get(column, 'no values')}"
    verdict = found.verdict.value
    # exploratory rows are not judged: skipped, so they never count as a pass
    status = {"worse": "failure", "not-enough-data": "skipped",
              "exploratory": "skipped"}.get(verdict, "passed")
    # one p rule for every format: an exploratory row shows no p (as the tables; the
    # JSON keeps its unadjusted p with adjust "none"), a primary row its Holm p
    p = "" if verdict == "exploratory" else f"{p_text(found.p_adjusted)} (Holm), "
    return status, (f"{verdict}: {line.label} ({column}) "
                    f"{format_pct(found.change, found.change_ci, found.scale, line.unit)} "
                    f"(95% CI "
                    f"{format_ci(found.change_ci, found.change, found.scale, line.unit)}), "
                    f"{p}{line.direction} is better; {found.reason}")


def junit_xml(run: RunData, tab: Table) -> str:
    profile = run.manifest.profile.name or "?"
    suite_name = f"napilab report {profile}"
    suites = ET.Element("testsuites", {"name": suite_name})
    suite = ET.SubElement(suites, "testsuite", {"name": suite_name})
    props = ET.SubElement(suite, "properties")
    for key, value in (("run_dir", str(run.directory)),
                       ("run_id", run.manifest.run_id),
                       ("status", str(run.manifest.status)),
                       ("baseline", tab.baseline), ("adjust", f"holm over {tab.family}")):
        ET.SubElement(props, "property", {"name": key, "value": value})
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for line in tab.lines:
        role = f"[{line.role}]" if line.role else ""
        for column in tab.compared:
            status, message = _message(line, column)
            case = ET.SubElement(suite, "testcase", {
                "classname": _xml(f"napilab.{profile}.{column}"), "name": _xml(f"{line.key}{role}"),
                "time": "0"})
            counts["tests"] += 1
            if status == "failure":
                counts["failures"] += 1
                ET.SubElement(case, "failure", {"message": _xml(message), "type": "worse"})
            elif status == "skipped":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", {"message": _xml(message)})
            else:
                ET.SubElement(case, "system-out").text = _xml(message)
    for failure in run_facts.failures(run):
        case = ET.SubElement(suite, "testcase", {
            "classname": _xml(f"napilab.{profile}.trials"), "name": _xml(
                f"trial {failure.trial} ({failure.variant} rep {failure.rep})"), "time": "0"})
        counts["tests"] += 1
        counts["errors"] += 1
        error = ET.SubElement(case, "error", {"message": _xml(failure.error), "type": "trial"})
        error.text = _xml("\n\n".join(f"{path}:\n{text}" for path, text in failure.stderr))
    for element in (suites, suite):
        element.attrib.update({k: str(v) for k, v in counts.items()} | {"time": "0"})
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"
