"""Two SSH testbeds at once (another engineer's beside the suite's): the one that made
/run/sshd (sshd's privilege-separation directory) going down first leaves it for the
other, whose sshd keeps taking connections; the last one down removes it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb

pytestmark = pytest.mark.serial  # it reads /run/sshd, which every other testbed shares

PRIV_SEP = Path("/run/sshd")


def ssh_ok(bed: tb.Testbed) -> bool:
    node = bed.nodes[0]
    done = subprocess.run(
        ["ssh", "-i", str(bed.state / "id_ed25519"), "-o", "BatchMode=yes",
         "-o", f"UserKnownHostsFile={bed.state / 'known_hosts'}", "-o", "ConnectTimeout=5",
         f"root@{node.mgmt_address}", "true"], capture_output=True, text=True, timeout=30,
        check=False)
    return done.returncode == 0


def test_the_first_down_leaves_run_sshd_to_the_other(root_only: None) -> None:
    if PRIV_SEP.exists():
        pytest.skip("/run/sshd exists already (this machine's sshd made it): no testbed "
                    "makes or removes it")
    first = tb.Testbed(prefix="napilabu", block=192)
    second = tb.Testbed(prefix="napilabv", block=200)
    try:
        first.up(ssh=True)
        second.up(ssh=True)
        assert (first.state / "created-run-sshd").exists()
        first.down()
        assert PRIV_SEP.exists() and (second.state / "created-run-sshd").exists()
        assert ssh_ok(second), "the second testbed's sshd lost /run/sshd"
        second.down()
        assert not PRIV_SEP.exists()
    finally:
        first.down()
        second.down()
