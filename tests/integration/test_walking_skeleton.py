"""End to end on a real testbed: sshd in two namespaces, paramiko, real ping flood over a
veth, real sysfs writes to the veth's NAPI settings, verified restore. The same
2-variant profile runs over SSH and over the local transport."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from napilab.harness.lab import netns as tb
from napilab.harness.store.store import load_samples
from tests.cli import run_napilab
from tests.conftest import sysfs

PROFILE = """\
name: skeleton
hosts:
  sender: {host: a}
  receiver: {host: b}
setup:
  receiver:
    netdev:
      ${iface}: {gro_flush_timeout: 20000, napi_defer_hard_irqs: 2}
workload:
  tool: ping
  duration: 2
  client: {role: sender, cpus: "0"}
  server: {role: receiver}
collect:
  softnet_stat: {roles: [receiver], cpus: "1"}
  interrupts: {roles: [receiver], cpus: "1"}
  proc_stat: {roles: [receiver], cpus: "1"}
variants:
  rps-off:
    setup: {receiver: {rps: {"${iface}": none}}}
  rps-remote:
    setup: {receiver: {rps: {"${iface}": "1"}, netdev: {"${iface}": {threaded: enabled}}}}
repeat: 1
"""
KNOBS = ("gro_flush_timeout", "napi_defer_hard_irqs", "threaded", "queues/rx-0/rps_cpus")


def _knobs(bed: tb.Testbed) -> dict[str, str]:
    return {k: sysfs(bed, "b", k) for k in KNOBS}


@pytest.mark.serial
@pytest.mark.parametrize("transport", ["ssh", "local"])
def test_two_variant_run_restores_and_reports(testbed: tb.Testbed, tmp_path: Path,
                                              transport: str) -> None:
    profile = tmp_path / "skeleton.yaml"
    profile.write_text(PROFILE)
    before = _knobs(testbed)
    proc = run_napilab("run", str(profile), "-i", str(testbed.inventory_path),
                       "--transport", transport, "-o", str(tmp_path / "results"),
                       "--format", "html,text")
    assert proc.returncode == 0, proc.stderr
    assert _knobs(testbed) == before, "sysfs not restored"

    run_dir = next((tmp_path / "results" / "skeleton").iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["schema_version"] == 3
    assert manifest["status"] == "complete" and manifest["incomplete"] is False
    assert [t["status"] for t in manifest["trials"]] == ["ok", "ok"]
    assert manifest["inventory"]["hosts"]["a"]["transport"] == transport
    remote = manifest["trials"][1]
    effective = {c["target"]: (c["requested"], c["effective"]) for c in remote["settings"]}
    assert effective["data0/threaded"] == ("1", "1")
    assert effective["data0/gro_flush_timeout"] == ("20000", "20000")
    assert effective["data0/rx-0"][0] == "2" and int(effective["data0/rx-0"][1], 16) == 2
    verdicts = {c["target"]: c["verdict"] for c in remote["settings"]}  # taken at apply time
    assert verdicts["data0/rx-0"] == {"state": "taken", "requested": "1", "effective": "1"}
    assert manifest["host_facts"]["b"]["kernel_release"]

    samples = load_samples(run_dir)
    assert list(samples.columns) == ["run_id", "trial", "variant", "rep", "role", "host",
                                     "source", "metric", "cpu", "value", "unit"]
    totals = samples[samples["cpu"].isna()].set_index(["variant", "source", "metric"])["value"]
    assert totals[("rps-remote", "softnet_stat", "received_rps")] > 1000
    assert totals[("rps-off", "softnet_stat", "received_rps")] < 100
    assert totals[("rps-remote", "interrupts", "function_call_interrupts")] > 1000
    assert totals[("rps-remote", "ping", "received")] > 1000
    per_cpu = samples[(samples["metric"] == "received_rps") & samples["cpu"].notna()]
    assert set(per_cpu["cpu"].astype(int)) == {0, 1}

    for name in ("client.out", "client.err", "client.json", "snapshot-before.out"):
        host = "a" if name.startswith("client") else "b"
        assert (run_dir / "raw" / "001" / host / name).exists(), name
    client = json.loads((run_dir / "raw" / "001" / "a" / "client.json").read_text())
    assert client["exit_code"] == 0 and "ping" in client["argv"]
    html = (run_dir / "report.html").read_text()
    assert "received_rps" in html and "<svg" in html and "rps-remote" in html
    assert "http://" not in html.replace("http://www.w3.org", "")
    text = (run_dir / "report.txt").read_text()
    assert "rps-off" in text.splitlines()[0]


SIGKILLED_APPLY = """
import os, signal, sys
from napilab.harness.transport.connect import transport_for
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.knobs.kind import Setting
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.hosts.session import HostSession
host = load_inventory(sys.argv[1]).hosts["b"]
settings = HostSettings(HostSession(transport_for(host)), "deadbeef")
settings.apply([Setting("receiver", "netdev", "data0/gro_flush_timeout", "7777"),
                Setting("receiver", "rps", "data0/rx-0", "1")])
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_restore_command_replays_a_journal_left_by_sigkill(testbed: tb.Testbed) -> None:
    """A process applies settings over SSH and is SIGKILLed before restoring; the
    journal it left on the host is replayed by `napilab restore`."""
    before = _knobs(testbed)
    killed = subprocess.run([sys.executable, "-c", SIGKILLED_APPLY,
                             str(testbed.inventory_path)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert killed.returncode == -9, killed.stderr
    assert sysfs(testbed, "b", "gro_flush_timeout") == "7777"
    assert int(sysfs(testbed, "b", "queues/rx-0/rps_cpus"), 16) == 2
    proc = run_napilab("restore", "-i", str(testbed.inventory_path), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "b: restored 2 setting(s) of run deadbeef" in proc.stdout
    assert "a: no journal" in proc.stdout
    assert _knobs(testbed) == before
    again = run_napilab("restore", "-i", str(testbed.inventory_path), timeout=60)
    assert "b: no journal, nothing to restore" in again.stdout


def test_kernel_refusal_is_reported_and_nothing_changes(testbed: tb.Testbed,
                                                         tmp_path: Path) -> None:
    """A veth without GRO has no NAPI, so the kernel refuses `threaded = 1` on mgmt0:
    the run fails naming the knob and the kernel's reason, data0's settings written
    before the refusal are restored, and the run is recorded as failed."""
    profile = tmp_path / "bad.yaml"
    profile.write_text(PROFILE.replace('netdev: {"${iface}": {threaded: enabled}}',
                                       "netdev: {mgmt0: {threaded: enabled}}"))
    before = _knobs(testbed)
    proc = run_napilab("run", str(profile), "-i", str(testbed.inventory_path),
                       "-o", str(tmp_path / "r"))
    assert proc.returncode == 1, proc.stderr
    assert "cannot set netdev mgmt0/threaded = '1'" in proc.stderr
    assert _knobs(testbed) == before
    assert sysfs(testbed, "b", "../mgmt0/threaded") == "0"
    run_dir = next((tmp_path / "r" / "skeleton").iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["incomplete"] is True
    assert [t["status"] for t in manifest["trials"]] == ["ok", "failed"]
    assert "mgmt0/threaded" in manifest["trials"][1]["error"]
