"""Shared fixtures: the real netns testbed (root only) and a guard that the machine is
left exactly as it was (global sysctls, namespaces, links, sshd processes)."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab, start_napilab

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TESTBED_PREFIX = "napilabt"
# The suite's own /29 of 198.51.100.0/24 (`napilab testbed up` takes 198.51.100.0/29),
# so that the suite runs beside a testbed someone brought up by hand.
TESTBED_BLOCK = 128
GLOBAL_SYSCTLS = ("net/core/busy_poll", "net/core/busy_read", "net/core/netdev_budget",
                  "net/core/netdev_budget_usecs", "net/core/dev_weight",
                  "net/core/rps_sock_flow_entries", "net/core/skb_defer_max")


def need_root() -> str | None:
    """Why root-only tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root: network namespaces, veth and sysfs writes"
    for tool in ("ip", "ethtool", "ping", "ss", "taskset"):
        if shutil.which(tool) is None:
            return f"needs {tool} (make test installs it as root)"
    return None


def machine_state() -> dict[str, object]:
    sysctls = {}
    for name in GLOBAL_SYSCTLS:
        path = Path("/proc/sys") / name
        if path.exists():
            sysctls[name] = path.read_text().strip()
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                           check=False).stdout.split("\n")
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           check=False).stdout
    sshd = subprocess.run(["pgrep", "-x", "sshd"], capture_output=True, text=True,
                          check=False).stdout.split()
    routes = subprocess.run(["ip", "-4", "route", "show"], capture_output=True, text=True,
                            check=False).stdout.splitlines()
    qemu = subprocess.run(["pgrep", "-f", "qemu-system"], capture_output=True, text=True,
                          check=False).stdout.split()
    tracers = subprocess.run(["pgrep", "-x", "bpftrace"], capture_output=True, text=True,
                             check=False).stdout.split()
    return {
        "sysctls": sysctls,
        "netns": sorted(n.split()[0] for n in netns if n.strip()),
        "links": sorted(line.split(":")[1].strip().split("@")[0] for line in links.splitlines()),
        "sshd": sorted(p for p in sshd if not tb.zombie(int(p))),  # exited, not yet reaped
        "routes": sorted(line.strip() for line in routes),
        "qemu": sorted(p for p in qemu if not tb.zombie(int(p))),
        "bpftrace": sorted(p for p in tracers if not tb.zombie(int(p))),
        "vm_testbeds": sorted(str(p) for p in Path("/run").glob("napilab*-vm")),
        # journals, locks and work directories: a run leaves none of them behind (the
        # empty directory itself may stay)
        "var_tmp_napilab": napilab_leftovers(),
    }


_BEFORE: dict[str, object] = {}
# One root test session at a time on a machine: a second one would remove the first one's
# testbed as stale and read its namespaces as a change to the machine. The lock is held
# for the life of the process (the kernel drops it when the process ends, even on
# SIGKILL); xdist workers run under their controller's lock.
SESSION_LOCK = Path("/run/lock/napilab-test-session.lock")
_SESSION: list[int] = []


def hold_session_lock() -> None:
    SESSION_LOCK.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(SESSION_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"waiting for another napilab test session on this machine "
              f"(pid {os.pread(fd, 32, 0).decode(errors='replace').strip() or '?'}, "
              f"{SESSION_LOCK})", file=sys.stderr, flush=True)
        fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _SESSION.append(fd)


def worker() -> str | None:
    """The pytest-xdist worker this process is ("gw0", "gw1", ...), None when it runs
    the tests itself."""
    return os.environ.get("PYTEST_XDIST_WORKER")


MAX_WORKERS = 6
# "" is the session that runs the tests itself (`-m serial`, or no xdist)
SESSIONS = ("", *(f"gw{i}" for i in range(MAX_WORKERS)))
PRIVATE_ROOT = Path("/run/napilabt-workers")
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 4096, 16384, 1 << 18


def worker_index(name: str) -> int:
    """N of worker gwN, checked against MAX_WORKERS."""
    index = int(name.removeprefix("gw"))
    if index >= MAX_WORKERS:
        raise pytest.UsageError(f"at most {MAX_WORKERS} workers run the root tests "
                                f"(198.51.100.{TESTBED_BLOCK}/26 holds that many testbeds)")
    return index


def suite_testbed(name: str | None = None) -> tuple[str, int]:
    """The prefix and management block of the netns testbed of worker `name` (this
    process's by default): the serial session's is napilabt on 198.51.100.128/29, worker
    gwN's napilabtN on the /29 after it, so workers bring theirs up side by side."""
    name = worker() if name is None else name
    if not name:
        return TESTBED_PREFIX, TESTBED_BLOCK
    index = worker_index(name)
    return f"{TESTBED_PREFIX}{index}", TESTBED_BLOCK + 8 * (index + 1)


def vm_testbed_prefix(name: str | None = None) -> str:
    """The VM testbed's prefix of worker `name` (this process's by default): napilabt
    for the serial session, napilabtvN for worker gwN (its taps napilabtvN-va, -vb)."""
    name = worker() if name is None else name
    return f"{TESTBED_PREFIX}v{worker_index(name)}" if name else TESTBED_PREFIX


def private_var_tmp() -> Path | None:
    """Worker gwN's own /var/tmp/napilab (root only): a directory bind-mounted over
    /var/tmp/napilab in a mount namespace of the worker's own, which every process it
    starts (napilab, `ip netns exec`, its testbed's sshd and their sessions) inherits.
    The netns testbeds' hosts share this machine's file system, and napilab keeps its
    locks, journals and work directories there: without this, one worker's run in
    progress would be another worker's leftover."""
    name = worker()
    if not name or os.geteuid() != 0:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    private = PRIVATE_ROOT / name
    shutil.rmtree(private, ignore_errors=True)  # a killed session's
    private.mkdir(parents=True)
    shared = Path("/var/tmp/napilab")
    shared.mkdir(parents=True, exist_ok=True)  # the mount point (an empty one may stay)
    for call, args in (("unshare", (CLONE_NEWNS,)),
                       ("mount", (b"none", b"/", None, MS_REC | MS_PRIVATE, None)),
                       ("mount", (bytes(private), bytes(shared), None, MS_BIND, None))):
        if getattr(libc, call)(*args) != 0:
            errno = ctypes.get_errno()
            raise pytest.UsageError(f"worker {name}: {call}{args}: {os.strerror(errno)}")
    return private


_PRIVATE: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    private = private_var_tmp()
    if private is not None:
        _PRIVATE.append(private)


def stale_testbeds() -> list[str]:
    """Remove the suite's testbeds a killed session left: the serial session's and each
    worker's, netns and VM."""
    from napilab.harness.lab.vmbed import VmTestbed

    removed = []
    for name in SESSIONS:
        prefix, block = suite_testbed(name)
        for stale, what in ((tb.Testbed(prefix=prefix, block=block), prefix),
                            (VmTestbed(prefix=vm_testbed_prefix(name)),
                             f"{vm_testbed_prefix(name)} VM")):
            if stale.exists():
                stale.down()
                removed.append(what)
    return removed


def pytest_sessionstart(session: pytest.Session) -> None:
    # `make test &` from a script (or nohup) starts pytest with SIGINT ignored, and every
    # napilab it starts inherits that: the Ctrl-C tests (tests/integration/test_faults.py,
    # test_resume.py, test_shared_hosts.py) then see runs that cannot be interrupted.
    # A terminal's Ctrl-C is what they test: Python's own handler here, which an exec
    # resets to the default for the processes the tests start.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not shutil.which("ip"):
        return
    if os.geteuid() == 0 and worker() is None:
        hold_session_lock()
        # The suite's own testbeds, left by a session that was killed before its
        # teardown (CI images have been captured with one up): they are ours to remove,
        # and removing them must not count as this session changing the machine.
        for prefix in stale_testbeds():
            print(f"removed a stale {prefix} testbed left by an earlier session")
    if worker() is None:
        _BEFORE.update(machine_state())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session if the tests changed the machine; a worker, if its own
    /var/tmp/napilab is not empty at its end."""
    hand_over_timeline(session)
    for private in _PRIVATE:
        left = sorted(p.name for p in private.iterdir())
        if left:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"LEFT IN {worker()}'s /var/tmp/napilab: {left}", red=True)
            session.exitstatus = 1
        shutil.rmtree(private, ignore_errors=True)
    if worker() is None:  # the workers' directories are gone: their parent too
        with contextlib.suppress(OSError):
            PRIVATE_ROOT.rmdir()
    if not _BEFORE:
        return
    after = machine_state()
    changed = {k: (_BEFORE[k], after[k]) for k in _BEFORE if _BEFORE[k] != after[k]}
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"MACHINE CHANGED BY TESTS: {changed}", red=True)
        session.exitstatus = 1


# Each test's wall time on its worker (set-up, call and teardown), for the schedule: a
# worker's lines are summed at the end of an xdist session (pytest_terminal_summary), so
# the run says which worker's share set the part's time.
_TIMELINE: list[tuple[str, float]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    start = time.monotonic()
    yield
    _TIMELINE.append((item.nodeid, time.monotonic() - start))


def hand_over_timeline(session: pytest.Session) -> None:
    """A worker hands its tests' times to the controller (xdist's workeroutput)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["napilab_timeline"] = [list(t) for t in _TIMELINE]


_WORKER_TIMES: dict[str, list[tuple[str, float]]] = {}


def pytest_testnodedown(node: Any, error: Any) -> None:
    output = getattr(node, "workeroutput", {})
    _WORKER_TIMES[str(getattr(getattr(node, "gateway", None), "id", "?"))] = [
        (str(n), float(s)) for n, s in output.get("napilab_timeline", [])]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _WORKER_TIMES:
        return
    terminalreporter.write_sep("=", "each worker's tests (seconds, busiest first)")
    for name, times in sorted(_WORKER_TIMES.items(), key=lambda w: -sum(s for _, s in w[1])):
        groups = sorted({vm_group(n) or own_testbed_group(n) or "-" for n, _ in times} - {"-"})
        terminalreporter.write_line(
            f"{name}: {sum(s for _, s in times):7.1f} s in {len(times)} tests"
            + (f" (groups {', '.join(groups)})" if groups else ""))


@pytest.fixture(scope="session")
def root_only() -> None:
    reason = need_root()
    if reason:
        pytest.skip(reason)


TRACEFS = Path("/sys/kernel/tracing")


@pytest.fixture(scope="session")
def tracefs(root_only: None) -> Iterator[None]:
    """tracefs mounted for the trace collector's bpftrace (a lab host mounts it at boot;
    this machine does not): mounted here when it is not, and unmounted after, in the
    worker's own mount namespace when it has one (private_var_tmp)."""
    if shutil.which("bpftrace") is None:
        pytest.skip("bpftrace is not installed (make test installs Debian's bpftrace)")
    if (TRACEFS / "events").is_dir():
        yield
        return
    subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", str(TRACEFS)], check=False)


@pytest.fixture(scope="module")
def testbed(root_only: None) -> Iterator[tb.Testbed]:
    """A real testbed with an sshd in each namespace, torn down even if tests fail."""
    if shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists():
        pytest.skip("needs openssh-server (make test installs it as root)")
    prefix, block = suite_testbed()
    bed = tb.Testbed(prefix=prefix, block=block)
    bed.down()  # a previous crashed session may have left one
    taken = bed.addresses_in_use()
    if taken:
        pytest.skip(f"the suite's testbed range {bed.network} is routed already ({taken})")
    bed.up(ssh=True)
    try:
        yield bed
    finally:
        bed.down()


def napilab_leftovers() -> list[str]:
    """Locks, journals and work directories of napilab runs on the testbed hosts (both
    namespaces share the machine's /var/tmp)."""
    found = Path("/var/tmp/napilab")
    return sorted(p.name for p in found.iterdir()) if found.exists() else []


@pytest.fixture(autouse=True)
def testbed_left_clean(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on the testbed: what its runs left (a lock, a journal) is replayed
    by `napilab restore` and the test errors at teardown naming it, so the tests after it
    start on a clean testbed instead of failing on its lock."""
    yield
    if "testbed" not in request.fixturenames:
        return
    left = napilab_leftovers()
    if not left:
        return
    bed: tb.Testbed = request.getfixturevalue("testbed")
    restore = run_napilab("restore", "-i", str(bed.inventory_path), timeout=120)
    pytest.fail(f"the test left {left} in /var/tmp/napilab; `napilab restore` exited "
                f"{restore.returncode}, leaving {napilab_leftovers()}: {restore.stderr.strip()}")


def workload_pings(bed: tb.Testbed, node: str) -> set[str]:
    """The ping floods running in a testbed namespace: a workload's ping, never the
    `ping -V` a run asks every host for (its tool versions) before it applies anything."""
    return {p for p in netns_pids(bed, node) if comm(p) == "ping" and "-f" in argv(p)}


def netns_pids(bed: tb.Testbed, node: str) -> list[str]:
    """The processes running in a testbed node's namespace."""
    return subprocess.run(["ip", "netns", "pids", f"{bed.prefix}-{node}"],
                          capture_output=True, text=True, check=False).stdout.split()


def argv(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def comm(pid: str) -> str:
    """The process's name, "" once it has exited."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def sysfs(bed: tb.Testbed, node: str, relpath: str) -> str:
    """Read a sysfs file of the data interface inside a testbed namespace."""
    netns = next(n.netns for n in bed.nodes if n.name == node)
    return subprocess.run(["ip", "netns", "exec", netns, "cat", f"/sys/class/net/data0/{relpath}"],
                          capture_output=True, text=True, check=True).stdout.strip()


class NapilabRuns:
    """`napilab` processes a test starts. At teardown, whatever the test did, each one
    still alive gets SIGINT (it restores its hosts and exits), then SIGKILL; if one
    died by SIGKILL, `napilab restore` replays what it left on the testbed."""

    def __init__(self, bed: tb.Testbed) -> None:
        self.bed = bed
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *args: str) -> subprocess.Popen[str]:
        proc = start_napilab(*args)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
        if any(p.returncode == -signal.SIGKILL for p in self.procs):
            run_napilab("restore", "-i", str(self.bed.inventory_path), timeout=120)


@pytest.fixture
def napilab_runs(testbed: tb.Testbed) -> Iterator[NapilabRuns]:
    runs = NapilabRuns(testbed)
    try:
        yield runs
    finally:
        runs.stop_all()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `--dist loadgroup`: the VM tests share a VM testbed per worker
    (tests/integration/vm/conftest.py), so the tests that boot guest b into other kernels
    and the AF_XDP seeds run on one worker, the other VM tests on another, each group in
    its order (two testbeds of two guests each, side by side); every other test is a
    unit of its own. xdist hands out the biggest units first: each worker starts on its
    VM group and the netns tests fill in after.

    A scheduler of our own, not `xdist_group` marks: pytest-xdist 3.8 groups by a suffix
    it writes to `item._nodeid`, which pytest 9 no longer reads (nodeid comes from
    `item._id`), so the marks were silently ignored: both workers booted a VM testbed
    and one ran VM tests alone for 270 s at the end."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class VmGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return vm_group(nodeid) or own_testbed_group(nodeid) or nodeid

    return VmGroups(config, log)


# Modules whose tests share a testbed of their own (a module fixture with a fixed prefix
# and addresses): one worker runs them all, or two workers would take down each other's.
OWN_TESTBED_MODULES = ("tests/integration/test_fleet.py",)


# Tests that bring up `napilab testbed up`'s own testbed (prefix napilab, 198.51.100.0/29,
# what `napilab demo` uses): one worker runs them one after the other. A clean clone's
# run had the wheel's `napilab demo` lose its hosts (SSH: "Error reading SSH protocol
# banner") when the test beside such a testbed took its own down on another worker.
DEFAULT_TESTBED_TESTS = (
    "tests/integration/test_wheel.py::test_demo_runs_from_the_wheel",
    "tests/integration/test_shared_hosts.py::test_suite_runs_beside_a_napilab_testbed",
)


# The wheel's tests share a module fixture that builds the wheel and installs it in a
# venv (31-45 s): the demo's test is in the group above, so the whole module is, and the
# wheel is built once instead of on two workers (a clean clone's run built it twice).
WHEEL_MODULE = "tests/integration/test_wheel.py"


def own_testbed_group(nodeid: str) -> str | None:
    path = nodeid.partition("::")[0]
    if nodeid.partition("[")[0] in DEFAULT_TESTBED_TESTS or path == WHEEL_MODULE:
        return "napilab-testbed"
    return path if path in OWN_TESTBED_MODULES else None


def vm_group(nodeid: str) -> str | None:
    """The VM testbed a test runs on under `--dist loadgroup` ("vm" or "vm-2"), None for
    a test that is not a VM test."""
    path, _, test = nodeid.partition("::")
    if not path.startswith("tests/integration/vm/"):
        return None
    test = test.partition("[")[0]
    second = ((Path(path).name in VM_SECOND_BED and test not in VM_FIRST_BED)
              or test in VM_SECOND_BED_TESTS)
    return "vm-2" if second else "vm"


# The VM tests on the second VM testbed: runs that boot guest b into other kernels and
# back, and the AF_XDP seeds; measured under -n 3 with the IRQ-respread test there too:
# 674 s on the second testbed, 558 s on the first, which now takes that test (34 s).
# The per-queue tests (35 and 22 s alone) run on the first: with the steered flow on the
# second, a clean-clone run spent 1009 s in integration, the second testbed last.
VM_SECOND_BED = ("test_vm_kernel.py", "test_vm_afxdp.py")
VM_FIRST_BED = ("test_an_irq_the_driver_respreads_on_a_channel_change_is_written",)
# With seed 001's whole letter a stored run (tests/golden/seed001), the second testbed
# took 674 s of a clean-clone run's 844 s of integration (its kernel tests 188 and 160
# s, seed 003's 183 s, its boot 141 s) and the first ran alone for the last 170 s: the
# SIGKILL-mid-run test (79 s) moved to the second. The second testbed's guest a has
# QEMU's vmxnet3 as its data NIC (tests/integration/vm/conftest.py): the per-queue test
# on that second driver runs there, and the SIGKILL-mid-run test went back to the first.
# With the trace collector in (2026-12-05) the first testbed took about 830 s of a clean
# clone's 842 s of integration, the second about 620 s: the SIGKILL-mid-run test (91 s
# there) moved to the second again.
# With the guests' udev reduced to one rule (2026-12-07) the first testbed took 662 and
# 738 s of two clean clones' integration, the second 589 and 666 s: the threaded
# busy-poll kthread test (guest b only, 26 s) moved to the second.
VM_SECOND_BED_TESTS = ("test_a_second_driver_per_queue_and_restored_after_sigkill",
                       "test_sigkill_mid_run_then_restore",
                       "test_threaded_busy_poll_kthreads_pinned_and_scheduled")
