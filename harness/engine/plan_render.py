"""`napilab plan`: every command per host, trial by trial, exactly as the engine will run
them (prefixes from `command_line`, wrappers from `workload_exec.compose`). Values that
exist only at run time (a file's original value, an interface's queue list, NAPI ids,
IRQ numbers, thread PIDs) are shown as placeholders: `<original>`, `rx-*`, `<napi-id>`.
Per-NAPI settings are shown in `ynl` form; a host without ynl gets the same request
through napilab's python3 netlink client."""

from __future__ import annotations

import shlex
from typing import Any

from harness.engine.plan_summary import summary_json, summary_lines
from harness.engine.workload_exec import SERVER_GRACE, compose
from harness.hosts.backends import BACKENDS, Item
from harness.hosts.resolve import KIND_ORDER, plan_items
from harness.hosts.settings import CREATE_NEW, JOURNAL_DIR, journal_path, workdir
from harness.profile.plan import Plan
from harness.profile.profile import Trial, Variant
from harness.profile.redact import shown_argv
from harness.transport.transport import command_line
from runners.collectors.collector import snapshot_argv
from runners.registry import TOOLS
from runners.workloads.workload import Context

# Per-trial cost beyond the workload itself, for the estimate (measured on the SSH
# testbed: settings, snapshots, readiness and restore, see benchmarks/overhead.py).
OVERHEAD_PER_TRIAL = 2.0


class _Steps:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.out: list[dict[str, Any]] = []

    def add(self, host: str, phase: str, argv: list[str], stdin: str | None = None,
            env: dict[str, str] | None = None) -> None:
        line = shown_argv(command_line(self.plan.hosts[host], argv, env), env)
        self.out.append({"host": host, "phase": phase, "argv": list(line), "stdin": stdin})

    def apply(self, host: str, items: list[Item], run_id: str) -> None:
        for argv in _reads(items):
            self.add(host, "apply", argv)
        journal = journal_path(run_id, host)
        self.add(host, "apply", [*CREATE_NEW, JOURNAL_DIR, journal + ".tmp", journal],
                 stdin="<journal>")
        for item in items:
            self.add(host, "apply", BACKENDS[item.backend].write_argv(item.key, item.value),
                     stdin=item.value if item.backend == "file" else None)
        for argv in _reads(items):
            self.add(host, "apply", argv)

    def restore(self, host: str, items: list[Item], run_id: str) -> None:
        for argv in _reads(items):
            self.add(host, "restore", argv)
        for item in reversed(items):
            self.add(host, "restore", BACKENDS[item.backend].write_argv(item.key, "<original>"),
                     stdin="<original>" if item.backend == "file" else None)
        for argv in _reads(items):
            self.add(host, "restore", argv)
        self.add(host, "restore", ["rm", "-f", "--", journal_path(run_id, host)])

    def snapshots(self, variant: Variant, phase: str = "snapshot") -> None:
        for host, specs in self.plan.collectors(variant).items():
            if specs:
                self.add(host, phase, snapshot_argv(sorted({s.name for _, s in specs})))

    def workload(self, variant: Variant, trial: Trial, run_id: str, *,
                 warmup: bool = False) -> None:
        plan, spec = self.plan, variant.workload
        server_host = plan.host_of(spec.server.role)
        ctx = Context(target=server_host.target_address, bind=server_host.target_address,
                      duration=spec.warmup if warmup else spec.duration,
                      workdir=workdir(run_id), trial=trial.id)
        commands = TOOLS[spec.tool].commands(plan.process_args(spec.client),
                                             plan.process_args(spec.server), ctx)
        prefix = "warmup-" if warmup else ""
        if commands.server is not None:
            self.add(server_host.name, prefix + "server",
                     compose(commands.server.argv, spec.server, spec.timeout + SERVER_GRACE),
                     env=dict(spec.server.env))
        self.add(plan.host_of(spec.client.role).name, prefix + "client",
                 compose(commands.client, spec.client, spec.timeout), env=dict(spec.client.env))


def steps(plan: Plan, trial: Trial, run_id: str = "<run>") -> list[dict[str, Any]]:
    """The trial's commands in order: host, phase, argv (and stdin for writes)."""
    variant = plan.profile.variant(trial.variant)
    out = _Steps(plan)
    applied = {host: [i for s in sorted(settings, key=lambda s: KIND_ORDER.index(s.kind))
                      for i in plan_items(s, host)]
               for host, settings in plan.settings(variant).items()}
    applied = {host: items for host, items in applied.items() if items}
    for host, items in applied.items():
        out.apply(host, items, run_id)
    if variant.workload.idle:
        out.snapshots(variant, "idle")
        out.snapshots(variant, f"idle+{variant.workload.idle:g}s")
    if variant.workload.warmup:
        out.workload(variant, trial, run_id, warmup=True)
    out.snapshots(variant)
    out.workload(variant, trial, run_id)
    out.snapshots(variant)
    for host, items in applied.items():
        out.restore(host, items, run_id)
    return out.out


def _reads(items: list[Item]) -> list[list[str]]:
    by_backend: dict[str, list[str]] = {}
    for item in items:
        by_backend.setdefault(item.backend, []).append(item.key)
    return [argv for name, keys in by_backend.items()
            for argv in BACKENDS[name].read_argvs(keys)]


def estimate(plan: Plan) -> float:
    profile = plan.profile
    trials = profile.trials()
    total = 0.0
    for trial in trials:
        spec = profile.variant(trial.variant).workload
        total += spec.duration + spec.idle + spec.warmup + OVERHEAD_PER_TRIAL
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
    if not summary_only:
        out["steps"] = [{"trial": t.index, "variant": t.variant, "rep": t.rep,
                         "commands": steps(plan, t)} for t in trials]
    return out


def _scripts() -> dict[str, str]:
    """napilab's fixed shell scripts, shown by name in the text plan (their text is
    printed once, at the end; `--json` keeps every argv whole)."""
    from harness.hosts import backends, resolve
    from runners.collectors import collector

    return {"snapshot": collector.SNAPSHOT_SCRIPT, "journal": CREATE_NEW[2],
            "sched-read": backends.SCHED_READ[2], "kprobe-list": backends.KPROBE_LIST[2],
            "kprobe-add": backends.KPROBE_ADD[2], "kprobe-del": backends.KPROBE_DEL[2],
            "msi-irqs": resolve.MSI_IRQS[2]}


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
    for name, text in used.items():
        lines += ["", f"<{name} script>:", *(f"    {line}" for line in text.splitlines())]
    return "\n".join(lines) + "\n"
