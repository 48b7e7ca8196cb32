"""Last of the VM tests (by name): `napilab testbed down` leaves nothing of the VM
testbed on this machine: no QEMU or vng process, no tap, no bridge, no namespace, no
route, no file."""

from __future__ import annotations

import subprocess
from pathlib import Path

from napilab.harness.lab.vmbed import VmTestbed
from tests.cli import run_napilab
from tests.integration.vm.conftest import close_guests


def test_down_leaves_nothing(vm_bed: VmTestbed) -> None:
    pids = {g["pid"] for g in vm_bed.status()["guests"].values()}
    assert all(pids) and vm_bed.stray_processes()
    links_before = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                                  check=True).stdout
    prefix = vm_bed.prefix  # this worker's (tests/conftest.py)
    assert f"{prefix}-va" in links_before and f"{prefix}-vb" in links_before
    # the user's testbed (none here): a no-op
    run_napilab("testbed", "down", timeout=120, check=True)
    close_guests(vm_bed)
    vm_bed.down()
    assert not vm_bed.state.exists() and not Path(f"/run/{prefix}-vm").exists()
    assert vm_bed.stray_processes() == []
    assert all(not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat")
               .read_text().split()[2] for pid in pids)
    qemu = subprocess.run(["pgrep", "-af", "qemu-system|virtme|vng"], capture_output=True,
                          text=True, check=False).stdout
    assert prefix not in qemu
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           check=True).stdout
    assert f"{prefix}-v" not in links
    for kind in ("tun", "bridge"):
        found = subprocess.run(["ip", "-o", "link", "show", "type", kind],
                               capture_output=True, text=True, check=True).stdout
        assert prefix not in found
    assert prefix not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                        text=True, check=True).stdout
    assert prefix not in subprocess.run(["ip", "route", "show", "table", "all"],
                                        capture_output=True, text=True, check=True).stdout
    assert not vm_bed.status()["up"]
    vm_bed.down()  # idempotent
