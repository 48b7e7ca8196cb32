"""The registry of knob kinds (harness.knobs.registry): a kind added there alone is
validated by the profile, planned by `napilab plan`, applied, read back, judged and
restored through the scripted transport; the `sysfs` kind; the kinds' own comparators."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.authoring.json_schema import profile_schema
from napilab.harness.engine.plan_render import plan_json, plan_text
from napilab.harness.errors import InputError, SettingMismatch
from napilab.harness.grammar.schema import Checker
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.knobs import grammar, registry, values
from napilab.harness.knobs.kind import Item, Kind, Lookup, Setting
from napilab.harness.profile.plan import Plan, bind
from napilab.harness.profile.profile import load_profile
from tests.fakes import FakeHost, FakeTransport

PROFILE = """\
name: toy
hosts:
  sut: {host: sut, iface: eth0}
setup:
  sut:
    toy: {knob: 5}
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


class Toy(Kind):
    """A throw-away kind: `toy: {NAME: 0..9}`, one file each under /sys/kernel/toy."""

    name = key = "toy"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        out = []
        for name in body or ():
            assert body is not None
            value = grammar.value(check, body, name, path, values.integer(0, 9))
            if value is not None:
                out.append(Setting(role, self.name, name, value))
        return out

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        return [self.item(f"/sys/kernel/toy/{setting.target}", setting.target, setting.value)]


@pytest.fixture()
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "KINDS", (*registry.KINDS, Toy()))


def bound(tmp_path: Path, text: str = PROFILE) -> Plan:
    (tmp_path / "p.yaml").write_text(text)
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    return bind(load_profile(tmp_path / "p.yaml"), load_inventory(tmp_path / "inv.yaml"))


def test_a_kind_added_to_the_registry_alone_goes_all_the_way(toy: None,
                                                            tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"setup\.sut\.toy\.knob: 12 is out of range 0\.\.9"):
        bound(tmp_path, PROFILE.replace("knob: 5", "knob: 12"))
    plan = bound(tmp_path)
    (variant,) = plan.profile.variants
    assert variant.settings == (Setting("sut", "toy", "knob", "5"),)
    setup = profile_schema()["$defs"]["setup"]["additionalProperties"]["properties"]
    # in the editors' schema too (any value: validate checks), its docstring the hover text
    assert setup["toy"] == {"description": "A throw-away kind: `toy: {NAME: 0..9}`, one "
                                           "file each under /sys/kernel/toy."}

    text = plan_text(plan)
    assert "apply    env LC_ALL=C tee -- /sys/kernel/toy/knob <<< '5'" in text
    assert "restore  env LC_ALL=C tee -- /sys/kernel/toy/knob <<< '<original>'" in text
    assert json.dumps(plan_json(plan))  # the JSON plan too

    fake = FakeHost({"/sys/kernel/toy/knob": "1\n"})
    settings = HostSettings(HostSession(FakeTransport(fake, name="sut")), "r1")
    (change,) = settings.apply(plan.settings(variant)["sut"])
    assert (change.original, change.requested, change.effective) == ("1", "5", "5")
    assert change.matches and fake.files["/sys/kernel/toy/knob"] == "5\n"
    journal = json.loads(fake.files["/var/tmp/napilab/journal-r1-sut.json"])
    assert journal["entries"][0]["kind"] == "toy"
    settings.restore()
    assert fake.files == {"/sys/kernel/toy/knob": "1\n"}


def test_a_value_the_toy_kernel_ignores_is_a_mismatch(toy: None, tmp_path: Path) -> None:
    plan = bound(tmp_path)
    fake = FakeHost({"/sys/kernel/toy/knob": "1\n"}, ignore={"/sys/kernel/toy/knob"})
    settings = HostSettings(HostSession(FakeTransport(fake, name="sut")), "r1")
    with pytest.raises(SettingMismatch, match="knob: wrote '5', reads '1'"):
        settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert "/var/tmp/napilab/journal-r1-sut.json" not in fake.files


def test_an_unknown_setup_key_lists_the_registry(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown key; expected one of") as exc:
        bound(tmp_path)
    assert "'sysfs'" in str(exc.value) and "'toy'" not in str(exc.value)


SYSFS = PROFILE.replace("toy: {knob: 5}", 'sysfs: {"${iface}": {power/control: "on"}}')


def test_sysfs_device_attribute(tmp_path: Path) -> None:
    plan = bound(tmp_path, SYSFS)
    path = "/sys/class/net/eth0/device/power/control"
    assert f"tee -- {path} <<< 'on'" in plan_text(plan)
    fake = FakeHost({path: "auto\n"})
    settings = HostSettings(HostSession(FakeTransport(fake, name="sut")), "r1")
    (change,) = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert (change.kind, change.target, change.original, change.effective) == (
        "sysfs", "eth0/device/power/control", "auto", "on")
    settings.restore()
    assert fake.files == {path: "auto\n"}


@pytest.mark.parametrize("attr", ["../x", "power/../../x", "a b", "/abs", ".hidden", "a/b/c/d"])
def test_sysfs_attributes_are_confined(tmp_path: Path, attr: str) -> None:
    with pytest.raises(InputError, match="is not a device attribute"):
        bound(tmp_path, SYSFS.replace("power/control", attr))


def test_sysfs_values_are_words(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="a sysfs value is an integer or a word"):
        bound(tmp_path, SYSFS.replace('"on"', '"on; reboot"'))


@pytest.mark.parametrize(("kind", "key", "requested", "effective", "state"), [
    ("rps", "/sys/class/net/d/queues/rx-0/rps_cpus", "6", "00000006", "taken"),
    ("irq_affinity", "/proc/irq/5/smp_affinity_list", "1-2", "1,2", "taken"),
    ("napi_threads", "7/cpus", "0-1", "0,1", "taken"),
    ("napi_threads", "7/policy", "fifo:50", "other:0", "mismatch"),
    ("ethtool", "d/-k/rx-gro-list", "on", "on [fixed]", "taken"),
    ("sysctl", "/proc/sys/net/ipv4/tcp_rmem", "4096\t131072", "4096  131072", "taken"),
    ("netdev", "/sys/class/net/d/gro_flush_timeout", "20000", "0", "mismatch"),
    ("kprobe", "napi_busy_loop", "present", "absent", "absent"),
])
def test_each_kind_judges_its_values(kind: str, key: str, requested: str, effective: str,
                                     state: str) -> None:
    verdict = registry.kind(kind).verdict(key, requested, effective)
    assert verdict.state == state
    assert registry.kind(kind).same(key, requested, effective) == (state == "taken")


def test_registry_names_every_kind_once() -> None:
    names = [k.name for k in registry.kinds()]
    assert len(names) == len(set(names))
    assert set(registry.profile_keys()) == {
        "sysctl", "irqbalance", "cpufreq", "ethtool", "netdev", "sysfs", "napi", "rps", "xps",
        "irq_affinity", "napi_threads", "transparent_hugepage", "cpuidle", "cpu_dma_latency",
        "smt", "intel_pstate", "energy_perf_bias", "platform_profile"}
    assert registry.order("ethtool") < registry.order("rps") < registry.order("napi_threads")
