"""The integration suite's scheduling under `--dist loadgroup` (tests/conftest.py): tests
that bring up `napilab testbed up`'s own testbed (prefix napilab, 198.51.100.0/29: what
`napilab demo` brings up) share one group, so no two of them run at once on different
workers and take each other's testbed down; the wheel's tests are in it too, so the
wheel is built once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import DEFAULT_TESTBED_TESTS, own_testbed_group

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
# a default Testbed(), or the CLI's demo (which brings one up)
USES_DEFAULT_TESTBED = re.compile(r"\bTestbed\(\)|\brun\(\s*\"demo\"|\"napilab\", \"demo\"")


def default_testbed_users() -> set[str]:
    found = set()
    for path in sorted(INTEGRATION.rglob("test_*.py")):
        source = path.read_text()
        for node in ast.parse(source).body:
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
                    and USES_DEFAULT_TESTBED.search(ast.get_source_segment(source, node) or "")):
                relative = path.relative_to(INTEGRATION.parents[1]).as_posix()
                found.add(f"{relative}::{node.name}")
    return found


def test_every_test_on_the_default_testbed_is_in_one_group() -> None:
    using = default_testbed_users()
    assert using == set(DEFAULT_TESTBED_TESTS)
    assert {own_testbed_group(nodeid) for nodeid in using} == {"napilab-testbed"}
    assert own_testbed_group(DEFAULT_TESTBED_TESTS[0] + "[param]") == "napilab-testbed"
    assert own_testbed_group("tests/integration/test_faults.py::test_concurrent_run_is_refused") \
        is None


def test_the_wheels_tests_build_it_once_on_one_worker() -> None:
    """The wheel's module fixture builds and installs it; its demo test is on the
    default testbed: every test of the module is in that one group."""
    source = (INTEGRATION / "test_wheel.py").read_text()
    names = [n.name for n in ast.parse(source).body
             if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    assert len(names) >= 5
    assert {own_testbed_group(f"tests/integration/test_wheel.py::{n}") for n in names} \
        == {"napilab-testbed"}
