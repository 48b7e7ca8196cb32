"""Every knob kind the seeds tune on a device, for real on a virtio-net NIC with two
queue pairs (guest b of the VM testbed, kernel 7.2): applied by napilab over SSH, read
back by napilab and checked again here with the kernel's own tools, restored."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from napilab.harness.errors import HostError, SettingMismatch
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.knobs.kind import Setting
from napilab.harness.knobs.kinds.napi import NETDEV_NL
from napilab.harness.lab.vmbed import VmTestbed
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from tests.integration.vm.conftest import guest, session_on

# The state a run may touch on guest b, read with the kernel's tools: restore must give
# back exactly this.
STATE = r"""
cd /sys/class/net/data0
for q in queues/rx-*; do echo "$q rps $(cat $q/rps_cpus) flows $(cat $q/rps_flow_cnt)"; done
for q in queues/tx-*; do echo "$q xps $(cat $q/xps_cpus) rxqs $(cat $q/xps_rxqs)"; done
for n in $(ls /sys/class/net/data0/device/msi_irqs 2>/dev/null || ls device/../msi_irqs); do
  echo "irq $n $(cat /proc/irq/$n/smp_affinity_list)"; done
echo "sysctl $(cat /proc/sys/net/core/busy_poll) $(cat /proc/sys/net/core/busy_read)"
echo "sysctl defer_max $(cat /proc/sys/net/core/skb_defer_max)"
ethtool -l data0 | tail -4
ethtool -c data0 | head -6
echo "threaded $(cat threaded) defer $(cat napi_defer_hard_irqs) flush $(cat gro_flush_timeout)"
echo "kprobes $(cat /sys/kernel/tracing/kprobe_events 2>/dev/null | wc -l)"
ps -eo comm= | grep -c '^napi/data0' || true
"""


@pytest.fixture()
def b(vm_clean: VmTestbed) -> Iterator[HostSession]:
    session = session_on(vm_clean, "b")
    yield session
    session.close()


def state(bed: VmTestbed) -> str:
    return guest(bed, "b", STATE).stdout


def settings_of(tmp_path: Path, bed: VmTestbed, setup: str,
                receiver: str = "b") -> list[Setting]:
    """The settings a profile's `setup.receiver:` YAML makes for guest `receiver` (the
    profile's own grammar, so targets are what a user's profile gives)."""
    sender = "a" if receiver == "b" else "b"
    profile = tmp_path / "p.yaml"
    profile.write_text(textwrap.dedent(f"""\
        name: vm-knobs
        hosts: {{sender: {sender}, receiver: {receiver}}}
        workload: {{tool: ping, duration: 1, client: {{role: sender}},
                   server: {{role: receiver}}}}
        setup:
          receiver:
        """) + textwrap.indent(textwrap.dedent(setup), "    "))
    plan = bind(load_profile(profile), load_inventory(bed.inventory_path))
    return plan.settings(plan.profile.variants[0])[receiver]


def napis(bed: VmTestbed) -> list[dict[str, object]]:
    out = guest(bed, "b", f"python3 -I -S - napi-get $(cat /sys/class/net/data0/ifindex) <<'EOF'\n"
                          f"{NETDEV_NL.read_text()}\nEOF").stdout
    return sorted(json.loads(out), key=lambda n: int(str(n["id"])))


def test_queue_irqs_rps_xps_busy_poll_and_per_napi(tmp_path: Path, vm_clean: VmTestbed,
                                                   b: HostSession) -> None:
    before = state(vm_clean)
    settings = HostSettings(b, "vmknob1")
    changes = settings.apply(settings_of(tmp_path, vm_clean, """\
        irq_affinity: {data0: "1"}
        rps: {data0: {cpus: "0-1", flow_cnt: 4096}}
        xps: {data0: "0"}
        sysctl: {net.core.busy_poll: 50, net.core.busy_read: 50}
        napi: {data0: {defer-hard-irqs: 2, gro-flush-timeout: 20000,
                       irq-suspend-timeout: 2000000}}
        """))
    assert changes and all(c.matches for c in changes), [c for c in changes if not c.matches]
    kinds = {c.kind for c in changes}
    assert kinds == {"irq_affinity", "rps", "rps_flow_cnt", "xps", "sysctl", "napi"}
    assert len([c for c in changes if c.kind == "irq_affinity"]) == 5  # config + 2x2 queues
    now = state(vm_clean)
    assert "queues/rx-0 rps 3 flows 4096" in now and "queues/rx-1 rps 3 flows 4096" in now
    assert "queues/tx-0 xps 1" in now and "queues/tx-1 xps 1" in now
    assert now.count(" 1\n") >= 5 and "sysctl 50 50" in now
    irqs = [line.split() for line in now.splitlines() if line.startswith("irq ")]
    assert len(irqs) == 5 and all(a == "1" for _, _, a in irqs)
    for napi in napis(vm_clean):  # both queues' NAPI instances
        assert (napi["defer-hard-irqs"], napi["gro-flush-timeout"],
                napi["irq-suspend-timeout"]) == (2, 20000, 2000000)
    settings.restore()
    assert state(vm_clean) == before


def test_threaded_busy_poll_kthreads_pinned_and_scheduled(tmp_path: Path, vm_clean: VmTestbed,
                                                          b: HostSession) -> None:
    before = state(vm_clean)
    assert "threaded 0" in before
    settings = HostSettings(b, "vmknob2")
    changes = settings.apply(settings_of(tmp_path, vm_clean, """\
        napi: {data0: {threaded: busy-poll}}
        napi_threads: {data0: {cpus: "1", policy: fifo, priority: 50}}
        """))
    assert all(c.matches for c in changes), changes
    assert [n["threaded"] for n in napis(vm_clean)] == ["busy-poll", "busy-poll"]
    threads = guest(vm_clean, "b", "for p in $(pgrep '^napi/data0'); do "
                    "echo \"$(cat /proc/$p/comm) $(taskset -pc $p | sed 's/.*: //') "
                    "$(chrt -p $p | tr '\\n' ' ')\"; done").stdout.splitlines()
    assert len(threads) == 2, threads  # one kthread per NAPI instance (per rx queue)
    for line in threads:
        assert line.split()[1] == "1" and "SCHED_FIFO" in line and "priority: 50" in line, line
    pids = {n["pid"] for n in napis(vm_clean)}
    assert len(pids) == 2 and all(isinstance(p, int) and p > 0 for p in pids)
    settings.restore()
    after = state(vm_clean)
    assert after == before and after.strip().endswith("0")  # the kthreads are gone


def test_channels_then_rps_on_the_queues_that_remain(tmp_path: Path, vm_clean: VmTestbed,
                                                     b: HostSession) -> None:
    before = state(vm_clean)
    settings = HostSettings(b, "vmknob3")
    changes = settings.apply(settings_of(tmp_path, vm_clean, """\
        ethtool: {data0: {channels: {combined: 1}}}
        rps: {data0: "1"}
        irq_affinity: {data0: "1"}
        """))
    assert all(c.matches for c in changes), changes
    rps = [c.target for c in changes if c.kind == "rps"]
    assert rps == ["data0/rx-0"]  # resolved after -L: rx-1 is gone
    now = guest(vm_clean, "b", "ethtool -l data0 | tail -1; ls /sys/class/net/data0/queues")
    assert now.stdout.split() == ["Combined:", "1", "rx-0", "tx-0"]
    settings.restore()
    assert state(vm_clean) == before


def test_coalescing_refused_clearly_and_a_value_not_taken(tmp_path: Path, vm_clean: VmTestbed,
                                                          b: HostSession) -> None:
    """QEMU's virtio-net offers no notification coalescing: `ethtool -C rx-usecs` is
    refused (the reason is the kernel's), and `adaptive-rx on` is accepted but reads
    back off: napilab says the kernel did not take it, and nothing stays changed."""
    before = state(vm_clean)
    with pytest.raises(HostError, match=r"cannot set ethtool data0/coalesce/rx-usecs = "
                                        r"'10': .*Operation not supported"):
        HostSettings(b, "vmknob4").apply(settings_of(tmp_path, vm_clean, """\
            ethtool: {data0: {coalesce: {rx-usecs: 10}}}
            """))
    with pytest.raises(SettingMismatch, match=r"the kernel did not take .*adaptive-rx"):
        HostSettings(b, "vmknob5").apply(settings_of(tmp_path, vm_clean, """\
            ethtool: {data0: {coalesce: {adaptive-rx: "on"}}}
            """))
    assert state(vm_clean) == before
