"""Loading a profile (bound to an inventory) and executing the plan: what `napilab run`,
`calibrate` and `demo` share. Registered commands import these from here, never from
harness/cli/main.py, so the CLI modules import one another without a cycle.

Like every CLI module it imports the layers below inside the functions that use them:
`napilab --help` and shell completion then import none of them (benchmarks/startup.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napilab.harness.engine.progress import Progress
from napilab.harness.errors import ExitCode, InputError, NapilabError

if TYPE_CHECKING:
    from napilab.harness.hosts.session import HostSession
    from napilab.harness.hosts.waits import Waits
    from napilab.harness.inventory.inventory import Inventory
    from napilab.harness.profile.plan import Plan
    from napilab.harness.store.manifest import WaitRecord
    from napilab.harness.store.store import RunStore


def load(profile: str, inventory: str | None, transport: str | None = None, *,
         tuned: bool = True) -> tuple[Plan | None, Any]:
    """The profile, and its plan on INVENTORY. With TUNED false a profile `napilab
    tune` searches is refused before the inventory is read (`run`)."""
    from napilab.harness.profile.profile import load_profile

    prof = load_profile(profile)
    if not tuned and prof.tune is not None:
        raise InputError(f"{profile}: variant {prof.tune.variant} holds the parameters "
                         "`napilab tune` searches (tune:)", hint="`napilab tune` it; the "
                         "profile it writes (recommended.yaml) runs with `napilab run`")
    if inventory is None:
        return None, prof
    from napilab.harness.inventory.inventory import load_inventory
    from napilab.harness.profile.plan import bind

    inv: Inventory = load_inventory(inventory).with_transport(transport)
    return bind(prof, inv), prof


def execute(bound: Plan, results: str, *, keep_going: bool = False,
            formats: list[str] | None = None, break_lock: bool = False,
            progress: Progress | None = None, resume: str | None = None,
            allow_host_change: bool = False,
            on_store: Callable[[Path], None] | None = None,
            run_dir: Path | None = None, waits: Waits | None = None) -> ExitCode:
    """Lock the hosts, run (or resume) the plan, release, render the reports.

    Every host's lock is released on its own: one that cannot be reached (or was not
    restored) keeps its lock and is named, and the error that ended the run is the one
    raised. ON_STORE is told the run directory once it exists (before any trial). RUN_DIR:
    the run's directory itself (a replica's, under its fleet run: harness.cli.fleet)
    instead of RESULTS/PROFILE/STAMP-RUN_ID. WAITS: what to wait for before the first
    trial (harness.hosts.waits), recorded in the manifest."""
    from napilab.harness.hosts.session import close_sessions
    from napilab.harness.interrupts import deferred_interrupts, sigterm_as_interrupt
    from napilab.harness.store.store import check_room

    progress = progress or Progress()
    store = None
    if resume:  # a refused resume connects to no host
        from napilab.harness.store.runs import open_for_resume

        store = open_for_resume(bound, resume)
    check_room(store.dir if store else results)
    with sigterm_as_interrupt():  # a SIGTERM from here on is a Ctrl-C: hosts released
        sessions = _connect_while_importing(bound)
        from napilab.harness.engine.engine import Engine
        from napilab.harness.hosts import lock
        from napilab.harness.store.runs import new_manifest
        from napilab.harness.store.store import RunStore, new_run_id

        run_id = store.run_id if store else new_run_id()
        locked: list[Any] = []
        try:
            locked, waited = _lock_hosts(sessions, run_id, break_lock, waits, progress)
            if store is None:
                store = RunStore.create(results, bound.profile.name, new_manifest(bound),
                                        run_id=run_id, directory=run_dir)
            _record_waits(store, waited)
        except BaseException:
            with deferred_interrupts():
                lock.release_all(locked, run_id)
                close_sessions(sessions.values())
            raise
        code = ExitCode.ERROR
        report_error = None
        try:
            if on_store is not None:
                on_store(store.dir)
            engine = Engine(bound, store, sessions, progress=progress, keep_going=keep_going)
            code = engine.run(resume=resume is not None, allow_host_change=allow_host_change)
        finally:
            with deferred_interrupts():  # a second signal: raised once every lock is released
                kept = lock.release_all(locked, run_id)
                close_sessions(sessions.values())
            for line in kept:
                progress.note(line)
            if formats and store.manifest.trials:
                report_error = write_reports(store.dir, formats, progress)
    if report_error:
        raise NapilabError(f"the run is stored in {store.dir}, but {report_error}",
                           hint=f"`napilab report {store.dir}` renders it later")
    return code


def _lock_hosts(sessions: dict[str, HostSession], run_id: str, break_lock: bool,
                waits: Waits | None, progress: Progress) -> tuple[list[Any], list[WaitRecord]]:
    """Every host locked (harness.hosts.lock), waiting for a live run's lock and for quiet
    hosts when asked (harness.hosts.waits)."""
    from napilab.harness.hosts import lock

    transports = [s.transport for s in sessions.values()]
    if waits is None:
        return lock.acquire_all(transports, run_id, break_lock=break_lock), []
    from napilab.harness.hosts.waits import lock_hosts

    return lock_hosts(transports, run_id, break_lock=break_lock, waits=waits,
                      say=progress.note)


def _record_waits(store: RunStore, waited: list[WaitRecord]) -> None:
    """The waits in the manifest (a resumed run adds its own to the first run's)."""
    if waited:
        store.manifest.waits = [*(store.manifest.waits or []), *waited]
        store.save_manifest()


def _connect_while_importing(bound: Plan) -> dict[str, HostSession]:
    """The hosts' sessions, opened in a thread while this one imports what the run needs
    (the engine, the store, pyarrow: 0.3-0.4 s here), which would otherwise come before
    or after connecting (two SSH connects: 0.38 s here, mostly waiting on sshd). An
    import that fails, or Ctrl-C, closes the sessions once they are open."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from napilab.harness.hosts.session import close_sessions, open_sessions

    pool = ThreadPoolExecutor(1, thread_name_prefix="napilab-connect")
    opening = pool.submit(open_sessions, bound.hosts.values())
    pool.shutdown(wait=False)
    try:
        import napilab.harness.engine.engine
        import napilab.harness.hosts.lock
        import napilab.harness.store.runs  # noqa: F401
        return opening.result()
    except BaseException:
        def close(done: Future[dict[str, HostSession]]) -> None:
            if not done.cancelled() and done.exception() is None:
                close_sessions(done.result().values())

        opening.add_done_callback(close)
        raise


def write_reports(run_dir: Path, formats: list[str], progress: Progress) -> str | None:
    """Write the reports; what went wrong (said at once, never raised), or None."""
    from napilab.reports.formats import render

    try:
        for path in render.write_reports(run_dir, formats):
            progress.note(f"wrote {path}")
    except (NapilabError, OSError) as exc:
        reason = exc.message if isinstance(exc, NapilabError) else str(exc)
        progress.note(f"the report could not be written: {reason}; `napilab report {run_dir}` "
                      "renders it later")
        return f"the report could not be written: {reason}"
    return None
