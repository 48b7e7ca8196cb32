"""The kernel a host runs, as a knob: read as `uname -r`, `uname -v` and /proc/cmdline,
written by booting the host into another kernel (the profile's `kernel:` section,
harness.profile.kernel; the inventory's `boot:` says how).

One item per host, key `running`. Values are JSON, so that the original is bootable
again from the journal alone:

    running (read):  {"release": R, "version": V, "cmdline": C}
    a target:        {"image": PATH, "release": R, "version": V, "append": [...]}
                     (the original also has "cmdline": the command line to boot back with)

A target is taken when the host came up with its release and version (the image's own
banner, read from the bzImage header) and every `append` word is on its command line;
a host that came up on anything else means the kernel did not take it. Boot methods
(inventory `boot.method`):

- vm: a guest of the VM testbed (harness.lab.vmbed), restarted on the image by the
  controller;
- kexec: `kexec -l IMAGE --initrd=... --command-line=...`, then `systemctl kexec`
  (`kexec -e` where there is no systemd); the command line is the host's own (as the
  run found it) plus `append`;
- grub-reboot: a one-time GRUB entry for /boot/vmlinuz-RELEASE, then a reboot;
- bootctl: a one-time systemd-boot entry (`bootctl set-oneshot`), then a reboot.

The last two boot an entry as the boot loader has it: `append` needs kexec or vm. A
target without an image (`kernel: {ROLE: {append: [...]}}`) is the image the host runs,
booted again with the words added (`BootMethod.own`); restore boots it back with its
own command line, which the read back of /proc/cmdline then matches exactly. After
the boot, the host is waited for until it answers over SSH with a new boot_id (inventory
`boot.timeout`). The engine boots; restore (the run's end, `napilab restore`) boots
back into the original.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import Sequence
from typing import Any

from napilab.harness.errors import HostError, NapilabError
from napilab.harness.knobs.backend import Backend, Command, read_files, tail_argv
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting, Verdict
from napilab.runners.base import HOST_PYTHON

KEY = "running"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
RUNNING = ("/proc/sys/kernel/osrelease", "/proc/sys/kernel/version", "/proc/cmdline")
# A bzImage's banner (harness.lab.kernels.image_banner), read on the host (kexec).
_BANNER = [*HOST_PYTHON, "-c", (
    "import sys\nd = open(sys.argv[1], 'rb').read(65536)\n"
    "assert d[0x202:0x206] == b'HdrS', 'not a bzImage'\n"
    "s = int.from_bytes(d[0x20E:0x210], 'little') + 0x200\n"
    "print(d[s:d.index(b'\\0', s)].decode())"), ]
_REBOOT_LATER = ["sh", "-c", 'nohup sh -c "sleep 1; $1" >/dev/null 2>&1 &', "napilab-reboot"]
_DROPPED = ("BOOT_IMAGE=", "initrd=")  # the boot loader's words, not the kernel's
CONTROLLER = "(controller)"  # a command of a boot method run on this machine, not the host


def dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def loads(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise HostError(f"not a kernel value napilab wrote: {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise HostError(f"not a kernel value napilab wrote: {text[:80]!r}")
    return value


def describe(text: str) -> str:
    """A kernel value as reports show it: `RELEASE (VERSION)` and what was appended."""
    try:
        value = loads(text)
    except HostError:
        return text
    out = f"{value.get('release', '?')} ({value.get('version', '?')})"
    if value.get("append"):
        out += " + " + " ".join(value["append"])
    return out


def split_banner(banner: str) -> tuple[str, str]:
    from napilab.harness.lab.kernels import split_banner as split

    return split(banner)


def own_cmdline(cmdline: str, append: Sequence[str] = ()) -> str:
    """A host's command line without its boot loader's words, plus `append`."""
    words = [w for w in cmdline.split() if not w.startswith(_DROPPED)]
    return " ".join([*words, *[w for w in append if w not in words]])


class BootMethod:
    """How one kind of host is booted into a target (inventory `boot.method`)."""

    name = ""
    takes_append = True

    def __init__(self, backend: BootBackend) -> None:
        self.backend = backend

    @property
    def transport(self) -> Any:
        return self.backend.transport

    def resolve(self, image: str, append: Sequence[str]) -> dict[str, Any]:
        """The target of a profile's `image` (+ `append`), with its release and version."""
        raise NotImplementedError

    def original(self, running: dict[str, Any]) -> dict[str, Any]:
        """The target that boots the host back into what it runs now."""
        return {"release": running["release"], "version": running["version"],
                "cmdline": running["cmdline"], "append": []}

    def own(self, running: dict[str, Any], append: Sequence[str]) -> dict[str, Any]:
        """The target that boots the image the host runs (`running`, as read) again,
        with `append` added to its command line: taken when the host comes up on the
        same release and version with every word on /proc/cmdline."""
        if not self.takes_append:
            raise HostError(f"{self.backend.host}: boot method {self.name} boots an entry "
                            "as the boot loader has it: `append` needs method kexec (or vm)")
        target = self.original(running)
        del target["cmdline"]  # the command line is the host's own plus `append`
        return {**target, "append": list(append)}

    def commands(self, target: dict[str, Any]) -> list[Command]:
        """What booting into `target` runs on the host (napilab plan shows it)."""
        raise NotImplementedError

    def boot(self, target: dict[str, Any]) -> None:
        for command in self.commands(target):
            self.transport.run(command.argv, stdin=command.stdin, timeout=120)


class VmBoot(BootMethod):
    """A VM testbed guest: the controller restarts its QEMU on the image."""

    name = "vm"

    def _bed(self) -> Any:
        from napilab.harness.lab.vmbed import VmTestbed

        boot = self.backend.boot
        return VmTestbed(state_dir=boot.testbed)

    def resolve(self, image: str, append: Sequence[str]) -> dict[str, Any]:
        from napilab.harness.lab import kernels

        kernel = kernels.find(image)
        return {"image": str(kernel.image), "release": kernel.release,
                "version": kernel.version, "append": list(append)}

    def original(self, running: dict[str, Any]) -> dict[str, Any]:
        boot = self.backend.boot
        first = self._bed().guest_kernel(boot.guest)["original"]
        return {**super().original(running), "image": first["image"]}

    def commands(self, target: dict[str, Any]) -> list[Command]:
        boot = self.backend.boot
        words = [f"--append={w}" for w in target.get("append", [])]
        return [Command([CONTROLLER, "napilab", "testbed", "boot", str(boot.guest),
                         f"--state={boot.testbed}",
                         f"--kernel={target.get('image', '<its own>')}", *words])]

    def boot(self, target: dict[str, Any]) -> None:
        boot = self.backend.boot
        self._bed().boot(boot.guest, target.get("image"), tuple(target.get("append", [])),
                         timeout=boot.timeout)


class KexecBoot(BootMethod):
    name = "kexec"

    def resolve(self, image: str, append: Sequence[str]) -> dict[str, Any]:
        path = image if "/" in image else f"/boot/vmlinuz-{image}"
        result = self.transport.run([*_BANNER, path], check=False)
        if result.exit_code != 0:
            raise HostError(f"{self.backend.host}: cannot read the kernel image {path}: "
                            + (result.stderr.strip().splitlines() or ["?"])[-1])
        release, version = split_banner(result.stdout.strip())
        initrd = f"/boot/initrd.img-{release}"
        has_initrd = self.transport.run(["test", "-f", initrd], check=False).exit_code == 0
        return {"image": path, "release": release, "version": version,
                "append": list(append), **({"initrd": initrd} if has_initrd else {})}

    def original(self, running: dict[str, Any]) -> dict[str, Any]:
        target = self.resolve(running["release"], ())
        return {**target, "cmdline": own_cmdline(running["cmdline"])}

    def commands(self, target: dict[str, Any]) -> list[Command]:
        cmdline = target.get("cmdline") or own_cmdline(self.backend.first_cmdline(),
                                                        target.get("append", []))
        load = ["kexec", "-l", target["image"], f"--command-line={cmdline}"]
        if target.get("initrd"):
            load.insert(3, f"--initrd={target['initrd']}")
        return [Command(load), Command([*_REBOOT_LATER, "systemctl kexec || kexec -e"])]


class GrubReboot(BootMethod):
    name = "grub-reboot"
    takes_append = False
    GRUB_CFG = "/boot/grub/grub.cfg"

    def resolve(self, image: str, append: Sequence[str]) -> dict[str, Any]:
        release = image.rpartition("vmlinuz-")[2] if "/" in image else image
        cfg = read_files(self.transport, [self.GRUB_CFG])[self.GRUB_CFG]
        entry = grub_entry(cfg, release)
        if entry is None:
            raise HostError(f"{self.backend.host}: no GRUB entry boots /boot/vmlinuz-{release}"
                            f" (in {self.GRUB_CFG})")
        return {"release": release, "version": "", "entry": entry, "append": list(append)}

    def commands(self, target: dict[str, Any]) -> list[Command]:
        if "entry" not in target:  # back to the default entry
            return [Command([*_REBOOT_LATER, "systemctl reboot || reboot"])]
        return [Command(["grub-reboot", target["entry"]]),
                Command([*_REBOOT_LATER, "systemctl reboot || reboot"])]


class Bootctl(BootMethod):
    name = "bootctl"
    takes_append = False

    def resolve(self, image: str, append: Sequence[str]) -> dict[str, Any]:
        release = image.rpartition("vmlinuz-")[2] if "/" in image else image
        listing = self.transport.run(["bootctl", "list", "--json=short", "--no-pager"])
        try:
            entries = json.loads(listing.stdout)
        except json.JSONDecodeError:
            raise HostError(f"{self.backend.host}: `bootctl list` is not JSON") from None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and release in (str(entry.get("version", "")),
                                                       str(entry.get("linux", ""))
                                                       .rpartition("vmlinuz-")[2]):
                return {"release": release, "version": "", "entry": str(entry["id"]),
                        "append": list(append)}
        raise HostError(f"{self.backend.host}: no systemd-boot entry for {release}")

    def commands(self, target: dict[str, Any]) -> list[Command]:
        if "entry" not in target:
            return [Command([*_REBOOT_LATER, "systemctl reboot"])]
        return [Command(["bootctl", "set-oneshot", target["entry"]]),
                Command([*_REBOOT_LATER, "systemctl reboot"])]


METHODS: dict[str, type[BootMethod]] = {m.name: m for m in (VmBoot, KexecBoot, GrubReboot,
                                                             Bootctl)}


def grub_entry(cfg: str, release: str) -> str | None:
    """The `grub-reboot` name (`SUBMENU_ID>ENTRY_ID`, or `ENTRY_ID` at the top level) of
    grub.cfg's first non-recovery entry whose `linux` line boots /boot/vmlinuz-RELEASE."""
    submenus: list[tuple[int, str]] = []  # (depth inside it, id)
    depth, entry = 0, ""
    for raw in cfg.splitlines():
        line = raw.strip()
        if line.startswith(("submenu ", "menuentry ")):
            words = shlex.split(line.rstrip("{").strip())
            ids = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "$menuentry_id_option"]
            if words[0] == "submenu":
                submenus.append((depth + 1, ids[0] if ids else words[1]))
            else:
                entry = ids[0] if ids and "recovery" not in line else ""
        elif line.startswith("linux") and entry:
            words = line.split()
            if len(words) > 1 and words[1].endswith(f"vmlinuz-{release}"):
                inside = [sid for d, sid in submenus if d <= depth]
                return ">".join([*inside, entry])
        depth += line.count("{") - line.count("}")
        submenus = [(d, sid) for d, sid in submenus if d <= depth]
    return None


class BootBackend(Backend):
    """Key `running`. Reading asks the kernel; writing boots the host (and waits for it)."""

    name = "boot"
    survives_reboot = True

    def __init__(self, transport: Any, boot: Any = None) -> None:
        super().__init__(transport)
        self._first_cmdline: str | None = None
        self._boot = boot  # `napilab plan`'s: the inventory's boot of the host

    @classmethod
    def for_plan(cls, boot: Any) -> BootBackend:
        backend = cls(None, boot)
        backend._first_cmdline = "<its command line>"
        return backend

    def planned_commands(self, image: str | None, append: Sequence[str]) -> list[Command]:
        """What booting into `image` (None: the image the host runs, with `append` if
        any) runs, as `napilab plan` shows it: the VM testbed's image is found on this
        machine, a lab host's named as the method finds it."""
        if image is None:  # the image the host runs: booted back, or again with `append`
            own: dict[str, Any] = {"image": "<its own>"}
            own.update({"append": list(append)} if append else
                       {"cmdline": "<its command line>"})
            if self.boot.method == "kexec":
                own["image"] = "/boot/vmlinuz-<its release>"
            return self.method().commands(own if self.boot.method in ("vm", "kexec") else {})
        target: dict[str, Any] = {"image": image, "append": list(append)}
        if self.boot.method == "vm":
            with contextlib.suppress(NapilabError):
                target = self.method().resolve(image, append)
        elif self.boot.method == "kexec" and "/" not in image:
            target["image"] = f"/boot/vmlinuz-{image}"
        else:
            target["entry"] = f"<the entry of {image}>"
        return self.method().commands(target)

    @property
    def boot(self) -> Any:
        boot = self._boot or self.transport.host.boot
        if boot is None:
            raise HostError(f"{self.host} has no `boot:` in the inventory: napilab cannot "
                            "boot it into another kernel")
        return boot

    def method(self) -> BootMethod:
        return METHODS[self.boot.method](self)

    def remember_cmdline(self, cmdline: str) -> None:
        """The command line the host had when the run found it, which kexec boots each
        image with (plus `append`): a backend is made again after each boot, and the
        command line it would read then may carry another variant's words."""
        self._first_cmdline = cmdline

    def first_cmdline(self) -> str:
        if self._first_cmdline is None:
            self._first_cmdline = loads(self.read([KEY])[KEY])["cmdline"]
        return self._first_cmdline

    def read_argvs(self, keys: Sequence[str]) -> list[list[str]]:
        return [tail_argv(list(RUNNING))]

    def read(self, keys: Sequence[str]) -> dict[str, str]:
        files = read_files(self.transport, list(RUNNING))
        value = dumps({"release": files[RUNNING[0]], "version": files[RUNNING[1]],
                       "cmdline": files[RUNNING[2]]})
        if self._first_cmdline is None:
            self._first_cmdline = files[RUNNING[2]]
        return {k: value for k in keys}

    def write_command(self, key: str, value: str) -> Command:
        commands = self.method().commands(loads(value))
        return commands[-1]

    def write(self, key: str, value: str) -> None:
        target = loads(value)
        method = self.method()
        if target.get("append") and not method.takes_append:
            raise HostError(f"{self.host}: boot method {method.name} boots an entry as the "
                            "boot loader has it: `append` needs method kexec (or vm)")
        before = self._boot_id()
        if "image" not in target and "entry" not in target and "cmdline" in target:
            target = method.original(target)  # a journalled original: boot back into it
        method.boot(target)
        self._wait(before)

    def _boot_id(self) -> str:
        return str(read_files(self.transport, [BOOT_ID])[BOOT_ID])

    def _wait(self, before: str) -> None:
        """Until the host answers with another boot_id (the old system may still be up
        for a moment after the command that reboots it)."""
        deadline = time.time() + float(self.boot.timeout)
        last = "no answer"
        while time.time() < deadline:
            try:
                now = self._boot_id()
            except NapilabError as exc:
                last = exc.message
                time.sleep(2)
                continue
            if now != before:
                return
            last = "the same boot_id: it has not rebooted yet"
            time.sleep(2)
        raise HostError(f"{self.host}: not back within {self.boot.timeout:.0f}s after the boot "
                        f"({last})", hint="`napilab restore -i INVENTORY` boots it back "
                        "into its own kernel once it answers")


def runs(running: dict[str, Any], target: dict[str, Any]) -> bool:
    """`running` (what the host reads) is `target`: its release and, where known, its
    version, and its command line exactly (a target with one, the original) or with
    every `append` word on it."""
    if running.get("release") != target.get("release"):
        return False
    if target.get("version") and running.get("version") != target.get("version"):
        return False
    if "cmdline" in target:
        return own_cmdline(running.get("cmdline", "")) == own_cmdline(target["cmdline"])
    words = str(running.get("cmdline", "")).split()
    return all(w in words for w in target.get("append", []))


class Kernel(Kind):
    """Settings of this kind come from the profile's `kernel:` section, not `setup:`;
    the engine applies them (harness.engine.boots)."""

    name = "kernel"
    backend = BootBackend

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(KEY, "kernel", setting.value)]

    def verdict(self, key: str, requested: str, effective: str) -> Verdict:
        taken = runs(loads(effective), loads(requested))
        return Verdict("taken" if taken else "mismatch", self.shown(requested),
                       self.shown(effective))

    def same(self, key: str, a: str, b: str) -> bool:
        """The host runs what the other value asks for (restore and a switch between
        kernels boot only when it does not)."""
        first, second = loads(a), loads(b)
        if "image" in first or "entry" in first or "cmdline" not in first:
            first, second = second, first
        return runs(first, second)

    def plan_original(self, item: Item) -> str:
        return "<the kernel the run started on>"

    def shown(self, value: str) -> str:
        """Release and version, what was appended, and a command line in full only
        where the profile did not set it (a running kernel, an original)."""
        text = describe(value)
        try:
            cmdline = loads(value).get("cmdline")
        except HostError:
            return text
        return f"{text}, command line {own_cmdline(cmdline)!r}" if cmdline else text
