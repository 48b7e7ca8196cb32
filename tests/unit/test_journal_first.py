"""Every host journals its originals before any host writes a knob (issue 21, item 10):
host b's journal cannot be written (its /var/tmp is full) -> the trial stops with host
a's knob never written (it went 1111 -> 3001 -> 1111 within ~40 ms before), and no
journal is left on either host once the trial's restore has run."""

from __future__ import annotations

from typing import Any

import pytest

from napilab.harness.engine.fan_out import HostOps
from napilab.harness.errors import HostError
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.knobs.kind import Setting
from tests.fakes import FakeHost, FakeTransport

X = "/sys/class/net/eth0/gro_flush_timeout"


class Plan:
    def settings(self, variant: Any) -> dict[str, list[Setting]]:
        return {host: [Setting("receiver", "netdev", "eth0/gro_flush_timeout", "3001")]
                for host in ("a", "b")}


class Store:
    def write_raw_json(self, *args: Any) -> None:
        pass


class Trial:
    id = "t001"


def test_a_host_that_cannot_journal_stops_the_trial_before_any_host_writes() -> None:
    hosts = {"a": FakeHost({X: "1111\n"}), "b": FakeHost({X: "1111\n"}, disk_full=True)}
    transports = {name: FakeTransport(fake, name) for name, fake in hosts.items()}
    ops = HostOps(Plan(), Store(), transports)  # type: ignore[arg-type]
    settings = {name: HostSettings(HostSession(t), "aaaa0001") for name, t in transports.items()}
    with pytest.raises(HostError, match=r"b: cannot write the journal .*No space left"):
        ops.apply(Trial(), None, settings)  # type: ignore[arg-type]
    for fake in hosts.values():
        assert fake.files[X] == "1111\n"
        assert not [argv for argv in fake.log if argv[0] == "tee"], fake.log  # no write
    ops.restore(settings)  # the trial's `finally`
    assert not [p for fake in hosts.values() for p in fake.files if "journal-" in p]


def test_hosts_that_can_journal_are_written_after_all_have_journalled() -> None:
    hosts = {"a": FakeHost({X: "1111\n"}), "b": FakeHost({X: "1111\n"})}
    transports = {name: FakeTransport(fake, name) for name, fake in hosts.items()}
    ops = HostOps(Plan(), Store(), transports)  # type: ignore[arg-type]
    settings = {name: HostSettings(HostSession(t), "aaaa0001") for name, t in transports.items()}
    changes = ops.apply(Trial(), None, settings)  # type: ignore[arg-type]
    assert [c.host for c in changes] == ["a", "b"]
    assert all(fake.files[X] == "3001\n" for fake in hosts.values())
    ops.restore(settings)
    assert all(fake.files[X] == "1111\n" for fake in hosts.values())
    assert not [p for fake in hosts.values() for p in fake.files if "journal-" in p]


def test_a_cpu_a_host_has_not_online_is_refused_before_the_first_trial(tmp_path: Any) -> None:
    """The inventory says nothing of b's CPUs; the run reads b's online CPUs (0-1) at the
    start: an RPS CPU 63 in the second variant is refused then, quoted as written (it
    was refused only when that variant's first trial applied, as the mask
    8000000000000000)."""
    from napilab.harness.inventory.inventory import load_inventory
    from napilab.harness.profile.plan import bind, check_online
    from napilab.harness.profile.profile import load_profile

    profile = tmp_path / "p.yaml"
    profile.write_text("""\
name: rps
hosts: {sender: {host: a}, receiver: {host: b, iface: eth0}}
workload: {tool: ping, client: {role: sender, cpus: "0"}, server: {role: receiver}}
variants:
  off: {setup: {receiver: {rps: {eth0: none}}}}
  far: {setup: {receiver: {rps: {eth0: "63"}}}}
""")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("hosts: {a: {transport: local}, b: {transport: local}}\n")
    plan = bind(load_profile(profile), load_inventory(inventory))
    (problem,) = check_online(plan, {"a": (0, 1), "b": (0, 1)})
    assert str(problem).startswith(f"{profile}:6:") and "'63'" in str(problem), problem
    assert "CPU 63 ('63') is not online on b (online: 0-1)" in str(problem)
    assert "8000000000000000" not in str(problem)
    assert check_online(plan, {"a": (0, 1), "b": tuple(range(64))}) == []
    assert check_online(plan, {"a": None, "b": None}) == []  # not read: nothing to say
