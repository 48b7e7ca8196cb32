"""A variant changes one word of a list it inherits (a workload's argv) without
writing the list again: `{after: {OPTION: VALUE}}`, `{at: {INDEX: VALUE}}`
(harness.profile.merge.edited); a word or index the list lacks is an error at the
edit's line."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.errors import InputError
from napilab.harness.profile.profile import load_profile

PROFILE = """\
name: argv-edit
hosts: {sut: {host: sut}, peer: {host: peer}}
workload:
  tool: command
  duration: 5
  client:
    role: sut
    args:
      argv: [timeout, -s, INT, "${duration}", xdpsock, -i, eth0, -q, "5", -B, -b, "64"]
  server: {role: peer}
variants:
  b64: {}
VARIANT
"""


def argv(tmp_path: Path, variant: str) -> dict[str, list[str]]:
    (tmp_path / "p.yaml").write_text(PROFILE.replace("VARIANT", variant))
    return {v.name: v.workload.client.args["argv"] for v in
            load_profile(tmp_path / "p.yaml").variants}


def test_one_word_after_an_option_or_at_an_index(tmp_path: Path) -> None:
    found = argv(tmp_path, """\
  b256:
    workload: {client: {args: {argv: {after: {-b: "256"}}}}}
  q3-term:
    workload: {client: {args: {argv: {after: {-q: "3"}, at: {2: TERM}}}}}
""")
    base = ["timeout", "-s", "INT", "${duration}", "xdpsock", "-i", "eth0", "-q", "5", "-B", "-b"]
    assert found["b64"] == [*base, "64"]
    assert found["b256"] == [*base, "256"]
    assert found["q3-term"] == ["timeout", "-s", "TERM", "${duration}", "xdpsock", "-i", "eth0",
                                "-q", "3", "-B", "-b", "64"]


@pytest.mark.parametrize(("edit", "message"), [
    ('{after: {-x: "1"}}', "'-x' is not in the list"),
    ('{after: {"64": "1"}}', "'64' is not followed by a word"),
    ("{at: {12: x}}", "'12' is not an index of the list (0 to 11)"),
    ("{at: [1]}", "`at` takes a mapping: index: new value"),
])
def test_an_edit_the_list_cannot_take_is_refused_at_its_line(tmp_path: Path, edit: str,
                                                             message: str) -> None:
    with pytest.raises(InputError) as caught:
        argv(tmp_path, f"  bad:\n    workload: {{client: {{args: {{argv: {edit}}}}}}}\n")
    (problem,) = caught.value.problems
    assert problem.location is not None and problem.location.line == 14
    assert message in problem.message
