"""`napilab bisect` in the VM lab: a git range of 8 synthetic commits whose build copies
one of two real Debian images (commits 1-3 and 5: b's own 7.2, with RPS IPIs to CPU 1;
commits 6-8: 7.2-rt, whose backlog_napi threads take RPS without a function-call IPI;
commit 4: an image whose kernel dies at its first instruction). The bisection names
commit 6, skips commit 4 with the reason, survives a SIGKILL in the middle of a step
(`--resume` gives the same answer) and leaves b on its own kernel with nothing of
napilab on it.

Its steps are ordinary runs with the kernel as a variant: the SIGKILL lands while b runs
the candidate's kernel with the trial's settings on, `napilab restore` boots b back
before `--resume` (the kernel journal outlives the boot), and the killed step's run is
checked as `napilab run` stores and reports it (tests/integration/vm/test_vm_kernel.py
makes the same claims of a plain run in `make test`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from napilab.harness.errors import HostError
from napilab.harness.lab import kernels
from napilab.harness.lab.vmbed import VmTestbed
from tests.bisect_trees import commit_tree
from tests.cli import run_napilab, start_napilab
from tests.integration.vm.conftest import (
    GENERIC,
    RT_NEW,
    guest,
    leftovers,
    link_state,
    tap_up,
    tap_watch,
)

# 340 s alone here with 3 steps after the endpoints' (8 boots of guest b under TCG; 417
# s before a kernel that died at boot stopped being retried as a lab fault), about 70 s
# more when git picks a fourth after the skip. Beside the other integration tests the
# VM kernel tests take 1.7-2 times their time alone: `make test` has no room for this
# one in its 20 minutes on 2 CPUs, so `make acceptance` runs it (as root)
pytestmark = pytest.mark.acceptance

IDENTITY = "uname -r; uname -v; cat /proc/cmdline"
WHICH = {1: "A", 2: "A", 3: "A", 4: "broken", 5: "A", 6: "B", 7: "B", 8: "B"}


def dead_on_arrival(image: Path, out: Path) -> None:
    """IMAGE with its kernel's code replaced by ud2 (its setup and header kept, the
    banner's build number changed so it is another kernel): QEMU loads it, the CPU
    faults on its first instruction with no IDT, and QEMU (-no-reboot) exits."""
    data = bytearray(image.read_bytes())
    setup = (data[0x1F1] or 4) + 1
    data[setup * 512:] = b"\x0f\x0b" * ((len(data) - setup * 512) // 2) + \
        b"\x0f" * ((len(data) - setup * 512) % 2)
    at = data.index(b" #1 ", 0, 0x10000)
    data[at:at + 4] = b" #9 "
    out.write_bytes(bytes(data))


def synthetic_tree(tmp_path: Path) -> tuple[Path, dict[int, str]]:
    images = tmp_path / "images"
    images.mkdir()
    (images / "A").write_bytes(kernels.find(GENERIC).image.read_bytes())
    (images / "B").write_bytes(kernels.find(RT_NEW).image.read_bytes())
    dead_on_arrival(images / "A", images / "broken")
    tree = tmp_path / "linux"
    tree.mkdir()
    return tree, commit_tree(tree, WHICH)


PROFILE = """\
name: vm-bisect
hosts: {sender: a, receiver: b}
workload: {tool: ping, duration: 1, idle: 0, warmup: 2, client: {role: sender, cpus: "0"},
           server: {role: receiver}}
collect:
  interrupts: {roles: [receiver], cpus: "1"}
setup:
  receiver: {irq_affinity: {data0: "0"}}
variants:
  rps: {setup: {receiver: {rps: {data0: "1"}}}}
metrics:
  interrupts.function_call_interrupts: {direction: lower}
repeat: 4
"""


def test_bisect_names_commit_6_skips_the_dead_kernel_and_resumes(
        tmp_path: Path, vm_clean: VmTestbed) -> None:
    own = guest(vm_clean, "b", IDENTITY).stdout
    tree, shas = synthetic_tree(tmp_path)
    profile = tmp_path / "p.yaml"
    profile.write_text(PROFILE)
    images = tmp_path / "images"
    args = ["bisect", str(profile), "-i", str(vm_clean.inventory_path), "--role", "receiver",
            "--tree", str(tree), "--good", shas[1], "--bad", shas[8],
            "--build", f"mkdir -p out && cp {images}/$(cat which) out/bzImage",
            "--build-image", "out/bzImage", "--metric", "function_call_interrupts",
            "--max-regression", "function_call_interrupts=50", "--repeat", "4",
            "--max-repeat", "8", "-o", str(tmp_path / "r")]
    plan = run_napilab(*args, "--dry-run", timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert "7 commits may be the first bad one" in plan.stdout
    assert "at most 3 step(s)" in plan.stdout
    with tap_watch(vm_clean.tap("b")) as seen:
        proc = start_napilab(*args, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            state, killed = _wait_measuring(tmp_path / "r", proc, vm_clean)
            os.killpg(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=30) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # killed on the candidate's kernel with the trial's settings on: the kernel
        # journal outlives the boot, and `napilab restore` boots b back into its own
        left = leftovers(vm_clean)["b"]
        assert any(n.endswith("-b-kernel.json") for n in left), left
        assert any(n.startswith("lock-") for n in left), left
        restored = run_napilab("restore", "-i", str(vm_clean.inventory_path), timeout=900)
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert any("restored 1 setting(s)" in line and "kernel=7.2" in line
                   for line in restored.stdout.splitlines()), restored.stdout
        assert guest(vm_clean, "b", IDENTITY).stdout == own
        assert leftovers(vm_clean) == {"a": [], "b": []}
        resumed = run_napilab(*args[:4], "--resume", str(state), timeout=1500)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr + link_state(vm_clean)
    # b's tap was down while b booted, and is up again
    assert seen == {True, False} and tap_up(vm_clean.tap("b"))
    log = json.loads((state / "bisect.json").read_text())
    assert log["answer"]["first_bad"] == shas[6], resumed.stdout
    steps = {s["commit"]: s for s in log["steps"] if s["number"] > 0}
    measured = [c for c, s in steps.items() if s["verdict"] in ("good", "bad")]
    assert len(measured) <= 3, steps
    assert steps[shas[4]]["verdict"] == "skip"
    assert steps[shas[4]]["reason"].startswith("did not boot, or came up broken"), \
        steps[shas[4]]["reason"]
    assert steps[shas[4]]["rounds"][0]["error"]
    # the reason is the kernel's (its guest died while it booted), run once: a guest that
    # dies on the trial's own kernel is not a lab fault to boot again and retry
    assert "b exited while booting" in steps[shas[4]]["reason"], steps[shas[4]]["reason"]
    assert steps[shas[4]]["boots"] == 2  # into it, and back
    # the step killed while measured was measured again, once, to the same verdict
    assert steps[killed]["verdict"] == "bad" and len(steps[killed]["rounds"]) == 1
    # b's own kernel is image A's: a step on A boots nothing, one on B boots it and back
    assert {WHICH[n]: steps[shas[n]]["boots"] for n in WHICH if shas[n] in steps
            and WHICH[n] != "broken"} == {"A": 0, "B": 2}, steps
    assert log["steps"][0]["boots"] == 2
    # the killed step's run, as `napilab run` stores and reports it: the candidate's
    # trials on 7.2-rt, the kernel change taken, the host unchanged at the end
    run_dir = state / steps[killed]["rounds"][0]["run"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert not manifest.get("hosts_changed")
    for trial in (t for t in manifest["trials"] if t["variant"] == "candidate"):
        change = next(c for c in trial["settings"] if c["kind"] == "kernel")
        assert change["verdict"]["state"] == "taken"
        assert json.loads(change["effective"])["release"].startswith("7.2.")
        assert "PREEMPT_RT" in change["effective"]
    report = run_napilab("report", str(run_dir), "--format", "text", timeout=120, check=True)
    assert "\n  candidate: b on 7.2." in report.stdout, report.stdout
    text = (state / "bisect.txt").read_text()
    assert f"the first bad commit is {shas[6]}" in text and "commit 6" in text
    assert "skipped:" in text and shas[4][:12] in text
    assert any(p.name.startswith("console-b") for p in (state / "steps").rglob("*.log"))
    assert guest(vm_clean, "b", IDENTITY).stdout == own
    assert leftovers(vm_clean) == {"a": [], "b": []}
    # the tree is back on the commit it was on, git's bisection state gone
    assert not (tree / ".git" / "BISECT_LOG").exists()


def _wait_measuring(results: Path, proc: subprocess.Popen[str],
                    bed: VmTestbed) -> tuple[Path, str]:
    """The bisection's directory and the commit of the first step (after the endpoints')
    measuring on image B, the PREEMPT_RT kernel (booted: b is not on its own kernel),
    once that step is there (which commit git picks after a skip is git's choice) and b
    runs B with a trial's settings on (RPS to CPU 1)."""
    deadline = time.time() + 1200
    found = None
    while found is None:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.time() < deadline, "no step on image B reached its measurement"
        time.sleep(1)
        for path in results.glob("vm-bisect/bisect-*/bisect.json"):
            try:
                log = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            found = next(((path.parent, step["commit"]) for step in log["steps"][1:]
                          if step["phase"] == "measuring"
                          and "-rt-" in (step["image"] or "")), found)
    while time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        with contextlib.suppress(HostError):  # between two boots
            now = guest(bed, "b", "uname -r; cat /sys/class/net/data0/queues/rx-0/rps_cpus",
                        check=False)
            if now.exit_code == 0 and "-rt-" in now.stdout and \
                    now.stdout.strip().endswith("2"):
                return found
        time.sleep(0.2)
    raise AssertionError("b never ran image B with a trial's settings on")
