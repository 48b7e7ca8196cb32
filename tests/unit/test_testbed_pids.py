"""A testbed kills only what it started (issue 37's held-out VM failure): a pid read
from a file is killed only while its command line still names the testbed's state (a
pid is reused once its process died), and `testbed down` leaves alone every process
that is not a guest's, such as a `napilab run -i STATE/inventory.yaml` still going.
Real processes, started here and stopped in the teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb
from napilab.harness.lab.guest import stop_guest
from napilab.harness.lab.vmbed import VmTestbed

SLEEP = "import time; time.sleep(60)"


@pytest.fixture()
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start(procs: list[subprocess.Popen[bytes]], argv: list[str],
          argv0: str | None = None) -> subprocess.Popen[bytes]:
    """`argv` in a session of its own, its argv[0] shown as `argv0` (bash's exec -a)."""
    if argv0 is not None:
        argv = ["bash", "-c", 'exec -a "$0" "$@"', argv0, *argv]
    proc = subprocess.Popen(argv, start_new_session=True)
    procs.append(proc)
    return proc


def running(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def wait_named(proc: subprocess.Popen[bytes], needle: str, argv0: str | None = None) -> None:
    """Until the process names `needle` and, with `argv0`, exec has replaced bash's
    command line (which names `needle` too, as an argument) with the program's."""
    for _ in range(500):
        argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        if needle.encode() in b"\0".join(argv) and (argv0 is None or argv[0] == argv0.encode()):
            return
        time.sleep(0.01)
    raise AssertionError(f"{proc.pid} never named {needle} as {argv0 or 'itself'}")


def test_a_pid_that_is_now_another_process_is_not_killed(
        tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> None:
    """A pidfile of sshd (netns testbed) and of vng (VM testbed) holding the pid of a
    process that is not theirs: neither is signalled. The process that does name the
    state directory is stopped, as before."""
    other = start(started, [sys.executable, "-c", SLEEP])
    for name in ("sshd.pid", "vng.pid"):
        (tmp_path / "a").mkdir(exist_ok=True)
        (tmp_path / "a" / name).write_text(f"{other.pid}\n")
    tb._kill_pidfile(tmp_path / "a" / "sshd.pid")
    stop_guest(tmp_path / "a" / "vng.pid", timeout=2)
    assert running(other)
    ours = start(started, [sys.executable, "-c", SLEEP, str(tmp_path / "a")])
    wait_named(ours, str(tmp_path / "a"))
    (tmp_path / "a" / "vng.pid").write_text(f"{ours.pid}\n")
    stop_guest(tmp_path / "a" / "vng.pid", timeout=5)
    assert ours.wait(timeout=5) == -signal.SIGTERM and running(other)
    ours = start(started, [sys.executable, "-c", SLEEP, str(tmp_path / "a")])
    wait_named(ours, str(tmp_path / "a"))
    (tmp_path / "a" / "sshd.pid").write_text(f"{ours.pid}\n")
    tb._kill_pidfile(tmp_path / "a" / "sshd.pid")
    assert ours.wait(timeout=5) == -signal.SIGTERM and running(other)


def test_testbed_down_spares_a_controller_that_names_its_inventory(
        tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> None:
    """`testbed down` killed with SIGKILL every process whose command line named its
    state directory, which includes `napilab run -i STATE/inventory.yaml` in another
    terminal. Now only a guest's own processes (QEMU, vng, virtme-run) are strays."""
    bed = VmTestbed("nlt", tmp_path / "state")
    bed.state.mkdir()
    inventory = str(bed.state / "inventory.yaml")
    controller = start(started, [sys.executable, "-c", SLEEP, "run", "-i", inventory],
                       argv0="/usr/local/bin/napilab")
    qemu = start(started, [sys.executable, "-c", SLEEP, "-name", "a", "-fsdev",
                           f"path={bed.state / 'a'}"], argv0="/usr/bin/qemu-system-x86_64")
    vng = start(started, [sys.executable, "-c", SLEEP, "--rodir", str(bed.state / "b")],
                argv0="/usr/bin/vng")
    for proc, argv0 in ((controller, "/usr/local/bin/napilab"),
                        (qemu, "/usr/bin/qemu-system-x86_64"), (vng, "/usr/bin/vng")):
        wait_named(proc, str(bed.state), argv0)
    assert sorted(bed.stray_processes()) == sorted([qemu.pid, vng.pid])
    bed.down()
    # each guest's stop finds its own processes outside its pid file: TERM first
    assert qemu.wait(timeout=5) == -signal.SIGTERM and vng.wait(timeout=5) == -signal.SIGTERM
    assert running(controller) and not bed.state.exists()


def test_a_guests_qemu_outside_its_pid_file_counts_as_running_and_is_stopped(
        tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> None:
    """Issue 35's red VM run: guest b's vng.pid named another start while a QEMU of b
    still ran; `restore` said "guest b was not running" and the next start could not
    forward b's SSH port. A QEMU that names the guest's directory is its process
    whatever the pid file says: the guest runs, and stopping it stops that QEMU (and
    never guest ab's, whose directory only begins with b's name)."""
    from napilab.harness.lab.guest import Guest, GuestSpec, guest_processes

    (tmp_path / "b").mkdir()
    (tmp_path / "ab").mkdir()
    qemu = start(started, [sys.executable, "-c", SLEEP, "-fsdev",
                           f"local,path={tmp_path / 'b' / 'guest'},id=fs"],
                 argv0="/usr/bin/qemu-system-x86_64")
    other = start(started, [sys.executable, "-c", SLEEP, "-fsdev",
                            f"local,path={tmp_path / 'ab' / 'guest'},id=fs"],
                  argv0="/usr/bin/qemu-system-x86_64")
    bystander = start(started, [sys.executable, "-c", SLEEP])
    for proc in (qemu, other):
        wait_named(proc, str(tmp_path), "/usr/bin/qemu-system-x86_64")
    (tmp_path / "b" / "vng.pid").write_text(f"{bystander.pid}\n")  # not b's
    spec = GuestSpec("b", Path("/boot/none"), (), 1, "256M", 1, "tcg", 1, "tap0",
                     "192.0.2.2/24", 1, tmp_path / "b")
    assert guest_processes(tmp_path / "b") == [qemu.pid]
    assert Guest(spec).pid() == qemu.pid
    stop_guest(tmp_path / "b" / "vng.pid", timeout=2)
    assert qemu.wait(timeout=5) == -signal.SIGTERM
    assert Guest(spec).pid() is None and not (tmp_path / "b" / "vng.pid").exists()
    assert running(other) and running(bystander)
