"""The VM testbed: two QEMU guests, `a` and `b`, each an SSH host napilab reaches as it
reaches a lab host, joined by a multi-queue virtio-net data link.

    this machine                          guest a (kernel K_a)      guest b (kernel K_b)
    127.0.0.1:PORT_a --QEMU user net-->   mgmt0 198.51.100.130      .
    127.0.0.1:PORT_b --QEMU user net-->   .                         mgmt0 198.51.100.130
    tap PREFIX-va <-tc mirred-> tap PREFIX-vb
       data0 192.0.2.1/24 (a)         data0 192.0.2.2/24 (b): N queues, an IRQ and a NAPI each

Management traffic goes over loopback into QEMU's user network of each guest (which
reaches nothing: `restrict=on`); data traffic goes from one tap to the other by tc
redirects, never into this machine's network stack (whose own addresses may well be in
192.0.2.0/24). Nothing leaves this machine. The guests run the
machine's own programs on Debian kernels of the kernel cache (harness.lab.kernels);
harness.lab.guest says how.

`down` stops every guest, removes the taps and the state
directory (keys, known_hosts, inventory, consoles, the guests' /var/tmp/napilab).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import yaml

from napilab.harness.errors import InputError, NapilabError
from napilab.harness.lab import kernels
from napilab.harness.lab.guest import (
    NIC_MODELS,
    SSHD_CONFIG,
    Guest,
    GuestDied,
    GuestSpec,
    GuestStalled,
    free_port,
    guest_processes,
    init_script,
    kvm_works,
    stop_guest,
)
from napilab.harness.lab.netns import run_here
from napilab.harness.records import codec
from napilab.harness.records.codec import Document, FrozenRecord

NAMES = ("a", "b")
DATA_ADDRESSES = {"a": "192.0.2.1", "b": "192.0.2.2"}
# TCG on 2 CPUs: 20-110 s measured; a loaded slower machine more (on one, two testbeds
# booting beside netns tests: a guest's udev took 60 s of its boot)
BOOT_TIMEOUT = 900.0
# a boot attempt whose console printed nothing for STALL s while its sshd does not
# answer is started again; a boot that prints is slow, not stuck, and is waited for
STALL = 120.0


class VmTestbed:
    def __init__(self, prefix: str = "napilab", state_dir: str | Path | None = None) -> None:
        if len(prefix) > 11:
            raise NapilabError(f"testbed prefix {prefix!r} too long (interface names are "
                               "limited to 15 characters)")
        self.prefix = prefix
        self.state = Path(state_dir or f"/run/{prefix}-vm")
        if state_dir is not None and (self.state / "state.json").exists():
            # a run that boots a guest knows the testbed by its directory: the taps are
            # named by the prefix `up` was given
            self.prefix = self._load().prefix

    @property
    def inventory_path(self) -> Path:
        return self.state / "inventory.yaml"

    def tap(self, name: str) -> str:
        return f"{self.prefix}-v{name}"

    # -- up --------------------------------------------------------------------------

    def up(self, kernel: dict[str, str] | None = None, *, queues: int = 2,
           cpus: int | dict[str, int] = 2, memory: str = "1G", accel: str = "auto",
           timeout: float = BOOT_TIMEOUT, nic: dict[str, str] | None = None) -> Path:
        """Both guests; `kernel`, `cpus` and `nic` (the data NIC's model, NIC_MODELS:
        virtio by default) per guest name (or `cpus` for both)."""
        models = {n: (nic or {}).get(n, "virtio") for n in NAMES}
        for name, model in models.items():
            if model not in NIC_MODELS:
                raise NapilabError(f"guest {name}: NIC model {model!r}; napilab knows "
                                   f"{', '.join(NIC_MODELS)}")
        if os.geteuid() != 0:
            raise NapilabError("the VM testbed needs root (taps, tc, QEMU)")
        if self.exists():
            raise NapilabError(f"a VM testbed named {self.prefix!r} is already up",
                               hint=f"`napilab testbed down` first (state: {self.state})")
        if not 1 <= queues <= 16:
            raise NapilabError(f"queues {queues}: 1 to 16")
        chosen = {n: kernels.find((kernel or {}).get(n) or default_kernel()) for n in NAMES}
        for tool in ("qemu-system-x86_64", "busybox"):
            if shutil.which(tool) is None:
                raise NapilabError(f"{tool} not found", hint="apt-get install qemu-system-x86 "
                                   "busybox-static (`make test` does it as root)")
        if accel == "auto":
            accel = "kvm" if kvm_works(chosen["a"].image) else "tcg"
        try:
            self.state.mkdir(mode=0o700, parents=True)
            self._link(models)
            self._keys()
            vcpus = cpus if isinstance(cpus, dict) else dict.fromkeys(NAMES, cpus)
            specs = {n: self._spec(n, i, chosen[n], queues, vcpus.get(n, 2), memory, accel,
                                   models[n]) for i, n in enumerate(NAMES)}
            self._save(VmState(prefix=self.prefix, accel=accel, guests={
                n: _entry(s, _kernel_ref(chosen[n], ())) for n, s in specs.items()}))
            self._write_inventory(specs)
            self._boot(list(specs.values()), timeout)
        except BaseException:
            self.down()
            raise
        return self.inventory_path

    def _spec(self, name: str, index: int, kernel: kernels.Kernel, queues: int, cpus: int,
              memory: str, accel: str, nic: str = "virtio") -> GuestSpec:
        home = self.state / name
        (home / "guest").mkdir(parents=True)
        (home / "var-tmp-napilab").mkdir(mode=0o700)
        spec = GuestSpec(name=name, image=kernel.image, append=(), cpus=cpus, memory=memory,
                         queues=queues, accel=accel, ssh_port=free_port(), tap=self.tap(name),
                         data_address=f"{DATA_ADDRESSES[name]}/24",
                         mac_index=(sum(self.prefix.encode()) * 2 + index) % 256, state=home,
                         nic=nic)
        guest = home / "guest"
        (guest / "init.sh").write_text(init_script(spec))
        (guest / "sshd_config").write_text(SSHD_CONFIG)
        (guest / "machine-id").write_text(uuid.uuid4().hex + "\n")
        shutil.copy(self.state / "id_ed25519.pub", guest / "authorized_keys")
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{self.prefix}-vm-{name}",
              "-f", str(guest / "ssh_host_ed25519_key")])
        return spec

    def _link(self, models: dict[str, str]) -> None:
        """The data link: two persistent taps (multi-queue for a NIC model QEMU serves
        with several), each one's ingress redirected to the other's egress by tc (u32 +
        mirred), so frames go from guest to guest and never into this machine's own
        network stack (no bridge, no address, IPv6 off on both). A tap is brought up
        once its guest has booted (`_start`, `_up`)."""
        taps = [self.tap(n) for n in NAMES]
        for name, tap in zip(NAMES, taps, strict=True):
            multi = ["multi_queue"] if NIC_MODELS[models[name]][1] else []
            _run(["ip", "tuntap", "add", "dev", tap, "mode", "tap", *multi])
            _disable_ipv6(tap)
            _run(["tc", "qdisc", "add", "dev", tap, "ingress"])
        for tap, peer in ((taps[0], taps[1]), (taps[1], taps[0])):
            _run(["tc", "filter", "add", "dev", tap, "ingress", "protocol", "all", "u32",
                  "match", "u32", "0", "0", "action", "mirred", "egress", "redirect",
                  "dev", peer])

    def _keys(self) -> None:
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{self.prefix}-vm",
              "-f", str(self.state / "id_ed25519")])

    def _boot(self, specs: list[GuestSpec], timeout: float) -> dict[str, float]:
        """Start the guests together, then wait for each one's sshd."""
        deadline = time.time() + timeout
        guests = [Guest(s) for s in specs]
        for guest in guests:
            _start(guest)
        return {g.spec.name: _up(g, deadline) for g in guests}

    def _write_inventory(self, specs: dict[str, GuestSpec]) -> None:
        hosts: dict[str, Any] = {}
        known = []
        for name, spec in specs.items():
            hosts[name] = {
                "address": "127.0.0.1", "port": spec.ssh_port, "user": "root",
                "key": str(self.state / "id_ed25519"),
                "known_hosts": str(self.state / "known_hosts"),
                "data_address": DATA_ADDRESSES[name], "iface": "data0", "cpus": spec.cpus,
                "connect_timeout": 30,
                "boot": {"method": "vm", "testbed": str(self.state), "guest": name},
            }
            pub = (spec.state / "guest" / "ssh_host_ed25519_key.pub").read_text().split()
            known.append(f"[127.0.0.1]:{spec.ssh_port} {pub[0]} {pub[1]}")
        (self.state / "known_hosts").write_text("\n".join(known) + "\n")
        header = (f"# written by `napilab testbed up --vm` for VM testbed {self.prefix!r}; "
                  "removed by `napilab testbed down`.\n")
        self.inventory_path.write_text(header + yaml.safe_dump(
            {"transport": "ssh", "hosts": hosts}, sort_keys=False))

    # -- a guest's kernel --------------------------------------------------------------

    def boot(self, name: str, kernel: str | None, append: tuple[str, ...] = (),
             timeout: float = BOOT_TIMEOUT) -> float:
        """Restart guest `name` on `kernel` (None: the one `up` booted it with) with
        `append` added to its command line; seconds until its sshd answered."""
        state = self._load()
        if name not in state.guests:
            raise NapilabError(f"the VM testbed has no guest {name!r} (have: {list(NAMES)})")
        entry = state.guests[name]
        chosen = kernels.find(kernel or entry.original.image)
        spec = replace(_spec_from(entry, self.state / name), image=chosen.image,
                       append=tuple(append))
        guest = Guest(spec)
        guest.stop()
        started = time.time()
        state.guests[name] = _entry(spec, entry.original)
        self._save(state)
        _start(guest)
        _up(guest, started + timeout)
        return time.time() - started

    def revive(self, name: str, timeout: float = BOOT_TIMEOUT) -> bool:
        """Start guest `name` on its original kernel if it is not running (its QEMU
        died, or a boot failed half way); True when it was started."""
        entry = self._load().guests[name]
        spec = _spec_from(entry, self.state / name)
        if Guest(spec).pid() is not None:
            return False
        self.boot(name, None, (), timeout)
        return True

    def console(self, name: str) -> Path:
        """Guest `name`'s console log (GuestSpec.console: every boot of it, appended)."""
        return self.state / name / "console.log"

    def guest_kernel(self, name: str) -> dict[str, Any]:
        """The image and additions guest `name` was last started with, and its original."""
        entry = self._load().guests[name]
        release, version = kernels.read_image(Path(entry.image))
        return {"image": entry.image, "release": release, "version": version,
                "append": list(entry.append), "original": codec.full(entry.original)}

    # -- down / status -----------------------------------------------------------------

    def exists(self) -> bool:
        return self.state.exists() or any(Path(f"/sys/class/net/{self.tap(n)}").exists()
                                          for n in NAMES)

    def down(self) -> None:
        """Stop the guests, remove the taps and the state directory.
        Idempotent; never fails on what is already gone."""
        for name in NAMES:
            stop_guest(self.state / name / "vng.pid")
        for pid in self.stray_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        for dev in (self.tap(n) for n in NAMES):
            if Path(f"/sys/class/net/{dev}").exists():
                _run(["ip", "link", "del", dev], check=False)
        shutil.rmtree(self.state, ignore_errors=True)

    def stray_processes(self) -> list[int]:
        """The guests' own processes left behind (a QEMU whose vng parent was killed
        alone, say): QEMU, virtiofsd or vng whose command line names this testbed's
        state directory. Only those: `napilab run -i STATE/inventory.yaml` names it too,
        and `testbed down` must never kill a controller that is still running."""
        return guest_processes(self.state)

    def status(self) -> dict[str, Any]:
        try:
            state = self._load()
        except (OSError, InputError):
            return {"up": False, "state": str(self.state), "guests": {}}
        guests = {}
        for name, entry in state.guests.items():
            guest = Guest(_spec_from(entry, self.state / name))
            release, _ = kernels.read_image(Path(entry.image))
            guests[name] = {"pid": guest.pid(), "kernel": release, "append": list(entry.append),
                            "ssh": f"root@127.0.0.1:{entry.ssh_port}",
                            "data_address": entry.data_address,
                            "queues": entry.queues, "cpus": entry.cpus, "nic": entry.nic}
        return {"up": all(g["pid"] for g in guests.values()), "accel": state.accel,
                "inventory": str(self.inventory_path),
                "data_link": [self.tap(n) for n in NAMES],
                "guests": guests}

    # -- state -------------------------------------------------------------------------

    def _load(self) -> VmState:
        return codec.read(self.state / "state.json", VmState)

    def _save(self, state: VmState) -> None:
        tmp = self.state / "state.json.tmp"
        tmp.write_bytes(codec.encode(state, indent=1))
        tmp.replace(self.state / "state.json")


def _start(guest: Guest) -> None:
    """The guest's QEMU started with the guest's tap down; `_up` brings the tap up once
    the guest's sshd answers (its init has opened data0 by then). A frame that reached a
    QEMU 7.2 virtio-net with RSS (`virtio-rss`; QEMU steers in software, its eBPF
    steering did not load here) before the guest driver had filled its receive rings
    stopped QEMU reading that tap queue for good: a's pings, sent from one vCPU, went
    unanswered (CI: 1 of 20; here, guest a booted while b sent UDP to it: 4 of 4 boots, 0
    of 4 with a's tap down meanwhile; a's driver bound again under the same traffic: 8 of
    15, 0 of 6). A down tap takes nothing from the peer's redirect, so nothing reaches a
    guest before its rings are filled."""
    _run(["ip", "link", "set", guest.spec.tap, "down"])
    guest.start()


def _up(guest: Guest, deadline: float, attempts: int = 3) -> float:
    """Seconds until the guest's sshd answered (its tap then brought up). A guest that
    dies while booting, or whose console prints nothing for STALL seconds, is started
    again, twice at most:
    under TCG a kernel sometimes oopses while it patches its own code at boot (seen
    here: a fault in sched_clock_idle_wakeup_event on a 7.2 guest, 1 boot in about 15)
    or stalls bringing up its CPUs (a 4-vCPU guest beside a 2-vCPU one on 2 CPUs); the
    console keeps every attempt. A boot still printing is waited for until `deadline`
    (restarting it after a fixed time threw away slow boots that were nearly done)."""
    started = time.time()
    for attempt in range(1, attempts + 1):
        try:
            guest.wait_ssh(deadline, stall=STALL)
            _run(["ip", "link", "set", guest.spec.tap, "up"])
            return time.time() - started
        except (GuestDied, GuestStalled):
            if attempt == attempts or time.time() >= deadline:
                raise
            guest.stop()
            guest.start()
    raise AssertionError("unreachable")


def default_kernel() -> str:
    """The newest generic (not PREEMPT_RT) kernel of the cache."""
    generic = [k for k in kernels.installed() if not k.rt]
    if not generic:
        raise NapilabError(f"no kernel in {kernels.kernel_dir()}",
                           hint="`napilab testbed kernels --fetch` (root, network)")
    return max(generic, key=lambda k: _version_key(k.release)).release


def _version_key(release: str) -> tuple[int, ...]:
    numbers = []
    for part in release.replace("-", ".").replace("+", ".").split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)


class KernelRef(FrozenRecord, frozen=True):
    """A kernel image a guest boots, with what was added to its command line."""

    WHAT = "a guest's kernel"

    image: str
    release: str = ""
    version: str = ""
    append: list[str] = msgspec.field(default_factory=list)


class GuestEntry(FrozenRecord, frozen=True):
    """How one guest was last started (its GuestSpec) and the kernel `up` chose."""

    WHAT = "a VM testbed guest"

    image: str
    cpus: int
    memory: str
    queues: int
    accel: str
    ssh_port: int
    tap: str
    data_address: str
    mac_index: int
    original: KernelRef
    append: list[str] = msgspec.field(default_factory=list)
    nic: str = "virtio"


class VmState(Document):
    """STATE_DIR/state.json of `napilab testbed up --vm`."""

    WHAT = "the VM testbed's state.json"
    VERSION = 1

    prefix: str
    accel: str
    guests: dict[str, GuestEntry] = msgspec.field(default_factory=dict)


def _entry(spec: GuestSpec, original: KernelRef) -> GuestEntry:
    return GuestEntry(image=str(spec.image), append=list(spec.append), cpus=spec.cpus,
                      memory=spec.memory, queues=spec.queues, accel=spec.accel,
                      ssh_port=spec.ssh_port, tap=spec.tap, data_address=spec.data_address,
                      mac_index=spec.mac_index, nic=spec.nic, original=original)


def _spec_from(entry: GuestEntry, home: Path) -> GuestSpec:
    return GuestSpec(name=home.name, image=Path(entry.image), append=tuple(entry.append),
                     cpus=entry.cpus, memory=entry.memory, queues=entry.queues,
                     accel=entry.accel, ssh_port=entry.ssh_port, tap=entry.tap,
                     data_address=entry.data_address, mac_index=entry.mac_index,
                     state=home, nic=entry.nic)


def _kernel_ref(kernel: kernels.Kernel, append: tuple[str, ...]) -> KernelRef:
    return KernelRef(image=str(kernel.image), release=kernel.release,
                     version=kernel.version, append=list(append))


def _disable_ipv6(dev: str) -> None:
    with contextlib.suppress(OSError):
        Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").write_text("1\n")


def _run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run_here(argv, check=check, what="VM testbed", timeout=60)

