"""`napilab plan`: every command per host, trial by trial, exactly as the engine will run
them (prefixes from `command_line`, wrappers from `workload_exec.compose`). Values that
exist only at run time (a file's original value, an interface's queue list, NAPI ids,
IRQ numbers, thread PIDs) are shown as placeholders: `<original>`, `rx-*`, `<napi-id>`.
Per-NAPI settings are shown in `ynl` form; a host without ynl gets the same request
through napilab's python3 netlink client."""

from __future__ import annotations

import shlex
from typing import Any

from napilab.harness.engine.boots import kernel_journal, schedule
from napilab.harness.engine.plan_summary import summary_json, summary_lines
from napilab.harness.engine.steps import (
    ApplySettings,
    Deltas,
    Idle,
    RestoreSettings,
    Snapshot,
    Workload,
    trial_steps,
)
from napilab.harness.engine.workload_exec import SERVER_GRACE, compose
from napilab.harness.hosts import setting_steps as host_steps
from napilab.harness.hosts.settings import workdir
from napilab.harness.knobs import registry
from napilab.harness.knobs.backend import Backend
from napilab.harness.knobs.kind import Item, PlanLookup, Setting
from napilab.harness.knobs.kinds.kernel import CONTROLLER, KEY, BootBackend
from napilab.harness.profile import clients
from napilab.harness.profile.design import traced_lines
from napilab.harness.profile.kernel import KernelSpec
from napilab.harness.profile.plan import Plan
from napilab.harness.profile.profile import Trial, Variant
from napilab.harness.redact import shown_argv
from napilab.harness.transport.transport import command_line
from napilab.runners.registry import (
    TOOLS,
    snapshot_argv,
    snapshot_hostscript,
    snapshot_phase,
    snapshot_script,
)
from napilab.runners.workloads.workload import Context

# Per-trial cost beyond the workload itself, for the estimate (measured on the SSH
# testbed: settings, snapshots, readiness and restore, see benchmarks/overhead.py).
OVERHEAD_PER_TRIAL = 2.0
# A boot into another kernel: a VM testbed guest under TCG, 20-110 s measured here.
BOOT_SECONDS = 60.0


class _Steps:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.out: list[dict[str, Any]] = []

    def add(self, host: str, phase: str, argv: list[str], stdin: str | None = None,
            env: dict[str, str] | None = None) -> None:
        line = shown_argv(command_line(self.plan.hosts[host], argv, env), env)
        self.out.append({"host": host, "phase": phase, "argv": list(line), "stdin": stdin})

    def apply(self, host: str, settings: list[Setting], run_id: str
              ) -> list[tuple[Setting, Item]]:
        """The commands of the apply steps; returns the items in journal order."""
        journal = host_steps.journal_path(run_id, host)
        done: list[tuple[Setting, Item]] = []
        first = True
        for step in host_steps.apply_steps(settings):
            match step:
                case host_steps.Journal(settings=phase):
                    fresh = host_steps.new_items(phase, PlanLookup(host),
                                      ((i.backend, i.key) for _, i in done))
                    if fresh:
                        done += fresh
                        self.reads(host, "apply", [i for _, i in fresh])
                        self.add(host, "apply", host_steps.journal_argv(journal, first=first),
                                 stdin="<journal>")
                        first = False
                case host_steps.Write(kind=kind):
                    for setting, item in done:
                        if setting.kind == kind:
                            self.write(host, "apply", item, item.value)
                case host_steps.Verify():
                    self.reads(host, "apply", [i for _, i in done])
        return done

    def restore(self, host: str, done: list[tuple[Setting, Item]], run_id: str) -> None:
        items = [i for _, i in done]
        for step in host_steps.RESTORE_STEPS:
            match step:
                case host_steps.ReadCurrent() | host_steps.ReadBack():
                    self.reads(host, "restore", items)
                case host_steps.WriteOriginals():
                    for setting, item in reversed(done):
                        original = registry.kind(setting.kind).plan_original(item)
                        self.write(host, "restore", item, original)
                case host_steps.DropJournal():
                    journal = host_steps.journal_path(run_id, host)
                    self.add(host, "restore", host_steps.drop_journal_argv(journal))

    def reads(self, host: str, phase: str, items: list[Item]) -> None:
        for name, keys in host_steps.by_backend((i.backend, i.key) for i in items).items():
            for argv in _planned(name).read_argvs(keys):
                self.add(host, phase, argv)

    def write(self, host: str, phase: str, item: Item, value: str) -> None:
        command = _planned(item.backend).write_command(item.key, value)
        self.add(host, phase, command.argv, stdin=command.stdin)

    def snapshots(self, variant: Variant, phase: str = "snapshot",
                  snapshot: str = "stop") -> None:
        for host, specs in self.plan.collectors(variant).items():
            if specs:
                names = sorted({s.name for _, s in specs})
                script = snapshot_hostscript(names)
                argv = snapshot_argv(names, snapshot, {s.name: s.options for _, s in specs})
                self.add(host, phase, [_shown(word) for word in argv],
                         stdin=f"<{script}>" if script else None)

    def workload(self, variant: Variant, trial: Trial, run_id: str, *,
                 warmup: bool = False) -> None:
        plan, spec = self.plan, variant.workload
        server_host = plan.host_of(spec.server.role)
        ctx = Context(target=server_host.target_address, bind=server_host.target_address,
                      duration=spec.warmup if warmup else spec.duration,
                      workdir=workdir(run_id), trial=trial.id)
        commands = clients.build(plan, spec, ctx)
        prefix = "warmup-" if warmup else ""
        if commands.server is not None:
            self.add(server_host.name, prefix + "server",
                     compose(commands.server.argv, spec.server, spec.timeout + SERVER_GRACE,
                             commands.server.stop_grace),
                     env=dict(spec.server.env))
        for agent in commands.agents:  # a master's other clients, started before it
            assert agent.agent is not None
            self.add(agent.host, prefix + agent.name.replace("client", "agent", 1),
                     compose(agent.agent.argv, agent.process, spec.timeout + SERVER_GRACE,
                             agent.agent.stop_grace), env=dict(agent.process.env))
        for client in commands.runners:  # started together
            self.add(client.host, prefix + client.name,
                     compose(client.commands.client, client.process, spec.timeout),
                     env=dict(client.process.env))


    def boot(self, host: str, spec: KernelSpec | None, run_id: str, *, first: bool) -> None:
        """Booting `host` into `spec` (None: its own kernel): the kernel journal when
        this is the host's first boot, the boot, the read back."""
        backend = BootBackend.for_plan(self.plan.hosts[host].boot)
        reads = backend.read_argvs([KEY])
        journal = kernel_journal(run_id, host)
        self.add(host, "boot", reads[0])
        self.add(host, "boot", host_steps.journal_argv(journal, first=first), stdin="<journal>")
        commands = backend.planned_commands(spec.image if spec else None,
                                            spec.append if spec else ())
        for command in commands:
            if command.argv[0] == CONTROLLER:  # run here, not on the host
                self.out.append({"host": host, "phase": "boot", "argv": command.argv,
                                 "stdin": None})
            else:
                self.add(host, "boot", command.argv, stdin=command.stdin)
        self.add(host, "boot", reads[0])


def boot_steps(plan: Plan, trial: Trial, run_id: str = "<run>") -> list[dict[str, Any]]:
    """The boots before `trial` (harness.engine.boots.schedule)."""
    boots, _ = schedule(plan, plan.trials())
    out = _Steps(plan)
    journalled = {h for t, hosts in boots.items() if t < trial.index for h in hosts}
    wanted = plan.kernels(plan.profile.variant(trial.variant))
    for host in boots.get(trial.index, {}):
        out.boot(host, wanted.get(host), run_id, first=host not in journalled)
    return out.out


def steps(plan: Plan, trial: Trial, run_id: str = "<run>") -> list[dict[str, Any]]:
    """The trial's commands in order: host, phase, argv (and stdin for writes)."""
    variant = plan.profile.variant(trial.variant)
    out = _Steps(plan)
    out.out = boot_steps(plan, trial, run_id) if plan.booted_hosts else []
    applied: dict[str, list[tuple[Setting, Item]]] = {}
    for step in trial_steps(variant):
        match step:
            case ApplySettings():
                applied = {host: out.apply(host, settings, run_id)
                           for host, settings in plan.settings(variant).items() if settings}
            case Snapshot(name=name, phase=phase):
                out.snapshots(variant, phase, snapshot_phase(name))
            case Workload(warmup=warmup):
                out.workload(variant, trial, run_id, warmup=warmup)
            case RestoreSettings():
                for host, done in applied.items():
                    if done:
                        out.restore(host, done, run_id)
            case Idle() | Deltas():
                pass  # no command: a sleep, a computation on the controller
    return out.out


def _planned(backend: str) -> Backend:
    """A backend as `napilab plan` shows it (same commands, none run)."""
    return registry.backend_class(backend).planned()


def estimate(plan: Plan) -> float:
    profile = plan.profile
    trials = profile.trials()
    total = 0.0
    for trial in trials:
        spec = profile.variant(trial.variant).workload
        total += spec.duration + spec.idle + spec.warmup + OVERHEAD_PER_TRIAL
    if plan.booted_hosts:
        boots, back = schedule(plan, trials)
        total += BOOT_SECONDS * (len(boots) + bool(back))  # the hosts of a trial boot at once
    return total + profile.cooldown * max(0, len(trials) - 1)


def compared_text(pairs: tuple[tuple[str, str], ...]) -> str:
    """`b, c with a; e with d`: each baseline after the variants compared with it."""
    bases: dict[str, list[str]] = {}
    for base, other in pairs:
        bases.setdefault(base, []).append(other)
    return "; ".join(f"{', '.join(others)} with {base}" for base, others in bases.items()) \
        or "nothing (one variant per group)"


def plan_json(plan: Plan, *, summary_only: bool = False) -> dict[str, Any]:
    """The plan as JSON: `summary` as plan_summary.summary_json, then `steps` (left out
    when `summary_only`)."""
    trials = plan.trials()
    out = {
        "profile": plan.profile.name, "trials": len(trials),
        "estimated_seconds": round(estimate(plan), 1),
        "order": plan.profile.order, "seed": plan.profile.seed,
        "hosts": {name: {"transport": h.transport, "address": h.address}
                  for name, h in plan.hosts.items()},
        "comparisons": [list(pair) for pair in plan.profile.comparisons],
        "summary": summary_json(plan),
    }
    if plan.profile.twins:  # traced twin -> its variant: never compared
        out["twins"] = plan.profile.twins
    if not summary_only:
        out["steps"] = [{"trial": t.index, "variant": t.variant, "rep": t.rep,
                         "commands": steps(plan, t)} for t in trials]
    return out


def _scripts() -> dict[str, str]:
    """napilab's fixed shell scripts, shown by name in the text plan (their text is
    printed once, at the end; `--json` keeps every argv whole)."""
    scripts = {"snapshot": snapshot_script(), "journal": host_steps.CREATE_NEW[2],
               "journal-update": host_steps.ATOMIC_WRITE[2]}
    for kind in registry.kinds():
        scripts.update(kind.backend.scripts)
    for tool in TOOLS.values():
        scripts.update(getattr(tool, "scripts", {}))
    return scripts


def plan_text(plan: Plan, *, summary_only: bool = False) -> str:
    """The summary (plan_summary), then every trial's commands unless `summary_only`."""
    trials = plan.trials()
    profile = plan.profile
    lines = [f"profile {profile.name}: {len(profile.variants)} variant(s) x {profile.repeat} "
             f"= {len(trials)} trial(s), order {profile.order}"
             + (f" (seed {profile.seed})" if profile.seed is not None else "")
             + f", estimated {estimate(plan):.0f}s"]
    if any(v.group is not None for v in profile.variants):
        lines.append("compared: " + compared_text(profile.comparisons))
    lines += traced_lines(profile)
    lines += summary_lines(plan)
    if summary_only:
        return "\n".join(lines) + "\n"
    lines.append("trials:")
    scripts = {text: name for name, text in _scripts().items()}
    used: dict[str, str] = {}
    for trial in trials:
        lines.append(f"trial {trial.id}: {trial.variant} rep {trial.rep}")
        for step in steps(plan, trial):
            stdin = f" <<< {step['stdin']!r}" if step["stdin"] is not None else ""
            words = []
            for word in step["argv"]:
                if word in scripts:
                    used[scripts[word]] = word
                    words.append(f"<{scripts[word]} script>")
                else:
                    words.append(shlex.quote(word))
            lines.append(f"  {step['host']:<8} {step['phase']:<8} {' '.join(words)}{stdin}")
    if plan.booted_hosts:
        _, back = schedule(plan, trials)
        for host in back:
            lines.append(f"end of run: {host} boots back into its own kernel (restore: "
                         "the kernel journal's original), then the journal is dropped")
    for name, text in used.items():
        lines += ["", f"<{name} script>:", *(f"    {line}" for line in text.splitlines())]
    return "\n".join(lines) + "\n"


def _shown(word: str) -> str:
    """A section word carrying data (trace's `@trace:PROGRAM`, gzip'd and base64'd) as
    its name and size."""
    name, sep, data = word.partition(":")
    if not (word.startswith("@") and sep and len(data) > 80):
        return word
    return f"{name}:<{len(data)} bytes: the tracer program, gzip and base64>"
