"""The VM testbed for the tests of this directory: two QEMU guests on Debian kernels
(harness.lab.vmbed), booted once for the session (for each pytest-xdist worker that
runs VM tests: tests/conftest.py groups them on two, each with a testbed of its own,
napilabtv0 and napilabtv1) and shared; torn down at its end, and by
tests/integration/vm/test_vm_zz_down.py, which checks that nothing of its testbed is left.

They skip, with the reason, only where QEMU cannot start a guest here: not root, no
qemu-system-x86_64 or busybox-static, no kernels in the cache (`make test` fetches them
as root; no network to deb.debian.org leaves it empty). A guest that boots and then
misbehaves is a failure, never a skip."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from napilab.harness.errors import HostError
from napilab.harness.hosts.session import HostSession
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.lab import kernels
from napilab.harness.lab.vmbed import VmTestbed
from napilab.harness.transport.connect import transport_for
from napilab.harness.transport.transport import CommandResult
from tests.cli import run_napilab, start_napilab
from tests.conftest import vm_group, vm_testbed_prefix

RT_OLD, RT_NEW, GENERIC = "6.1-rt", "7.2-rt", "7.2"


def cannot_start() -> str | None:
    if os.geteuid() != 0:
        return "the VM testbed needs root (taps, tc, QEMU)"
    for tool in ("qemu-system-x86_64", "busybox", "tc"):
        if shutil.which(tool) is None:
            return f"needs {tool} (make test installs qemu-system-x86, busybox-static as root)"
    have = {name for k in kernels.installed() for name in (*k.aliases, k.release)}
    missing = [k for k in (RT_OLD, RT_NEW, GENERIC) if k not in have]
    if missing:
        return (f"no kernel {', '.join(missing)} in {kernels.kernel_dir()} (`napilab testbed "
                "kernels --fetch` could not reach deb.debian.org)")
    return None


_BED: list[VmTestbed] = []
_FIRST_TEST: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if not _FIRST_TEST:
        _FIRST_TEST.append(item.nodeid)


def a_nic() -> str:
    """Guest a's data NIC: QEMU's vmxnet3 on the second VM testbed of a `--dist
    loadgroup` session (a worker runs one VM group: tests/conftest.py), so per-queue
    settings are proven on a second driver without a testbed of its own; virtio-net
    with QEMU's RSS otherwise (`ethtool -x`/`-X`: a flow can be steered to a queue)."""
    second = (os.environ.get("PYTEST_XDIST_WORKER") is not None and _FIRST_TEST
              and vm_group(_FIRST_TEST[0]) == "vm-2")
    return "vmxnet3" if second else "virtio-rss"


@pytest.fixture(scope="session")
def vm_bed() -> Iterator[VmTestbed]:
    """Guests a and b on the 7.2 generic kernel, 2 queue pairs each; b, the receiver
    the seeds tune, has 3 vCPUs (seed 000 pins its NAPI kthread and IRQ to CPU 2), a has
    2 (a 4-vCPU b stalled bringing up its CPUs once here, beside a, on 2 CPUs). b's NIC
    is virtio-net; a's is a_nic()'s."""
    reason = cannot_start()
    if reason:
        pytest.skip(reason)
    bed = VmTestbed(prefix=vm_testbed_prefix())
    bed.down()  # a session killed before its teardown may have left one
    try:
        bed.up({"a": GENERIC, "b": GENERIC}, queues=2, cpus={"a": 2, "b": 3}, memory="1G",
               nic={"a": a_nic()})
        _BED.append(bed)
        yield bed
    finally:
        close_guests(bed)
        bed.down()


@pytest.fixture(scope="session")
def vm_inventory(vm_bed: VmTestbed) -> Path:
    return vm_bed.inventory_path


def session_on(bed: VmTestbed, name: str) -> HostSession:
    return HostSession(transport_for(load_inventory(bed.inventory_path).hosts[name]))


# One SSH connection per guest for the session's helpers (the transport connects again
# when a guest was booted or killed): a new connection per call cost about 0.9 s of
# handshake under TCG, and the VM tests call `guest` about 200 times.
_GUESTS: dict[tuple[str, str], HostSession] = {}


def guest(bed: VmTestbed, name: str, script: str, timeout: float = 120,
          check: bool = True) -> CommandResult:
    """A shell script run on guest `name` over SSH (napilab's own transport)."""
    key = (str(bed.state), name)
    if key not in _GUESTS:
        _GUESTS[key] = session_on(bed, name)
    return _GUESTS[key].transport.run(["sh", "-c", script], timeout=timeout, check=check)


def close_guests(bed: VmTestbed) -> None:
    for key in [k for k in _GUESTS if k[0] == str(bed.state)]:
        _GUESTS.pop(key).close()


# What the data link looked like when a ping across it failed (clean-clone runs saw
# "+3 errors, 100% packet loss": a's ARP for b unanswered, and a run's ping warm-up
# with no reply to 10 requests), for the failure's message; per queue, since a queue
# that stopped receiving loses only the flows hashed to it.
LINK = ("ip -s link show data0; ip addr show data0; ip neigh show dev data0; "
        "ethtool -l data0 | tail -5; ethtool -x data0 | head -4; "
        "ethtool -S data0 | grep -E '(rx|tx)_queue_[0-9]+_(packets|drops|kicks)'; "
        "grep -E 'virtio.*(input|output)' /proc/interrupts")


def link_state(bed: VmTestbed) -> str:
    out = [f"\n--- guest {n}:\n" + guest(bed, n, LINK, check=False).stdout for n in ("a", "b")]
    for name in ("a", "b"):
        tap = bed.tap(name)
        out.append(f"\n--- tap {tap}:\n" + subprocess.run(
            f"ip -s link show dev {tap}; tc -s filter show dev {tap} ingress",
            shell=True, capture_output=True, text=True, check=False).stdout)
    return "".join(out)


def tap_up(tap: str) -> bool:
    return bool(int(Path(f"/sys/class/net/{tap}/flags").read_text(), 16) & 0x1)  # IFF_UP


@contextlib.contextmanager
def tap_watch(tap: str) -> Iterator[set[bool]]:
    """Every state (up: True, down: False) tap `tap` was seen in, 20 times a second,
    while the block runs."""
    seen: set[bool] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            with contextlib.suppress(OSError):
                seen.add(tap_up(tap))

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()


def kill_run_when(bed: VmTestbed, args: list[str], script: str, done: Callable[[str], bool],
                  timeout: float = 600, on: str = "b") -> str:
    """`napilab ARGS` in its own session, SIGKILLed once `script` on guest `on` prints
    what `done` accepts (the guest may be booting: it does not answer then); what the
    script printed then."""
    proc = start_napilab(*args, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + timeout
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.time() < deadline, f"{on} never showed what the test waits for: {script}"
            try:
                now = guest(bed, on, script, check=False)
            except HostError:  # booting
                now = None
            if now is not None and now.exit_code == 0 and done(now.stdout):
                break
            time.sleep(1)
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        return now.stdout
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def leftovers(bed: VmTestbed) -> dict[str, list[str]]:
    """What runs left in each guest's /var/tmp/napilab (the guests' disks are
    directories of the testbed on this machine)."""
    out = {}
    for name in ("a", "b"):
        found = bed.state / name / "var-tmp-napilab"
        out[name] = sorted(p.name for p in found.iterdir()) if found.exists() else []
    return out


@pytest.fixture()
def vm_clean(vm_bed: VmTestbed) -> Iterator[VmTestbed]:
    """The shared guests for one test: after it, a lock or journal left in a guest is
    replayed by `napilab restore` (which also starts a guest that is not running) and
    the test errors naming it, so the next test starts on clean guests."""
    yield vm_bed
    left = leftovers(vm_bed)
    status = vm_bed.status()
    down = [n for n, g in status["guests"].items() if not g["pid"]]
    if not any(left.values()) and not down:
        return
    consoles = {n: console_tail(vm_bed, n) for n in down}
    restore = run_napilab("restore", "-i", str(vm_bed.inventory_path), timeout=900)
    pytest.fail(f"the test left {left} (guests not running: {down}); `napilab restore` "
                f"exited {restore.returncode}, leaving {leftovers(vm_bed)}: "
                f"{restore.stdout.strip()} {restore.stderr.strip()}; consoles: {consoles}")


def console_tail(bed: VmTestbed, name: str, lines: int = 40) -> str:
    path = bed.console(name)
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def dead_guests(bed: VmTestbed) -> dict[str, str]:
    """Guests whose QEMU is gone, with the end of their console (a TCG guest that
    crashed: a kernel oops or panic under emulation)."""
    return {n: console_tail(bed, n) for n, g in bed.status()["guests"].items()
            if not g["pid"]}
