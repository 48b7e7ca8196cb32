"""What a trial does on every host at once: facts, settings, snapshots, restore.

Each of these runs on all hosts of the trial concurrently (one thread per host, each
on that host's own connection), so a trial's set-up and tear-down take as long as the
slowest host, not the sum of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from napilab.harness.errors import NapilabError, RestoreIncomplete
from napilab.harness.hosts import facts as host_facts
from napilab.harness.hosts.settings import HostSettings
from napilab.harness.knobs.change import Change
from napilab.harness.knobs.kinds.napi import hostscript
from napilab.harness.profile.plan import Plan
from napilab.harness.profile.profile import Trial, Variant
from napilab.harness.store.manifest import HostFacts, RestoreRecord
from napilab.harness.store.store import Row, RunStore
from napilab.harness.transport.transport import Transport
from napilab.runners import registry
from napilab.runners.collectors import collector as collectors

T = TypeVar("T")
# What identifies a boot and a kernel: compared at the start and the end of a run.
IDENTITY = ("boot_id", "kernel_release", "kernel_version", "cmdline")


def each_host(hosts: list[str], work: Callable[[str], T]) -> dict[str, T]:
    """`work(host)` for every host concurrently; every host finishes before the first
    error (if any) is raised, so no host is left half done."""
    if len(hosts) <= 1:
        return {h: work(h) for h in hosts}
    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        futures = {h: pool.submit(work, h) for h in hosts}
        results: dict[str, T] = {}
        errors: list[BaseException] = []
        for host, future in futures.items():
            try:
                results[host] = future.result()
            except BaseException as exc:
                errors.append(exc)
    if errors:
        raise errors[0]
    return results


class HostOps:
    def __init__(self, plan: Plan, store: RunStore, transports: dict[str, Transport]) -> None:
        self.plan = plan
        self.store = store
        self.transports = transports
        self.host_info: dict[str, collectors.HostInfo] = {}
        # a window's first snapshot was attempted and its last has not completed
        self.counting = False

    def facts(self) -> dict[str, HostFacts]:
        def gather(name: str) -> dict[str, Any]:
            ifaces = [self.plan.iface_of(role) for role, h in self.plan.role_hosts.items()
                      if h.name == name]
            return host_facts.gather(self.transports[name], [i for i in ifaces if i],
                                     self._binaries(name))

        facts = each_host(list(self.transports), gather)
        self.host_info = {name: host_facts.host_info(f) for name, f in facts.items()}
        return {name: HostFacts.from_json(f) for name, f in facts.items()}

    def _binaries(self, host: str) -> set[str]:
        """The workload programs any variant runs on `host`."""
        out: set[str] = set()
        for variant in self.plan.profile.variants:
            workload = variant.workload
            for side, process in (*(("client", c) for c in workload.clients),
                                  ("server", workload.server)):
                if self.plan.host_of(process.role).name == host:
                    out.update(host_facts.workload_binaries(workload.tool, side, process.args))
        return out

    def changed_hosts(self, before: dict[str, HostFacts],
                      booted: set[str] | frozenset[str] = frozenset()
                      ) -> tuple[dict[str, list[str]], dict[str, str]]:
        """Hosts whose boot or kernel changed during the run, and what changed; and the
        hosts that could not be read again (why), whose change is not known. A host
        napilab booted (`booted`) has a new boot_id by design: only its kernel and
        command line are compared (it was booted back into its own)."""
        unread: dict[str, str] = {}

        def read(name: str) -> dict[str, str] | None:
            try:
                return host_facts.identity(self.transports[name])
            except NapilabError as exc:
                unread[name] = exc.message
                return None

        now = each_host(list(self.transports), read)
        empty = HostFacts()
        changed = {name: [k for k in IDENTITY if before.get(name, empty).get(k) != ident.get(k)
                          and not (k == "boot_id" and name in booted)]
                   for name, ident in now.items() if ident is not None}
        return {name: what for name, what in changed.items() if what}, unread

    def apply(self, trial: Trial, variant: Variant,
              settings: dict[str, HostSettings]) -> list[Change]:
        wanted = {h: s for h, s in self.plan.settings(variant).items() if s}

        def apply_one(host: str) -> list[Change]:
            changes = settings[host].apply(wanted[host])
            self.store.write_raw_json(trial.id, host, "settings.json",
                                      [c.to_json() for c in changes])
            return changes

        # every host journals its originals before any host writes a knob: a host that
        # cannot journal stops the trial with nothing changed anywhere
        each_host(list(wanted), lambda host: settings[host].prepare(wanted[host]))
        done = each_host(list(wanted), apply_one)
        return [change for host in wanted for change in done[host]]

    def restore(self, settings: dict[str, HostSettings]) -> list[RestoreRecord]:
        """Every host is restored even when another fails; failures are raised together."""
        changed = [h for h, s in settings.items() if s.changes]
        errors: list[str] = []

        def restore_one(host: str) -> list[RestoreRecord]:
            try:
                return [RestoreRecord(host, c.target, c.path, c.original)
                        for c in settings[host].restore()]
            except NapilabError as exc:
                errors.append(str(exc))
                return []

        done = each_host(changed, restore_one)
        if errors:
            raise RestoreIncomplete("restore incomplete: " + "; ".join(errors),
                            hint="`napilab restore -i INVENTORY` replays the on-host journals")
        return [r for host in changed for r in done[host]]

    def snapshot(self, trial: Trial, variant: Variant, when: str) -> dict[str, dict[str, Any]]:
        """One exec per host reads every collector's sources; returns parsed snapshots."""
        by_host = self.plan.collectors(variant)
        wanted = {h: sorted({spec.name for _, spec in specs})
                  for h, specs in by_host.items() if specs}

        phase = registry.snapshot_phase(when)
        if phase == "start":
            self.counting = True

        def read(host: str) -> dict[str, Any]:
            names = wanted[host]
            argv = registry.snapshot_argv(names, phase,
                                          {spec.name: spec.options for _, spec in by_host[host]})
            script = registry.snapshot_hostscript(names)
            result = self.transports[host].run(argv, check=False,
                                               stdin=hostscript(script) if script else None,
                                               timeout=registry.snapshot_timeout(names, phase))
            self.store.write_raw(trial.id, host, f"snapshot-{when}.out", result.stdout)
            files = collectors.split_tail(result.stdout)
            parsed: dict[str, Any] = {"_uptime": collectors.uptime_seconds(files)}
            for name in names:
                collector = registry.COLLECTORS[name]
                if all(p in files for p in collector.paths):
                    parsed[name] = collector.parse(files, self.host_info[host])
            return parsed

        done = each_host(list(wanted), read)
        if phase != "start":
            self.counting = False
        return done

    def stop_counting(self, variant: Variant) -> None:
        """A trial that ended between a window's first snapshot and its last (a failed
        workload, an interrupt, a snapshot that failed half way) leaves counting
        collectors running (perf stat): stop them, on every host that has one, ignoring
        what they print."""
        if not self.counting:
            return
        self.counting = False
        wanted = {h: registry.counting(sorted({spec.name for _, spec in specs}))
                  for h, specs in self.plan.collectors(variant).items()}
        wanted = {h: names for h, names in wanted.items() if names}

        def stop(host: str) -> None:
            with contextlib.suppress(NapilabError):  # a host gone: perf's own timeout
                self.transports[host].run(registry.snapshot_argv(wanted[host], "stop"),
                                          check=False,
                                          timeout=registry.snapshot_timeout(wanted[host], "stop"))

        each_host(list(wanted), stop)

    def collector_rows(self, trial: Trial, variant: Variant, before: dict[str, dict[str, Any]],
                       after: dict[str, dict[str, Any]], suffix: str = "") -> list[Row]:
        """Collector deltas per CPU plus totals over each collector's `cpus`; sources
        get `suffix` (`.idle` for the idle window)."""
        rows: list[Row] = []
        for host, specs in self.plan.collectors(variant).items():
            for role, cspec in specs:
                if cspec.name not in before[host] or cspec.name not in after[host]:
                    continue
                collector = registry.COLLECTORS[cspec.name]
                options = cspec.options
                if getattr(collector, "wants_cpus", False):
                    options = {**options, "cpus": cspec.cpus}
                values = collector.delta(before[host][cspec.name], after[host][cspec.name],
                                         options, self.host_info[host])
                values += collectors.totals(values, cspec.cpus)
                rows += [Row(trial.index, trial.variant, trial.rep, role, host,
                             cspec.name + suffix, v.metric, v.cpu, float(v.value), v.unit)
                         for v in values]
            if specs:
                interval = after[host]["_uptime"] - before[host]["_uptime"]
                rows.append(Row(trial.index, trial.variant, trial.rep, specs[0][0], host,
                                "snapshot" + suffix, "interval", None, interval, "s"))
        return rows
