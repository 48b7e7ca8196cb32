"""Two root test sessions on one machine would break each other (the second removes the
first one's testbed as stale and reads its namespaces as a change to the machine): a
second session waits for the first, saying so. Root only (only root sessions lock)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SESSION_LOCK


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                    reason="only root sessions (the ones that build testbeds) take the lock")
def test_a_second_session_waits_for_the_first() -> None:
    assert SESSION_LOCK.exists()
    # a session of its own, not one more worker of this one (under xdist)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    second = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co",
         "tests/unit/test_session_lock.py"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            second.wait(timeout=8)
    finally:
        second.kill()
        _, err = second.communicate()
    assert "waiting for another napilab test session on this machine" in err, err
