"""The kernel as a variant axis, without a host: the profile's `kernel:` and `boot:`,
binding to an inventory's `boot:`, the trial order and the boots of the schedule, the
plan's boot commands, the kernel kind's verdicts, GRUB entries, kexec's commands, the
report's joined columns, and host identities across kernels (real boots: tests/
integration/vm)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from napilab.harness.engine.boots import OWN, schedule
from napilab.harness.engine.plan_render import plan_text
from napilab.harness.errors import InputError
from napilab.harness.hosts.identity import HostIdentity
from napilab.harness.inventory.inventory import Boot, Host, load_inventory
from napilab.harness.knobs.kinds import kernel
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from napilab.harness.transport.transport import CommandResult
from napilab.reports.ab.compare import load_run, table
from tests.synthetic_runs import store_run

INVENTORY = """\
hosts:
  a: {address: 198.51.100.2, boot: {method: kexec}}
  b: {address: 198.51.100.6, boot: {method: kexec, timeout: 300}}
  c: {address: 198.51.100.10}
"""
BASE = """\
name: k
hosts: {sender: a, receiver: b}
workload: {tool: ping, duration: 1, client: {role: sender}, server: {role: receiver}}
"""


def profile(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "p.yaml"
    body = textwrap.dedent(body)
    base = BASE if not body.startswith("hosts:") else BASE.replace(
        "hosts: {sender: a, receiver: b}\n", "")
    path.write_text(base + body)
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    return path


def bound(tmp_path: Path, body: str):  # type: ignore[no-untyped-def]
    return bind(load_profile(profile(tmp_path, body)),
                load_inventory(tmp_path / "inv.yaml"))


def problems(tmp_path: Path, body: str, *, inventory: bool = False) -> str:
    with pytest.raises(InputError) as caught:
        if inventory:
            bound(tmp_path, body)
        else:
            load_profile(profile(tmp_path, body))
    return str(caught.value)


KERNELS = """\
variants:
  Baseline: {kernel: {receiver: "6.1-rt"}}
  Patched: {kernel: {receiver: {image: "7.2-rt", append: thread_backlog_napi}}}
  Own: {}
repeat: 2
"""


def test_kernel_grammar_and_per_kernel_grouping(tmp_path: Path) -> None:
    prof = load_profile(profile(tmp_path, KERNELS))
    kernels = {v.name: v.kernel("receiver") for v in prof.variants}
    assert kernels["Baseline"] is not None and kernels["Baseline"].image == "6.1-rt"
    assert kernels["Patched"] is not None and kernels["Patched"].append == (
        "thread_backlog_napi",)
    assert kernels["Own"] is None and prof.boot == "per-kernel"
    # interleaved within a kernel, one block per kernel: 3 boots, not 6
    assert [(t.variant, t.rep) for t in prof.trials()] == [
        ("Baseline", 1), ("Baseline", 2), ("Patched", 1), ("Patched", 2), ("Own", 1),
        ("Own", 2)]
    fresh = load_profile(profile(tmp_path, KERNELS + "boot: per-trial\n"))
    assert [t.variant for t in fresh.trials()] == ["Baseline", "Patched", "Own"] * 2


def test_kernel_mistakes_are_named_where_written(tmp_path: Path) -> None:
    text = problems(tmp_path, """\
        kernel: {receiver: 7.2, sender: {image: "a b"}, nobody: x}
        boot: always
        """)
    assert "p.yaml:4:20: kernel.receiver: 7.2 is a number to YAML (6.10 reads as 6.1)" in text
    assert "boot: 'always' is not one of ['per-kernel', 'per-trial']" in text
    assert "kernel.sender.image: 'a b': an image is an alias" in text
    assert "kernel.nobody: no such role" in text
    text = problems(tmp_path, """\
        variants: {v: {kernel: {receiver: {image: x, append: ["ok", "x;reboot"]}}}}
        """)
    assert "variants.v.kernel.receiver.append: 'x;reboot': a command-line word" in text


def test_bind_needs_a_boot_method_for_each_booted_host(tmp_path: Path) -> None:
    text = problems(tmp_path, "hosts: {sender: a, receiver: c}\n" + KERNELS, inventory=True)
    assert ("variants.Baseline.kernel.receiver.image: host c has no `boot:` in "
            in text and "napilab cannot boot it into 6.1-rt" in text)


def test_inventory_boot_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("hosts:\n  a: {address: 198.51.100.2, boot: {method: vm}}\n"
                    "  b: {address: 198.51.100.6, boot: {method: kexec, guest: b}}\n"
                    "  c: {address: 198.51.100.7, boot: {method: pxe}}\n")
    with pytest.raises(InputError) as caught:
        load_inventory(path)
    text = str(caught.value)
    assert "hosts.a.boot.testbed: method vm needs `testbed`" in text
    assert "hosts.b.boot.guest: only method vm has a guest, not kexec" in text
    assert "hosts.c.boot.method: 'pxe' is not one of ['bootctl', 'grub-reboot', 'kexec', " \
        "'vm']" in text
    path.write_text("hosts:\n  b: {address: 198.51.100.6, boot: {method: kexec, "
                    "timeout: 300}}\n")
    assert load_inventory(path).hosts["b"].boot == Boot("kexec", None, None, 300.0)


def test_schedule_bounds_the_boots(tmp_path: Path) -> None:
    plan = bound(tmp_path, KERNELS)
    boots, back = schedule(plan, plan.trials())
    assert boots == {1: {"b": "6.1-rt"}, 3: {"b": "7.2-rt + thread_backlog_napi"},
                     5: {"b": OWN}}
    assert back == []  # the last trials ran on its own kernel: nothing to boot back
    fresh = bound(tmp_path, KERNELS.replace("  Own: {}\n", "") + "boot: per-trial\n")
    boots, back = schedule(fresh, fresh.trials())
    assert sorted(boots) == [1, 2, 3, 4] and back == ["b"]


def test_plan_shows_every_boot(tmp_path: Path) -> None:
    text = plan_text(bound(tmp_path, KERNELS))
    assert "b        ~ kernel: 6.1-rt -> 7.2-rt + thread_backlog_napi" in text
    lines = [ln for ln in text.splitlines() if " boot " in ln]
    loads = [ln for ln in lines if "kexec -l" in ln]
    assert len(loads) == 3  # one per boot of the schedule
    assert ("kexec -l /boot/vmlinuz-6.1-rt '--command-line=<its command line>'" in loads[0])
    assert "thread_backlog_napi" in loads[1]
    assert "'systemctl kexec || kexec -e'" in text
    assert "journal-<run>-b-kernel.json" in text
    assert text.count("<journal script>") == 1 + text.count("<journal script> napilab-create")


def running(release: str, version: str = "#1 SMP PREEMPT_RT", cmdline: str = "ro quiet"
            ) -> str:
    return kernel.dumps({"release": release, "version": version, "cmdline": cmdline})


def test_the_kernel_kind_judges_what_came_up() -> None:
    kind = kernel.Kernel()
    target = kernel.dumps({"image": "/boot/vmlinuz-6.1.0-57-rt-amd64",
                           "release": "6.1.0-57-rt-amd64", "version": "#1 SMP PREEMPT_RT",
                           "append": ["thread_backlog_napi"]})
    up = running("6.1.0-57-rt-amd64", cmdline="BOOT_IMAGE=/x ro thread_backlog_napi")
    assert kind.verdict(kernel.KEY, target, up).state == "taken"
    assert kind.verdict(kernel.KEY, target, running("6.1.0-57-rt-amd64")).state == "mismatch"
    other = kind.verdict(kernel.KEY, target, running("7.2.13+deb14-amd64",
                                                     cmdline="thread_backlog_napi"))
    assert other.state == "mismatch" and other.effective.startswith("7.2.13+deb14-amd64")
    original = running("7.2.13+deb14-amd64", "#1 SMP PREEMPT_DYNAMIC", "BOOT_IMAGE=/v ro")
    assert kind.same(kernel.KEY, running("7.2.13+deb14-amd64", "#1 SMP PREEMPT_DYNAMIC",
                                         "ro"), original)  # the boot loader's words aside
    assert not kind.same(kernel.KEY, up, original)
    assert kind.shown(target) == ("6.1.0-57-rt-amd64 (#1 SMP PREEMPT_RT) + "
                                  "thread_backlog_napi")


GRUB = """\
menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-3f7c' {
	linux	/boot/vmlinuz-7.2.13+deb14-amd64 root=UUID=3f7c ro quiet
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-3f7c' {
	menuentry 'Debian GNU/Linux, with Linux 6.1.0-57-rt-amd64 (recovery mode)' --class debian $menuentry_id_option 'gnulinux-6.1.0-57-rt-amd64-recovery-3f7c' {
		linux	/boot/vmlinuz-6.1.0-57-rt-amd64 root=UUID=3f7c ro single
	}
	menuentry 'Debian GNU/Linux, with Linux 6.1.0-57-rt-amd64' --class debian $menuentry_id_option 'gnulinux-6.1.0-57-rt-amd64-advanced-3f7c' {
		linux	/boot/vmlinuz-6.1.0-57-rt-amd64 root=UUID=3f7c ro quiet
	}
}
"""  # noqa: E501 (grub.cfg's own lines)


def test_grub_entries() -> None:
    assert kernel.grub_entry(GRUB, "6.1.0-57-rt-amd64") == (
        "gnulinux-advanced-3f7c>gnulinux-6.1.0-57-rt-amd64-advanced-3f7c")
    assert kernel.grub_entry(GRUB, "7.2.13+deb14-amd64") == "gnulinux-simple-3f7c"
    assert kernel.grub_entry(GRUB, "5.10.0-30-amd64") is None


class KexecHost:
    """Answers the two commands kexec's resolution runs on a lab host."""

    def __init__(self) -> None:
        self.host = Host("b", boot=Boot("kexec"))
        self.log: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 60,
            env: Mapping[str, str] | None = None, stdin: str | None = None,
            check: bool = True) -> CommandResult:
        self.log.append(tuple(argv))
        out, code = "", 0
        if argv[0] == "python3":
            out = ("6.1.0-57-rt-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_RT "
                   "Debian 6.1.192-3 (2026-11-26)\n")
        elif argv[0] == "test":
            code = 0 if argv[-1] == "/boot/initrd.img-6.1.0-57-rt-amd64" else 1
        elif argv[0] == "tail":
            out = ("==> /proc/sys/kernel/osrelease <==\n7.2.13+deb14-amd64\n\n"
                   "==> /proc/sys/kernel/version <==\n#1 SMP PREEMPT_DYNAMIC\n\n"
                   "==> /proc/cmdline <==\nBOOT_IMAGE=/boot/vmlinuz-7.2 root=/dev/vda1 ro\n")
        return CommandResult("b", tuple(argv), code, out, "", 0.0, 0.0)


def test_kexec_loads_the_image_with_the_hosts_own_command_line() -> None:
    host = KexecHost()
    backend = kernel.BootBackend(host)
    target = backend.method().resolve("6.1.0-57-rt-amd64", ["thread_backlog_napi"])
    assert target == {"image": "/boot/vmlinuz-6.1.0-57-rt-amd64",
                      "release": "6.1.0-57-rt-amd64",
                      "version": "#1 SMP PREEMPT_RT Debian 6.1.192-3 (2026-11-26)",
                      "append": ["thread_backlog_napi"],
                      "initrd": "/boot/initrd.img-6.1.0-57-rt-amd64"}
    load, reboot = backend.method().commands(target)
    assert load.argv == ["kexec", "-l", "/boot/vmlinuz-6.1.0-57-rt-amd64",
                         "--initrd=/boot/initrd.img-6.1.0-57-rt-amd64",
                         "--command-line=root=/dev/vda1 ro thread_backlog_napi"]
    assert reboot.argv[-1] == "systemctl kexec || kexec -e"


def test_grub_reboot_and_bootctl_refuse_an_append() -> None:
    host = KexecHost()
    host.host = Host("b", boot=Boot("grub-reboot"))
    backend = kernel.BootBackend(host)
    with pytest.raises(Exception, match="`append` needs method kexec"):
        backend.write(kernel.KEY, kernel.dumps({"entry": "x", "release": "r", "version": "",
                                                "append": ["a"]}))


def test_identity_of_pid_1s_namespace_outlives_the_kernel() -> None:
    old = HostIdentity("m" * 32, "boot1", "net:[4026531840]", initial=True)  # 6.1
    new = HostIdentity("m" * 32, "boot2", "net:[4026531833]", initial=True)  # 7.2
    assert old.key == new.key  # one machine across its kernels
    assert old.keys[1] != new.keys[1]  # what older napilab wrote is still found
    ns = HostIdentity("m" * 32, "boot1", "net:[4026532100]")
    assert ns.key != old.key and ns.keys == (ns.key, ns.key)


def test_report_columns_join_variants(tmp_path: Path) -> None:
    document = {"report": {"columns": {"Baseline": ["ping-a", "defer-a"],
                                       "Patched": ["ping-b", "defer-b"]},
                           "table": [{"source": "interrupts",
                                      "metric": "function_call_interrupts"},
                                     {"source": "kprobes", "metric": "trigger_rx_softirq"}]}}
    run = store_run(tmp_path, {
        "interrupts.function_call_interrupts": {"ping-a": [9000, 9100], "ping-b": [180, 170],
                                                 "defer-a": [5, 6], "defer-b": [7, 6]},
        "kprobes.trigger_rx_softirq": {"defer-a": [519, 500], "defer-b": [0, 0]},
    }, variants=["ping-a", "ping-b", "defer-a", "defer-b"], document=document)
    tab = table(load_run(run))
    assert tab.variants == ["Baseline", "Patched"] and tab.pairs == (("Baseline", "Patched"),)
    ipis = next(line for line in tab.lines if line.metric == "function_call_interrupts")
    # from the first variant of each column that measured it (the ping ones)
    assert ipis.cells["Baseline"].values == (9000, 9100)
    assert ipis.cells["Patched"].values == (180, 170)
    trig = next(line for line in tab.lines if line.metric == "trigger_rx_softirq")
    assert trig.cells["Baseline"].values == (519, 500)


def test_report_columns_are_checked(tmp_path: Path) -> None:
    text = problems(tmp_path, """\
        variants: {a: {}, b: {}}
        report: {columns: {A: [a, zz], B: [a]}}
        """)
    assert "report.columns.A: no variant 'zz'" in text
    assert "report.columns.B: variant 'a' is already in column 'A'" in text


def test_tcg_guests_timings_are_flagged(tmp_path: Path) -> None:
    from napilab.reports.formats import render, run_facts
    from tests.synthetic_runs import FACTS

    facts = {"a": {**FACTS, "virtualization": "QEMU TCG, emulated"},
             "b": {**FACTS, "virtualization": "none"}}
    run = load_run(store_run(tmp_path, {"ping.rtt_avg": {"x": [10, 11], "y": [12, 13]}},
                             host_facts=facts))
    text = render.text(run)
    assert "host(s) a: QEMU TCG, emulated; timings (latencies, rates, CPU times) are not" \
        in text
    found = run_facts.confounders(run.manifest, run_facts.settings_rows(run.manifest))
    assert any(c.startswith("host a is a QEMU TCG, emulated guest") for c in found)
    assert not any("host b" in c for c in found)
