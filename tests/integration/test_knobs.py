"""Every knob kind that this machine can exercise, applied for real over SSH to the
testbed (or to the root namespace for global sysctls), read back with the kernel's
own tools, and restored."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from napilab.harness.errors import CommandError, HostError
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.inventory.inventory import Host, load_inventory
from napilab.harness.knobs.kind import Setting
from napilab.harness.lab import netns as tb
from napilab.harness.transport.connect import transport_for
from tests.conftest import suite_testbed


@pytest.fixture()
def host_b(testbed: tb.Testbed) -> Iterator[HostSession]:
    session = HostSession(transport_for(load_inventory(testbed.inventory_path).hosts["b"]))
    yield session
    session.close()


def ns(bed: tb.Testbed, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", f"{bed.prefix}-b", *argv],
                          capture_output=True, text=True, check=True).stdout


def napi_threads() -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,comm="], capture_output=True, text=True,
                         check=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "napi/data0-" in line]


def test_threaded_napi_via_netlink_and_thread_pinning(testbed: tb.Testbed,
                                                      host_b: HostSession) -> None:
    assert napi_threads() == []
    settings = HostSettings(host_b, "knobs1")
    changes = settings.apply([
        Setting("r", "napi", "data0/threaded", "enabled"),
        Setting("r", "napi", "data0/defer-hard-irqs", "2"),
        Setting("r", "napi", "data0/gro-flush-timeout", "20000"),
        Setting("r", "napi_threads", "data0/cpus", "1"),
        Setting("r", "napi_threads", "data0/policy", "fifo:50"),
    ])
    assert all(c.matches for c in changes), changes
    (pid,) = napi_threads()
    assert "affinity list: 1" in subprocess.run(["taskset", "-pc", str(pid)],
                                                capture_output=True, text=True).stdout
    chrt = subprocess.run(["chrt", "-p", str(pid)], capture_output=True, text=True).stdout
    assert "SCHED_FIFO" in chrt and "priority: 50" in chrt
    assert {c.target.split("/", 1)[1] for c in changes if c.kind == "napi"} >= {
        f"napi-{c.path.split('/')[1]}/threaded" for c in changes if c.kind == "napi"}
    settings.restore()
    assert napi_threads() == []  # threaded back to disabled: the kthread is gone
    state = ns(testbed, "python3", "-c", "print(open('/sys/class/net/data0/threaded').read())")
    assert state.strip() == "0"


def test_threaded_busy_poll_is_refused_by_this_kernel(host_b: HostSession) -> None:
    uname = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout
    settings = HostSettings(host_b, "knobs2")
    try:
        settings.apply([Setting("r", "netdev", "data0/gro_flush_timeout", "5000"),
                        Setting("r", "napi", "data0/threaded", "busy-poll")])
    except HostError as exc:
        assert "cannot set napi data0/napi-" in str(exc)
        assert "no threaded busy-poll" in str(exc)
    else:  # a newer kernel takes it: then it must have been applied and verified
        assert not uname.startswith("6.18"), "6.18 has no threaded busy-poll"
        settings.restore()
    assert ns(tb.Testbed(suite_testbed()[0]), "cat",
              "/sys/class/net/data0/gro_flush_timeout") == "0\n"


def test_ethtool_features_and_read_back(testbed: tb.Testbed, host_b: HostSession) -> None:
    before = ns(testbed, "ethtool", "-k", "data0")
    settings = HostSettings(host_b, "knobs3")
    changes = settings.apply([Setting("r", "ethtool", "data0/features/rx-gro-list", "on")])
    assert [(c.path, c.original, c.effective) for c in changes] == [
        ("data0/-k/rx-gro-list", "off", "on")]
    assert "rx-gro-list: on" in ns(testbed, "ethtool", "-k", "data0")
    settings.restore()
    assert ns(testbed, "ethtool", "-k", "data0") == before


def test_irq_affinity_on_a_veth_fails_clearly(host_b: HostSession) -> None:
    with pytest.raises(HostError, match="no IRQs found for data0"):
        HostSettings(host_b, "knobs4").apply([Setting("r", "irq_affinity", "data0", "1")])


def test_sysfs_device_attribute_of_a_veth_fails_before_any_write(testbed: tb.Testbed,
                                                                host_b: HostSession) -> None:
    """A veth has no device directory: the read of the sysfs kind's file fails, naming
    it, before the netdev value of the same apply is written or a journal is left."""
    settings = HostSettings(host_b, "knobs7")
    with pytest.raises(HostError, match="/sys/class/net/data0/device/power/control"):
        settings.apply([Setting("r", "netdev", "data0/gro_flush_timeout", "5000"),
                        Setting("r", "sysfs", "data0/device/power/control", "on")])
    assert ns(testbed, "cat", "/sys/class/net/data0/gro_flush_timeout") == "0\n"
    assert not settings.changes


def test_namespaced_busy_poll_explains_itself(host_b: HostSession) -> None:
    with pytest.raises(HostError) as exc:
        HostSettings(host_b, "knobs5").apply([Setting("r", "sysctl", "net.core.busy_poll",
                                                      "50")])
    assert "exist only in the initial network namespace" in str(exc.value)


def test_global_sysctl_in_the_root_namespace_comes_back(root_only: None) -> None:
    """The one test that writes the machine's own global sysctls: restored and checked
    here, and by the session guard in conftest.py."""
    paths = [Path("/proc/sys/net/core/busy_poll"), Path("/proc/sys/net/core/busy_read")]
    before = [p.read_text() for p in paths]
    new = str(int(before[0]) + 7)
    root = local_root()
    settings = HostSettings(root, "knobs6")
    try:
        settings.apply([Setting("r", "sysctl", "net.core.busy_poll", new),
                        Setting("r", "sysctl", "net.core.busy_read", new)])
        assert [p.read_text().strip() for p in paths] == [new, new]
    finally:
        settings.restore()
    assert [p.read_text() for p in paths] == before


def local_root() -> HostSession:
    return HostSession(transport_for(Host(name="root", transport="local")))


def test_a_write_over_ssh_lands_and_a_rejected_one_says_why(testbed: tb.Testbed,
                                                         host_b: HostSession) -> None:
    """SSHTransport.write_file through the shell's printf: the value lands (read back by
    the kernel's own file), and a value the kernel rejects is an error with the kernel's
    reason (tee's retry), not dash's "I/O error"; the file keeps its value."""
    path = "/sys/class/net/data0/gro_flush_timeout"
    original = ns(testbed, "cat", path).strip()
    transport = host_b.transport
    try:
        transport.write_file(path, "20000\n")
        assert ns(testbed, "cat", path).strip() == "20000"
        with pytest.raises(CommandError) as failed:
            transport.write_file(path, "not-a-number\n")
        assert "Invalid argument" in failed.value.stderr
        assert "I/O error" not in failed.value.stderr
        assert ns(testbed, "cat", path).strip() == "20000"
        with pytest.raises(CommandError) as missing:
            transport.write_file("/sys/class/net/data0/no_such_dir_napilab/knob", "1\n")
        assert "No such file or directory" in missing.value.stderr
    finally:
        transport.write_file(path, original + "\n")
    assert ns(testbed, "cat", path).strip() == original
