"""The VM testbed's data NIC models (harness.lab.guest NIC_MODELS): the QEMU device
each puts on the data tap and how many tap queues it reads (virtio-net all of them;
QEMU's vmxnet3 and e1000e one: frames on the tap's other queues were lost)."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.harness.errors import NapilabError
from napilab.harness.lab.guest import NIC_MODELS, GuestSpec, qemu_opts
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
