"""The run loop: for each trial (variant x repetition, in the profile's order)

    settings.apply -> collectors before -> workload -> collectors after -> settings.restore

restore always runs (finally, SIGINT, SIGTERM), and each finished trial's raw output,
rows and manifest entry are on disk before the next trial starts.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from harness import facts as host_facts
from harness import workload_exec
from harness.errors import ExitCode, HostError, Interrupted, NapilabError
from harness.plan import Plan
from harness.profile import Trial, Variant
from harness.settings import Change, HostSettings
from harness.store import Row, RunStore
from harness.transport import Transport
from runners import collector as collectors
from runners.base import Value
from runners.registry import TOOLS
from runners.workload import Context, ToolResult

Progress = Callable[[str], None]


@contextmanager
def deferred_interrupts() -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM while hosts are being restored; re-raise after."""
    received: list[int] = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise KeyboardInterrupt


def _sigterm_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class Engine:
    def __init__(self, plan: Plan, store: RunStore, transports: dict[str, Transport], *,
                 progress: Progress = lambda line: None, keep_going: bool = False) -> None:
        self.plan = plan
        self.store = store
        self.transports = transports
        self.progress = progress
        self.keep_going = keep_going
        self.host_info: dict[str, collectors.HostInfo] = {}

    # -- run ---------------------------------------------------------------------------

    def run(self) -> ExitCode:
        previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
        manifest = self.store.manifest
        manifest.update(started=time.time(), status="running", incomplete=True)
        try:
            self._gather_facts()
            trials = self.plan.trials()
            manifest["trials"] = [self._trial_entry(t) for t in trials]
            self.store.save_manifest()
            failed = 0
            for trial in trials:
                if not self._run_trial(trial, len(trials)):
                    failed += 1
                    if not self.keep_going:
                        break
                if self.plan.profile.cooldown and trial.index < len(trials):
                    time.sleep(self.plan.profile.cooldown)
            done = sum(1 for t in manifest["trials"] if t["status"] == "ok")
            manifest["incomplete"] = done < len(trials)
            manifest["status"] = "complete" if not manifest["incomplete"] else "partial"
            if failed and not self.keep_going:
                manifest["status"] = "failed"
                error = next(t["error"] for t in manifest["trials"] if t["status"] == "failed")
                raise NapilabError(f"trial failed: {error}",
                                   hint="hosts were restored; --keep-going runs the rest")
            return ExitCode.PARTIAL if failed else ExitCode.OK
        except KeyboardInterrupt:
            manifest["status"] = "interrupted"
            raise Interrupted("interrupted; every host was restored") from None
        finally:
            manifest["ended"] = time.time()
            self.store.save_manifest()
            signal.signal(signal.SIGTERM, previous)

    def _trial_entry(self, trial: Trial) -> dict[str, Any]:
        return {"index": trial.index, "id": trial.id, "variant": trial.variant,
                "rep": trial.rep, "status": "pending"}

    def _gather_facts(self) -> None:
        hosts: dict[str, Any] = {}
        for name, transport in self.transports.items():
            ifaces = [self.plan.iface_of(role) for role, h in self.plan.role_hosts.items()
                      if h.name == name]
            self.progress(f"host {name}: gathering facts")
            facts = host_facts.gather(transport, [i for i in ifaces if i])
            hosts[name] = facts
            self.host_info[name] = host_facts.host_info(facts)
        self.store.manifest["host_facts"] = hosts

    # -- one trial -----------------------------------------------------------------------

    def _run_trial(self, trial: Trial, total: int) -> bool:
        variant = self.plan.profile.variant(trial.variant)
        entry = self.store.manifest["trials"][trial.index - 1]
        entry.update(status="running", start=time.time())
        self.progress(f"trial {trial.index}/{total}: {trial.variant} rep {trial.rep}")
        settings = {name: HostSettings(t, self.store.run_id, policy=self.plan.profile.on_mismatch)
                    for name, t in self.transports.items()}
        rows: list[Row] = []
        try:
            try:
                entry["settings"] = self._apply(trial, variant, settings)
                absent = [c["target"] for c in entry["settings"]
                          if c["kind"] == "kprobe" and c["effective"] == "absent"]
                if absent:
                    entry["absent"] = absent
                rows = self._measure(trial, variant)
            finally:
                with deferred_interrupts():
                    entry["restore"] = self._restore(trial, settings)
        except KeyboardInterrupt:
            entry.update(status="interrupted", end=time.time())
            raise
        except NapilabError as exc:
            entry.update(status="failed", error=str(exc), end=time.time())
            self.progress(f"trial {trial.index}/{total}: FAILED: {exc}")
            self.store.save_manifest()
            if isinstance(exc, HostError) and "restore incomplete" in str(exc):
                raise
            return False
        self.store.add_rows(rows)
        entry.update(status="ok", end=time.time())
        self.store.save_manifest()
        return True

    def _measure(self, trial: Trial, variant: Variant) -> list[Row]:
        """Idle window (if any), warm-up (if any), then the measured load."""
        spec = variant.workload
        rows: list[Row] = []
        if spec.idle:
            self.progress(f"  idle window {spec.idle:g}s")
            start = self._snapshot(trial, variant, "idle-before")
            time.sleep(spec.idle)
            end = self._snapshot(trial, variant, "idle-after")
            rows += self._collector_rows(trial, variant, start, end, suffix=".idle")
        if spec.warmup:
            self._workload(trial, variant, warmup=True)
        before = self._snapshot(trial, variant, "before")
        result = self._workload(trial, variant)
        after = self._snapshot(trial, variant, "after")
        return rows + self._rows(trial, variant, result, before, after)

    def _apply(self, trial: Trial, variant: Variant,
               settings: dict[str, HostSettings]) -> list[dict[str, Any]]:
        applied: list[dict[str, Any]] = []
        for host, wanted in self.plan.settings(variant).items():
            if not wanted:
                continue
            self.progress(f"  {host}: applying {len(wanted)} setting(s)")
            changes = settings[host].apply(wanted)
            applied += [{"host": host, **asdict(c)} for c in changes]
            self.store.write_raw_json(trial.id, host, "settings.json",
                                      [asdict(c) for c in changes])
        return applied

    def _restore(self, trial: Trial, settings: dict[str, HostSettings]) -> list[dict[str, Any]]:
        restored: list[dict[str, Any]] = []
        errors: list[str] = []
        for host, host_settings in settings.items():
            if not host_settings.changes:
                continue
            try:
                changes: list[Change] = host_settings.restore()
                restored += [{"host": host, "target": c.target, "path": c.path,
                              "restored": c.original} for c in changes]
            except NapilabError as exc:
                errors.append(str(exc))
        if errors:
            raise HostError("restore incomplete: " + "; ".join(errors),
                            hint="`napilab restore -i INVENTORY` replays the on-host journals")
        return restored

    def _snapshot(self, trial: Trial, variant: Variant, when: str) -> dict[str, dict[str, Any]]:
        """One exec per host reads every collector's files; returns parsed snapshots."""
        out: dict[str, dict[str, Any]] = {}
        for host, specs in self.plan.collectors(variant).items():
            names = sorted({spec.name for _, spec in specs})
            result = self.transports[host].run(collectors.snapshot_argv(names), check=False)
            self.store.write_raw(trial.id, host, f"snapshot-{when}.out", result.stdout)
            files = collectors.split_tail(result.stdout)
            parsed: dict[str, Any] = {"_uptime": collectors.uptime_seconds(files)}
            for name in names:
                collector = collectors.COLLECTORS[name]
                if all(p in files for p in collector.paths):
                    parsed[name] = collector.parse(files, self.host_info[host])
            out[host] = parsed
        return out

    def _workload(self, trial: Trial, variant: Variant, *, warmup: bool = False) -> ToolResult:
        spec = variant.workload
        tool = TOOLS[spec.tool]
        client_host = self.plan.host_of(spec.client.role)
        server_host = self.plan.host_of(spec.server.role)
        duration = spec.warmup if warmup else spec.duration
        ctx = Context(target=server_host.target_address, bind=server_host.target_address,
                      duration=duration, workdir=f"/var/tmp/napilab/{self.store.run_id}",
                      trial=trial.id)
        commands = tool.commands(self.plan.process_args(spec.client),
                                 self.plan.process_args(spec.server), ctx)
        record = workload_exec.WorkloadRecord()
        self.progress(f"  {client_host.name}: {spec.tool} for {duration:g}s"
                      + (" (warm-up, not measured)" if warmup else ""))
        try:
            if commands.client_files or commands.server_files:
                for host in {client_host.name, server_host.name}:
                    self.transports[host].run(["mkdir", "-p", ctx.workdir])
            output = workload_exec.run(
                commands, client=spec.client, server=spec.server,
                client_transport=self.transports[client_host.name],
                server_transport=self.transports[server_host.name],
                duration=spec.duration, timeout=spec.timeout, record=record)
        finally:
            self._store_workload(trial, record, "warmup-" if warmup else "")
        return tool.parse(output)

    def _store_workload(self, trial: Trial, record: workload_exec.WorkloadRecord,
                        prefix: str) -> None:
        for name, result in ((f"{prefix}client", record.client),
                             (f"{prefix}server", record.server)):
            if result is None:
                continue
            self.store.write_raw(trial.id, result.host, f"{name}.out", result.stdout)
            self.store.write_raw(trial.id, result.host, f"{name}.err", result.stderr)
            self.store.write_raw_json(trial.id, result.host, f"{name}.json", {
                "argv": list(result.argv), "exit_code": result.exit_code,
                "start": result.start, "duration": result.duration})

    def _rows(self, trial: Trial, variant: Variant, result: ToolResult,
              before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[Row]:
        spec = variant.workload
        rows: list[Row] = []

        def add(role: str, source: str, values: list[Value]) -> None:
            host = self.plan.host_of(role).name
            rows.extend(Row(trial.index, trial.variant, trial.rep, role, host, source,
                            v.metric, v.cpu, float(v.value), v.unit) for v in values)

        add(spec.client.role, spec.source, result.client)
        add(spec.server.role, spec.source, result.server)
        if result.latencies_us is not None:
            self.store.write_latencies(trial.id, result.latencies_us)
        return rows + self._collector_rows(trial, variant, before, after)

    def _collector_rows(self, trial: Trial, variant: Variant, before: dict[str, dict[str, Any]],
                        after: dict[str, dict[str, Any]], suffix: str = "") -> list[Row]:
        """Collector deltas per CPU plus totals over each collector's `cpus`; sources
        get `suffix` (`.idle` for the idle window)."""
        rows: list[Row] = []
        for host, specs in self.plan.collectors(variant).items():
            for role, cspec in specs:
                if cspec.name not in before[host] or cspec.name not in after[host]:
                    continue
                collector = collectors.COLLECTORS[cspec.name]
                values = collector.delta(before[host][cspec.name], after[host][cspec.name],
                                         cspec.options, self.host_info[host])
                values += collectors.totals(values, cspec.cpus)
                rows += [Row(trial.index, trial.variant, trial.rep, role, host,
                             cspec.name + suffix, v.metric, v.cpu, float(v.value), v.unit)
                         for v in values]
            if specs:
                interval = after[host]["_uptime"] - before[host]["_uptime"]
                rows.append(Row(trial.index, trial.variant, trial.rep, specs[0][0], host,
                                "snapshot" + suffix, "interval", None, interval, "s"))
        return rows
