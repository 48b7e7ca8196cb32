"""Replicas (issue 38): an inventory's `replicas:` bind a profile's host names to host
sets; every mistake in them is refused before any host is touched, with the file, line
and key, exit code 2 and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.errors import InputError
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from tests.cli import run_cli
from tests.unit.test_cli_input import tripwire  # noqa: F401 (autouse: no host opened)

PROFILE = """\
name: t
hosts:
  sender: {host: a}
  receiver: {host: b}
workload:
  tool: ping
  duration: 1
  client: {role: sender}
  server: {role: receiver}
variants:
  one: {}
  two: {}
"""
INVENTORY = """\
transport: local
hosts:
  a: {address: 127.0.0.1}
  b: {address: 127.0.0.1}
  x1: {address: 127.0.0.2}
  y1: {address: 127.0.0.3}
  x2: {address: 127.0.0.4}
  y2: {address: 127.0.0.5}
replicas:
  r1: {a: x1, b: y1}
  r2: {a: x2, b: y2}
"""


def files(tmp_path: Path, inventory: str = INVENTORY, profile: str = PROFILE) -> tuple[str, str]:
    (tmp_path / "p.yaml").write_text(profile)
    (tmp_path / "inv.yaml").write_text(inventory)
    return str(tmp_path / "p.yaml"), str(tmp_path / "inv.yaml")


def test_each_replica_binds_the_profiles_host_names_to_its_own_hosts(tmp_path: Path) -> None:
    profile, inventory = files(tmp_path)
    inv = load_inventory(inventory)
    assert inv.replicas == {"r1": {"a": "x1", "b": "y1"}, "r2": {"a": "x2", "b": "y2"}}
    prof = load_profile(profile)
    for name, (sender, receiver) in (("r1", ("x1", "y1")), ("r2", ("x2", "y2"))):
        plan = bind(prof, inv, replica=name)
        assert plan.replica == name
        assert plan.host_of("sender").name == sender
        assert plan.host_of("receiver").name == receiver
    plain = bind(prof, inv)  # without a replica: the names themselves, as before
    assert (plain.host_of("sender").name, plain.replica) == ("a", None)


@pytest.mark.parametrize(("replicas", "message", "line"), [
    ("  r1: {a: x1, b: nope}\n", "replicas.r1.b: no host 'nope' in this inventory", 10),
    ("  r1: {a: x1, b: y1}\n  r2: {a: x1, b: y2}\n",
     "replicas.r2.a: host 'x1' is in replica 'r1' too", 11),
    ("  r1: []\n", "replicas.r1: expected a mapping", 10),
    ("  r1: {}\n", "replicas.r1: a replica binds at least one host name", 10),
    ("  'bad name': {a: x1}\n", "replicas.bad name: replica names are letters", 10),
])
def test_a_wrong_replica_is_named_with_its_line(tmp_path: Path, replicas: str, message: str,
                                                line: int,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    text = INVENTORY[:INVENTORY.index("replicas:")] + "replicas:\n" + replicas
    profile, inventory = files(tmp_path, text)
    result = run_cli(capsys, "run", profile, "-i", inventory, "-o", str(tmp_path / "r"))
    assert result.code == 2, result.err
    assert message in result.err and f"inv.yaml:{line}" in result.err, result.err
    assert "Traceback" not in result.err and not (tmp_path / "r").exists()


def test_a_replica_that_misses_a_host_name_of_the_profile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """r2 binds only `a`: the profile's receiver (host b) has no host there; every
    replica's problems are said at once."""
    text = INVENTORY.replace("r2: {a: x2, b: y2}", "r2: {a: x2}")
    profile, inventory = files(tmp_path, text)
    result = run_cli(capsys, "run", profile, "-i", inventory, "-o", str(tmp_path / "r"))
    assert result.code == 2
    assert "hosts.receiver.host: replica 'r2' of" in result.err
    assert "binds no host 'b' (it binds ['a'])" in result.err and "p.yaml:4" in result.err


@pytest.mark.parametrize(("choice", "message"), [
    ("r3", "--replicas 'r3': "),
    (",", "--replicas ',': "),
])
def test_replicas_not_in_the_inventory(tmp_path: Path, choice: str, message: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    profile, inventory = files(tmp_path)
    result = run_cli(capsys, "run", profile, "-i", inventory, "--replicas", choice,
                     "-o", str(tmp_path / "r"))
    assert result.code == 2 and message in result.err and "['r1', 'r2']" in result.err
    assert not (tmp_path / "r").exists()


def test_replicas_asked_of_an_inventory_without_any(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile, inventory = files(tmp_path, INVENTORY[:INVENTORY.index("replicas:")])
    result = run_cli(capsys, "run", profile, "-i", inventory, "--replicas", "r1",
                     "-o", str(tmp_path / "r"))
    assert result.code == 2 and "has replicas none" in result.err


def test_a_replica_the_inventory_does_not_have(tmp_path: Path) -> None:
    profile, inventory = files(tmp_path)
    with pytest.raises(InputError, match=r"no replica 'r9' in .*; replicas are \['r1', 'r2'\]"):
        bind(load_profile(profile), load_inventory(inventory), replica="r9")


def test_a_replica_bound_on_the_command_line(tmp_path: Path) -> None:
    """`--replica NAME:ALIAS=HOST,...` adds a replica to any inventory (an Ansible one
    included): one runner per pair."""
    from napilab.harness.cli.fleet import with_replicas

    profile, inventory = files(tmp_path, INVENTORY[:INVENTORY.index("replicas:")])
    inv = with_replicas(load_inventory(inventory), ("p9:a=x1,b=y1",))
    plan = bind(load_profile(profile), inv, replica="p9")
    assert (plan.host_of("sender").name, plan.host_of("receiver").name) == ("x1", "y1")


@pytest.mark.parametrize(("spec", "message"), [
    ("p9", "NAME:ALIAS=HOST[,ALIAS=HOST...]"),
    ("p9:a=x1,b", "NAME:ALIAS=HOST[,ALIAS=HOST...]"),
    ("p9:a=x1,b=nope", "no host 'nope'"),
    ("r1:a=x1,b=y1", "has a replica 'r1'"),
    ("p9:a=x1,b=y2", "host 'x1' is in replica 'r1' too"),
])
def test_a_wrong_replica_on_the_command_line(tmp_path: Path, spec: str, message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    profile, inventory = files(tmp_path)
    result = run_cli(capsys, "run", profile, "-i", inventory, "--replica", spec,
                     "-o", str(tmp_path / "r"))
    assert result.code == 2 and message in result.err, result.err
    assert "Traceback" not in result.err and not (tmp_path / "r").exists()


def test_the_plan_of_each_replica(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`napilab plan` (and `run --dry-run`) over an inventory's replicas: each replica's
    plan under its name, on its own hosts; `--replicas` chooses; nothing touched."""
    profile, inventory = files(tmp_path)
    shown = run_cli(capsys, "plan", profile, "-i", inventory, "--summary")
    assert shown.code == 0, shown.err
    first, second = shown.out.split("== replica r2\n")
    assert first.startswith("== replica r1\n") and "x1" in first and "x2" not in first
    assert "x2" in second and "y2" in second and "x1" not in second
    one = run_cli(capsys, "run", profile, "-i", inventory, "--replicas", "r2", "--dry-run",
                  "-o", str(tmp_path / "r"))
    assert one.code == 0 and one.out.startswith("== replica r2\n") and "x1" not in one.out
    assert not (tmp_path / "r").exists()
