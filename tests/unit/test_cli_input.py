"""Bad input: a one-line error naming file:line and the key, exit code 2, and no
command run on any host (every transport constructor is replaced by a tripwire)."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.transport import connect
from tests.cli import run_cli

GOOD = """\
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
"""
INVENTORY = """\
transport: local
hosts:
  a: {address: 127.0.0.1}
  b: {address: 127.0.0.1}
"""


@pytest.fixture(autouse=True)
def tripwire(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a transport was opened for bad input")

    monkeypatch.setattr(connect, "transport_for", refuse)
    monkeypatch.setattr(connect, "LocalTransport", refuse)
    monkeypatch.setattr(connect, "SSHTransport", refuse)


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def run_args(tmp_path: Path, profile: str) -> list[str]:
    return ["run", profile, "-i", write(tmp_path, INVENTORY, "inv.yaml"), "-o",
            str(tmp_path / "results")]


CASES = {
    "missing file": (None, "no such file", None),
    "yaml syntax": (GOOD.replace("client: {role: sender}", "client: {role: sender"),
                    "YAML syntax error", 9),
    "unknown top key": (GOOD + "repeats: 3\n", "repeats: unknown key", 12),
    "unknown variant field": (GOOD.replace("one: {}", "one: {setpu: {}}"),
                              "variants.one.setpu: unknown key", 11),
    "unknown workload key": (GOOD.replace("  duration: 1", "  duraton: 1"),
                             "workload.duraton: unknown key", 7),
    "unknown tool": (GOOD.replace("tool: ping", "tool: pign"),
                     "workload.tool: 'pign' is not one of", 6),
    "bad netdev value": (GOOD + "setup:\n  receiver:\n    netdev:\n      eth0: {threaded: 2}\n",
                         "setup.receiver.netdev.eth0.threaded: expected one of", 15),
    "unknown role in setup": (GOOD + "setup:\n  recevier:\n    sysctl: {net.core.busy_poll: 50}\n",
                              "setup.recevier: no such role", 13),
    "bad cpu list": (GOOD.replace("client: {role: sender}", "client: {role: sender, cpus: x}"),
                     "workload.client.cpus: 'x' is not a CPU list", 8),
    "unknown inventory host": (GOOD.replace("{host: b}", "{host: c}"),
                               "hosts.receiver.host: no host 'c'", 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_exits_2_with_location(case: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    text, message, line = CASES[case]
    profile = str(tmp_path / "absent.yaml") if text is None else write(tmp_path, text)
    code, _, err = run_cli(capsys, *run_args(tmp_path, profile))
    assert code == 2, err
    assert err.startswith("napilab: error: "), err
    assert message in err, err
    if line is not None:
        assert f"{profile}:{line}:" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "results").exists()


def test_every_problem_is_reported_at_once(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    text = (GOOD.replace("duration: 1", "duration: -1").replace("tool: ping", "tool: ping")
            + "repeat: 0\norder: interleave\n")
    code, _, err = run_cli(capsys, "validate", write(tmp_path, text))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 3, err
    assert "workload.duration: -1 is out of range" in lines[0]
    assert "repeat: 0 is out of range" in lines[1]
    assert "order: 'interleave' is not one of" in lines[2] and "did you mean 'interleaved'" \
        in lines[2]


def test_bad_inventory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inventory = write(tmp_path, "hosts:\n  a: {address: 127.0.0.1, prot: 22}\n", "inv.yaml")
    code, _, err = run_cli(capsys, "run", write(tmp_path, GOOD), "-i", inventory)
    assert code == 2
    assert f"{inventory}:2:27: hosts.a.prot: unknown key" in err
    assert "did you mean 'port'" in err


def test_usage_error_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run_cli(capsys, "run")
    assert code == 2


def test_validate_good_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run_cli(capsys, "validate", write(tmp_path, GOOD))
    assert code == 0
