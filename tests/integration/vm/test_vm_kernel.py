"""The kernel as a variant on the VM testbed: `napilab plan` shows every boot; a run
boots guest b into a variant's kernel for its trials and back into its own at the end;
a run killed with SIGKILL while b runs a variant's kernel is put back by `napilab
restore`, which boots b into its own kernel (the kernel journal outlives the boot).
Seed 001's whole letter (two RT kernels, both experiments and the letter's script in
each boot) is a stored run: tests/unit/test_seed001_letter.py."""

from __future__ import annotations

import json
from pathlib import Path

from napilab.harness.lab.vmbed import VmTestbed
from tests.cli import run_napilab
from tests.conftest import ROOT
from tests.integration.vm.conftest import (
    RT_NEW,
    RT_OLD,
    guest,
    kill_run_when,
    leftovers,
    link_state,
    tap_up,
    tap_watch,
)

IDENTITY = "uname -r; uname -v; cat /proc/cmdline"


def test_plan_shows_every_boot(vm_inventory: Path) -> None:
    out = run_napilab("plan", str(ROOT / "profiles" / "seed-001-backlog-napi-vm.yaml"),
                      "-i", str(vm_inventory), timeout=120, check=True).stdout
    boots = [ln for ln in out.splitlines() if "napilab testbed boot b" in ln]
    # boot: per-trial, 4 variants and their traced twins x 2 repetitions
    assert len(boots) == 16
    assert sum("6.1.0-" in ln for ln in boots) == 8 and sum("7.2." in ln for ln in boots) == 8
    assert "end of run: b boots back into its own kernel" in out
    assert "b        ~ kernel: 6.1-rt -> 7.2-rt" in out


def test_a_run_boots_b_into_its_variants_kernel_and_back(tmp_path: Path,
                                                         vm_clean: VmTestbed) -> None:
    own = guest(vm_clean, "b", IDENTITY).stdout
    # a 2 s warm-up: b, just booted, must resolve a before its first reply (CI, loaded,
    # saw none in a 1 s flood without one)
    profile = tmp_path / "p.yaml"
    profile.write_text(f"""\
name: vm-kernel-run
hosts: {{sender: a, receiver: b}}
workload: {{tool: ping, duration: 1, idle: 0, warmup: 2, client: {{role: sender}},
           server: {{role: receiver}}}}
variants:
  own: {{}}
  rt: {{kernel: {{receiver: "{RT_NEW}"}}, setup: {{receiver: {{rps: {{data0: "1"}}}}}}}}
repeat: 1
boot: per-kernel
""")
    with tap_watch(vm_clean.tap("b")) as seen:
        done = run_napilab("run", str(profile), "-i", str(vm_clean.inventory_path),
                           "-o", str(tmp_path / "r"), "--format", "text", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr + link_state(vm_clean)
    # b's tap was down while b booted (a frame reaching QEMU's virtio-net before the
    # guest's rings were filled could stop QEMU reading that tap queue) and is up again
    assert seen == {True, False} and tap_up(vm_clean.tap("b"))
    (run_dir,) = (tmp_path / "r" / "vm-kernel-run").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    trials = {t["variant"]: t for t in manifest["trials"]}
    kernel = next(c for c in trials["rt"]["settings"] if c["kind"] == "kernel")
    assert kernel["verdict"]["state"] == "taken"
    effective = json.loads(kernel["effective"])
    assert effective["release"].startswith("7.2.") and "PREEMPT_RT" in kernel["effective"]
    assert not any(c["kind"] == "kernel" for c in trials["own"]["settings"])
    text = (run_dir / "report.txt").read_text()
    assert "\n  rt: b on 7.2." in text, text
    # b is back on its own kernel and command line, nothing of the run left in either
    assert guest(vm_clean, "b", IDENTITY).stdout == own
    assert leftovers(vm_clean) == {"a": [], "b": []}
    assert not manifest.get("hosts_changed")


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
    restored = run_napilab("restore", "-i", str(vm_clean.inventory_path), timeout=900)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "restored 1 setting(s)" in restored.stdout and "kernel=7.2" in restored.stdout
    assert guest(vm_clean, "b", IDENTITY).stdout == own  # its own kernel and command line
    assert leftovers(vm_clean) == {"a": [], "b": []}
    guest(vm_clean, "a", "pkill -x ping || true")  # the killed run's workload, if still on
