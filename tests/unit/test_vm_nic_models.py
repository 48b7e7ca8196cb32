"""The VM testbed's data NIC models (harness.lab.guest NIC_MODELS): the QEMU device
each puts on the data tap and how many tap queues it reads (virtio-net all of them;
QEMU's vmxnet3 and e1000e one: frames on the tap's other queues were lost)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from napilab.harness.errors import NapilabError
from napilab.harness.lab.guest import (
    NIC_MODELS,
    UDEV_RULES,
    UDEV_RULES_DIRS,
    GuestSpec,
    init_script,
    qemu_opts,
    with_udev_rules,
)
from napilab.harness.lab.vmbed import VmState, VmTestbed


def spec(nic: str) -> GuestSpec:
    return GuestSpec(name="b", image=Path("/boot/vmlinuz"), append=(), cpus=2, memory="1G",
                     queues=4, accel="tcg", ssh_port=2222, tap="napilab-vb",
                     data_address="192.0.2.2/24", mac_index=7, state=Path("/tmp/b"), nic=nic)


@pytest.mark.parametrize(("nic", "device", "tap_queues"), [
    ("virtio", "virtio-net-pci,netdev=data,mq=on,vectors=10,mac=52:54:00:6e:01:07", 4),
    ("virtio-rss", "virtio-net-pci,netdev=data,mq=on,vectors=10,rss=on,hash=on,"
                   "mac=52:54:00:6e:01:07", 4),
    ("vmxnet3", "vmxnet3,netdev=data,mac=52:54:00:6e:01:07", 1),
    ("e1000e", "e1000e,netdev=data,mac=52:54:00:6e:01:07", 1),
])
def test_each_model_is_its_qemu_device_on_the_tap(nic: str, device: str,
                                                  tap_queues: int) -> None:
    opts = qemu_opts(spec(nic))
    data = opts[opts.index("-netdev", opts.index("-netdev") + 1) + 1]
    assert f"queues={tap_queues}," in data and "ifname=napilab-vb" in data
    assert opts[-1] == device
    assert NIC_MODELS[nic][1] is (tap_queues > 1)


def test_an_unknown_model_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    bed = VmTestbed(prefix="napilabu", state_dir=str(tmp_path / "bed"))
    with pytest.raises(NapilabError, match="NIC model 'e1000'; napilab knows virtio, "
                       "virtio-rss, vmxnet3, e1000e"):
        bed.up(nic={"b": "e1000"})
    assert not (tmp_path / "bed").exists()


def test_a_testbed_known_by_its_directory_names_its_taps_by_its_prefix(
        tmp_path: Path) -> None:
    """A run boots a guest through VmTestbed(state_dir=...) (the inventory's `boot:
    testbed`): the tap it takes down while the guest boots is the testbed's own (a clean
    clone's run took down "napilab-vb", which did not exist, and left guest b stopped)."""
    bed = VmTestbed(prefix="napilabq", state_dir=str(tmp_path / "bed"))
    bed.state.mkdir()
    bed._save(VmState(prefix="napilabq", accel="tcg", guests={}))
    assert VmTestbed(state_dir=str(bed.state)).tap("b") == "napilabq-vb"
    assert VmTestbed(state_dir=str(tmp_path / "none")).tap("b") == "napilab-vb"


@pytest.mark.parametrize(("nic", "driver"), [("virtio", "virtio_net"),
                                             ("virtio-rss", "virtio_net"),
                                             ("vmxnet3", "vmxnet3"), ("e1000e", "e1000e")])
def test_the_init_script_loads_its_nics_drivers(nic: str, driver: str) -> None:
    """The guests run no udev: the init script loads the management NIC's driver and the
    data NIC's before it names them."""
    lines = init_script(spec(nic)).splitlines()
    load = lines.index(f"modprobe -a virtio_net {driver}")
    assert load < next(i for i, line in enumerate(lines) if "name data0" in line)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None
                    or not any(os.path.isdir(d) for d in UDEV_RULES_DIRS),
                    reason="a mount namespace needs root, unshare and udev rules to replace")
def test_a_guests_qemu_sees_one_udev_rule_and_the_machine_keeps_its_own(
        tmp_path: Path) -> None:
    """What the guest's QEMU exports as the guest's root has, in every udev rules
    directory, only the rule of virtme-ng's script ports (in a private mount namespace):
    the machine's own rules are untouched, during and after."""
    dirs = [d for d in UDEV_RULES_DIRS if os.path.isdir(d)]
    before = {d: sorted(os.listdir(d)) for d in dirs}
    probe = ["sh", "-c", 'for d do echo "$d:$(ls "$d" | tr "\\n" " ")"; done', "sh", *dirs]
    argv = with_udev_rules(probe, tmp_path / "rules")
    assert argv[:4] == [shutil.which("unshare"), "--mount", "--propagation", "private"]
    inside = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.split("\n")[:-1] == [f"{d}:{' '.join(UDEV_RULES)} " for d in dirs]
    [rule] = UDEV_RULES
    assert "virtio-ports/$attr{name}" in (tmp_path / "rules" / rule).read_text()
    assert {d: sorted(os.listdir(d)) for d in dirs} == before
