"""Seeds 002 and 003 on real AF_XDP in the guests: short versions of the shipped VM
profiles (two variants each, one repetition, 4 s of packets), the kernel's pktgen on
guest a sending to b's virtio-net queue 0, dpdk-testpmd's net_af_xdp PMD, xdpsock and
netperf receiving on b. Each checks the rates came from the receivers, the kernel's
view of the AF_XDP socket was read, and b and a are left as they were (channels, IRQ
affinity, defer/flush, promiscuous mode, XDP programs, pktgen and xsk_diag unloaded).
Tools that cannot be had here are skipped with the reason (make test installs dpdk-dev,
librte-net-af-xdp23 and, via `napilab testbed tools`, netperf; xdpsock is built by hand)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from napilab.harness.lab.vmbed import VmTestbed
from tests.cli import run_napilab
from tests.integration.vm.conftest import guest
from tests.integration.vm.test_vm_knobs import STATE

ROOT = Path(__file__).parents[3]
# what an AF_XDP receiver or pktgen could leave behind, beyond the knobs STATE reads
LEFT = STATE + r"""
ip -d -o link show data0 | grep -o 'promiscuity [0-9]*\|prog/xdp'
grep -E '^(pktgen|xsk_diag) ' /proc/modules || true
"""


def both(bed: VmTestbed) -> tuple[str, str]:
    return guest(bed, "a", LEFT).stdout, guest(bed, "b", LEFT).stdout


def trimmed(shipped: str, keep: list[str], matrix: dict[str, list[object]] | None,
            tmp_path: Path) -> Path:
    """The shipped profile with only `keep` of its variants, one repetition, 4 s."""
    doc = yaml.safe_load((ROOT / "profiles" / shipped).read_text())
    doc["variants"] = {k: v for k, v in doc["variants"].items() if k in keep}
    if matrix is None:
        doc.pop("matrix", None)
    else:
        doc["matrix"]["parameters"] = matrix
        doc["matrix"]["variants"] = [v for v in doc["matrix"]["variants"] if v in keep]
        doc["matrix"].pop("exclude", None)
    doc["repeat"] = 1
    for variant in [doc, *doc["variants"].values()]:
        if "workload" in variant:
            variant["workload"]["duration"] = 4
    path = tmp_path / shipped
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_on(bed: VmTestbed, profile: Path, tmp_path: Path
           ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`napilab run PROFILE` on the guests; its samples and manifest."""
    done = run_napilab("run", str(profile), "-i", str(bed.inventory_path), "-o",
                       str(tmp_path / "r"), "--format", "text", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return rows_of(tmp_path, yaml.safe_load(profile.read_text())["name"])


def rows_of(tmp_path: Path, name: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    run_dir = next((tmp_path / "r" / name).iterdir())
    return (pd.read_parquet(run_dir / "samples.parquet"),
            json.loads((run_dir / "manifest.json").read_text()))


def value(rows: pd.DataFrame, variant: str, metric: str, role: str = "sut",
          source: str = "pktgen") -> float:
    """One trial's value (the receiver's and pktgen's metrics share names: tx_packets)."""
    mine = rows[(rows["variant"] == variant) & (rows["metric"] == metric)
                & (rows["source"] == source) & (rows["role"] == role) & rows["cpu"].isna()]
    assert len(mine) == 1, (variant, metric, mine)
    return float(mine["value"].iloc[0])


@pytest.mark.skipif(shutil.which("dpdk-testpmd") is None,
                    reason="dpdk-testpmd is not installed (Debian's dpdk-dev; make test "
                    "installs it as root)")
def test_seed_003_testpmd_receives_pktgens_flood_on_af_xdp(tmp_path: Path,
                                                            vm_clean: VmTestbed) -> None:
    profile = trimmed("seed-003-afxdp-vm.yaml", ["1c-plain", "1c"],
                      {"busy_budget": [64], "main_lcore": [1]}, tmp_path)
    before = both(vm_clean)
    rows, manifest = run_on(vm_clean, profile, tmp_path)
    for variant in ("1c-plain", "1c-budget-64"):
        sent = value(rows, variant, "tx_packets", "source")
        got = value(rows, variant, "fwd_rx_packets")
        assert 0 < got <= sent, (variant, got, sent)  # testpmd's own count, of pktgen's
        assert value(rows, variant, "delivered_pps") == pytest.approx(
            got / value(rows, variant, "tx_seconds", "source"))
        assert value(rows, variant, "xsk_sockets") == 1  # the kernel listed its socket
        assert value(rows, variant, "xsk_zerocopy") in (0, 1)
    hosts = manifest["host_facts"]
    assert isinstance(hosts, dict)
    versions = hosts["b"]["tool_versions"]
    assert versions["dpdk-testpmd"].startswith("dpdk-dev 22.11"), versions
    assert hosts["a"]["tool_versions"]["modprobe"].startswith("pktgen ")
    assert hosts["b"]["af_xdp"] == "yes"
    assert both(vm_clean) == before


@pytest.mark.skipif(shutil.which("xdpsock") is None or shutil.which("netperf") is None,
                    reason="needs xdpsock (bpf-examples' AF_XDP-example, not packaged: build "
                    "it under /tmp and put it on PATH) and netperf (`napilab testbed tools "
                    "--fetch`)")
def test_seed_002_netperf_and_xdpsock_busy_poll(tmp_path: Path, vm_clean: VmTestbed) -> None:
    profile = trimmed("seed-002-prefer-busypoll-vm.yaml", ["udp-rr-busy-read", "xdpsock-busy"],
                      {"budget": [64]}, tmp_path)
    before = both(vm_clean)
    rows, manifest = run_on(vm_clean, profile, tmp_path)
    assert value(rows, "udp-rr-busy-read", "transaction_rate", source="netperf") > 0
    assert value(rows, "udp-rr-busy-read", "latency_mean", source="netperf") > 0
    got = value(rows, "xdpsock-busy-64", "rx_packets")
    assert 0 < got <= value(rows, "xdpsock-busy-64", "tx_packets", "peer")
    assert value(rows, "xdpsock-busy-64", "xsk_sockets") == 1
    trial = next(t for t in manifest["trials"] if t["variant"] == "xdpsock-busy-64")
    assert {c["kind"] for c in trial["settings"]} >= {"ethtool", "netdev", "irq_affinity"}
    assert all(c["verdict"]["state"] == "taken" for c in trial["settings"])
    assert both(vm_clean) == before


def test_an_irq_the_driver_respreads_on_a_channel_change_is_written(
        tmp_path: Path, vm_clean: VmTestbed) -> None:
    """virtio-net spreads its IRQs over the CPUs again on `ethtool -L`: queue 0's IRQ,
    put on CPU 0 before the run, is spread again by `combined 1`; asked for CPU 0 (its
    original), it is written again, not skipped as unchanged; restore puts it back on
    CPU 0 after the channels (which spread it once more)."""
    from napilab.harness.hosts.settings import HostSettings
    from tests.integration.vm.conftest import session_on
    from tests.integration.vm.test_vm_knobs import settings_of

    irq = guest(vm_clean, "b", "d=$(basename $(readlink /sys/class/net/data0/device)); "
                "grep -m1 \"$d-input.0\" /proc/interrupts | cut -d: -f1").stdout.strip()
    path = f"/proc/irq/{irq}/smp_affinity_list"
    boot = guest(vm_clean, "b", f"cat {path}").stdout.strip()
    guest(vm_clean, "b", f"echo 0 > {path}")
    try:
        before = guest(vm_clean, "b", STATE).stdout
        respread = guest(vm_clean, "b", f"ethtool -L data0 combined 1; cat {path}; "
                                        f"ethtool -L data0 combined 2; echo 0 > {path}")
        assert respread.stdout.strip() != "0"  # what the driver does, measured first
        session = session_on(vm_clean, "b")
        try:
            settings = HostSettings(session, "vmknob9")
            changes = settings.apply(settings_of(tmp_path, vm_clean, """\
                ethtool: {data0: {channels: {combined: 1}}}
                irq_affinity: {data0: "0"}
                """))
            assert all(c.matches for c in changes), changes
            assert guest(vm_clean, "b", f"cat {path}").stdout.strip() == "0"
            settings.restore()
        finally:
            session.close()
        assert guest(vm_clean, "b", STATE).stdout == before
    finally:
        guest(vm_clean, "b", f"echo {boot} > {path}")
