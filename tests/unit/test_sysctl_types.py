"""Sysctl values are checked against the sysctl's type on the host (issue 36, item 4):
what the host reads (tests/data/sysfs/6.18.44-fc-v1098/sysctl_types.txt, captured on
this VM) decides, once the originals are read and before anything is journalled or
written; a word for an integer sysctl, or too few integers, fails naming the key, the
value and what the host reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.errors import HostError
from tests.unit.test_hostwide_kinds import JOURNAL, apply, bound, settings_on, tree

SYSCTLS = Path(__file__).parents[1] / "data" / "sysfs" / "6.18.44-fc-v1098" / "sysctl_types.txt"


def refused(tmp_path: Path, setup: str) -> str:
    plan = bound(tmp_path, setup)
    settings, fake = settings_on(tree(SYSCTLS))
    with pytest.raises(HostError) as info:
        settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert not [line for line in fake.log if line[0] == "tee"]
    assert JOURNAL not in fake.files
    return str(info.value)


@pytest.mark.parametrize(("setup", "error"), [
    ("sysctl: {net.core.busy_poll: fast}",
     "sut: sysctl net.core.busy_poll = 'fast': 'fast' is not an integer, and "
     "net.core.busy_poll is an integer sysctl (the host reads '0')"),
    ("sysctl: {net.ipv4.tcp_rmem: [4096, lots, 6291456]}",
     "'lots' is not an integer, and net.ipv4.tcp_rmem is an integer sysctl "
     "(the host reads '4096 131072 33554432')"),
    ("sysctl: {net.ipv4.tcp_rmem: 4096}",
     "sysctl net.ipv4.tcp_rmem = '4096': net.ipv4.tcp_rmem holds 3 integers (the host "
     "reads '4096 131072 33554432'): give all 3, as a list"),
    ('sysctl: {net.ipv4.ip_local_port_range: [1024, "65535.0"]}',
     "'65535.0' is not an integer, and net.ipv4.ip_local_port_range"),
])
def test_a_value_not_of_the_sysctls_type_fails_before_any_write(
        tmp_path: Path, setup: str, error: str) -> None:
    assert error in refused(tmp_path, setup)


def test_a_later_bad_value_stops_the_earlier_good_ones_too(tmp_path: Path) -> None:
    """Every sysctl's original is read first: the good one is not written either."""
    message = refused(tmp_path, "sysctl: {net.ipv4.tcp_congestion_control: cubic, "
                                "net.core.busy_poll: auto}")
    assert "net.core.busy_poll = 'auto'" in message


def test_values_of_the_right_type_are_written_and_restored(tmp_path: Path) -> None:
    plan = bound(tmp_path, "sysctl: {net.core.busy_poll: 50, "
                           "net.ipv4.tcp_rmem: [4096, 262144, 33554432], "
                           "net.ipv4.tcp_congestion_control: cubic, "
                           "net.ipv4.tcp_allowed_congestion_control: cubic, "
                           "kernel.core_pattern: core.napilab}")
    files = tree(SYSCTLS)
    settings, fake, changes = apply(plan, dict(files))
    assert [(c.target, c.state) for c in changes] == [
        ("net.core.busy_poll", "taken"), ("net.ipv4.tcp_rmem", "taken"),
        ("net.ipv4.tcp_congestion_control", "taken"),
        ("net.ipv4.tcp_allowed_congestion_control", "taken"),
        ("kernel.core_pattern", "taken")]
    settings.restore()
    assert {p: v.strip() for p, v in fake.files.items()} == {
        p: v.strip() for p, v in files.items()}
