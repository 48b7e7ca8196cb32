"""Interrupts held over the few steps that must not be split: restoring a host, and
starting a process on one together with noting that it runs.

SIGINT and SIGTERM reach Python in the main thread, between two bytecodes. One that
lands after a workload's command has reached its host but before napilab has its
handle (inside `Transport.start`, while sshd answers) leaves the command running with
nobody to stop it: measured, 3 of 6 interrupted runs on a host whose shell starts in
50 ms. Held, the signal is raised right after the block, when the handle is kept."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def deferred_interrupts() -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM for the block; raise KeyboardInterrupt after it if one came.
    Off the main thread (where no signal is delivered) it holds nothing."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    def hold(signum: int, frame: object) -> None:
        if not (signum == signal.SIGTERM and _terminated):
            received.append(signum)

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, hold)
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt in the block, as a Ctrl-C does: a run told to stop
    (`kill`, a replica whose controller died: PR_SET_PDEATHSIG) restores its hosts and
    releases their locks. Held over everything between the first lock taken and the last
    released: a SIGTERM that lands after the trials, while the locks are released, would
    otherwise end the process with the default action and leave them. Off the main
    thread it does nothing.

    One SIGTERM stops the run; a later one is the same request and is ignored, held or
    not. PR_SET_PDEATHSIG sends a replica its SIGTERM again each time it is handed to
    another thread of its dying controller: measured, 2 of 3 replicas took a second
    one, which, raised while the first was being handled, left a manifest saying
    "running"."""
    global _terminated
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _terminated = False
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _terminated = False


_terminated = False  # a SIGTERM was raised in sigterm_as_interrupt's block


def _raise_interrupt(signum: int, frame: object) -> None:
    global _terminated
    if not _terminated:
        _terminated = True
        raise KeyboardInterrupt
