"""Host keys against real sshds (issue 14 item 9): eight sshd with their own host keys
in the testbed's namespace a, reached in parallel as eight inventory hosts, as
OpenSSH's StrictHostKeyChecking=accept-new would: every new key appended under a lock,
the rest of known_hosts untouched, @revoked keys refused, @cert-authority lines never
taken for a host key, a crash on none of them. A refused key is a HostError: `napilab
run` exits 1 while connecting, before any lock is taken or knob written (connect comes
before harness.hosts.lock in harness.cli.execute). The sshds are stopped at teardown
whatever happens."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from napilab.harness.errors import HostError
from napilab.harness.inventory.inventory import Host
from napilab.harness.lab import netns as tb
from napilab.harness.transport.connect import close, connect

PORTS = tuple(range(2201, 2209))
# A known_hosts as people keep them: comments, a hashed name, markers, another host.
PREAMBLE = textwrap.dedent("""\
    # lab hosts, keep sorted
    |1|JfKTdBh7rNbXkVAQCRp4OQoJfgM=|USECr3SWf1JUPsms5AqfD5QfxkM= ssh-ed25519 KEY_A
    @cert-authority *.lab.example ssh-ed25519 KEY_B
    @revoked old.lab.example ssh-ed25519 KEY_C

    other.lab.example ssh-ed25519 KEY_D  # kept as written
    """)


@dataclass(frozen=True)
class Sshd:
    port: int
    key_type: str
    key: str  # base64 of the host's public key
    pidfile: Path


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True)
    return path.with_suffix(".pub").read_text().split()[1]


def preamble(tmp: Path) -> str:
    keys = [_keygen(tmp / f"other{i}") for i in range(4)]
    text = PREAMBLE
    for name, key in zip(("KEY_A", "KEY_B", "KEY_C", "KEY_D"), keys, strict=True):
        text = text.replace(name, key)
    return text


@pytest.fixture(scope="module")
def sshds(testbed: tb.Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Sshd]]:
    base = tmp_path_factory.mktemp("sshds")
    node = testbed.nodes[0]
    started: list[Sshd] = []
    try:
        for port in PORTS:
            home = base / str(port)
            home.mkdir()
            key = _keygen(home / "host_key")
            config = home / "sshd_config"
            config.write_text("\n".join([
                f"ListenAddress {node.mgmt_address}:{port}", f"HostKey {home / 'host_key'}",
                f"PidFile {home / 'sshd.pid'}",
                f"AuthorizedKeysFile {testbed.state / 'authorized_keys'}",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no",
                "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                "LogLevel ERROR"]) + "\n")
            subprocess.run(["ip", "netns", "exec", node.netns, "/usr/sbin/sshd", "-f",
                            str(config), "-E", str(home / "sshd.log")], check=True)
            started.append(Sshd(port, "ssh-ed25519", key, home / "sshd.pid"))
        deadline = time.time() + 10
        while not all(s.pidfile.exists() for s in started):
            assert time.time() < deadline, "an sshd did not start"
            time.sleep(0.02)
        yield started
    finally:
        for sshd in started:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(sshd.pidfile.read_text()), signal.SIGTERM)
        deadline = time.time() + 5
        while time.time() < deadline and any(_running(s) for s in started):
            time.sleep(0.05)


def _running(sshd: Sshd) -> bool:
    pid = tb.read_pid(sshd.pidfile)
    return pid is not None and tb.alive(pid)


def hosts(testbed: tb.Testbed, sshds: list[Sshd], known_hosts: Path | None,
          policy: str) -> list[Host]:
    return [Host(name=f"k{s.port}", address=testbed.nodes[0].mgmt_address, port=s.port,
                 user="root", key=str(testbed.state / "id_ed25519"),
                 known_hosts=str(known_hosts) if known_hosts else None,
                 host_key_policy=policy) for s in sshds]


def reach(chosen: list[Host]) -> None:
    close(connect(chosen).values())


def line(testbed: tb.Testbed, sshd: Sshd) -> str:
    return f"[{testbed.nodes[0].mgmt_address}]:{sshd.port} {sshd.key_type} {sshd.key}"


def test_eight_hosts_at_once_record_every_key(testbed: tb.Testbed, sshds: list[Sshd],
                                              tmp_path: Path) -> None:
    """Fault: 8 unknown hosts connected in parallel (threads of one run), 10 rounds.
    Expected: each round, all 8 keys appended after the untouched original text (napilab
    0.1 lost 2-5 of 8 per round and dropped the comments), then all 8 accepted under
    `reject`."""
    original = preamble(tmp_path)
    expected = {line(testbed, s) for s in sshds}
    for round_ in range(10):
        known = tmp_path / f"known_hosts.{round_}"
        known.write_text(original)
        reach(hosts(testbed, sshds, known, "accept-new"))
        text = known.read_text()
        assert text.startswith(original)
        assert set(text[len(original):].splitlines()) == expected, round_
        reach(hosts(testbed, sshds, known, "reject"))


def test_two_runs_at_once_record_every_key(testbed: tb.Testbed, sshds: list[Sshd],
                                           tmp_path: Path) -> None:
    """Fault: two napilab processes, 4 new hosts each, one known_hosts file. Expected:
    8 lines, none lost or split."""
    known = tmp_path / "known_hosts"
    known.write_text("# shared\n")
    script = textwrap.dedent(f"""\
        import sys
        from napilab.harness.inventory.inventory import Host
        from napilab.harness.transport.connect import close, connect
        ports = [int(p) for p in sys.argv[1:]]
        close(connect([Host(name=f"k{{p}}", address={testbed.nodes[0].mgmt_address!r},
                            port=p, user="root", key={str(testbed.state / 'id_ed25519')!r},
                            known_hosts={str(known)!r}, host_key_policy="accept-new")
                       for p in ports]).values())
        """)
    procs = [subprocess.Popen([sys.executable, "-c", script, *map(str, PORTS[i::2])])
             for i in range(2)]
    try:
        assert [p.wait(timeout=60) for p in procs] == [0, 0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    lines = known.read_text().splitlines()
    assert lines[0] == "# shared" and set(lines[1:]) == {line(testbed, s) for s in sshds}


def test_accept_new_without_a_file_records_in_home(testbed: tb.Testbed, sshds: list[Sshd],
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: accept-new with no `known_hosts` in the inventory (napilab 0.1 accepted any
    key on every run and saved none). Expected: ~/.ssh/known_hosts made (0700 dir, 0600
    file) with the key, which `reject` then accepts."""
    monkeypatch.setenv("HOME", str(tmp_path))
    reach(hosts(testbed, sshds[:1], None, "accept-new"))
    known = tmp_path / ".ssh" / "known_hosts"
    assert known.read_text() == line(testbed, sshds[0]) + "\n"
    assert stat.S_IMODE(known.stat().st_mode) == 0o600
    assert stat.S_IMODE(known.parent.stat().st_mode) == 0o700
    reach(hosts(testbed, sshds[:1], None, "reject"))


def test_revoked_key_is_refused_under_both_policies(testbed: tb.Testbed, sshds: list[Sshd],
                                                    tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    revoked = line(testbed, sshds[0]).replace(f"[{testbed.nodes[0].mgmt_address}]", "[*]")
    known.write_text(preamble(tmp_path) + f"@revoked {revoked}\n")
    before = known.read_text()
    for policy in ("accept-new", "reject"):
        with pytest.raises(HostError, match="revoked"):
            reach(hosts(testbed, sshds[:1], known, policy))
    known.write_text(before + line(testbed, sshds[0]) + "\n")  # listed and revoked
    with pytest.raises(HostError, match="revoked"):
        reach(hosts(testbed, sshds[:1], known, "reject"))
    assert known.read_text() == before + line(testbed, sshds[0]) + "\n"


def test_cert_authority_lines_are_read_not_trusted(testbed: tb.Testbed, sshds: list[Sshd],
                                                   tmp_path: Path) -> None:
    """A CA line matching the host (with the host's own key as the "CA") is no host
    key: under `reject` the host is unknown, and the message says why; a plain line
    next to it is used."""
    known = tmp_path / "known_hosts"
    ca = f"@cert-authority * {sshds[1].key_type} {sshds[1].key}\n"
    known.write_text(preamble(tmp_path) + ca + line(testbed, sshds[0]) + "\n")
    reach(hosts(testbed, sshds[:1], known, "reject"))
    with pytest.raises(HostError, match=r"unknown host key.*@cert-authority"):
        reach(hosts(testbed, sshds[1:2], known, "reject"))


def test_changed_key_is_refused_and_a_rotated_one_accepted(testbed: tb.Testbed,
                                                           sshds: list[Sshd],
                                                           tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    address = testbed.nodes[0].mgmt_address
    other = _keygen(tmp_path / "other")
    known.write_text(f"[{address}]:{sshds[2].port} ssh-ed25519 {other}\n")
    with pytest.raises(HostError, match="does not match known_hosts"):
        reach(hosts(testbed, sshds[2:3], known, "accept-new"))
    assert known.read_text().count("\n") == 1  # nothing added
    # two keys of one type for the host (a key being rotated): the one it shows counts
    known.write_text(known.read_text() + line(testbed, sshds[2]) + "\n")
    reach(hosts(testbed, sshds[2:3], known, "reject"))
