"""One QEMU guest of the VM testbed, booted by virtme-ng on a kernel of the cache.

virtme-ng (`vng --run IMAGE`) boots the image with the machine's root file system as
the guest's root (9p, read-only, with tmpfs overlays on /etc, /var, /tmp ...), so the
guest has every program the machine has (sshd, iperf3, ethtool, python3, a neper built
under /tmp) without an image to build; it loads the kernel's modules from the cache
(harness.lab.kernels). What napilab adds through `--qemu-opts`:

- mgmt0: QEMU user networking with `restrict=on` (the guest reaches nothing), one
  forwarded port: 127.0.0.1:PORT on this machine -> the guest's sshd. Its network
  (198.51.100.128/25) exists only inside QEMU.
- data0: a NIC model of NIC_MODELS on one of the testbed's persistent multi-queue taps
  (harness.lab.vmbed): virtio-net with N queue pairs (`mq=on`, MSI-X vectors 2N+2; one
  IRQ and one NAPI instance per queue, `ethtool -l/-L` real), the same with QEMU's RSS
  (`rss=on,hash=on`: `ethtool -x` shows the indirection table), or an emulated real NIC
  whose driver names its queues and IRQs its own way: vmxnet3 (N queue pairs) or e1000e
  (one queue, with rings and ITR).
- /run/napilab-guest (read-only): the guest's init script, sshd config, host key,
  authorized_keys and machine-id; /var/tmp/napilab (read-write, on this machine under
  the guest's state directory): napilab's locks and journals, kept across the guest's
  reboots as a lab host's disk keeps them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from napilab.harness.errors import HostError, NapilabError
from napilab.harness.lab.netns import alive, names, zombie

GUEST_DIR = "/run/napilab-guest"  # where the guest sees its read-only files
MGMT_NET = "198.51.100.128/25"  # QEMU's user network: inside the QEMU process only
MGMT_HOST = "198.51.100.129"
MGMT_DNS = "198.51.100.131"
MGMT_GUEST = "198.51.100.130"
READY = "napilab-guest-ready"


_VNG_HINT = "virtme-ng is installed with napilab's test extras (`make test` does it)"


def vng_path() -> str:
    """virtme-ng's `vng`: beside this Python (napilab's venv), else on PATH."""
    beside = Path(sys.executable).parent / "vng"
    return str(beside) if beside.is_file() else (shutil.which("vng") or "vng")


@dataclass(frozen=True)
class GuestSpec:
    name: str  # host name in the inventory: "a" or "b"
    image: Path
    append: tuple[str, ...]  # kernel command-line additions
    cpus: int
    memory: str
    queues: int
    accel: str  # "tcg" or "kvm"
    ssh_port: int
    tap: str
    data_address: str  # 192.0.2.x/24
    mac_index: int  # distinct per guest and per testbed prefix
    state: Path  # this guest's directory on the machine
    nic: str = "virtio"  # the data NIC's model, one of NIC_MODELS

    @property
    def mgmt_mac(self) -> str:
        return _mac(0, self.mac_index)

    @property
    def data_mac(self) -> str:
        return _mac(1, self.mac_index)

    @property
    def console(self) -> Path:
        return self.state / "console.log"


def _mac(nic: int, index: int) -> str:
    return f"52:54:00:6e:{nic:02x}:{index:02x}"


# The data NIC's QEMU device by model (`{vectors}` and `{mac}` filled in), and whether
# QEMU serves several tap queues with it: virtio-net does; QEMU's vmxnet3 (which shows
# the guest up to one queue pair per vCPU) and e1000e (one queue) read one tap queue,
# and frames the tap puts on its other queues were lost (a vmxnet3 guest on a 4-queue
# tap here: one ping answered, then none of 3 pings nor of a flood's 10 requests), so
# theirs is opened with one (then 20 of 20 answered).
NIC_MODELS = {
    "virtio": ("virtio-net-pci,netdev=data,mq=on,vectors={vectors},mac={mac}", True),
    "virtio-rss": ("virtio-net-pci,netdev=data,mq=on,vectors={vectors},rss=on,hash=on,"
                   "mac={mac}", True),
    "vmxnet3": ("vmxnet3,netdev=data,mac={mac}", False),
    "e1000e": ("e1000e,netdev=data,mac={mac}", False),
}
# each model's driver in the guest, loaded by its init script (the guests' udev loads
# no module: UDEV_RULES)
NIC_DRIVERS = {"virtio": "virtio_net", "virtio-rss": "virtio_net", "vmxnet3": "vmxnet3",
               "e1000e": "e1000e"}


def qemu_opts(spec: GuestSpec) -> list[str]:
    """The NICs, as QEMU options (`vng --qemu-opts`); under TCG, one host thread for all
    of a guest's vCPUs (`thread=single`): with a thread per vCPU, a kernel that patches
    its own code while another vCPU runs it (a static key flipped: RPS switched on, at
    boot) was seen to crash here on torn instructions (7.2-rt in
    netif_receive_skb_list_internal, 7.2 in sched_clock_idle_wakeup_event)."""
    vectors = 2 * spec.queues + 2
    device, multi = NIC_MODELS[spec.nic]
    single = ["-accel", "tcg,thread=single"] if spec.accel == "tcg" else []
    return [*single,
        "-netdev", f"user,id=mgmt,restrict=on,ipv6=off,net={MGMT_NET},host={MGMT_HOST},"
                   f"dns={MGMT_DNS},hostfwd=tcp:127.0.0.1:{spec.ssh_port}-{MGMT_GUEST}:22",
        "-device", f"virtio-net-pci,netdev=mgmt,mac={spec.mgmt_mac}",
        "-netdev", f"tap,id=data,ifname={spec.tap},script=no,downscript=no,"
                   f"queues={spec.queues if multi else 1},vhost=off",
        "-device", device.format(vectors=vectors, mac=spec.data_mac),
    ]


# Drivers of the q35 machine's own devices (AHCI and its DVD drive, the SMBus, the
# watchdogs, the PC speaker, the mouse) and of KVM, which udev's coldplug with the
# machine's rules loads at every boot and no test uses: kept from loading by alias (an
# explicit `modprobe` still loads one). With the machine's rules (a guest started
# without its own, UDEV_RULES: not as root), a guest then answers SSH in 18 s instead
# of 25 s here (udev settles 6 s after its trigger instead of 18 s).
UNUSED_MODULES = ("ahci", "libahci", "libata", "sr_mod", "cdrom", "sg", "scsi_mod",
                  "i2c_i801", "i2c_smbus", "lpc_ich", "i6300esb", "iTCO_wdt",
                  "intel_pmc_bxt", "watchdog", "pcspkr", "psmouse", "serio_raw", "evdev",
                  "kvm_amd", "kvm_intel", "kvm", "ccp", "irqbypass", "aesni_intel",
                  "gf128mul", "qemu_fw_cfg", "button", "powernow_k8", "acpi_cpufreq")


def vng_argv(spec: GuestSpec, vng: str = "vng") -> list[str]:
    argv = [vng, "--run", str(spec.image), "--cpus", str(spec.cpus), "--memory", spec.memory,
            "--name", spec.name, "--verbose", "--force-9p",
            f"--rodir={GUEST_DIR}={spec.state / 'guest'}",
            f"--rwdir=/var/tmp/napilab={spec.state / 'var-tmp-napilab'}",
            "--qemu-opts=" + shlex.join(qemu_opts(spec)),
            "--exec", f"sh {GUEST_DIR}/init.sh"]
    if spec.accel == "tcg":
        argv.insert(1, "--disable-kvm")
    argv += ["--append", "modprobe.blacklist=" + ",".join(UNUSED_MODULES)]
    for extra in spec.append:
        argv += ["--append", extra]
    return argv


# The guests' udev has one rule: the /dev/virtio-ports names virtme-ng's init runs its
# script through (without them it runs it on the console, and as PID 1 then reaps no
# orphan: a perf stat a snapshot started stayed a zombie, and the next snapshot waited
# its 5 s for it). The guest's QEMU runs in a mount namespace of its own in which every
# rules directory udev reads is a directory holding that rule, so the coldplug loads no
# module and runs no program; the init script loads the NICs' drivers (NIC_DRIVERS).
# udev's coldplug took 8.7 s of a guest's 16.5 s boot here with the machine's rules
# (guest clock, TCG; a trigger and settle again: 7.5 s, 1.7 s with no rule). The
# machine's own mounts are not touched: the namespace is private and ends with the
# guest's processes.
UDEV_RULES_DIRS = ("/etc/udev/rules.d", "/usr/local/lib/udev/rules.d", "/usr/lib/udev/rules.d",
                   "/lib/udev/rules.d")
UDEV_RULES = {"50-napilab-virtme-ports.rules":
              'SUBSYSTEM=="virtio-ports", KERNEL=="vport*", ATTR{name}=="?*", '
              'SYMLINK+="virtio-ports/$attr{name}"\n'}
_WITH_RULES = ('r=$1; shift; while [ "$1" != -- ]; do mount --bind "$r" "$1" || '
               'echo "napilab: the machine\'s udev rules stay in the guest"; shift; done; '
               'shift; exec "$@"')


def with_udev_rules(argv: list[str], rules: Path) -> list[str]:
    """ARGV run in a private mount namespace in which every udev rules directory is
    RULES (UDEV_RULES written there); as root, where `unshare` is, else ARGV as it is."""
    unshare = shutil.which("unshare")
    targets = sorted({os.path.realpath(d) for d in UDEV_RULES_DIRS if os.path.isdir(d)})
    if os.geteuid() != 0 or unshare is None or not targets:
        return argv
    rules.mkdir(parents=True, exist_ok=True)
    for name, text in UDEV_RULES.items():
        (rules / name).write_text(text)
    return [unshare, "--mount", "--propagation", "private", "sh", "-c", _WITH_RULES, "sh",
            str(rules), *targets, "--", *argv]


def init_script(spec: GuestSpec) -> str:
    """What the guest runs once booted (as root): its identity, its NICs named by MAC,
    addresses, then sshd in the foreground (the guest lives as long as sshd does)."""
    return "\n".join([
        "#!/bin/sh",
        "# written by `napilab testbed up --vm`; runs inside the guest",
        "set -eu",
        f"G={GUEST_DIR}",
        "cat $G/machine-id > /etc/machine-id",
        "# virtme-ng locks every account ('!'), which sshd refuses even for a key",
        "sed 's/^root:[^:]*:/root:*:/' /etc/shadow > /run/napilab-shadow",
        "cat /run/napilab-shadow > /etc/shadow && rm /run/napilab-shadow",
        "# root's shell: sh, so that no login rc file (pyenv's, say) runs per command",
        "awk -F: -v OFS=: '$1 == \"root\" {$7 = \"/bin/sh\"} 1' /etc/passwd > /run/napilab-passwd",
        "cat /run/napilab-passwd > /etc/passwd && rm /run/napilab-passwd",
        f"modprobe -a virtio_net {NIC_DRIVERS[spec.nic]}",
        "for dev in /sys/class/net/*; do",
        '  case "$(cat "$dev/address")" in',
        f'    {spec.mgmt_mac}) ip link set "${{dev##*/}}" name mgmt0 ;;',
        f'    {spec.data_mac}) ip link set "${{dev##*/}}" name data0 ;;',
        "  esac",
        "done",
        "ip link set lo up",
        f"ip addr add {MGMT_GUEST}/25 dev mgmt0",
        "ip link set mgmt0 up",
        f"ip addr add {spec.data_address} dev data0",
        "ip link set data0 up",
        "# tracefs, as a lab host's systemd mounts it (the trace collector's bpftrace)",
        "[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing "
        "|| true",
        "mkdir -p -m 0755 /run/sshd",
        f'echo "{READY} $(uname -r)"',
        "exec /usr/sbin/sshd -D -e -f $G/sshd_config",
        "",
    ])


SSHD_CONFIG = "\n".join([
    "ListenAddress 0.0.0.0", "Port 22", f"HostKey {GUEST_DIR}/ssh_host_ed25519_key",
    f"AuthorizedKeysFile {GUEST_DIR}/authorized_keys", "PermitRootLogin prohibit-password",
    "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
    "StrictModes no", "PrintMotd no", "MaxSessions 64", "MaxStartups 64:30:128",
    "LogLevel ERROR", "",
])


class GuestDied(HostError):
    """The guest's QEMU exited before its sshd answered (a kernel panic, say)."""


class GuestStalled(HostError):
    """The guest's console printed nothing for a while and its sshd does not answer."""


class Guest:
    """A running (or stopped) guest: the vng process group it was started as."""

    def __init__(self, spec: GuestSpec) -> None:
        self.spec = spec

    @property
    def pidfile(self) -> Path:
        return self.spec.state / "vng.pid"

    def pid(self) -> int | None:
        """The guest's vng, or while any process of the guest runs without it (a QEMU
        whose vng exited or whose pid file was lost), that process: running is what
        holds its SSH port and its tap."""
        try:
            pid = int(self.pidfile.read_text())
        except (OSError, ValueError):
            pid = None
        if pid is not None and alive(pid) and names(pid, self.spec.state):
            return pid
        left = guest_processes(self.spec.state)
        return left[0] if left else None

    def start(self) -> None:
        """Start the guest; whatever is left of an earlier start is stopped first (a
        second QEMU could not forward the SSH port the first one holds, and would answer
        for a kernel that is not the one asked for)."""
        stop_guest(self.pidfile)
        left = guest_processes(self.spec.state)
        if left:
            raise HostError(f"guest {self.spec.name}: processes {left} of an earlier start "
                            "did not exit", hint="`napilab testbed down` removes the testbed")
        vng = vng_path()
        if shutil.which(vng) is None:
            raise NapilabError(f"{vng} not found", hint=_VNG_HINT)
        argv = with_udev_rules(vng_argv(self.spec, vng), self.spec.state / "udev-rules")
        # vng runs virtme-run through the shell: the venv's bin directory goes first
        env = {**os.environ, "PATH": f"{Path(vng).parent}:{os.environ.get('PATH', '')}"}
        with open(self.spec.console, "ab") as console:
            console.write(f"--- napilab: {shlex.join(argv)}\n".encode())
            console.flush()
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console,
                                        stderr=subprocess.STDOUT, start_new_session=True,
                                        env=env, cwd="/")  # the guest's command line
                # names vng's working directory (virtme_chdir): the same for every boot
            except FileNotFoundError:
                raise NapilabError(f"{argv[0]} not found", hint=_VNG_HINT) from None
        self.pidfile.write_text(str(proc.pid))

    def wait_ssh(self, deadline: float, stall: float | None = None) -> float:
        """Seconds until the guest's sshd answers with its banner on the forwarded port;
        an error with the console's last lines if the guest dies, the deadline passes
        or (with `stall`) its console has printed nothing for `stall` seconds
        (GuestStalled: a boot that hangs, not one that is slow)."""
        start = last_progress = time.time()
        seen = self._console_size()
        while time.time() < deadline:
            if self.pid() is None:
                raise GuestDied(f"guest {self.spec.name} exited while booting: "
                                + self.console_tail())
            if _banner(self.spec.ssh_port):
                return time.time() - start
            size = self._console_size()
            if size != seen:
                seen, last_progress = size, time.time()
            elif stall is not None and time.time() - last_progress > stall:
                raise GuestStalled(f"guest {self.spec.name}: no SSH and nothing on its "
                                   f"console for {stall:.0f}s: " + self.console_tail())
            time.sleep(0.5)
        raise HostError(f"guest {self.spec.name}: no SSH within {deadline - start:.0f}s: "
                        + self.console_tail())

    def _console_size(self) -> int:
        try:
            return self.spec.console.stat().st_size
        except OSError:
            return -1

    def console_tail(self, lines: int = 8) -> str:
        try:
            text = self.spec.console.read_text(errors="replace")
        except OSError:
            return "(no console log)"
        return " / ".join(ln.strip() for ln in text.splitlines()[-lines:] if ln.strip())

    def stop(self, timeout: float = 10) -> None:
        stop_guest(self.pidfile, timeout)


def stop_guest(pidfile: Path, timeout: float = 10) -> None:
    """The process group a guest was started as (vng and its QEMU): TERM, then KILL;
    the pidfile goes. Only a group one of whose processes names the guest's directory
    (vng's and QEMU's command lines do): the pid of a guest that died may since have
    become another process's, and another session's group."""
    try:
        pid: int | None = int(pidfile.read_text())
    except (OSError, ValueError):
        pid = None
    if pid is not None and not any(names(p, pidfile.parent) for p in group_members(pid)):
        pid = None
    deadline = time.time() + timeout
    if pid is not None and _group_alive(pid):
        _signal_group(pid, signal.SIGTERM)
        while time.time() < deadline and _group_alive(pid):
            time.sleep(0.1)
        if _group_alive(pid):
            _signal_group(pid, signal.SIGKILL)
            while _group_alive(pid) and time.time() < deadline + 5:
                time.sleep(0.1)
    # the guest's processes outside that group (its pid file overwritten or lost): the
    # same, one by one
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = guest_processes(pidfile.parent)
        for stray in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(stray, sig)
        # a KILLed QEMU takes its memory and its 9p and tap file descriptors down first:
        # 5 s was too short once on a loaded machine (a clean clone's make test)
        end = max(deadline, time.time() + 5) if sig == signal.SIGTERM else time.time() + 30
        while left and time.time() < end:
            time.sleep(0.1)
            left = guest_processes(pidfile.parent)
    with contextlib.suppress(OSError):
        pidfile.unlink()


_GUEST_PROGRAMS = (b"vng", b"virtme-ng", b"virtme-run", b"virtme-ng-init")


def guest_processes(directory: Path) -> list[int]:
    """The processes of the guests whose state is under `directory` (a guest's, or the
    testbed's): QEMU, virtiofsd or vng whose command line names it. Only those: `napilab
    run -i STATE/inventory.yaml` names a testbed's state too, and must never be killed."""
    named = re.compile(re.escape(str(directory).rstrip("/").encode()) + rb"(?=[/\0,:=]|$)")
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if named.search(b"\0".join(argv)) and _guest_process(argv) \
                        and not zombie(int(entry.name)):
                    out.append(int(entry.name))
    return out


def _guest_process(argv: list[bytes]) -> bool:
    """A process a guest is made of: QEMU or virtiofsd, or vng or virtme-run (Python
    scripts: the path is argv[0] or, run by an interpreter, argv[1]; or the command of
    the shell vng runs virtme-run with)."""
    program = os.path.basename(argv[0]) if argv else b""
    if program.startswith((b"qemu-system-", b"virtiofsd")):
        return True
    if program in (b"sh", b"dash", b"bash") and argv[1:2] == [b"-c"] and len(argv) > 2:
        argv = argv[2].split()[:1]  # vng's `sh -c 'virtme-run ...'`
    return any(os.path.basename(a) in _GUEST_PROGRAMS for a in argv[:2])


def _banner(port: int) -> bool:
    """An SSH server answers on 127.0.0.1:port (QEMU's forwarder accepts a connection
    before the guest listens, then closes it: only the banner tells)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.settimeout(3)
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def group_members(pgid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def kvm_works(image: Path, timeout: float = 20) -> bool:
    """Whether a KVM guest gets as far as the kernel's first message: on some machines
    /dev/kvm exists but every guest dies at once ("KVM internal error ... emulation
    failure" in the decompressor)."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".serial") as serial:
        argv = ["qemu-system-x86_64", "-accel", "kvm", "-m", "256", "-nodefaults",
                "-display", "none", "-no-reboot", "-kernel", str(image), "-append",
                "console=ttyS0 earlyprintk=serial panic=-1", "-serial", f"file:{serial.name}"]
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except FileNotFoundError:
            return False
        assert proc.stderr is not None
        os.set_blocking(proc.stderr.fileno(), False)
        deadline = time.time() + timeout
        errors = b""
        try:
            while time.time() < deadline and proc.poll() is None:
                if b"Linux version" in Path(serial.name).read_bytes():
                    return True
                errors += proc.stderr.read() or b""
                if b"KVM internal error" in errors:
                    return False
                time.sleep(0.2)
            return b"Linux version" in Path(serial.name).read_bytes()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stderr.close()
