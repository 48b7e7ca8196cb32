"""KTAP version 1 of a suite of cases (reports.ci.suite), the kernel's test output
(Documentation/dev-tools/ktap.rst): "KTAP version 1", the plan "1..N", then per group
(a compared variant, "trials") a subtest indented by four spaces with its own version
line, "# Subtest: NAME" and plan, its cases as "ok N name" / "not ok N name", and the
group's own result line; a case of the whole suite (the gate's verdict) is a result
line at the top. Diagnostic lines ("# ...") carry the suite's properties and each case's
message, directly before its result line.

Four spaces, not the two the spec's text names: KUnit prints four, the kernel's parser
(tools/testing/kunit/kunit_parser.py) takes any, and so does the spec's "should".
Outcomes as reports.ci.suite maps them: a skipped case is `not ok N name # SKIP
reason`, an error `not ok N name # ERROR reason`. A group is `not ok` when any case in
it failed or erred, `ok` when none did and some passed (KTAP: skipped tests do not
affect the parent), and `not ok ... # SKIP` when every case was skipped."""

from __future__ import annotations

import re

from napilab.reports.ci.suite import CiCase, CiSuite

INDENT = "    "
_SPACE = re.compile(r"\s+")


def _name(text: str) -> str:
    """A description KTAP can carry: no "#" (it starts the directive), one line."""
    return _SPACE.sub(" ", text.replace("#", "no.")).strip() or "-"


def _reason(text: str) -> str:
    """A directive's diagnostic data: one line."""
    return _SPACE.sub(" ", text).strip()


def _diagnostics(text: str) -> list[str]:
    return [f"# {line}".rstrip() for line in text.splitlines() if line.strip()]


def _result(n: int, case: CiCase) -> list[str]:
    name = _name(case.name)
    if case.outcome == "passed":
        return [*_diagnostics(case.message), f"ok {n} {name}"]
    if case.outcome == "failure":
        more = _diagnostics(case.text) if case.text not in case.message else []
        return [*_diagnostics(case.message), *more, f"not ok {n} {name}"]
    if case.outcome == "skipped":
        return [f"not ok {n} {name} # SKIP {_reason(case.message)}"]
    return [*_diagnostics(case.text), f"not ok {n} {name} # ERROR {_reason(case.message)}"]


def _group(n: int, name: str, cases: tuple[CiCase, ...]) -> list[str]:
    inner = ["KTAP version 1", f"# Subtest: {_name(name)}", f"1..{len(cases)}"]
    for k, case in enumerate(cases, 1):
        inner += _result(k, case)
    outcomes = {c.outcome for c in cases}
    if outcomes & {"failure", "error"}:
        last = f"not ok {n} {_name(name)}"
    elif "passed" in outcomes:
        last = f"ok {n} {_name(name)}"
    else:
        last = f"not ok {n} {_name(name)} # SKIP no case judged"
    return [INDENT + line for line in inner] + [last]


def ktap(suite: CiSuite) -> str:
    groups = list(suite.groups())
    out = ["KTAP version 1", f"# {suite.name}",
           *(f"# {key}: {_reason(value)}" for key, value in suite.properties),
           *_diagnostics(suite.notes), f"1..{len(groups)}"]
    for n, (name, cases) in enumerate(groups, 1):
        out += _group(n, name, cases) if name else _result(n, cases[0])
    return "\n".join(out) + "\n"
