"""The kernel as a variant on the VM testbed: `napilab plan` shows every boot, and a run
killed with SIGKILL while guest b runs a variant's kernel is put back by `napilab
restore`, which boots b into its own kernel (the kernel journal outlives the boot)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from napilab.harness.lab.vmbed import VmTestbed
from tests.conftest import ROOT
from tests.integration.vm.conftest import NAPILAB, RT_OLD, guest, kill_run_when, leftovers

IDENTITY = "uname -r; uname -v; cat /proc/cmdline"


def test_plan_shows_every_boot(vm_inventory: Path) -> None:
    out = subprocess.run([NAPILAB, "plan", str(ROOT / "profiles" /
                                                "seed-001-backlog-napi-vm.yaml"),
                          "-i", str(vm_inventory)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    boots = [ln for ln in out.splitlines() if "napilab testbed boot b" in ln]
    assert len(boots) == 8  # boot: per-trial, 4 variants x 2 repetitions
    assert sum("6.1.0-" in ln for ln in boots) == 4 and sum("7.2." in ln for ln in boots) == 4
    assert "end of run: b boots back into its own kernel" in out
    assert "b        ~ kernel: 6.1-rt -> 7.2-rt" in out


def test_sigkill_on_a_variants_kernel_then_restore_boots_back(tmp_path: Path,
                                                             vm_clean: VmTestbed) -> None:
    own = guest(vm_clean, "b", IDENTITY).stdout
    profile = tmp_path / "p.yaml"
    profile.write_text(f"""\
name: vm-kernel-kill
hosts: {{sender: a, receiver: b}}
workload: {{tool: ping, duration: 300, client: {{role: sender}}, server: {{role: receiver}}}}
variants:
  old: {{kernel: {{receiver: "{RT_OLD}"}}, setup: {{receiver: {{rps: {{data0: "1"}}}}}}}}
repeat: 1
""")
    # killed on the variant's kernel, with its settings on
    kill_run_when(vm_clean, ["run", str(profile), "-i", str(vm_clean.inventory_path), "-o",
                             str(tmp_path / "r"), "--format", ""],
                  IDENTITY + "; cat /sys/class/net/data0/queues/rx-0/rps_cpus",
                  lambda now: now.startswith("6.1.0-") and now.strip().endswith("2"))
    left = leftovers(vm_clean)["b"]
    assert any(n.endswith("-b-kernel.json") for n in left), left
    assert any(n.startswith("lock-") for n in left), left
    restored = subprocess.run([NAPILAB, "restore", "-i", str(vm_clean.inventory_path)],
                              capture_output=True, text=True, timeout=900, check=False)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "restored 1 setting(s)" in restored.stdout and "kernel=7.2" in restored.stdout
    assert guest(vm_clean, "b", IDENTITY).stdout == own  # its own kernel and command line
    assert leftovers(vm_clean) == {"a": [], "b": []}
    guest(vm_clean, "a", "pkill -x ping || true")  # the killed run's workload, if still on
