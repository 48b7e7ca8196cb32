"""Names and control characters (issue 14 item 11), through the CLI as a user meets
them. Fault: an Ansible host named `../../../../tmp/x` (napilab 0.1 took it, and
`write_raw` wrote outside the run directory), an interface `eth0` followed by a
newline (passed `match` + `$`), a NUL in a value (dropped by the remote sh, a crash
of the local transport). Expected: `validate`, `plan` and `run` exit 2 with the file,
line and key; no transport is opened (no knob or lock on any host is touched) and
nothing is written, inside the results directory or outside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.inventory.inventory import load_inventory
from tests.cli import run_cli
from tests.unit.test_cli_input import GOOD, tripwire  # noqa: F401  (autouse: no transport)

PROFILE = GOOD.replace("sender: {host: a}", "sender: {host: HOST}")
ANSIBLE = """\
all:
  vars: {ansible_user: root}
  hosts:
    "HOST": {ansible_host: 127.0.0.1, napilab_transport: local}
    b: {ansible_host: 127.0.0.1, napilab_transport: local}
"""
ESCAPE = "../../../../tmp/napilab-escape"


def files(tmp_path: Path, profile: str, inventory: str) -> tuple[str, str]:
    (tmp_path / "p.yaml").write_text(profile)
    (tmp_path / "inv.yaml").write_text(inventory)
    return str(tmp_path / "p.yaml"), str(tmp_path / "inv.yaml")


def test_ansible_host_name_with_a_path_is_refused_everywhere(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile, inventory = files(tmp_path, PROFILE.replace("HOST", ESCAPE),
                               ANSIBLE.replace("HOST", ESCAPE))
    results = tmp_path / "deep" / "er" / "results"
    escaped = Path("/tmp/napilab-escape")
    assert not escaped.exists()
    for args in (["validate", profile, "-i", inventory], ["plan", profile, "-i", inventory],
                 ["run", profile, "-i", inventory, "-o", str(results)]):
        code, _, err = run_cli(capsys, *args)
        assert code == 2, err
        assert (f"inv.yaml:4:39: all.hosts.{ESCAPE}: '{ESCAPE}': host names are letters, "
                "digits, '.', '_' and '-'") in err, err
        assert "Traceback" not in err
    assert not results.exists() and not escaped.exists()


@pytest.mark.parametrize("name", ["x/y", "..", ".hidden", "-dash", "a" * 65])
def test_every_name_that_is_not_a_file_name_is_refused(name: str, tmp_path: Path) -> None:
    _, inventory = files(tmp_path, PROFILE, ANSIBLE.replace("HOST", name))
    with pytest.raises(Exception, match="host names are letters") as refused:
        load_inventory(inventory)
    assert refused.typename == "InputError"


def test_a_name_followed_by_a_newline_is_refused(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`iface: "eth0\\n"` passed `^...$` (`$` matches before a final newline)."""
    inventory = ANSIBLE.replace("HOST", "a").replace(
        "b: {ansible_host: 127.0.0.1,", 'b: {ansible_host: 127.0.0.1, napilab_iface: "eth0\\n",')
    profile, inv = files(tmp_path, PROFILE.replace("HOST", "a"), inventory)
    code, _, err = run_cli(capsys, "plan", profile, "-i", inv)
    assert code == 2, err
    assert "inv.yaml:5:" in err and "all.hosts.b.napilab_iface: 'eth0\\n' contains a " \
        "control character" in err, err


@pytest.mark.parametrize("value", ["1\\x00", "\\x1b[31m", "a\\x7fb", "1\\u0085"])
def test_control_characters_in_any_value_are_refused(
        value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = PROFILE.replace("HOST", "a") + f'setup:\n  receiver:\n    sysctl: ' \
        f'{{net.core.busy_read: "{value}"}}\n'
    profile_path, inventory = files(tmp_path, profile, ANSIBLE.replace("HOST", "a"))
    code, _, err = run_cli(capsys, "validate", profile_path, "-i", inventory)
    assert code == 2, err
    assert "p.yaml:14:" in err and "setup.receiver.sysctl.net.core.busy_read:" in err
    assert "contains a control character" in err and "Traceback" not in err


def test_a_description_may_hold_tabs_and_newlines(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    profile = PROFILE.replace("HOST", "a") + 'description: "two\\tcolumns\\nand lines"\n'
    profile_path, inventory = files(tmp_path, profile, ANSIBLE.replace("HOST", "a"))
    code, _, err = run_cli(capsys, "validate", profile_path, "-i", inventory)
    assert code == 0, err
