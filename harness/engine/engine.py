"""The run loop: for each trial (variant x repetition, in the profile's order)

    settings.apply -> [idle window] -> [warm-up] -> collectors before -> workload
    -> collectors after -> settings.restore

Set-up, snapshots and restore run on all hosts at once (harness.engine.fan_out). Restore
always runs (finally, SIGINT, SIGTERM). Each finished trial's raw output, rows and
manifest entry are on disk before the next trial starts, so an interrupted run loses
nothing and `--resume` continues it.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Any

from napilab.harness.engine import lab_faults, resume_check, workload_exec, workload_rows
from napilab.harness.engine.boots import Boots
from napilab.harness.engine.fan_out import HostOps
from napilab.harness.engine.plan_render import estimate
from napilab.harness.engine.progress import Progress
from napilab.harness.engine.steps import (
    ApplySettings,
    Deltas,
    Idle,
    RestoreSettings,
    Snapshot,
    TrialStep,
    Workload,
    trial_steps,
)
from napilab.harness.errors import (
    ExitCode,
    HostError,
    InputError,
    Interrupted,
    NapilabError,
    RestoreIncomplete,
    StorageError,
)
from napilab.harness.hosts import facts as host_facts
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings, workdir
from napilab.harness.interrupts import deferred_interrupts
from napilab.harness.profile import clients
from napilab.harness.profile.plan import Plan, check_online
from napilab.harness.profile.profile import Trial, Variant
from napilab.harness.profile.sections import ProcessSpec
from napilab.harness.store.command_record import CommandRecord
from napilab.harness.store.manifest import HostFacts, TrialRecord
from napilab.harness.store.store import Row, RunStore
from napilab.harness.store.summary import write_summary
from napilab.runners.registry import TOOLS
from napilab.runners.workloads.workload import Context, ToolResult


class Engine:
    def __init__(self, plan: Plan, store: RunStore, sessions: dict[str, HostSession], *,
                 progress: Progress | None = None, keep_going: bool = False) -> None:
        self.plan = plan
        self.store = store
        self.sessions = sessions
        self.transports = {name: s.transport for name, s in sessions.items()}
        self.progress = progress or Progress()
        self.keep_going = keep_going
        self.hosts = HostOps(plan, store, self.transports)
        self.boots = Boots(plan, sessions, store.run_id,
                           say=lambda line: self.progress.phase(line))

    # -- run ---------------------------------------------------------------------------

    def run(self, *, resume: bool = False, allow_host_change: bool = False) -> ExitCode:
        """Every trial to run (all, or those a resumed run has not finished). A SIGTERM
        arrives as a Ctrl-C (harness.cli.execute, the one caller, holds that from the
        first connection to the last lock released): the trial under way restores its
        hosts and the run is interrupted."""
        manifest = self.store.manifest
        facts = self.hosts.facts()
        self._check_online(resume)
        self._check_af_xdp(facts, resume)
        if resume:  # before anything is recorded: a refusal leaves the run as it was
            resume_check.compare(manifest, facts, allow_host_change, self.progress,
                                 booted=set(self.plan.booted_hosts))
            self.store.reserve(required=True)  # before the first trial: room for its end
        trials = self._schedule(resume)
        manifest.status, manifest.incomplete = "running", True
        if manifest.started is None:
            manifest.started = time.time()
        if resume:
            manifest.resumed = [*(manifest.resumed or []), time.time()]
        todo = [t for t in trials if manifest.trial(t.index).status != "ok"]
        per_trial = estimate(self.plan) / max(1, len(self.plan.trials()))
        self.progress.run_start(self.store.run_id, str(self.store.dir), len(trials), per_trial)
        self.progress.done = len(trials) - len(todo)
        self.store.reserve()  # topped up (a new run's store held it when created)
        completed = False
        try:
            if manifest.host_facts is None:
                manifest.host_facts = facts
            if self.boots.active:
                self.boots.resolve_all()
            self._warmup_trials(resume)
            self.store.save_manifest(final=False)
            failed = self._run_trials(todo, len(trials))
            self._boot_back()
            self._check_hosts(facts)
            done = sum(1 for t in manifest.trials if t.status == "ok")
            manifest.incomplete = done < len(trials)
            manifest.status = "complete" if not manifest.incomplete else "partial"
            if failed and not self.keep_going:
                manifest.status = "failed"
                error = next(t.error for t in manifest.trials if t.status == "failed")
                raise NapilabError(f"trial failed: {error}",
                                   hint="hosts were restored; --keep-going runs the rest")
            completed = True
            return ExitCode.PARTIAL if failed else ExitCode.OK
        except KeyboardInterrupt:
            manifest.status = "interrupted"
            raise Interrupted("interrupted; every host was restored; "
                              f"`napilab run ... --resume {self.store.dir}` continues") from None
        except StorageError as exc:
            manifest.status = "failed"
            raise StorageError(exc.message, hint=(exc.hint + "; " if exc.hint else "")
                               + "then `napilab run PROFILE -i INVENTORY --resume "
                               f"{self.store.dir}` continues the run") from None
        except NapilabError:
            manifest.status = "failed"
            raise
        finally:
            # how the run ended is written whole: a second signal (Ctrl-C twice, or the
            # SIGTERM PR_SET_PDEATHSIG sends a replica once per exiting thread of its
            # controller) is raised after it, not in the middle of the manifest's save
            with deferred_interrupts():
                if manifest.status == "running":  # raised inside a handler above
                    manifest.status = ("interrupted" if isinstance(sys.exception(),
                                                                   KeyboardInterrupt)
                                       else "failed")
                if not self.boots.finished:
                    self._boot_back(raise_error=False)
                manifest.ended = time.time()
                self._merge_samples()
                self._save_last(raise_error=completed)
                self._write_summary()
            self.progress.run_end(str(manifest.status))

    def _check_online(self, resume: bool) -> None:
        """Every variant's CPU lists against the CPUs the hosts have online (just read),
        before any knob on any host; a new run refused here leaves no directory."""
        problems = check_online(self.plan, {h: i.online_cpus
                                            for h, i in self.hosts.host_info.items()})
        if problems:
            if not resume:
                self.store.discard()
            raise InputError(sorted(set(problems), key=str))

    def _check_af_xdp(self, facts: dict[str, HostFacts], resume: bool) -> None:
        """Refused before any knob: an AF_XDP program on a host without AF_XDP."""
        problems = af_xdp_problems(self.plan, facts)
        if problems:
            if not resume:
                self.store.discard()
            raise HostError("; ".join(problems),
                            hint="`napilab hosts check` shows each host's XDP support")

    def _boot_back(self, *, raise_error: bool = True) -> None:
        """Every booted host back on its own kernel (its kernel journal stays where
        that fails, for `napilab restore`)."""
        failures = self.boots.finish()
        if failures and raise_error:
            raise RestoreIncomplete("restore incomplete: " + "; ".join(failures),
                                    hint="`napilab restore -i INVENTORY` boots the host back")
        for failure in failures:
            self.progress.note(failure)

    def _merge_samples(self) -> None:
        try:
            self.store.merge_samples()
        except (StorageError, OSError) as exc:
            self.progress.note(f"the per-trial sample files stay in {self.store.dir}/samples "
                               f"(they are read as they are): {exc}")

    def _write_summary(self) -> None:
        """RUN_DIR/summary.json (harness.store.summary): what readers of many runs scan
        first; a run without it is still read whole, so a failure is only said."""
        try:
            write_summary(self.store.dir, self.store.manifest)
        except (NapilabError, OSError, ValueError) as exc:
            self.progress.note(f"summary.json not written ({exc}): `napilab push` writes it")

    def _save_last(self, *, raise_error: bool) -> None:
        """The manifest's final state. A failure to write it is raised after a run that
        completed, and only said after one that failed (its error is the one to show)."""
        try:
            self.store.save_manifest()
        except StorageError as exc:
            if raise_error:
                raise
            self.progress.note(f"{exc.message}: manifest.json does not show how the run "
                               "ended")
        finally:
            self.store.release_reserve()

    def _schedule(self, resume: bool) -> list[Trial]:
        """The trial order: the profile's, or on resume the one the manifest recorded
        (a randomized order is not drawn again)."""
        manifest = self.store.manifest
        if resume:
            return [Trial(t.index, t.variant, t.rep) for t in manifest.trials]
        trials = self.plan.trials()
        manifest.trials = [TrialRecord(t.index, t.id, t.variant, t.rep, "pending") for t in trials]
        return trials

    def _run_trials(self, trials: list[Trial], total: int) -> int:
        failed = 0
        for position, trial in enumerate(trials):
            if not self._run_trial(trial):
                failed += 1
                if not self.keep_going:
                    break
            if self.plan.profile.cooldown and position < len(trials) - 1:
                time.sleep(self.plan.profile.cooldown)
        return failed

    def _warmup_trials(self, resume: bool) -> None:
        """`warmup_trials: N`: N trials (variants in turn) before the measured ones,
        whose results are not kept."""
        count = 0 if resume else self.plan.profile.warmup_trials
        variants = self.plan.profile.variants
        for i in range(count):
            variant = variants[i % len(variants)]
            trial = Trial(0, variant.name, 0)
            self.progress.phase("warm-up trial", detail=f"{i + 1}/{count} ({variant.name})")
            settings = self._settings()
            try:
                self.boots.before(variant)
                self.hosts.apply(trial, variant, settings)
                self._workload(trial, variant)
            finally:
                with deferred_interrupts():
                    self.hosts.restore(settings)
        if count:
            shutil.rmtree(self.store.dir / "raw" / trial.id, ignore_errors=True)

    def _check_hosts(self, facts: dict[str, HostFacts]) -> None:
        changed, unread = self.hosts.changed_hosts(facts, booted=set(self.plan.booted_hosts))
        for host, why in unread.items():
            self.progress.note(f"host {host} could not be read at the end of the run ({why}): "
                               "whether it rebooted or changed kernel is not known")
        flagged = dict(self.store.manifest.hosts_changed or {})
        for host, what in changed.items():
            flagged[host] = sorted({*flagged.get(host, []), *what})
            self.progress.note(f"host {host} changed during the run: {', '.join(what)} "
                               "differ(s) from the start; its results are suspect")
        self.store.manifest.hosts_changed = flagged or None

    def _settings(self) -> dict[str, HostSettings]:
        return {name: HostSettings(s, self.store.run_id, policy=self.plan.profile.on_mismatch)
                for name, s in self.sessions.items()}

    # -- one trial -----------------------------------------------------------------------

    def _run_trial(self, trial: Trial) -> bool:
        variant = self.plan.profile.variant(trial.variant)
        entry = self.store.manifest.trial(trial.index)
        entry.restart()
        entry.status, entry.start = "running", time.time()
        self.progress.trial_start(trial.index, trial.variant, trial.rep)
        settings = self._settings()
        steps = trial_steps(variant)
        assert isinstance(steps[-1], RestoreSettings)  # run in `finally`, always
        rows: list[Row] = []
        booting = False
        try:
            if (self.store.dir / "raw" / trial.id).exists():  # a resumed trial starts over
                shutil.rmtree(self.store.dir / "raw" / trial.id)
            self.store.drop_trial(trial.index)
            self.store.save_manifest(final=False)  # watchers see which trial runs
            try:
                snapshots: dict[str, dict[str, dict[str, Any]]] = {}
                if self.boots.active:
                    self.progress.phase("kernels")
                    booting = True
                    entry.settings = self.boots.before(variant)
                    booting = False
                    self.store.save_manifest(final=False)
                for step in steps[:-1]:
                    rows += self._step(step, trial, variant, settings, snapshots)
            finally:
                with deferred_interrupts():
                    self.progress.phase("restoring")
                    self.hosts.stop_counting(variant)
                    entry.restore = self.hosts.restore(settings)
        except KeyboardInterrupt:
            entry.status, entry.end = "interrupted", time.time()
            raise
        except NapilabError as exc:
            try:
                # a host that did not come up on the trial's kernel is that kernel's
                # failure, not the lab's: the boot itself started a guest that died or
                # stalled again, twice (harness.lab.vmbed), so the trial is not run again
                again = not booting and self._lab_fault(trial, entry, settings, exc)
            except NapilabError as recovery:
                return self._trial_failed(trial, entry, recovery)
            return self._run_trial(trial) if again else self._trial_failed(trial, entry, exc)
        try:
            self.store.add_rows(rows)
            entry.status, entry.end = "ok", time.time()
            self.store.save_manifest(final=False)
        except StorageError as exc:
            return self._trial_failed(trial, entry, exc)
        self.progress.trial_end(trial.index, "ok")
        return True

    def _lab_fault(self, trial: Trial, entry: TrialRecord, settings: dict[str, HostSettings],
                   exc: NapilabError) -> bool:
        """A VM guest that dropped: its console kept, booted again if it does not answer,
        the trial's settings restored; True when the trial is to run again
        (harness.engine.lab_faults). Raises what the restore raises."""
        hosts = lab_faults.dropped(exc, self.sessions)
        if not hosts or len(entry.lab_faults or []) >= lab_faults.RETRIES:
            return False
        entry.lab_faults = [*(entry.lab_faults or []), str(exc)]
        self.progress.note(f"trial {trial.index}: {', '.join(hosts)} dropped ({exc.message}): "
                           "a fault of the VM lab, not a result; the trial runs again")
        for host in hosts:
            session = self.sessions[host]
            self.store.write_raw(lab_faults.raw_dir(trial.id, len(entry.lab_faults)), host,
                                 "console.log", lab_faults.console(session))
            if not lab_faults.answers(session):
                self.progress.phase(f"{host}: booting it again")
                took = lab_faults.boot_again(session)
                self.progress.note(f"{host} did not answer: booted again ({took:.0f} s), "
                                   "on the kernel the testbed started it with")
                if host in self.boots.current:  # the next trial boots its kernel again
                    self.boots.current[host] = None
            session.rebooted()
        with deferred_interrupts():
            self.progress.phase("restoring")
            self.hosts.restore(settings)
        self.store.save_manifest(final=False)
        return True

    def _trial_failed(self, trial: Trial, entry: TrialRecord, exc: NapilabError) -> bool:
        """Record the failure; raise when the run cannot go on (a host not restored, a
        results directory that cannot be written)."""
        entry.status, entry.error, entry.end = "failed", str(exc), time.time()
        self.progress.trial_end(trial.index, "failed", str(exc))
        try:
            self.store.save_manifest(final=False)
        except StorageError:
            if not isinstance(exc, StorageError):
                raise
            # the results disk is full: the run ends, and its final save (through the
            # reserve) records this trial's failure
        if isinstance(exc, StorageError | RestoreIncomplete):
            raise exc
        return False

    def _step(self, step: TrialStep, trial: Trial, variant: Variant,
              settings: dict[str, HostSettings],
              snapshots: dict[str, dict[str, dict[str, Any]]]) -> list[Row]:
        """One step of harness.engine.steps; returns the rows it measured."""
        match step:
            case ApplySettings():
                self.progress.phase("applying settings")
                entry = self.store.manifest.trial(trial.index)
                entry.settings = [*(entry.settings or []),
                                  *self.hosts.apply(trial, variant, settings)]
                absent = [c.target for c in entry.settings if c.state == "absent"]
                if absent:
                    entry.absent = absent
            case Snapshot(name=name):
                snapshots[name] = self.hosts.snapshot(trial, variant, name)
            case Idle(seconds=seconds):
                self.progress.phase("idle window", detail=f"{seconds:g}s")
                time.sleep(seconds)
            case Workload(warmup=True):
                self._workload(trial, variant, warmup=True)
            case Workload():
                return self._tool_rows(trial, variant, self._workload(trial, variant))
            case Deltas(before=before, after=after, suffix=suffix):
                return self.hosts.collector_rows(trial, variant, snapshots[before],
                                                 snapshots[after], suffix=suffix)
            case RestoreSettings():
                raise AssertionError("restore runs in `finally`")
        return []

    def _workload(self, trial: Trial, variant: Variant, *, warmup: bool = False
                  ) -> list[tuple[ProcessSpec, ToolResult]]:
        """The workload run once; each reporting client's role with what it reported
        (one client: one; several, each of an `each` tool's, or a master's)."""
        spec = variant.workload
        tool = TOOLS[spec.tool]
        client_host = self.plan.host_of(spec.client.role)
        server_host = self.plan.host_of(spec.server.role)
        duration = spec.warmup if warmup else spec.duration
        ctx = Context(target=server_host.target_address, bind=server_host.target_address,
                      duration=duration, workdir=workdir(self.store.run_id),
                      trial=trial.id)
        commands = clients.build(self.plan, spec, ctx)
        record = workload_exec.WorkloadRecord()
        self.progress.phase("warm-up" if warmup else spec.tool, client_host.name,
                            f"{duration:g}s")
        try:
            if any(c.commands.client_files or c.commands.server_files
                   for c in commands.clients):
                for host in {*(c.host for c in commands.clients), server_host.name}:
                    self.transports[host].run(["mkdir", "-p", ctx.workdir])
            outputs = workload_exec.run(
                commands, server=spec.server, server_host=server_host.name,
                transports=self.transports, timeout=spec.timeout, record=record,
                started=self.store.warm)  # while the run waits on its first workload
        finally:
            self._store_workload(trial, record, "warmup-" if warmup else "")
        return [(client.process, tool.parse(output))
                for client, output in zip(commands.runners, outputs, strict=True)]

    def _store_workload(self, trial: Trial, record: workload_exec.WorkloadRecord,
                        prefix: str) -> None:
        named = [(f"{prefix}{client.name}", result) for client, result in record.clients]
        for name, result in [*named, (f"{prefix}server", record.server)]:
            if result is None:
                continue
            self.store.write_raw(trial.id, result.host, f"{name}.out", result.stdout)
            self.store.write_raw(trial.id, result.host, f"{name}.err", result.stderr)
            self.store.write_raw_record(trial.id, result.host, f"{name}.json", CommandRecord(
                argv=list(result.argv), exit_code=result.exit_code, start=result.start,
                duration=result.duration))

    def _tool_rows(self, trial: Trial, variant: Variant,
                   results: list[tuple[ProcessSpec, ToolResult]]) -> list[Row]:
        rows, latencies = workload_rows.rows(self.plan, trial, variant.workload, results)
        if latencies is not None:
            self.store.write_latencies(trial.id, latencies)
        return rows


def af_xdp_problems(plan: Plan, facts: dict[str, HostFacts]) -> list[str]:
    """Each host whose kernel has no AF_XDP sockets (its facts' `af_xdp`) where a variant
    runs an AF_XDP program (xdpsock, testpmd's net_af_xdp vdev)."""
    problems = []
    for variant in plan.profile.variants:
        for process in (*variant.workload.clients, variant.workload.server):
            host = plan.host_of(process.role).name
            program = host_facts.af_xdp_program(process.args)
            if program and host in facts and facts[host].get("af_xdp") == "no":
                problems.append(f"{host}: variant {variant.name} runs {program}, which needs "
                                "AF_XDP sockets, and the kernel has none (/proc/net/protocols "
                                "lists no XDP: CONFIG_XDP_SOCKETS)")
    return list(dict.fromkeys(problems))
