"""Whole runs on the VM testbed: device settings with a workload and the collectors'
device lines, a run killed with SIGKILL mid-trial and put back by `napilab restore`,
and the settings of seeds 000 and 003 applied, read back and restored there."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.lab.guest import group_members
from napilab.harness.lab.vmbed import VmTestbed
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from napilab.reports.ab.compare import load_run
from tests.cli import run_napilab, start_napilab
from tests.conftest import ROOT
from tests.integration.vm.conftest import guest, kill_run_when, leftovers, session_on
from tests.integration.vm.test_vm_knobs import STATE

PROFILE = """\
name: vm-device
hosts: {sender: a, receiver: b}
workload:
  tool: ping
  duration: 3
  client: {role: sender, cpus: "0"}
  server: {role: receiver}
setup:
  receiver:
    irq_affinity: {data0: "1"}
    rps: {data0: "0"}
collect:
  interrupts: {roles: [receiver], irqs: "virtio.*-(input|output)"}
  napi_threads: {roles: [receiver]}
  softnet_stat: {roles: [receiver]}
  kprobes: {roles: [receiver], functions: [napi_complete_done, no_such_function_napilab]}
variants:
  irq-cpu1: {}
  threaded-busy-poll:
    setup:
      receiver:
        napi: {data0: {threaded: busy-poll}}
        napi_threads: {data0: {cpus: "1", policy: fifo, priority: 50}}
repeat: 1
"""


def state(bed: VmTestbed) -> str:
    return guest(bed, "b", STATE).stdout


# the counters that need a real NIC queue or a guest kernel: netdev qstats over
# netlink (virtio_net reports them per queue), perf stat, and the CPU cost from proc_stat
COUNTERS = """\
  qstats: {roles: [receiver], ifaces: [data0]}
  ethtool_stats: {roles: [receiver], ifaces: [data0]}
  perf_stat: {roles: [receiver]}
  proc_stat: {roles: [receiver]}
"""


def test_a_run_sets_device_knobs_and_reads_device_lines(tmp_path: Path,
                                                        vm_clean: VmTestbed) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE.replace("variants:\n", COUNTERS + "variants:\n", 1))
    before = state(vm_clean)
    done = run_napilab("run", str(profile), "-i", str(vm_clean.inventory_path), "-o",
                       str(tmp_path / "r"), "--format", "text", timeout=900)
    assert done.returncode == 0, done.stderr
    run_dir = next((tmp_path / "r" / "vm-device").iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for trial in manifest["trials"]:
        assert trial["status"] == "ok"
        states = {c["target"]: c["verdict"]["state"] for c in trial["settings"]}
        assert states.pop("kprobe no_such_function_napilab") == "absent"
        assert set(states.values()) == {"taken"}, trial["settings"]
    rows = pd.read_parquet(run_dir / "samples.parquet")
    inputs = guest(vm_clean, "b", "cd /sys/class/net/data0; for n in $(ls device/../msi_irqs)"
                   "; do if grep -q \"^ *$n:.*input\" /proc/interrupts; then echo irq_$n; fi;"
                   " done").stdout.split()
    assert len(inputs) == 2, inputs  # the data NIC's two rx queue IRQs
    irq_lines = rows[(rows["source"] == "interrupts") & rows["metric"].isin(inputs)]
    assert irq_lines["value"].sum() > 0  # the queues' IRQs fired, as device lines
    # on CPU 1: x86 moves an IRQ at its next interrupt after an affinity write, so the
    # first one of a quiet queue (an ARP on rx queue 1) may still land on the old CPU
    per_cpu = irq_lines[irq_lines["cpu"].notna()]
    on_cpu1 = per_cpu[per_cpu["cpu"] == 1.0]["value"].sum()
    assert on_cpu1 >= 0.99 * per_cpu["value"].sum(), per_cpu.to_string()
    threads = rows[(rows["source"] == "napi_threads") & (rows["variant"] ==
                                                          "threaded-busy-poll")]
    assert threads[threads["metric"] == "threads"]["value"].iloc[0] == 2
    assert threads[threads["metric"] == "threads_realtime"]["value"].iloc[0] == 2
    queues = rows[rows["source"] == "qstats"].set_index(["variant", "metric"])["value"]
    replies = rows[(rows["source"] == "ping") & (rows["metric"] == "received")].set_index(
        "variant")["value"]
    for variant in ("irq-cpu1", "threaded-busy-poll"):
        assert queues[(variant, "queues")] == 4  # data0: 2 rx and 2 tx queues
        assert queues[(variant, "data0.rx_packets")] == queues[(variant, "data0.rx_packets.q0")] \
            + queues[(variant, "data0.rx_packets.q1")]
        # every echo request the flood sent b came in on data0 (and ARP, a few more)
        assert replies[variant] <= queues[(variant, "data0.rx_packets")] <= replies[variant] + 20, (
            variant, replies[variant], queues[(variant, "data0.rx_packets")])
    # b sent every echo reply it was counted for on data0 (a rate such as "more than
    # 1000 in 3 s" depends on the machine: a loaded clean-clone run saw 996)
    for variant in ("irq-cpu1", "threaded-busy-poll"):
        assert queues[(variant, "data0.tx_packets")] >= replies[variant] > 0
    # ethtool -S per queue (virtio_net 6.10+ keeps packets and bytes for qstats, and
    # prints its kicks and drops per queue and in total): the total is the queues' sum
    driver = rows[rows["source"] == "ethtool_stats"].set_index(["variant", "metric"])["value"]
    for variant in ("irq-cpu1", "threaded-busy-poll"):
        assert driver[(variant, "data0.tx_kicks")] == driver[(variant, "data0.tx_kicks.q0")] \
            + driver[(variant, "data0.tx_kicks.q1")]
        assert driver[(variant, "data0.rx_drops")] == 0
    assert driver[("irq-cpu1", "data0.tx_kicks")] > 100  # b kicked its tx queue per reply
    clock = rows[(rows["source"] == "perf_stat") & (rows["metric"] == "cpu_clock")]
    assert set(clock["cpu"].dropna()) == {0.0, 1.0, 2.0} and (clock["value"] > 0).all()
    cost = load_run(run_dir).samples
    kthreads = cost[(cost["source"] == "cpu") & (cost["metric"] == "napi_thread_cores")]
    busy = kthreads.set_index("variant")["value"]
    assert busy["irq-cpu1"] == 0 and 0.3 < busy["threaded-busy-poll"] < 2.1  # busy pollers
    hits = rows[(rows["source"] == "kprobes") & (rows["metric"] == "napi_complete_done")]
    assert len(hits) == 2 and (hits["value"] > 0).all()  # a kprobe per trial, hit
    assert state(vm_clean) == before  # the kprobe events are gone too
    assert leftovers(vm_clean) == {"a": [], "b": []}


def test_sigkill_mid_run_then_restore(tmp_path: Path, vm_clean: VmTestbed) -> None:
    """Killed while it holds device and per-queue settings (queue i's IRQs on CPU i+1,
    queue 1's NAPI threaded, XPS by rx queue): `napilab restore` puts back both."""
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE.replace("duration: 3", "duration: 120").replace(
        '    irq_affinity: {data0: "1"}\n',
        '    irq_affinity: {data0: {spread: "1-2"}}\n'
        "    napi: {data0: {queues: 1, threaded: enabled}}\n"
        "    xps: {data0: {rxqs: paired}}\n"))
    before = state(vm_clean)  # every IRQ's CPUs, xps_rxqs, the NAPI kthreads
    kill_run_when(vm_clean, ["run", str(profile), "-i", str(vm_clean.inventory_path), "-o",
                             str(tmp_path / "r"), "--format", ""], STATE,
                  lambda now: "queues/rx-0 rps 1" in now, timeout=300)  # the settings are on
    left = leftovers(vm_clean)["b"]
    assert any(n.startswith("journal-") for n in left) and any(
        n.startswith("lock-") for n in left), left
    assert state(vm_clean) != before
    restored = run_napilab("restore", "-i", str(vm_clean.inventory_path), timeout=900)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "b: restored" in restored.stdout and "removed the stale lock" in restored.stdout
    assert state(vm_clean) == before
    assert leftovers(vm_clean) == {"a": [], "b": []}
    # the stray ping of the killed run's workload is gone with the trial
    time.sleep(1)
    pings = guest(vm_clean, "a", "pgrep -x ping || true").stdout.strip()
    if pings:  # ended by its own deadline, at the latest
        guest(vm_clean, "a", "pkill -x ping || true")


def lab_inventory(bed: VmTestbed, tmp_path: Path, names: dict[str, str]) -> Path:
    """The VM inventory under the host names a shipped profile uses (sut, peer ...)."""
    doc = yaml.safe_load(bed.inventory_path.read_text())
    doc["hosts"] = {new: doc["hosts"][old] for new, old in names.items()}
    for host in doc["hosts"].values():  # seed 000 pins its client to CPUs 3-10 of a lab
        host.pop("cpus")  # host: its settings (CPU 2) are what is checked here
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("shipped", "names"), [
    ("seed-000-threaded-busypoll.yaml", {"sut": "b", "peer": "a"}),
    ("seed-003-afxdp-busy-budget.yaml", {"sut": "b"}),
])
def test_seed_settings_apply_read_back_and_restore(shipped: str, names: dict[str, str],
                                                   tmp_path: Path, vm_clean: VmTestbed) -> None:
    """Every variant's settings of the shipped seed profile, bound to the guests, applied
    for real, read back as requested, restored; `hosts check` finds each knob there."""
    inventory = lab_inventory(vm_clean, tmp_path, names)
    plan = bind(load_profile(ROOT / "profiles" / shipped), load_inventory(inventory))
    before = state(vm_clean)
    check = json.loads(run_napilab("hosts", "check", "-i", str(inventory), "--json",
                                   timeout=900).stdout)
    sut = next(r for r in check if r["host"] == "sut")
    assert sut["per_napi_netlink"].startswith("2 NAPI(s)") and sut["queues"]
    kinds: set[str] = set()
    distinct = {tuple(plan.settings(v)["sut"]): v for v in plan.profile.variants}
    for variant in distinct.values():  # each distinct set of settings once
        session: HostSession = session_on(vm_clean, "b")
        try:
            settings = HostSettings(session, f"seed{variant.name[:8]}".replace("-", ""))
            changes = settings.apply(plan.settings(variant)["sut"])
            assert changes and all(c.matches for c in changes), variant.name
            kinds |= {c.kind for c in changes}
            for change in changes:  # hosts check saw the files it writes
                if change.backend == "file" and change.path.startswith("/sys/class/net"):
                    assert sut["knobs"].get(change.path, "writable") == "writable"
            settings.restore()
        finally:
            session.close()
        assert state(vm_clean) == before, variant.name
    expected = {"seed-000-threaded-busypoll.yaml": {"ethtool", "irq_affinity", "sysctl",
                                                    "netdev", "napi", "napi_threads"},
                "seed-003-afxdp-busy-budget.yaml": {"irq_affinity", "netdev"}}[shipped]
    assert expected <= kinds, kinds


@pytest.mark.skipif(shutil.which("tcp_rr") is None,
                    reason="neper's tcp_rr is not on PATH (not packaged: build google/neper "
                    "under /tmp and put it on PATH; the guests see this machine's files)")
def test_seed_000_runs_with_neper(tmp_path: Path, vm_clean: VmTestbed) -> None:
    """Seed 000's profile on the guests (sut = b, peer = a), its settings as shipped; the
    workload adapted to them: neper found where this machine has it (the guests' PATH is
    sshd's), no onload wrapper, the client on b's CPUs 0-1, 3 s trials, one repetition."""
    tcp_rr = Path(str(shutil.which("tcp_rr"))).resolve()
    inventory = lab_inventory(vm_clean, tmp_path, {"sut": "b", "peer": "a"})
    wrapper = ["env", f"PATH={tcp_rr.parent}:/usr/sbin:/usr/bin:/sbin:/bin"]
    profile = tmp_path / "seed000.yaml"
    profile.write_text(yaml.safe_dump({
        "name": "seed-000-threaded-busypoll", "extends": str(
            ROOT / "profiles" / "seed-000-threaded-busypoll.yaml"),
        "workload": {"duration": 3, "warmup": 1,
                     "client": {"cpus": "0-1", "wrapper": wrapper},
                     "server": {"wrapper": wrapper}},
        "repeat": 1, "cooldown": 0}))
    before = state(vm_clean)
    done = run_napilab("run", str(profile), "-i", str(inventory), "-o", str(tmp_path / "r"),
                       "--format", "text", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = next((tmp_path / "r" / "seed-000-threaded-busypoll").iterdir())
    rows = pd.read_parquet(run_dir / "samples.parquet")
    neper = rows[rows["source"] == "neper"]
    for variant in ("sysctl-busypoll", "threaded-busypoll"):
        mine = neper[neper["variant"] == variant]
        assert mine[mine["metric"] == "num_transactions"]["value"].iloc[0] > 0
        assert mine[mine["metric"] == "latency_p99"]["value"].iloc[0] > 0
    threads = rows[(rows["source"] == "napi_threads") & (rows["variant"] ==
                                                          "threaded-busypoll")]
    count = threads[threads["metric"] == "threads"]["value"].iloc[0]
    # every NAPI kthread of data0 busy-polls on SCHED_FIFO (virtio-net keeps the NAPI
    # instance of the queue pair that `combined 1` turned off)
    assert count >= 1 and threads[threads["metric"] == "threads_realtime"]["value"].iloc[
        0] == count
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert all(c["verdict"]["state"] == "taken" for t in manifest["trials"]
               for c in t["settings"])
    assert state(vm_clean) == before


def test_a_guest_that_drops_mid_trial_is_booted_again_and_the_trial_run_again(
        tmp_path: Path, vm_clean: VmTestbed) -> None:
    """Fault: guest b's QEMU dies (SIGKILL) while trial 1 runs, as a TCG guest sometimes
    drops. Before, the trial failed (restore incomplete) and the run ended. Now it is a
    lab fault: b's console is kept with the trial, b is booted again, the trial's
    settings are restored and the trial runs again; the run completes (exit 0), the
    manifest records the fault, and b is as it was."""
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE.replace("duration: 3", "duration: 5"))
    before = state(vm_clean)
    out = tmp_path / "r"
    proc = start_napilab("run", str(profile), "-i", str(vm_clean.inventory_path), "-o",
                         str(out), "--format", "", start_new_session=True)
    try:
        deadline = time.time() + 300
        # the trial's flood, not `ping -V` of the host facts (a drop then is a host
        # unreachable at the start, another test's fault: a clean clone's run saw it)
        while not guest(vm_clean, "a", "pgrep -f '^ping -n -f ' || true").stdout.strip():
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(0.5)
        pgid = int((vm_clean.state / "b" / "vng.pid").read_text())
        qemu = [p for p in group_members(pgid)
                if Path(f"/proc/{p}/exe").resolve().name.startswith("qemu-system")]
        assert len(qemu) == 1, qemu
        os.kill(qemu[0], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, stdout + stderr
    assert "a fault of the VM lab, not a result; the trial runs again" in stderr
    assert "b did not answer: booted again" in stderr
    (path,) = out.glob("*/*/manifest.json")
    manifest = json.loads(path.read_text())
    first, second = manifest["trials"]
    assert manifest["status"] == "complete" and first["status"] == second["status"] == "ok"
    assert len(first["lab_faults"]) == 1 and "b: " in first["lab_faults"][0]
    assert "lab_faults" not in second
    console = path.parent / "raw" / f"{first['id']}.lab-fault-1" / "b" / "console.log"
    assert re.search(r"^\[ *\d+\.\d+\] ", console.read_text(errors="replace"), re.M)  # b's kernel
    assert state(vm_clean) == before
    assert leftovers(vm_clean) == {"a": [], "b": []}
