"""A profile bound to an inventory: which host plays each role, each variant's settings
per host with `${iface}` resolved, and what every trial will run. Pure: no host is
touched; `napilab plan` prints it and the engine executes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from napilab.harness.errors import InputError, NapilabError, Problem, Written
from napilab.harness.grammar import cpus
from napilab.harness.grammar.schema import suggest
from napilab.harness.inventory.inventory import Host, Inventory
from napilab.harness.knobs import registry
from napilab.harness.knobs.kind import Setting
from napilab.harness.profile.kernel import KernelSpec
from napilab.harness.profile.profile import Profile, Trial, Variant
from napilab.harness.profile.sections import CollectSpec, ProcessSpec, WorkloadSpec
from napilab.runners.base import PLACEHOLDER, fill


@dataclass(frozen=True)
class Plan:
    profile: Profile
    inventory: Inventory
    role_hosts: dict[str, Host]  # role -> host
    replica: str | None = None  # the inventory replica whose hosts these are

    @property
    def hosts(self) -> dict[str, Host]:
        """Hosts used by the profile, in role order, each once."""
        return {h.name: h for h in self.role_hosts.values()}

    def trials(self) -> list[Trial]:
        return self.profile.trials()

    def host_of(self, role: str) -> Host:
        return self.role_hosts[role]

    def iface_of(self, role: str) -> str | None:
        return self.profile.roles[role].iface or self.role_hosts[role].iface

    def settings(self, variant: Variant) -> dict[str, list[Setting]]:
        """Each host's settings for `variant`, placeholders resolved."""
        out: dict[str, list[Setting]] = {name: [] for name in self.hosts}
        for setting in variant.settings:
            host = self.host_of(setting.role)
            target = self.substitute(setting.target, setting.role)
            out[host.name].append(replace(setting, target=target))
        for spec in variant.collect:  # what collectors need set (kprobe events), per trial
            for role in spec.roles:
                for kind in registry.kinds():
                    out[self.host_of(role).name] += kind.for_collector(spec.name, spec.options,
                                                                       role)
        return out

    def kernels(self, variant: Variant) -> dict[str, KernelSpec]:
        """host -> the kernel `variant` runs it on; hosts not named run their own."""
        return {self.host_of(k.role).name: k for k in variant.kernels}

    @property
    def booted_hosts(self) -> list[str]:
        """Hosts some variant boots into a kernel, in role order."""
        named = {self.host_of(k.role).name for v in self.profile.variants for k in v.kernels}
        return [h for h in self.hosts if h in named]

    def collectors(self, variant: Variant) -> dict[str, list[tuple[str, CollectSpec]]]:
        """host -> [(role, collect spec)] for every role a collector reads."""
        out: dict[str, list[tuple[str, CollectSpec]]] = {name: [] for name in self.hosts}
        for spec in variant.collect:
            for role in spec.roles:
                out[self.host_of(role).name].append((role, spec))
        return out

    def substitute(self, text: str, role: str) -> str:
        return fill(text, {"iface": self.iface_of(role) or ""})

    def process_args(self, process: ProcessSpec) -> Mapping[str, Any]:
        """The role's args with `${iface}` filled in (in strings and lists of strings)."""
        def fill(value: Any) -> Any:
            if isinstance(value, str):
                return self.substitute(value, process.role)
            if isinstance(value, list):
                return [fill(v) for v in value]
            return value

        return {k: fill(v) for k, v in process.args.items()}


def bind(profile: Profile, inventory: Inventory, *,
         replica: str | None = None) -> Plan:
    """Check every role's host exists and every placeholder resolves; all problems at once.
    With `replica`, the host names the roles name are that replica's hosts (inventory
    `replicas:`); every one the profile uses must be bound."""
    problems: list[Problem] = []
    role_hosts: dict[str, Host] = {}
    binding = inventory.replicas.get(replica, {}) if replica is not None else {}
    if replica is not None and replica not in inventory.replicas:
        raise InputError(f"no replica {replica!r} in {inventory.path}; replicas are "
                         f"{sorted(inventory.replicas)}{suggest(replica, inventory.replicas)}")
    for role, spec in profile.roles.items():
        name = binding.get(spec.host, spec.host)
        host = inventory.hosts.get(name)
        if replica is not None and spec.host not in binding:
            problems.append(Problem(spec.where, f"hosts.{role}.host",
                                    f"replica {replica!r} of {inventory.path} binds no host "
                                    f"{spec.host!r} (it binds {sorted(binding)})"))
        elif host is None:
            hint = suggest(spec.host, inventory.hosts)
            problems.append(Problem(spec.where, f"hosts.{role}.host",
                                    f"no host {spec.host!r} in {inventory.path}; hosts are "
                                    f"{sorted(inventory.hosts)}{hint}"))
        else:
            role_hosts[role] = host
    if problems:
        raise InputError(problems)
    plan = Plan(profile, inventory, role_hosts, replica)
    for variant in profile.variants:
        for setting in variant.settings:
            if PLACEHOLDER.search(setting.target) and not plan.iface_of(setting.role):
                problems.append(Problem(profile.roles[setting.role].where,
                                        f"hosts.{setting.role}.iface",
                                        f"{setting.describe()} uses ${{iface}} but role "
                                        f"{setting.role!r} has no iface (in the profile's hosts "
                                        "or the inventory)"))
    problems += _check_commands(plan) + _check_cpus(plan) + _check_kernels(plan)
    if problems:
        raise InputError(sorted(set(problems), key=str))
    return plan


def check_online(plan: Plan, online: Mapping[str, tuple[int, ...] | None]) -> list[Problem]:
    """Every variant's CPU lists against the CPUs each host has online, read when a run
    starts: a CPU a host lacks is refused before the first trial, at the list as the
    profile wrote it (`63`, not the mask 8000000000000000)."""
    return _check_cpus(plan, online)


def _check_cpus(plan: Plan,
                online: Mapping[str, tuple[int, ...] | None] | None = None) -> list[Problem]:
    """CPU lists fit the host when the inventory says how many CPUs it has (or, given
    `online`, the CPUs it has online); each error at the CPU list as written, once however
    many variants share it."""
    problems = []

    def fits(role: str, text: str, at: Written | None, what: str) -> None:
        host = plan.host_of(role)
        have = _cpus_of(host, online)
        if not have or not text:
            return
        known = set(have)
        try:
            missing = [c for c in cpus.parse_list(text) if c not in known]
        except cpus.CpuListError:
            return  # the profile's own check names it
        if not missing:
            return
        where, path = (at.location, at.key_path) if at else (plan.profile.roles[role].where,
                                                             what)
        if online is None:
            why = f"CPU {missing[0]} does not exist on {host.name}, which has {len(have)} " \
                  f"CPUs (0-{len(have) - 1})"
        else:
            why = f"CPU {missing[0]} ({text!r}) is not online on {host.name} (online: " \
                  f"{cpus.format_list(list(have))})"
        problems.append(Problem(where, path, why))

    for variant in plan.profile.variants:
        for side, process in _processes(variant.workload):
            fits(process.role, process.cpus or "", process.written.get("cpus"),
                 f"workload.{side}.cpus")
        for setting in variant.settings:
            for cpu_list in registry.kind(setting.kind).cpu_lists(setting):
                fits(setting.role, cpu_list, setting.at, f"setup.{setting.role}.{setting.kind}")
        for spec in variant.collect:
            for role in spec.roles:
                fits(role, cpus.format_list(list(spec.cpus or ())), spec.cpus_at,
                     f"collect.{spec.name}.cpus")
    return problems


def _processes(workload: WorkloadSpec) -> list[tuple[str, ProcessSpec]]:
    """(key path, process) of every process of a workload."""
    if not workload.others:
        return [("client", workload.client), ("server", workload.server)]
    return [*((f"clients.{p.role}", p) for p in workload.clients),
            ("server", workload.server)]


def _cpus_of(host: Host, online: Mapping[str, tuple[int, ...] | None] | None
             ) -> tuple[int, ...] | None:
    """The CPUs a host has: online ones when read, else 0..N-1 of its inventory count."""
    if online is not None:
        return online.get(host.name)
    return tuple(range(host.cpus)) if host.cpus is not None else None


def _check_kernels(plan: Plan) -> list[Problem]:
    """A host a variant boots into a kernel says how (inventory `boot:`); two roles on
    one host ask for one kernel."""
    problems = []
    for variant in plan.profile.variants:
        per_host: dict[str, KernelSpec] = {}
        for spec in variant.kernels:
            host = plan.host_of(spec.role)
            where, path = (spec.at.location, spec.at.key_path) if spec.at else (None, "kernel")
            if host.boot is None:
                problems.append(Problem(where, path, f"host {host.name} has no `boot:` in "
                                        f"{plan.inventory.path}: napilab cannot boot it into "
                                        f"{spec.describe()} (methods: kexec, grub-reboot, "
                                        "bootctl, vm)"))
            elif spec.append and host.boot.method in ("grub-reboot", "bootctl"):
                problems.append(Problem(where, path, f"host {host.name} boots by "
                                        f"{host.boot.method}, an entry as the boot loader "
                                        "has it: `append` needs boot method kexec or vm"))
            other = per_host.setdefault(host.name, spec)
            if (other.image, other.append) != (spec.image, spec.append):
                problems.append(Problem(where, path, f"roles {other.role} and {spec.role} "
                                        f"are both host {host.name}, with different kernels"))
    return problems


def _check_commands(plan: Plan) -> list[Problem]:
    """Build every variant's workload commands now: a tool that finds its arguments
    wrong (a metric regex that does not compile, an empty argv) says so before any
    host is touched."""
    from napilab.harness.profile import clients
    from napilab.runners.workloads.workload import Context

    problems = []
    for variant in plan.profile.variants:
        spec = variant.workload
        server = plan.host_of(spec.server.role)
        ctx = Context(target=server.target_address, bind=server.target_address,
                      duration=spec.duration, workdir="<workdir>", trial="000")
        errors: list[tuple[ProcessSpec, NapilabError]] = []
        try:
            clients.build(plan, spec, ctx, errors)
        except NapilabError as exc:  # a tool that takes one client (validate said so)
            errors.append((spec.client, exc))
        problems += [_command_problem(plan, variant.name, spec, process, exc)
                     for process, exc in errors]
    return problems


def _command_problem(plan: Plan, variant: str, spec: WorkloadSpec, process: ProcessSpec,
                     exc: NapilabError) -> Problem:
    """A tool's refusal of a process's arguments, at the args (or the role) it read."""
    at = process.written.get("args")
    where, path = (at.location, at.key_path) if at else (
        plan.profile.roles[process.role].where, f"variants.{variant}.workload")
    # the tool's errors name it already (`command: client argv is required`)
    text = exc.message if exc.message.startswith(
        (f"{spec.tool}: ", f"{spec.source}: ")) else f"{spec.tool}: {exc.message}"
    return Problem(where, path, text)
