"""The host-wide latency knobs (transparent_hugepage, cpuidle, cpu_dma_latency, smt,
cpufreq's host-wide files, energy_perf_bias, platform_profile): grammar errors at
file:line, `napilab plan`, and apply/read back/restore through the scripted transport
on sysfs trees under tests/data/sysfs/ (captured on this VM, or written from the
kernel's documentation where no machine here has the files: see their `source`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.engine.plan_render import plan_text
from napilab.harness.errors import HostError, InputError
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.knobs import registry
from napilab.harness.profile.plan import Plan, bind
from napilab.harness.profile.profile import load_profile
from napilab.runners.collectors.collector import split_tail
from tests.fakes import FakeHost, FakeTransport

SYSFS = Path(__file__).parents[1] / "data" / "sysfs"
THIS_VM = SYSFS / "6.18.44-fc-v1098" / "cpu_thp.txt"
INTEL = SYSFS / "from-docs" / "intel-pstate-4cpu.txt"
LAPTOP = SYSFS / "from-docs" / "acpi-cpufreq-laptop.txt"
CPU = "/sys/devices/system/cpu"
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
    for name in ("transparent_hugepage", "cpuidle"):
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
