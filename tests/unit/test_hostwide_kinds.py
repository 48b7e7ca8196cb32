"""The host-wide latency knobs (transparent_hugepage, cpuidle, cpu_dma_latency, smt,
cpufreq's host-wide files, energy_perf_bias, platform_profile): grammar errors at
file:line, `napilab plan`, and apply/read back/restore through the scripted transport
on sysfs trees under tests/data/sysfs/ (captured on this VM, or written from the
kernel's documentation where no machine here has the files: see their `source`)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from napilab.harness.engine.plan_render import plan_text
from napilab.harness.errors import HostError, InputError, SettingMismatch
from napilab.harness.hosts.host_records import JournalRecord
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.knobs import registry
from napilab.harness.knobs.kinds.cpu import cpu_dma_latency
from napilab.harness.profile.plan import Plan, bind
from napilab.harness.profile.profile import load_profile
from napilab.harness.records import codec
from napilab.harness.transport.transport import CommandResult, Process
from napilab.runners.collectors.collector import split_tail
from tests.fakes import FakeHost, FakeTransport

SYSFS = Path(__file__).parents[1] / "data" / "sysfs"
THIS_VM = SYSFS / "6.18.44-fc-v1098" / "cpu_thp.txt"
INTEL = SYSFS / "from-docs" / "intel-pstate-4cpu.txt"
LAPTOP = SYSFS / "from-docs" / "acpi-cpufreq-laptop.txt"
CPU = "/sys/devices/system/cpu"
THP = "/sys/kernel/mm/transparent_hugepage"
JOURNAL = "/var/tmp/napilab/journal-r1-sut.json"

PROFILE = """\
name: hostwide
hosts:
  sut: {host: sut, iface: eth0}
setup:
  sut:
SETUP
workload:
  tool: ping
  duration: 1
  client: {role: sut}
  server: {role: sut}
"""
INVENTORY = """\
hosts:
  sut: {transport: local, iface: eth0, cpus: 4}
"""


def tree(path: Path) -> dict[str, str]:
    """A sysfs tree in `tail -v -n +1` form, as the fake host's files."""
    return dict(split_tail(path.read_text()))


def bound(tmp_path: Path, setup: str) -> Plan:
    text = PROFILE.replace("SETUP", "\n".join("    " + line for line in setup.splitlines()))
    (tmp_path / "p.yaml").write_text(text)
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    return bind(load_profile(tmp_path / "p.yaml"), load_inventory(tmp_path / "inv.yaml"))


def settings_on(files: dict[str, str]) -> tuple[HostSettings, FakeHost]:
    fake = FakeHost(files)
    return HostSettings(HostSession(FakeTransport(fake, name="sut")), "r1"), fake


def apply(plan: Plan, files: dict[str, str]) -> tuple[HostSettings, FakeHost, list]:
    settings, fake = settings_on(files)
    changes = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    return settings, fake, changes


def error_of(tmp_path: Path, setup: str) -> str:
    with pytest.raises(InputError) as info:
        bound(tmp_path, setup)
    return str(info.value)


# transparent_hugepage


def test_thp_reads_the_bracketed_mode_and_restores_it(tmp_path: Path) -> None:
    plan = bound(tmp_path, "transparent_hugepage: {enabled: never, defrag: never}")
    text = plan_text(plan)
    assert "tee -- /sys/kernel/mm/transparent_hugepage/enabled <<< 'never'" in text
    assert "tee -- /sys/kernel/mm/transparent_hugepage/defrag <<< 'never'" in text
    settings, fake, changes = apply(plan, tree(THIS_VM))
    assert [(c.target, c.original, c.effective, c.state) for c in changes] == [
        ("transparent_hugepage/enabled", "madvise", "never", "taken"),
        ("transparent_hugepage/defrag", "madvise", "never", "taken")]
    journal = json.loads(fake.files[JOURNAL])
    assert [e["original"] for e in journal["entries"]] == ["madvise", "madvise"]
    # the kernel shows the file again with brackets: the read back takes the word
    fake.files["/sys/kernel/mm/transparent_hugepage/enabled"] = "always madvise [never]\n"
    settings.restore()
    assert fake.files["/sys/kernel/mm/transparent_hugepage/enabled"] == "madvise\n"
    assert fake.files["/sys/kernel/mm/transparent_hugepage/defrag"] == "madvise\n"
    assert JOURNAL not in fake.files


def test_thp_modes_are_the_kernels(tmp_path: Path) -> None:
    message = error_of(tmp_path, "transparent_hugepage: {enabled: sometimes, defrag: defer}")
    assert "p.yaml:6" in message
    assert ("setup.sut.transparent_hugepage.enabled: 'sometimes' is not one of "
            "['always', 'madvise', 'never']") in message
    assert "enabled: x" not in message
    message = error_of(tmp_path, "transparent_hugepage: {enabled: never, khugepaged: 1}")
    assert "setup.sut.transparent_hugepage.khugepaged: unknown key" in message


def test_thp_on_a_kernel_without_it_fails_before_any_write(tmp_path: Path) -> None:
    plan = bound(tmp_path, "transparent_hugepage: {enabled: never}")
    settings, fake = settings_on({})
    with pytest.raises(HostError, match="cannot read /sys/kernel/mm/transparent_hugepage/"
                                        "enabled"):
        settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert not any(line[0] == "tee" for line in fake.log)


def test_registry_places_host_wide_kinds_before_interface_kinds() -> None:
    first_iface = registry.order("ethtool")
    for name in ("transparent_hugepage", "cpuidle", "cpu_dma_latency", "smt"):
        assert registry.order("irqbalance") < registry.order(name) < first_iface


# cpuidle


def test_cpuidle_disables_named_states_and_restores_them(tmp_path: Path) -> None:
    plan = bound(tmp_path, 'cpuidle: {cpus: "0-1", disable: [C6, 2]}')
    text = plan_text(plan)
    assert "tee -- '/sys/devices/system/cpu/cpu1/cpuidle/<C6>/disable' <<< '1'" in text
    assert "tee -- /sys/devices/system/cpu/cpu1/cpuidle/state2/disable <<< '1'" in text
    files = tree(INTEL)
    settings, fake, changes = apply(plan, dict(files))
    assert [(c.target, c.path.rsplit("/", 2)[1], c.original, c.effective, c.state)
            for c in changes] == [
        ("cpu0 C6 disable", "state3", "0", "1", "taken"),
        ("cpu0 C1E disable", "state2", "0", "1", "taken"),
        ("cpu1 C6 disable", "state3", "0", "1", "taken"),
        ("cpu1 C1E disable", "state2", "0", "1", "taken")]
    assert fake.files[f"{CPU}/cpu2/cpuidle/state3/disable"] == "0\n"  # not listed
    settings.restore()
    assert {p: v.strip() for p, v in fake.files.items()} == {
        p: v.strip() for p, v in files.items()}


def test_cpuidle_max_latency_sets_every_state(tmp_path: Path) -> None:
    plan = bound(tmp_path, 'cpuidle: {cpus: "3", max_latency_us: 10}')
    assert ("tee -- '/sys/devices/system/cpu/cpu3/cpuidle/<each state>/disable' <<< "
            "'<1 if its latency > 10 us, else 0>'") in plan_text(plan)
    files = tree(INTEL)
    files[f"{CPU}/cpu3/cpuidle/state1/disable"] = "1\n"  # the host had C1 off
    settings, fake, changes = apply(plan, files)
    assert [(c.target, c.requested, c.effective) for c in changes] == [
        ("cpu3 POLL disable", "0", "0"), ("cpu3 C1 disable", "0", "0"),
        ("cpu3 C1E disable", "0", "0"), ("cpu3 C6 disable", "1", "1")]
    settings.restore()
    assert fake.files[f"{CPU}/cpu3/cpuidle/state1/disable"] == "1\n"
    assert fake.files[f"{CPU}/cpu3/cpuidle/state3/disable"] == "0\n"


def test_cpuidle_refuses_a_state_or_a_cpu_the_host_lacks(tmp_path: Path) -> None:
    plan = bound(tmp_path, 'cpuidle: {cpus: "0", disable: [C6]}')
    settings, fake = settings_on(tree(THIS_VM))  # haltpoll: POLL and "haltpoll idle"
    with pytest.raises(HostError, match=r"cpu0 has no idle state 'C6'; it has POLL \(state0, "
                                        r"0 us\), haltpoll idle \(state1, 1 us\)"):
        settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    settings, fake = settings_on(tree(LAPTOP))  # no cpuidle directory
    with pytest.raises(HostError, match="cpu0 has no cpuidle states"):
        settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert not any(line[0] == "tee" for line in fake.log)


def test_cpuidle_haltpoll_state_by_its_name_with_a_space(tmp_path: Path) -> None:
    plan = bound(tmp_path, 'cpuidle: {cpus: "1", disable: ["haltpoll idle"]}')
    changes = apply(plan, tree(THIS_VM))[2]
    assert [(c.path, c.effective) for c in changes] == [
        (f"{CPU}/cpu1/cpuidle/state1/disable", "1")]


@pytest.mark.parametrize(("setup", "error"), [
    ('cpuidle: {cpus: "0", disable: [C6], max_latency_us: 5}', "expected exactly one of"),
    ('cpuidle: {cpus: "0"}', "expected exactly one of"),
    ('cpuidle: {cpus: "0", disable: ["C6; reboot"]}',
     "cpuidle.disable[0]: expected an idle state's name"),
    ('cpuidle: {cpus: "0", max_latency_us: -1}', "-1 is out of range 0..10000000"),
    ('cpuidle: {disable: [C6]}', "cpuidle.cpus: required key is missing"),
    ('cpuidle: {cpus: "0-9", disable: [C6]}', "cpuidle.cpus: CPU 4 does not exist on sut"),
])
def test_cpuidle_grammar_errors(tmp_path: Path, setup: str, error: str) -> None:
    message = error_of(tmp_path, setup)
    assert "p.yaml:6" in message and error in message


# cpu_dma_latency


class FakeHolder:
    """A request holder on the fake host: its request counts until it is signalled."""

    def __init__(self, host: QosHost, argv: Sequence[str]) -> None:
        self.argv, self.host, self.value = tuple(argv), host, int(argv[-1])
        self.code: int | None = None
        host.requests.append(self)

    def poll(self) -> int | None:
        return self.code

    def output(self) -> tuple[str, str]:
        return "held\n", ""

    def signal(self, name: str) -> None:
        self.host.signals.append(name)
        self.end()

    def end(self) -> None:
        if self.code is None:
            self.code = 0
            self.host.requests.remove(self)

    def wait(self, timeout: float) -> CommandResult:
        return CommandResult("sut", self.argv, self.code or 0, "held\n", "", 0.0, 0.0)


class QosHost(FakeTransport):
    """The scripted transport with the kernel's CPU latency QoS: /dev/cpu_dma_latency
    reads the lowest request held, or PM_QOS_CPU_LATENCY_DEFAULT_VALUE."""

    def __init__(self, held_by_others: int | None = None) -> None:
        super().__init__(FakeHost({}), name="sut")
        self.others = [] if held_by_others is None else [held_by_others]
        self.requests: list[FakeHolder] = []
        self.signals: list[str] = []
        self.started: list[tuple[tuple[str, ...], bool]] = []

    def run(self, argv: Sequence[str], **kw: Any) -> CommandResult:
        if argv[0] != "od":
            return super().run(argv, **kw)
        assert list(argv) == [*cpu_dma_latency.READ, "/dev/cpu_dma_latency"]
        value = min([*self.others, *(r.value for r in self.requests), 2_000_000_000])
        return self._result(argv, 0, f" {value:>11}\n")

    def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              stdin_open: bool = False) -> Process:
        self.started.append((tuple(argv), stdin_open))
        return FakeHolder(self, argv)


def qos_settings(host: QosHost) -> HostSettings:
    return HostSettings(HostSession(host), "r1")


def test_cpu_dma_latency_is_held_for_the_trial_and_released(tmp_path: Path) -> None:
    plan = bound(tmp_path, "cpu_dma_latency: 0")
    text = plan_text(plan)
    assert ("apply    env LC_ALL=C sh -c <cpu-dma-latency-hold script> "
            "napilab-cpu-dma-latency /dev/cpu_dma_latency 0") in text
    assert "restore  env LC_ALL=C kill -s TERM '<holder-pid>'" in text
    assert "od -An -t d4 -N 4 -- /dev/cpu_dma_latency" in text
    host = QosHost()
    settings = qos_settings(host)
    (change,) = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert (change.original, change.requested, change.effective, change.state) == (
        "2000000000", "0", "0 (napilab holds 0)", "taken")
    assert host.started == [(("sh", "-c", cpu_dma_latency.HOLD_SCRIPT,
                              "napilab-cpu-dma-latency", "/dev/cpu_dma_latency", "0"), True)]
    assert json.loads(host.fake.files[JOURNAL])["entries"][0]["backend"] == "pm_qos_holder"
    settings.restore()
    assert host.requests == [] and host.signals == ["TERM"] and JOURNAL not in host.fake.files


def test_a_lower_request_of_another_holder_is_a_mismatch(tmp_path: Path) -> None:
    plan = bound(tmp_path, "cpu_dma_latency: 50")
    host = QosHost(held_by_others=0)  # tuned's force_latency
    with pytest.raises(SettingMismatch, match=r"cpu_dma_latency: wrote '50', reads "
                                             r"'0 \(napilab holds 50\)'"):
        qos_settings(host).apply(plan.settings(plan.profile.variants[0])["sut"])
    assert host.requests == [] and JOURNAL not in host.fake.files


def test_after_a_crash_restore_finds_the_request_gone_with_its_holder(tmp_path: Path) -> None:
    plan = bound(tmp_path, "cpu_dma_latency: 0")
    host = QosHost()
    qos_settings(host).apply(plan.settings(plan.profile.variants[0])["sut"])
    for holder in list(host.requests):
        holder.end()  # the controller died: sshd closed the holder's stdin, it exited
    doc = codec.parse(host.fake.files[JOURNAL], JournalRecord, JOURNAL)
    restored = HostSettings.from_journal(HostSession(host), doc, JOURNAL).restore()
    assert [c.original for c in restored] == ["2000000000"]
    assert len(host.started) == 1 and JOURNAL not in host.fake.files


def test_cpu_dma_latency_grammar(tmp_path: Path) -> None:
    message = error_of(tmp_path, "cpu_dma_latency: -1")
    assert ("p.yaml:6:22: setup.sut.cpu_dma_latency: -1 is out of range 0..2000000000 "
            "(microseconds)") in message


def test_the_hold_script_writes_hex_text_and_ends_with_its_controller(
        tmp_path: Path) -> None:
    """The real script through the local transport, on a plain file standing for the
    device: 8 hex digits and a newline (never the 4 bytes the kernel reads as binary);
    a controller that dies (os._exit, no cleanup) closes the holder's stdin and the
    holder exits."""
    device, gone = tmp_path / "device", tmp_path / "gone"
    child = f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from napilab.harness.inventory.inventory import Host
from napilab.harness.knobs.kinds.cpu.cpu_dma_latency import HOLD_SCRIPT
from napilab.harness.transport.local import LocalTransport
script = HOLD_SCRIPT + '; echo $$ > {gone}'
t = LocalTransport(Host(name="h", transport="local"))
p = t.start(["sh", "-c", script, "hold", {str(device)!r}, "2000000000"], stdin_open=True)
while "held" not in p.output()[0]:
    time.sleep(0.01)
print(p.poll(), flush=True)
os._exit(0)
"""
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    assert out == "None\n"  # held, and still running when its controller died
    deadline = time.monotonic() + 10
    while not gone.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gone.exists() and device.read_text() == "77359400\n"


# smt


def test_smt_off_and_back_on(tmp_path: Path) -> None:
    plan = bound(tmp_path, "smt: off")
    text = plan_text(plan)
    assert "tee -- /sys/devices/system/cpu/smt/control <<< 'off'" in text
    assert "tee -- /sys/devices/system/cpu/smt/control <<< 'on'" in text  # restore
    settings, fake, (change,) = apply(plan, tree(INTEL))
    assert (change.original, change.effective, change.state) == ("on", "off", "taken")
    settings.restore()
    assert fake.files[f"{CPU}/smt/control"] == "on\n" and JOURNAL not in fake.files


@pytest.mark.parametrize(("path", "word"), [(THIS_VM, "notsupported"),
                                            (LAPTOP, "notimplemented")])
def test_smt_refused_where_the_host_cannot_switch_it(tmp_path: Path, path: Path,
                                                    word: str) -> None:
    plan = bound(tmp_path, "smt: off")
    settings, fake = settings_on(tree(path))
    with pytest.raises(HostError, match=f"smt/control reads {word}"):
        settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert not any(line[0] == "tee" for line in fake.log)


def test_smt_forceoff_is_refused_at_its_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, "smt: forceoff")
    assert "p.yaml:6:10: setup.sut.smt: expected on or off, got 'forceoff'" in message
    assert "cannot be undone before a reboot" in message


# together


def test_pm_qos_0_smt_off_thp_never_validates_plans_and_applies(tmp_path: Path) -> None:
    plan = bound(tmp_path, "cpu_dma_latency: 0\nsmt: off\n"
                           "transparent_hugepage: {enabled: never, defrag: never}")
    lines = plan_text(plan).splitlines()
    assert [ln.strip() for ln in lines if ln.startswith("  sut      + ")] == [
        "sut      + transparent_hugepage enabled = never",
        "sut      + transparent_hugepage defrag = never",
        "sut      + cpu_dma_latency = 0",
        "sut      + smt control = off"]
    writes = [ln.split("apply    env LC_ALL=C ")[1] for ln in lines
              if "apply    env LC_ALL=C tee" in ln
              or "apply    env LC_ALL=C sh -c <cpu-dma" in ln]
    assert writes == [
        "tee -- /sys/kernel/mm/transparent_hugepage/enabled <<< 'never'",
        "tee -- /sys/kernel/mm/transparent_hugepage/defrag <<< 'never'",
        "sh -c <cpu-dma-latency-hold script> napilab-cpu-dma-latency /dev/cpu_dma_latency 0",
        "tee -- /sys/devices/system/cpu/smt/control <<< 'off'"]
    restores = [ln.split("restore  env LC_ALL=C ")[1] for ln in lines
                if "restore  env LC_ALL=C tee" in ln or "restore  env LC_ALL=C kill" in ln]
    assert restores == [
        "tee -- /sys/devices/system/cpu/smt/control <<< 'on'",
        "kill -s TERM '<holder-pid>'",
        "tee -- /sys/kernel/mm/transparent_hugepage/defrag <<< '<original>'",
        "tee -- /sys/kernel/mm/transparent_hugepage/enabled <<< '<original>'"]
    host = QosHost()
    host.fake.files.update(tree(INTEL))
    host.fake.files.update({f"{THP}/enabled": "[always] madvise never\n",
                            f"{THP}/defrag": "always defer defer+madvise [madvise] never\n"})
    settings = qos_settings(host)
    changes = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert [(c.kind, c.original, c.state) for c in changes] == [
        ("transparent_hugepage", "always", "taken"), ("transparent_hugepage", "madvise", "taken"),
        ("cpu_dma_latency", "2000000000", "taken"), ("smt", "on", "taken")]
    settings.restore()
    assert host.requests == [] and host.fake.files[f"{CPU}/smt/control"] == "on\n"
    assert host.fake.files[f"{THP}/enabled"] == "always\n"
