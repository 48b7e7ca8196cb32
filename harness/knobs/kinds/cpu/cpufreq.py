"""`cpufreq: {cpus: "0-3", governor: performance, energy_performance_preference:
performance, boost: 0}`: the cpufreq files of a set of CPUs and the host's boost switch
(Documentation/admin-guide/pm/cpufreq.rst, intel_pstate.rst, amd-pstate.rst).

- `governor`: each listed CPU's cpuN/cpufreq/scaling_governor.
- `energy_performance_preference` (EPP): written per policy,
  /sys/devices/system/cpu/cpufreq/policyN/energy_performance_preference, for every
  policy that governs a listed CPU. The policies (their `affected_cpus`) and the words
  each takes (`energy_performance_available_preferences`) are read from the host when
  the trial starts: a word the host does not list, a policy that also governs CPUs the
  profile does not name, or a host without the file (a driver without EPP: only
  intel_pstate with HWP and amd-pstate-epp have it) is refused before any write, naming
  the file. Written after the governor: intel_pstate refuses any EPP but `performance`
  while the performance governor is in force.
- `boost`: 0 or 1, /sys/devices/system/cpu/cpufreq/boost (acpi-cpufreq, amd-pstate;
  intel_pstate has `intel_pstate: {no_turbo: 1}` instead). Host-wide: takes no `cpus`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from napilab.harness.errors import HostError
from napilab.harness.grammar import cpus
from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node
from napilab.harness.knobs import grammar, values
from napilab.harness.knobs import json_parts as js
from napilab.harness.knobs.backend import read_files
from napilab.harness.knobs.kind import Item, Kind, Lookup, Session, Setting

CPU = "/sys/devices/system/cpu"
CPUFREQ = f"{CPU}/cpufreq"
BOOST = f"{CPUFREQ}/boost"
EPP = "energy_performance_preference"
AVAILABLE = "energy_performance_available_preferences"
PER_CPU = ("governor", EPP)
KEYS = ("cpus", *PER_CPU, "boost")
_GOVERNOR = re.compile(r"[a-z][a-z0-9_]{0,31}")
_PREFERENCE = re.compile(r"[a-z][a-z_]{0,31}")  # the kernel's words: balance_performance
_POLICY = re.compile(r"policy(\d{1,4})")
BOOST_STATE = values.integer(0, 1)


@dataclass(frozen=True)
class Policy:
    """A cpufreq policy: its directory name, the CPUs it governs, the EPP words it takes."""

    name: str
    cpus: tuple[int, ...]
    preferences: tuple[str, ...]


def _refuse_absent(session: Session, paths: list[str], hint: str) -> dict[str, str]:
    try:
        return read_files(session.transport, paths)
    except HostError as exc:
        raise HostError(exc.message, hint=hint) from None


def policies(session: Session, cpu_list: str) -> list[Policy]:
    """The policies that govern the CPUs of `cpu_list`, read from the host (three
    commands); refused when a CPU has none, or a policy governs CPUs not listed."""
    listing = session.transport.run(["ls", "--", CPUFREQ], check=False)
    names = sorted((n for n in listing.stdout.split() if _POLICY.fullmatch(n)),
                   key=lambda n: int(n[6:]))
    no_driver = "the host has no cpufreq driver (a VM, or cpufreq disabled): drop the key"
    if not names:
        raise HostError(f"{session.name}: {CPUFREQ} has no policyN directory", hint=no_driver)
    affected = _refuse_absent(session, [f"{CPUFREQ}/{n}/affected_cpus" for n in names],
                              no_driver)
    wanted = set(cpus.parse_list(cpu_list))
    governs = {n: tuple(int(c) for c in affected[f"{CPUFREQ}/{n}/affected_cpus"].split())
               for n in names}
    chosen = [n for n in names if wanted & set(governs[n])]
    lacking = wanted - {c for n in chosen for c in governs[n]}
    if lacking:
        raise HostError(f"{session.name}: no cpufreq policy governs CPU "
                        f"{cpus.format_list(sorted(lacking))} (is it offline?)")
    for name in chosen:
        extra = set(governs[name]) - wanted
        if extra:
            raise HostError(f"{session.name}: {CPUFREQ}/{name} governs CPUs "
                            f"{cpus.format_list(sorted(governs[name]))}; the profile names "
                            f"{cpus.format_list(sorted(wanted & set(governs[name])))} only",
                            hint="name every CPU of the policy in `cpus:`")
    paths = [f"{CPUFREQ}/{n}/{AVAILABLE}" for n in chosen]
    words = _refuse_absent(session, paths, "this cpufreq driver has no energy performance "
                           "preference (intel_pstate with HWP and amd-pstate-epp have it); "
                           "drop energy_performance_preference for this host")
    return [Policy(n, governs[n], tuple(words[f"{CPUFREQ}/{n}/{AVAILABLE}"].split()))
            for n in chosen]


class Cpufreq(Kind):
    name = key = "cpufreq"

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        body = grammar.body(check, node, self.name, path)
        if body is None:
            return []
        check.keys(body, path, KEYS)
        per_cpu = [k for k in PER_CPU if k in body]
        if not per_cpu and "boost" not in body:
            check.error(body.location, path, f"expected at least one of {', '.join(KEYS[1:])}")
            return []
        if per_cpu and "cpus" not in body:
            check.error(body.location, join(path, "cpus"), "required key is missing (the "
                        f"CPUs whose {per_cpu[0]} is set)")
        elif "cpus" in body and not per_cpu:
            check.error(body.where("cpus"), join(path, "cpus"), "names CPUs for no per-CPU "
                        "setting (governor, energy_performance_preference); boost is the "
                        "host's")
        cpu_list = (grammar.value(check, body, "cpus", path, values.cpu_list)
                    if "cpus" in body else None)
        out = []
        for attr, pattern in (("governor", _GOVERNOR), (EPP, _PREFERENCE)):
            word = check.get(body, attr, path, str)
            if word is not None and not pattern.fullmatch(word):
                check.error(body.where(attr), join(path, attr),
                            f"{word!r} is not a {attr.replace('_', ' ')} name")
            elif word is not None and cpu_list:
                target = cpu_list if attr == "governor" else f"{cpu_list}/{EPP}"
                out.append(Setting(role, self.name, target, word,
                                   grammar.at(body, "cpus", path)))
        if "boost" in body:
            state = grammar.value(check, body, "boost", path, BOOST_STATE)
            if state is not None:
                out.append(Setting(role, self.name, "boost", state,
                                   grammar.at(body, "boost", path)))
        return out

    def json_schema(self) -> js.Schema:
        return js.obj({"cpus": js.CPU_LIST,
                       "governor": js.leaf({"type": "string", "pattern": js.regex(_GOVERNOR)}),
                       EPP: js.leaf({"type": "string", "pattern": js.regex(_PREFERENCE)}),
                       "boost": js.converter(BOOST_STATE)})

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        if setting.target == "boost":
            return [self.item(BOOST, "cpufreq boost", setting.value)]
        cpu_list, _, attr = setting.target.partition("/")
        if attr == EPP:
            plan = [Policy(f"<policy of CPUs {cpu_list}>", (), (setting.value,))]
            found = host.find(policies, cpu_list, plan=plan)
            return [self._epp(host.name, policy, setting.value) for policy in found]
        return [self.item(f"{CPU}/cpu{cpu}/cpufreq/scaling_governor",
                          f"cpu{cpu} governor", setting.value)
                for cpu in cpus.parse_list(cpu_list)]

    def _epp(self, host: str, policy: Policy, word: str) -> Item:
        path = f"{CPUFREQ}/{policy.name}/{EPP}"
        if word not in policy.preferences:
            raise HostError(f"{host}: {path} takes {', '.join(policy.preferences)}; "
                            f"not {word!r}", hint=f"the words of {AVAILABLE} on the host")
        return self.item(path, f"{policy.name} {EPP}", word)

    def cpu_lists(self, setting: Setting) -> list[str]:
        return [] if setting.target == "boost" else [setting.target.partition("/")[0]]

    def check_paths(self, iface: str | None) -> list[str]:
        return [f"{CPU}/cpu0/cpufreq/scaling_governor", f"{CPUFREQ}/policy0/{EPP}", BOOST]
