"""The CPU power knobs (cpufreq's EPP and boost, intel_pstate, energy_perf_bias,
platform_profile): grammar errors at file:line, `napilab plan`, and apply/read back/
restore through the scripted transport on the values real hosts showed
(tests/data/sysfs/lore/, quoted in public mails: see its README) or, where no capture
was found, on the trees written from the kernel's documentation (from-docs/, labelled
so)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from napilab.harness.engine.plan_render import plan_text
from napilab.harness.errors import HostError, SettingMismatch
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.transport.transport import CommandResult
from tests.fakes import FakeHost, FakeTransport
from tests.unit.test_hostwide_kinds import INTEL, JOURNAL, LAPTOP, bound, error_of, tree

LORE = Path(__file__).parents[1] / "data" / "sysfs" / "lore"
AMD = LORE / "amd-pstate-epp-5950x-policy0.txt"
PSTATE = LORE / "intel-pstate-active-5.4-rc8.txt"
PSTATE_PARTIAL = LORE / "intel-pstate-partial-5.4-rc8.txt"
PROFILE_OK = LORE / "platform-profile-quiet-balanced-performance.txt"
PROFILE_EINVAL = LORE / "platform-profile-hp-envy-einval.txt"
POLICY0 = "/sys/devices/system/cpu/cpufreq/policy0"
PSTATE_DIR = "/sys/devices/system/cpu/intel_pstate"
ACPI = "/sys/firmware/acpi"


def quoted(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """A quoted listing as the host's files, and the files whose read failed (path ->
    the error): `grep .` lines (PATH:VALUE), `PATH: VALUE` lines, and `$ cat PATH`
    followed by the content or by cat's error."""
    files: dict[str, str] = {}
    failed: dict[str, str] = {}
    lines = path.read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith("$ cat /"):
            name, answer = line.removeprefix("$ cat "), lines[index + 1]
            if answer.startswith(f"cat: {name}: "):
                failed[name] = answer.removeprefix(f"cat: {name}: ")
            else:
                files[name] = answer + "\n"
        elif line.startswith("/sys/") and ":" in line:
            name, _, value = line.partition(":")
            files[name] = value.strip() + "\n"
    assert files, f"{path} quotes no file"
    return files, failed


class QuotedHost(FakeTransport):
    """The scripted transport on a quoted host: a file whose read failed there fails
    here the same way (tail: error reading 'PATH': REASON)."""

    def __init__(self, path: Path) -> None:
        files, self.failed = quoted(path)
        super().__init__(FakeHost(files), name="sut")

    def _tail(self, argv: Sequence[str], stdin: str | None) -> CommandResult:
        bad = [p for p in argv[5:] if p in self.failed]
        if not bad:
            return super()._tail(argv, stdin)
        return self._result(argv, 1, "", "\n".join(
            f"tail: error reading '{p}': {self.failed[p]}" for p in bad))


def on(transport: FakeTransport) -> HostSettings:
    return HostSettings(HostSession(transport), "r1")


def writes(fake: FakeHost) -> list[str]:
    return [line[2] for line in fake.log if line[0] == "tee"]


def refused(tmp_path: Path, setup: str, transport: FakeTransport, match: str) -> None:
    """The apply fails before any write (no journal is left either)."""
    plan = bound(tmp_path, setup)
    with pytest.raises(HostError, match=match):
        on(transport).apply(plan.settings(plan.profile.variants[0])["sut"])
    assert writes(transport.fake) == [] and JOURNAL not in transport.fake.files


# cpufreq: energy_performance_preference, per policy


def test_epp_is_written_per_policy_and_restored(tmp_path: Path) -> None:
    plan = bound(tmp_path, 'cpufreq: {cpus: "0", energy_performance_preference: performance}')
    assert ("tee -- '/sys/devices/system/cpu/cpufreq/<policy of CPUs 0>/"
            "energy_performance_preference' <<< 'performance'") in plan_text(plan)
    host = QuotedHost(AMD)
    before = dict(host.fake.files)
    settings = on(host)
    (change,) = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert (change.path, change.original, change.effective, change.state) == (
        f"{POLICY0}/energy_performance_preference", "balance_performance", "performance",
        "taken")
    assert json.loads(host.fake.files[JOURNAL])["entries"][0]["original"] == (
        "balance_performance")
    settings.restore()
    assert host.fake.files == before  # the journal gone, the preference as it was


def test_epp_word_the_host_does_not_offer_is_refused_with_its_words(tmp_path: Path) -> None:
    refused(tmp_path, 'cpufreq: {cpus: "0", energy_performance_preference: powersave}',
            QuotedHost(AMD), f"{POLICY0}/energy_performance_preference takes default, "
            "performance, balance_performance, balance_power, power; not 'powersave'")


def test_epp_for_a_cpu_no_policy_governs_is_refused(tmp_path: Path) -> None:
    refused(tmp_path, 'cpufreq: {cpus: "0-1", energy_performance_preference: performance}',
            QuotedHost(AMD), "no cpufreq policy governs CPU 1")


def test_epp_refuses_a_policy_that_also_governs_unnamed_cpus(tmp_path: Path) -> None:
    host = QuotedHost(AMD)
    host.fake.files[f"{POLICY0}/affected_cpus"] = "0 1\n"  # changed here: a shared policy
    refused(tmp_path, 'cpufreq: {cpus: "0", energy_performance_preference: performance}',
            host, "policy0 governs CPUs 0-1; the profile names 0 only")


def test_epp_on_a_host_without_cpufreq_names_the_directory(tmp_path: Path) -> None:
    refused(tmp_path, 'cpufreq: {cpus: "0", energy_performance_preference: performance}',
            QuotedHost(PSTATE), "/sys/devices/system/cpu/cpufreq has no policyN directory")


def test_epp_on_a_driver_without_it_names_the_file(tmp_path: Path) -> None:
    host = QuotedHost(AMD)
    del host.fake.files[f"{POLICY0}/energy_performance_available_preferences"]  # removed here
    refused(tmp_path, 'cpufreq: {cpus: "0", energy_performance_preference: performance}',
            host, f"cannot read {POLICY0}/energy_performance_available_preferences")


# cpufreq: boost, governor


def test_boost_off_and_back(tmp_path: Path) -> None:
    plan = bound(tmp_path, "cpufreq: {boost: 0}")
    assert "tee -- /sys/devices/system/cpu/cpufreq/boost <<< '0'" in plan_text(plan)
    host = FakeTransport(FakeHost(tree(LAPTOP)), name="sut")
    settings = on(host)
    (change,) = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert (change.original, change.effective, change.state) == ("1", "0", "taken")
    settings.restore()
    assert host.fake.files["/sys/devices/system/cpu/cpufreq/boost"] == "1\n"


def test_boost_on_a_host_without_it_names_the_file(tmp_path: Path) -> None:
    refused(tmp_path, "cpufreq: {boost: 0}", QuotedHost(AMD),
            "cannot read /sys/devices/system/cpu/cpufreq/boost")


def test_governor_then_epp_in_that_order(tmp_path: Path) -> None:
    plan = bound(tmp_path, 'cpufreq: {cpus: "0", governor: performance, '
                           'energy_performance_preference: performance}')
    host = QuotedHost(AMD)
    host.fake.files["/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"] = (
        host.fake.files[f"{POLICY0}/scaling_governor"])  # cpu0/cpufreq is policy0's link
    on(host).apply(plan.settings(plan.profile.variants[0])["sut"])
    assert [w for w in writes(host.fake) if "/sys/" in w] == [
        "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        f"{POLICY0}/energy_performance_preference"]


@pytest.mark.parametrize(("setup", "error"), [
    ("cpufreq: {energy_performance_preference: performance}",
     "cpufreq.cpus: required key is missing"),
    ('cpufreq: {cpus: "0", boost: 1}', "cpufreq.cpus: names CPUs for no per-CPU setting"),
    ("cpufreq: {boost: 2}", "cpufreq.boost: 2 is out of range 0..1"),
    ("cpufreq: {}", "expected at least one of governor, energy_performance_preference"),
    ('cpufreq: {cpus: "0", energy_performance_preference: "bal perf"}',
     "'bal perf' is not a energy performance preference name"),
])
def test_cpufreq_grammar_errors(tmp_path: Path, setup: str, error: str) -> None:
    message = error_of(tmp_path, setup)
    assert "p.yaml:6" in message and error in message


# intel_pstate


def test_intel_pstate_limits_written_and_restored(tmp_path: Path) -> None:
    plan = bound(tmp_path, "intel_pstate: {no_turbo: 1, max_perf_pct: 100, min_perf_pct: 100}")
    host = QuotedHost(PSTATE)
    before = dict(host.fake.files)
    settings = on(host)
    changes = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert [(c.target, c.original, c.effective, c.state) for c in changes] == [
        ("intel_pstate/no_turbo", "0", "1", "taken"),
        ("intel_pstate/max_perf_pct", "100", "100", "taken"),
        ("intel_pstate/min_perf_pct", "42", "100", "taken")]
    assert [w for w in writes(host.fake) if "/sys/" in w] == [
        f"{PSTATE_DIR}/no_turbo", f"{PSTATE_DIR}/min_perf_pct"]  # max was already 100
    settings.restore()
    assert host.fake.files == before


def test_a_limit_the_driver_clamps_is_a_mismatch(tmp_path: Path) -> None:
    plan = bound(tmp_path, "intel_pstate: {min_perf_pct: 100}")
    host = QuotedHost(PSTATE)
    host.fake.ignore.add(f"{PSTATE_DIR}/min_perf_pct")  # the driver keeps its value
    with pytest.raises(SettingMismatch, match="intel_pstate/min_perf_pct: wrote '100', "
                                              "reads '42'"):
        on(host).apply(plan.settings(plan.profile.variants[0])["sut"])
    assert JOURNAL not in host.fake.files


def test_intel_pstate_without_no_turbo_names_the_file(tmp_path: Path) -> None:
    refused(tmp_path, "intel_pstate: {no_turbo: 1, min_perf_pct: 50}",
            QuotedHost(PSTATE_PARTIAL), f"cannot read {PSTATE_DIR}/no_turbo")


def test_intel_pstate_grammar(tmp_path: Path) -> None:
    message = error_of(tmp_path, "intel_pstate: {min_perf_pct: 101, turbo: 0}")
    assert "p.yaml:6" in message
    assert "intel_pstate.min_perf_pct: 101 is out of range 0..100" in message
    assert "intel_pstate.turbo: unknown key" in message


# energy_perf_bias (no real capture found: the tree from the kernel's documentation)


def test_energy_perf_bias_by_name_written_as_its_number(tmp_path: Path) -> None:
    plan = bound(tmp_path, 'energy_perf_bias: {cpus: "0-1", value: performance}')
    assert ("tee -- /sys/devices/system/cpu/cpu1/power/energy_perf_bias <<< '0'"
            in plan_text(plan))
    host = FakeTransport(FakeHost(tree(INTEL)), name="sut")
    settings = on(host)
    changes = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert [(c.target, c.original, c.effective, c.state) for c in changes] == [
        ("cpu0 energy_perf_bias", "6", "0", "taken"),
        ("cpu1 energy_perf_bias", "6", "0", "taken")]
    settings.restore()
    assert host.fake.files["/sys/devices/system/cpu/cpu0/power/energy_perf_bias"] == "6\n"


def test_energy_perf_bias_refused_where_the_cpu_has_none(tmp_path: Path) -> None:
    refused(tmp_path, 'energy_perf_bias: {cpus: "0", value: 4}', QuotedHost(AMD),
            "cannot read /sys/devices/system/cpu/cpu0/power/energy_perf_bias")


def test_energy_perf_bias_grammar(tmp_path: Path) -> None:
    message = error_of(tmp_path, 'energy_perf_bias: {cpus: "0", value: turbo}')
    assert ("energy_perf_bias.value: expected 0..15 or one of performance, "
            "balance-performance, normal, balance-power, power, got 'turbo'") in message


# platform_profile


def test_platform_profile_set_and_restored(tmp_path: Path) -> None:
    plan = bound(tmp_path, "platform_profile: performance")
    assert "tee -- /sys/firmware/acpi/platform_profile <<< 'performance'" in plan_text(plan)
    host = QuotedHost(PROFILE_OK)
    settings = on(host)
    (change,) = settings.apply(plan.settings(plan.profile.variants[0])["sut"])
    assert (change.original, change.effective, change.state) == (
        "balanced", "performance", "taken")
    settings.restore()
    assert host.fake.files[f"{ACPI}/platform_profile"] == "balanced\n"


def test_platform_profile_not_offered_is_refused_with_the_choices(tmp_path: Path) -> None:
    refused(tmp_path, "platform_profile: low-power", QuotedHost(PROFILE_OK),
            f"{ACPI}/platform_profile_choices offers quiet, balanced, performance; "
            "not 'low-power'")


def test_platform_profile_that_cannot_be_read_back_is_refused(tmp_path: Path) -> None:
    refused(tmp_path, "platform_profile: performance", QuotedHost(PROFILE_EINVAL),
            f"cannot read {ACPI}/platform_profile: .*Invalid argument")


def test_platform_profile_absent(tmp_path: Path) -> None:
    refused(tmp_path, "platform_profile: performance", QuotedHost(PSTATE),
            f"cannot read {ACPI}/platform_profile_choices")


def test_all_of_them_in_the_registrys_order(tmp_path: Path) -> None:
    plan = bound(tmp_path, "platform_profile: performance\n"
                           "intel_pstate: {no_turbo: 1}\n"
                           'energy_perf_bias: {cpus: "0", value: normal}\n'
                           "cpufreq: {boost: 0}")
    lines = [ln.strip() for ln in plan_text(plan).splitlines() if ln.startswith("  sut      + ")]
    assert lines == ["sut      + platform_profile = performance",
                     "sut      + cpufreq boost = 0",
                     "sut      + intel_pstate no_turbo = 1",
                     "sut      + energy_perf_bias 0 = 6"]
