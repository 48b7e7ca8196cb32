"""`kernel: {ROLE: {append: [...]}}` without an image: the image the host runs, booted
again with extra command-line words (kexec, or vm), planned, read back from
/proc/cmdline and restored by booting back without them. The boots go through the
engine's Boots and the kernel kind's backend against a scripted kexec host that boots
what `kexec -l` loaded; the values it starts from are a Debian host's (release,
`uname -v`, a command line with the boot loader's BOOT_IMAGE)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from napilab.harness.engine.boots import Boots
from napilab.harness.engine.plan_render import plan_text
from napilab.harness.errors import HostError, InputError, SettingMismatch
from napilab.harness.hosts.session import HostSession
from napilab.harness.inventory.inventory import Boot, load_inventory
from napilab.harness.knobs.kinds import kernel
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from napilab.harness.transport.transport import CommandResult
from tests.fakes import FakeHost, FakeTransport
from tests.unit.test_kernel_axis import bound, problems

RELEASE = "7.2.13+deb14-amd64"
VERSION = "#1 SMP PREEMPT_DYNAMIC Debian 7.2.13-1 (2026-10-01)"
CMDLINE = f"BOOT_IMAGE=/boot/vmlinuz-{RELEASE} root=UUID=3f7c ro quiet"
OWN_APPEND = """\
variants:
  as-is: {}
  polling: {kernel: {receiver: {append: [idle=poll, "intel_idle.max_cstate=0"]}}}
"""


class KexecHost(FakeTransport):
    """A lab host booted by kexec: `kexec -l` loads an image with a command line, the
    delayed `systemctl kexec` boots it (a new boot_id, /proc/cmdline exactly the loaded
    line, the image's release and version)."""

    def __init__(self) -> None:
        super().__init__(FakeHost({"/proc/sys/kernel/osrelease": f"{RELEASE}\n",
                                   "/proc/sys/kernel/version": f"{VERSION}\n",
                                   "/proc/cmdline": f"{CMDLINE}\n",
                                   kernel.BOOT_ID: "boot-0\n"}), name="b")
        self.host = type(self.host)(name="b", transport="local", boot=Boot("kexec"))
        self.loaded: list[str] = []
        self.boots: list[str] = []

    def run(self, argv: Sequence[str], *, timeout: float = 60.0,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult:
        if argv[0] == "python3":  # the bzImage banner of /boot/vmlinuz-RELEASE
            assert argv[-1] == f"/boot/vmlinuz-{RELEASE}"
            return self._result(argv, 0, f"{RELEASE} (debian-kernel@lists.debian.org) "
                                f"{VERSION}\n")
        if argv[0] == "test":
            return self._result(argv, 0 if argv[-1] == f"/boot/initrd.img-{RELEASE}" else 1)
        if argv[0] == "kexec":
            self.loaded.append(argv[-1].removeprefix("--command-line="))
            return self._result(argv)
        if argv[:1] == ["sh"] and argv[3] == "napilab-reboot":
            self.boots.append(self.loaded[-1])
            self.fake.files["/proc/cmdline"] = self.loaded[-1] + "\n"
            self.fake.files[kernel.BOOT_ID] = f"boot-{len(self.boots)}\n"
            return self._result(argv)
        return super().run(argv, timeout=timeout, env=env, stdin=stdin, check=check)


def boots_on(tmp_path: Path, host: KexecHost) -> tuple[Any, Boots]:
    plan = bound(tmp_path, OWN_APPEND)
    return plan, Boots(plan, {"b": HostSession(host)}, "r1", lambda line: None)


def test_plan_boots_the_running_image_with_the_words(tmp_path: Path) -> None:
    text = plan_text(bound(tmp_path, OWN_APPEND))
    assert ("kexec -l '/boot/vmlinuz-<its release>' '--command-line=<its command line> "
            "idle=poll intel_idle.max_cstate=0'") in text
    assert "~ kernel: its own -> its own image + idle=poll intel_idle.max_cstate=0" in text


def test_append_boots_the_same_image_reads_cmdline_and_boots_back(tmp_path: Path) -> None:
    host = KexecHost()
    plan, boots = boots_on(tmp_path, host)
    boots.resolve_all()
    # a variant without a kernel, before any boot: the host as it runs, no boot and no
    # kernel change in its trials (the VM kernel test's `own` variant asserted this)
    assert boots.before(plan.profile.variant("as-is")) == [] and host.boots == []
    polling = plan.profile.variant("polling")
    (change,) = boots.before(polling)
    # the image it ran, with the host's own words (no BOOT_IMAGE) and the two added
    assert host.boots == ["root=UUID=3f7c ro quiet idle=poll intel_idle.max_cstate=0"]
    assert change.state == "taken"
    up = kernel.loads(str(change.effective))
    assert (up["release"], up["version"]) == (RELEASE, VERSION)
    original = kernel.loads(change.original)
    assert original["cmdline"] == CMDLINE  # journalled as the run found it
    journal = json.loads(host.fake.files["/var/tmp/napilab/journal-r1-b-kernel.json"])
    assert kernel.loads(journal["entries"][0]["original"])["cmdline"] == CMDLINE
    assert boots.before(polling) == [change]  # per-kernel: no second boot
    assert len(host.boots) == 1
    assert boots.finish() == []
    assert host.boots[-1] == "root=UUID=3f7c ro quiet"  # back, without the words
    assert "/var/tmp/napilab/journal-r1-b-kernel.json" not in host.fake.files


def test_a_kernel_that_drops_a_word_is_a_mismatch(tmp_path: Path) -> None:
    host = KexecHost()
    plan, boots = boots_on(tmp_path, host)
    real_run = host.run

    def dropping(argv: Sequence[str], **kw: Any) -> CommandResult:
        result = real_run(argv, **kw)
        cmdline = host.fake.files["/proc/cmdline"]
        host.fake.files["/proc/cmdline"] = cmdline.replace(" idle=poll", "")
        return result

    host.run = dropping  # type: ignore[method-assign]
    with pytest.raises(SettingMismatch, match="the kernel did not take kernel"):
        boots.before(plan.profile.variant("polling"))
    assert host.boots[-1] == "root=UUID=3f7c ro quiet"  # booted back after the mismatch


def test_grub_reboot_cannot_append(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: k\nhosts: {sender: a, receiver: b}\n"
                    "workload: {tool: ping, duration: 1, client: {role: sender}, "
                    "server: {role: receiver}}\n" + OWN_APPEND)
    (tmp_path / "inv.yaml").write_text(
        "hosts:\n  a: {address: 198.51.100.2}\n"
        "  b: {address: 198.51.100.6, boot: {method: grub-reboot}}\n")
    with pytest.raises(InputError, match=r"p\.yaml:6.*`append` needs boot method kexec or vm"):
        bind(load_profile(path), load_inventory(tmp_path / "inv.yaml"))


def test_the_boot_method_refuses_own_append_without_kexec() -> None:
    host = KexecHost()
    host.host = type(host.host)(name="b", transport="local", boot=Boot("bootctl"))
    method = kernel.BootBackend(host).method()
    with pytest.raises(HostError, match="`append` needs method kexec"):
        method.own({"release": RELEASE, "version": VERSION, "cmdline": CMDLINE}, ["a"])


def test_kernel_needs_an_image_or_append(tmp_path: Path) -> None:
    text = problems(tmp_path, "kernel: {receiver: {append: []}}\n")
    assert "p.yaml:4" in text and "expected an image, or `append`" in text


def test_a_kernel_that_does_not_come_up_is_named_by_its_release(tmp_path: Path) -> None:
    """The error of a boot that failed names the kernel as reports do (release, version,
    the words added), not as the journal's JSON holds it, and says why it failed."""
    host = KexecHost()
    plan, boots = boots_on(tmp_path, host)
    boots.resolve_all()
    original = host.run

    def run(argv: Sequence[str], **kw: Any) -> CommandResult:
        if argv[:1] == ["sh"] and len(argv) > 3 and argv[3] == "napilab-reboot":
            raise HostError("b: guest b exited while booting: Probing EDD ... ok")
        return original(argv, **kw)

    host.run = run  # type: ignore[method-assign]
    with pytest.raises(HostError) as caught:
        boots.before(plan.profile.variant("polling"))
    message = caught.value.message
    assert message == (f"b: cannot set kernel kernel = '{RELEASE} ({VERSION}) + idle=poll "
                       "intel_idle.max_cstate=0': b: guest b exited while booting: Probing "
                       "EDD ... ok"), message
    assert '"release"' not in message


def test_a_host_is_said_to_boot_only_when_it_does(tmp_path: Path) -> None:
    """A variant whose kernel is the one the host runs boots nothing, and no line says
    it boots (a bisect step's good endpoint on a host whose own kernel it is: the
    lines were counted as boots); the one that differs boots and is said to, and so
    is the boot back."""
    host = KexecHost()
    plan = bound(tmp_path, f"""\
variants:
  same: {{kernel: {{receiver: {{image: "{RELEASE}"}}}}}}
  polling: {{kernel: {{receiver: {{append: [idle=poll]}}}}}}
""")
    said: list[str] = []
    boots = Boots(plan, {"b": HostSession(host)}, "r1", said.append)
    boots.resolve_all()
    boots.before(plan.profile.variant("same"))
    assert said == [] and host.boots == []
    boots.before(plan.profile.variant("polling"))
    assert said == ["b: booting its own image + idle=poll"] and len(host.boots) == 1
    # the image it runs without the words: booted (the knob alone takes a host on that
    # image with more words as running it) with the host's own command line
    boots.before(plan.profile.variant("same"))
    assert said[-1] == f"b: booting {RELEASE}" and len(host.boots) == 2
    assert host.boots[-1] == "root=UUID=3f7c ro quiet"
    # and the words again, then back to the host's own kernel: each said and booted
    boots.before(plan.profile.variant("polling"))
    assert host.boots[-1] == "root=UUID=3f7c ro quiet idle=poll"
    assert boots.finish() == []
    assert said[-1] == "b: booting back into its own kernel" and len(host.boots) == 4
    # a run whose every variant asks for the kernel the host runs: no boot, none said
    said.clear()
    again = Boots(plan, {"b": HostSession(host)}, "r2", said.append)
    again.resolve_all()
    again.before(plan.profile.variant("same"))
    assert again.finish() == [] and said == [] and len(host.boots) == 4
