"""An interrupt that lands while a workload's process is being started on its host
(Transport.start: sshd answering, the reader threads starting) still stops that process:
napilab keeps the handle first and raises after. The process is real (LocalTransport),
the interrupt a real SIGINT to this interpreter, sent from inside start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from napilab.harness.engine import workload_exec
from napilab.harness.interrupts import deferred_interrupts
from napilab.harness.inventory.inventory import Host
from napilab.harness.profile.clients import Client
from napilab.harness.profile.sections import ProcessSpec
from napilab.harness.transport.local import LocalProcess, LocalTransport
from napilab.runners.workloads.workload import ToolCommands


class InterruptedWhileStarting(LocalTransport):
    """Starts the command, then takes a SIGINT before start returns."""

    def __init__(self) -> None:
        super().__init__(Host(name="h", transport="local"))
        self.started: list[LocalProcess] = []

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              stdin_open: bool = False) -> LocalProcess:
        proc = super().start(argv, env=env, stdin_open=stdin_open)
        self.started.append(proc)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs here, inside start, unless held
        return proc


def test_a_client_interrupted_as_it_starts_is_stopped() -> None:
    transport = InterruptedWhileStarting()
    client = Client(ProcessSpec(role="sender"), "h", ToolCommands(["sleep", "30"]))
    began = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            workload_exec._run_clients([client], {"h": transport}, timeout=60)
        [proc] = transport.started
        assert proc.poll() is not None, "the client outlived the interrupted run"
        assert time.monotonic() - began < 10
    finally:
        for left in transport.started:
            if left.poll() is None:
                left.signal("KILL")
                left.wait(5)


def test_held_interrupts_are_raised_after_the_block_and_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    reached = []
    with pytest.raises(KeyboardInterrupt), deferred_interrupts() as received:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        reached.append(True)
    assert reached == [True] and received == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is before


# A run whose trials are done (or interrupted) takes a SIGTERM while it releases its
# hosts' locks: it releases every one, then stops as on Ctrl-C. In a process of its own:
# with SIGTERM's default action there, the signal would end the test's interpreter.
RELEASE_INTERRUPTED = """\
import os, signal, sys, time
from pathlib import Path
from napilab.harness.cli import execute
from napilab.harness.engine import engine
from napilab.harness.errors import ExitCode
from napilab.harness.hosts import lock, session
sys.path.insert(0, sys.argv[2])
from tests.bisect_trees import profile_and_inventory

tmp = Path(sys.argv[1])
profile, inventory = profile_and_inventory(tmp)
plan, _ = execute.load(str(profile), str(inventory))
released = []

class Engine:
    def __init__(self, *args, **kwargs):
        pass
    def run(self, **kwargs):
        return ExitCode.OK

def release_all(transports, run_id):
    for host in transports:
        released.append(host)
        if host == "a":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler runs here unless held
    return []

execute._connect_while_importing = lambda bound: {}
execute._lock_hosts = lambda *args: (["a", "b"], [])
engine.Engine = Engine
lock.release_all = release_all
session.close_sessions = lambda sessions: None
try:
    execute.execute(plan, str(tmp / "results"))
except KeyboardInterrupt:
    print("interrupted after releasing", released,
          signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
"""


def test_a_sigterm_while_the_locks_are_released_releases_them_all(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", RELEASE_INTERRUPTED, str(tmp_path),
                           str(Path(__file__).parents[2])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "interrupted after releasing ['a', 'b'] True"


# A replica whose controller died takes PR_SET_PDEATHSIG's SIGTERM once per thread of
# the controller it is handed to as they exit: the first stops the run, a repeat (held
# or not) is the same request and raises nothing more; a Ctrl-C is still raised.
SIGTERM_TWICE = """\
import os, signal, time
from napilab.harness.interrupts import deferred_interrupts, sigterm_as_interrupt

def take(sig):
    os.kill(os.getpid(), sig)
    time.sleep(0.1)

seen = []
with sigterm_as_interrupt():
    try:
        take(signal.SIGTERM)
    except KeyboardInterrupt:
        seen.append("first")
        take(signal.SIGTERM)  # inside the handling of the first
        seen.append("repeat ignored")
    try:
        with deferred_interrupts():
            take(signal.SIGTERM)
        seen.append("held repeat ignored")
        with deferred_interrupts():
            take(signal.SIGINT)
    except KeyboardInterrupt:
        seen.append("ctrl-c raised")
with sigterm_as_interrupt():  # a new block: a SIGTERM stops it again
    try:
        take(signal.SIGTERM)
    except KeyboardInterrupt:
        seen.append("again")
print(seen, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
"""


def test_a_repeated_sigterm_is_the_same_request() -> None:
    done = subprocess.run([sys.executable, "-c", SIGTERM_TWICE], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == ("['first', 'repeat ignored', 'held repeat ignored', "
                                   "'ctrl-c raised', 'again'] True")
