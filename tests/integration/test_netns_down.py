"""A netns testbed going down ends every process in its namespaces, including one
started after the first listing: a clean clone's run left an sshd session (forked as
its listener was told to stop) holding a deleted namespace alive."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from napilab.harness.lab import netns as tb
from tests.conftest import TESTBED_PREFIX, worker

# told to stop, it starts another process in the namespace (as sshd may fork a session
# for a connection accepted just then), then waits
FORKS_WHEN_TOLD = 'trap "sleep 600 & wait" TERM; while :; do sleep 0.1; done'


def pids(netns: str) -> list[str]:
    return subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True,
                          check=False).stdout.split()


@pytest.fixture
def namespace(root_only: None) -> Iterator[str]:
    name = f"{TESTBED_PREFIX}k{worker() or ''}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        for pid in pids(name):
            subprocess.run(["kill", "-KILL", pid], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def test_a_process_started_while_the_namespace_is_emptied_is_ended_too(namespace: str) -> None:
    proc = subprocess.Popen(["ip", "netns", "exec", namespace, "sh", "-c", FORKS_WHEN_TOLD])
    try:
        deadline = time.monotonic() + 10
        while len(pids(namespace)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # sh and its first sleep
        first = set(pids(namespace))
        tb._kill_netns_processes(namespace)
        assert pids(namespace) == []
        assert proc.wait(timeout=10) != 0
        assert first  # there was something to end
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
