"""A real neper tcp_rr with 200-byte requests and 400-byte responses between the
testbed's namespaces, through napilab (local transport, so the tcp_rr found on this PATH
runs in each namespace). neper is not packaged: build it from google/neper and put its
directory on PATH to run this; otherwise it is skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab
from tests.conftest import comm, netns_pids

PROFILE = """\
name: neper-rr
hosts:
  client: {host: a}
  server: {host: b}
workload:
  tool: neper.tcp_rr
  duration: 5
  client: {role: client, cpus: "0", args: {Q: 200, R: 400, T: 1, F: 1, p: "50,90,99"}}
  server: {role: server, cpus: "1"}
variants:
  sizes: {}
repeat: 1
"""

pytestmark = pytest.mark.skipif(shutil.which("tcp_rr") is None,
                                reason="neper's tcp_rr is not on PATH (not packaged; build "
                                       "google/neper and add it to PATH)")


def test_neper_tcp_rr_200_400_between_namespaces(testbed: tb.Testbed, tmp_path: Path) -> None:
    profile = tmp_path / "neper.yaml"
    profile.write_text(PROFILE)
    proc = run_napilab("run", str(profile), "-i", str(testbed.inventory_path),
                       "--transport", "local", "-o", str(tmp_path / "r"), "--format",
                       "text", timeout=120)
    assert proc.returncode == 0, proc.stderr
    run_dir = next((tmp_path / "r" / "neper-rr").iterdir())
    server = json.loads((run_dir / "raw" / "001" / "b" / "server.json").read_text())
    argv = server["argv"]
    assert argv[argv.index("tcp_rr"):] == ["tcp_rr", "--nolog", "-H", "192.0.2.2", "-l", "5",
                                           "-Q", "200", "-R", "400", "-F", "1"]
    assert server["exit_code"] == 0  # it exited by itself after the client's CLI_DONE
    samples = pd.read_parquet(run_dir / "samples.parquet")
    values = samples.set_index(["role", "metric"])["value"]
    client_tx = values[("client", "num_transactions")]
    assert client_tx > 1000  # by hand here: ~10^4-10^5 in 5 s; 0 when the sizes disagree
    # The server answered every transaction the client counted (it counts over its whole
    # life, the client over its measured intervals, so it reports more, never fewer).
    assert values[("server", "num_transactions")] >= client_tx
    assert 0 < values[("client", "latency_p50")] <= values[("client", "latency_p99")]
    versions = json.loads((run_dir / "manifest.json").read_text())["host_facts"]
    tcp_rr = shutil.which("tcp_rr")
    for host in ("a", "b"):  # neper has no version: the binary that ran and its sha256
        assert versions[host]["tool_versions"]["tcp_rr"].startswith(f"{tcp_rr} sha256:")
        assert versions[host]["tool_versions"]["ethtool"].startswith("ethtool version ")
    comms = {comm(p) for p in netns_pids(testbed, "b")} - {""}  # "": exited meanwhile
    assert "tcp_rr" not in comms
