"""A secret never leaks in an error: an `env:` value with a control character is refused
(exit 2, file:line) with the value shown as <redacted> (issue 21, item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import run_cli

PROFILE = """\
name: secret
hosts: {sender: {host: a}, receiver: {host: b}}
workload:
  tool: ping
  client: {role: sender, env: {API_TOKEN: "hunter2-s3cr3t\\a"}}
  server: {role: receiver}
variants: {x: {}}
"""


def test_a_control_character_in_an_env_value_is_refused_without_the_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "secret.yaml"
    profile.write_text(PROFILE)
    code, _, err = run_cli(capsys, "validate", str(profile))
    assert code == 2
    assert "hunter2" not in err and "s3cr3t" not in err
    assert "<redacted> contains a control character" in err
    assert f"{profile}:5:" in err and "workload.client.env.API_TOKEN" in err
    assert "Traceback" not in err
