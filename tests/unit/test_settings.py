"""Settings: read -> journal -> write -> read back; restore in reverse, verified."""

from __future__ import annotations

import json

import pytest

from napilab.harness.errors import HostError, SettingMismatch
from napilab.harness.grammar import cpus
from napilab.harness.hosts.host_records import JournalRecord
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.knobs import values
from napilab.harness.knobs.kind import Setting
from napilab.harness.knobs.kinds import netdev
from napilab.harness.records import codec
from tests.fakes import FakeHost, FakeTransport

NET = "/sys/class/net/eth0"


def host() -> FakeHost:
    return FakeHost({
        f"{NET}/gro_flush_timeout": "0\n",
        f"{NET}/napi_defer_hard_irqs": "0\n",
        f"{NET}/threaded": "0\n",
        f"{NET}/queues/rx-0/rps_cpus": "00000000\n",
        f"{NET}/queues/rx-1/rps_cpus": "00000000\n",
        f"{NET}/queues/tx-0/xps_cpus": "00000001\n",
        "/proc/sys/net/core/busy_poll": "0\n",
    })


SETTINGS = [
    Setting("sut", "sysctl", "net.core.busy_poll", "50"),
    Setting("sut", "netdev", "eth0/gro_flush_timeout", "20000"),
    Setting("sut", "rps", "eth0/rx-*", "1-2"),
]


def test_apply_journals_writes_and_reads_back_then_restores() -> None:
    fake = host()
    original = dict(fake.files)
    settings = HostSettings(HostSession(FakeTransport(fake)), "r1")
    changes = settings.apply(SETTINGS)
    assert [c.target for c in changes] == ["net.core.busy_poll", "eth0/gro_flush_timeout",
                                           "eth0/rx-0", "eth0/rx-1"]
    assert all(c.matches for c in changes)
    assert fake.files[f"{NET}/queues/rx-1/rps_cpus"] == "6\n"
    journal = json.loads(fake.files["/var/tmp/napilab/journal-r1-fake.json"])
    assert [e["original"] for e in journal["entries"]] == ["0", "0", "00000000", "00000000"]
    # the journal is written before the first write
    first_tee = next(i for i, a in enumerate(fake.log) if a[0] == "tee")
    journal_write = next(i for i, a in enumerate(fake.log) if a[0] == "sh")
    assert journal_write < first_tee
    settings.restore()
    assert fake.files == {k: v for k, v in original.items()}
    tees = [a[2] for a in fake.log if a[0] == "tee"]
    assert tees[-4:] == [f"{NET}/queues/rx-1/rps_cpus", f"{NET}/queues/rx-0/rps_cpus",
                         f"{NET}/gro_flush_timeout", "/proc/sys/net/core/busy_poll"]


def test_value_equal_to_original_is_not_written() -> None:
    fake = host()
    HostSettings(HostSession(FakeTransport(fake)), "r1").apply(
        [Setting("sut", "netdev", "eth0/threaded", "0")])
    assert not [a for a in fake.log if a[0] == "tee"]


def test_silently_ignored_value_is_a_mismatch_and_is_restored() -> None:
    fake = host()
    fake.ignore.add(f"{NET}/gro_flush_timeout")
    settings = HostSettings(HostSession(FakeTransport(fake)), "r1")
    with pytest.raises(SettingMismatch, match="gro_flush_timeout: wrote '20000', reads '0'"):
        settings.apply(SETTINGS)
    assert fake.files["/proc/sys/net/core/busy_poll"] == "0\n"
    assert "/var/tmp/napilab/journal-r1-fake.json" not in fake.files


def test_mismatch_policy_warn_keeps_going() -> None:
    fake = host()
    fake.ignore.add(f"{NET}/gro_flush_timeout")
    changes = HostSettings(HostSession(FakeTransport(fake)), "r1", policy="warn").apply(SETTINGS)
    assert [c.matches for c in changes] == [True, False, True, True]


def test_refused_write_restores_what_was_written() -> None:
    fake = host()
    fake.refuse[f"{NET}/queues/rx-1/rps_cpus"] = "Invalid argument"
    with pytest.raises(HostError, match="cannot set rps eth0/rx-1 = '6': Invalid argument"):
        HostSettings(HostSession(FakeTransport(fake)), "r1").apply(SETTINGS)
    assert fake.files["/proc/sys/net/core/busy_poll"] == "0\n"
    assert fake.files[f"{NET}/queues/rx-0/rps_cpus"] == "00000000\n"


def test_missing_knob_fails_before_any_write() -> None:
    fake = host()
    with pytest.raises(HostError, match="cannot read /sys/class/net/eth0/mtu"):
        HostSettings(HostSession(FakeTransport(fake)), "r1").apply(
            [*SETTINGS, Setting("sut", "netdev", "eth0/mtu", "9000")])
    assert not [a for a in fake.log if a[0] in ("tee", "sh")]


def test_restore_failure_keeps_the_journal() -> None:
    fake = host()
    settings = HostSettings(HostSession(FakeTransport(fake)), "r1")
    settings.apply(SETTINGS)
    fake.refuse["/proc/sys/net/core/busy_poll"] = "Permission denied"
    with pytest.raises(HostError, match="restore incomplete"):
        settings.restore()
    assert "/var/tmp/napilab/journal-r1-fake.json" in fake.files
    assert fake.files[f"{NET}/gro_flush_timeout"] == "0\n"  # the others were restored


def test_journal_replay() -> None:
    fake = host()
    settings = HostSettings(HostSession(FakeTransport(fake)), "r9")
    settings.apply(SETTINGS)
    path = "/var/tmp/napilab/journal-r9-fake.json"
    replay = HostSettings.from_journal(HostSession(FakeTransport(fake)),
                                       codec.parse(fake.files[path], JournalRecord, path), path)
    assert len(replay.restore()) == 4
    assert fake.files[f"{NET}/gro_flush_timeout"] == "0\n"
    assert path not in fake.files


@pytest.mark.parametrize("text,expected", [("0-3,8", (0, 1, 2, 3, 8)), ("", ()),
                                           ("5", (5,)), ("1,1,2", (1, 2))])
def test_cpu_lists(text: str, expected: tuple[int, ...]) -> None:
    assert cpus.parse_list(text) == expected
    assert cpus.parse_list(cpus.format_list(list(expected))) == expected


@pytest.mark.parametrize("bad", ["a", "3-1", "1;2", "$(id)", "1 2", "0x1", "-1"])
def test_bad_cpu_lists(bad: str) -> None:
    with pytest.raises(cpus.CpuListError):
        cpus.parse_list(bad)


def test_masks() -> None:
    assert cpus.parse_mask("00000000,00000003") == (0, 1)
    assert cpus.parse_mask("ff") == tuple(range(8))
    assert cpus.to_mask([1, 2]) == "6" and cpus.to_mask([]) == "0"
    assert cpus.parse_mask("100000000") == (32,)


@pytest.mark.parametrize("value", ["2", "busy-poll", 3, "yes"])
def test_threaded_sysfs_takes_only_0_1(value: object) -> None:
    with pytest.raises(values.KnobValueError):
        netdev.ATTRS["threaded"](value)


@pytest.mark.parametrize("name", ["net.core.busy_poll;id", "../etc", "net/core", "net..x",
                                  "net.core.$(id)", "net.core.busy poll", "Net"])
def test_sysctl_names_are_confined(name: str) -> None:
    with pytest.raises(values.KnobValueError):
        values.check_sysctl(name)


def test_sudo_password_needed_is_explained() -> None:
    from napilab.harness.errors import CommandError
    from napilab.harness.transport.transport import CommandResult

    result = CommandResult("sut", ("sudo", "-n", "--", "env", "LC_ALL=C", "true"), 1, "",
                           "sudo: a password is required\n", 0.0, 0.0)
    with pytest.raises(CommandError) as exc:
        result.check()
    assert "sudo: a password is required" in str(exc.value)
    assert "passwordless sudo" in exc.value.hint


class GoesAwayOnRefusal(FakeTransport):
    """A host that is gone once a write failed (a guest whose new kernel died while it
    booted): every later command fails as a dropped connection."""

    def run(self, argv, **kw):  # type: ignore[no-untyped-def]
        try:
            return super().run(argv, **kw)
        finally:
            if argv[0] == "tee" and argv[-1] in self.fake.refuse:
                self.fake.unreachable = True


def test_a_failed_apply_whose_restore_fails_too_says_the_first_error() -> None:
    """The apply's own error is raised (it says what went wrong), the restore's added to
    it, and the journal stays for the next restore."""
    fake = host()
    fake.refuse[f"{NET}/gro_flush_timeout"] = "No such device"
    settings = HostSettings(HostSession(GoesAwayOnRefusal(fake)), "r1")
    with pytest.raises(HostError) as caught:
        settings.apply(SETTINGS)
    message = caught.value.message
    assert message == ("fake: cannot set netdev eth0/gro_flush_timeout = '20000': No such "
                       "device (then: fake: connection dropped during `tail`)"), message
    assert "/var/tmp/napilab/journal-r1-fake.json" in fake.files
    assert fake.files["/proc/sys/net/core/busy_poll"] == "50\n"  # written, not restored
    fake.unreachable = False
    fake.refuse.clear()
    settings.restore()  # the next restore puts it back and drops the journal
    assert fake.files["/proc/sys/net/core/busy_poll"] == "0\n"
    assert "/var/tmp/napilab/journal-r1-fake.json" not in fake.files
