"""JUnit XML of a suite of cases (reports.ci.suite), as CI systems read it (Jenkins,
GitLab, GitHub test reporters): a <testcase> per case, classname napilab.PROFILE.GROUP,
a failure as <failure type=KIND>, an error as <error>, a skipped case as <skipped>, a
passed one with its message in <system-out>; the suite's notes in <system-err>. Both
`napilab report --format junit` and `napilab check --junit` write through it."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from napilab.reports.ci.suite import CiSuite

# XML 1.0 has no way to write most control characters (a tool's ANSI colour codes, say):
# ElementTree would write them anyway and the file would not parse.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def junit_xml(suite: CiSuite) -> str:
    counts = suite.counts()
    attrs = {"name": _xml(suite.name), "tests": str(len(suite.cases)),
             "failures": str(counts["failure"]), "errors": str(counts["error"]),
             "skipped": str(counts["skipped"]), "time": "0"}
    suites = ET.Element("testsuites", attrs)
    element = ET.SubElement(suites, "testsuite", attrs)
    props = ET.SubElement(element, "properties")
    for key, value in suite.properties:
        ET.SubElement(props, "property", {"name": key, "value": _xml(value)})
    for case in suite.cases:
        classname = f"napilab.{suite.profile}" + (f".{case.group}" if case.group else "")
        testcase = ET.SubElement(element, "testcase", {
            "classname": _xml(classname), "name": _xml(case.name), "time": "0"})
        if case.outcome == "passed":
            ET.SubElement(testcase, "system-out").text = _xml(case.message)
        elif case.outcome == "skipped":
            ET.SubElement(testcase, "skipped", {"message": _xml(case.message)})
        else:
            found = ET.SubElement(testcase, case.outcome, {"message": _xml(case.message),
                                                           "type": case.kind})
            if case.text:
                found.text = _xml(case.text)
    if suite.notes:
        ET.SubElement(element, "system-err").text = _xml(suite.notes)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"
