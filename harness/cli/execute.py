"""Loading a profile (bound to an inventory) and executing the plan: what `napilab run`,
`calibrate` and `demo` share. Registered commands import these from here, never from
harness/cli/main.py, so the CLI modules import one another without a cycle."""

from __future__ import annotations

from typing import Any

from harness.engine.progress import Progress
from harness.errors import ExitCode
from harness.profile.inventory import Inventory, load_inventory
from harness.profile.plan import Plan, bind
from harness.profile.profile import load_profile
from harness.transport.connect import close, connect


def load(profile: str, inventory: str | None, transport: str | None = None
         ) -> tuple[Plan | None, Any]:
    prof = load_profile(profile)
    if inventory is None:
        return None, prof
    inv: Inventory = load_inventory(inventory).with_transport(transport)
    return bind(prof, inv), prof


def execute(bound: Plan, results: str, *, keep_going: bool = False,
            formats: list[str] | None = None, break_lock: bool = False,
            progress: Progress | None = None, resume: str | None = None) -> ExitCode:
    """Lock the hosts, run (or resume) the plan, release, render the reports."""
    from harness.engine.engine import Engine
    from harness.hosts import lock
    from harness.hosts.settings import tidy
    from harness.store.runs import new_manifest, open_for_resume
    from harness.store.store import RunStore, new_run_id

    progress = progress or Progress()
    store = open_for_resume(bound, resume) if resume else None
    run_id = store.run_id if store else new_run_id()
    transports = connect(bound.hosts.values())
    try:
        locked = lock.acquire_all(transports.values(), run_id, break_lock=break_lock)
    except BaseException:
        close(transports.values())
        raise
    if store is None:
        store = RunStore.create(results, bound.profile.name, new_manifest(bound), run_id=run_id)
    code = ExitCode.ERROR
    try:
        engine = Engine(bound, store, transports, progress=progress, keep_going=keep_going)
        code = engine.run(resume=resume is not None)
    finally:
        for transport in locked:
            lock.release(transport, run_id)
            tidy(transport, run_id)
        close(transports.values())
        if formats and store.manifest.get("trials"):
            from reports.formats.render import write_reports

            for path in write_reports(store.dir, formats):
                progress.note(f"wrote {path}")
    return code
