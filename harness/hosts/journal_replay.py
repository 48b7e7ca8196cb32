"""`napilab restore`: replay the on-host journals an interrupted run left behind.

Host by host (a host that fails does not stop the others):
- the machine's journals (harness.hosts.lock.belongs: by machine and network namespace, so a
  host renamed in the inventory still finds them) are replayed newest first by the
  time each was created: when two killed runs changed one knob, the older run's
  journal holds the true original and is written last;
- a journal whose run is still alive, or which belongs to a run of another
  controller that still holds the lock, is left alone (`--break-lock` replays it);
- when the host rebooted since the journal was written (its boot_id differs), its
  entries are skipped: the values that run set went with the boot, and its originals
  are that boot's (entries keyed by a PID or a NAPI id name other objects now); only
  the kernel the host runs (harness.knobs.kinds.kernel) is put back, by booting it;
  a thread's entry is skipped when its PID now runs a thread of another name;
- a journal that cannot be read, or is not in napilab's shape, is named and left in
  place, and the lock stays with it;
- the lock is removed once none of the machine's journals is left, if its holder is
  dead or the lock is corrupt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from napilab.harness.errors import HostError, NapilabError
from napilab.harness.hosts import identity, lock, tracers
from napilab.harness.hosts.host_records import LockRecord
from napilab.harness.hosts.session import HostSession
from napilab.harness.hosts.settings import HostSettings, JournalError, journal_entries, tidy
from napilab.harness.inventory.inventory import Host
from napilab.harness.knobs import registry
from napilab.harness.knobs.backend import read_present
from napilab.harness.knobs.change import Change
from napilab.harness.knobs.kinds.napi_threads import SchedBackend
from napilab.harness.transport.connect import transport_for
from napilab.harness.transport.transport import Transport


def replay(hosts: Iterable[Host], *, break_lock: bool = False,
           connect: Callable[[Host], Transport] = transport_for) -> Iterator[str]:
    """A line per thing done or left; HostError naming every file or host that needs
    attention, after every host was tried."""
    failures: list[str] = []
    seen: dict[str, lock.Journal] = {}  # journals no host claimed, by path
    claimed: set[str] = set()
    for host in hosts:
        session = HostSession(connect(host))  # its knob backends go with its connection
        try:
            yield from _revive(host)
            found = lock.journals(session.transport)
            mine = [j for j in found if lock.belongs(j, session.transport)]
            claimed.update(j.path for j in mine)
            seen.update((j.path, j) for j in found if j not in mine)
            yield from _replay_host(session, mine, break_lock, failures)
        except NapilabError as exc:
            failures.append(str(exc))
        finally:
            session.close()
    for path, journal in seen.items():
        if path not in claimed:
            written = (journal.doc.host if journal.doc is not None else "") or "?"
            yield (f"{path} (host {written}, run {journal.run_id}) belongs to no "
                   "host of this inventory (by machine-id and network namespace): left in "
                   "place")
    if failures:
        raise HostError("\n".join(failures), hint="fix what is named and run napilab restore "
                        "again; a journal left in place keeps its host locked")


def _revive(host: Host) -> Iterator[str]:
    """A VM testbed guest that is not running (its QEMU died, a boot failed half way) is
    started on its own kernel first: its journals live on its disk."""
    boot = host.boot
    if boot is None or boot.method != "vm" or not boot.testbed or not boot.guest:
        return
    from napilab.harness.lab.vmbed import VmTestbed

    bed = VmTestbed(state_dir=boot.testbed)
    if bed.exists() and bed.revive(boot.guest, boot.timeout):
        yield f"{host.name}: guest {boot.guest} was not running: started on its own kernel"


def _replay_host(session: HostSession, mine: list[lock.Journal], break_lock: bool,
                 failures: list[str]) -> Iterator[str]:
    transport = session.transport
    name = transport.host.name
    holder = lock.read_lock(transport)
    if not mine:
        yield f"{name}: no journal, nothing to restore"
    ordered = sorted(mine, key=lambda j: j.created, reverse=True)
    for number, journal in enumerate(ordered):
        lines: list[str] = []
        try:
            _replay_one(session, journal, holder, break_lock, lines)
        except NapilabError as exc:
            failures.append(str(exc))
            older = ordered[number + 1:]
            if older:  # they hold older originals: written before this one, never after
                failures.append(f"{name}: {len(older)} older journal(s) left for the next "
                                "napilab restore: " + ", ".join(j.path for j in older))
            yield from lines
            yield from _clear_lock(transport, len(ordered) - number, break_lock)
            return
        yield from lines
    yield from _clear_lock(transport, 0, break_lock)


def _replay_one(session: HostSession, journal: lock.Journal,
                holder: LockRecord | lock.Corrupt | None, break_lock: bool,
                lines: list[str]) -> None:
    """Restore what `journal` records, appending what happened to `lines`; a
    NapilabError says why it was left in place."""
    transport = session.transport
    name = transport.host.name
    keep = ("it was left in place: restore the values it lists by hand (or check they "
            "are), then delete it")
    if journal.doc is None:
        raise HostError(f"{name}: the journal {journal.path} cannot be read: {journal.error}; "
                        + keep)
    try:
        entries = journal_entries(journal.doc, name)
    except JournalError as exc:
        raise HostError(f"{name}: {journal.path} is not a journal napilab can replay "
                        f"({exc.message}); " + keep) from None
    run = journal.run_id
    state = identity.holder_state(journal.doc)
    lock_of_run = lock.run_of(holder) == run
    live = state == identity.ALIVE or (state == identity.UNKNOWN and lock_of_run)
    if live and not break_lock:
        where = "here" if state == identity.ALIVE else \
            f"on controller {journal.doc.controller}, which holds the lock"
        raise HostError(f"{name}: run {run} may still be running ({where}, pid "
                        f"{journal.doc.pid}): its journal {journal.path} was left "
                        "alone; if that run is dead, `napilab restore --break-lock` replays it")
    kept, skipped = _fresh_entries(transport, journal, entries)
    lines += [f"{name}: {line}" for line in skipped]
    restored = HostSettings.from_journal(session, journal.doc, journal.path, kept).restore()
    tidy(transport, run)
    renamed = journal.doc.host
    alias = f" (journalled as host {renamed})" if renamed and renamed != name else ""
    lines.append(f"{name}: restored {len(restored)} setting(s) of run {run}{alias}: "
                 + (", ".join(f"{c.target}={registry.kind(c.kind).shown(c.original)}"
                              for c in restored) or "-"))


def _fresh_entries(transport: Transport, journal: lock.Journal,
                   entries: list[Change]) -> tuple[list[Change], list[str]]:
    """The entries that still name the objects they were written for, and a line per
    skipped one."""
    assert journal.doc is not None
    boot = journal.doc.boot_id
    if boot is not None and boot != identity.of(transport).boot_id:
        # what a run set lived in the kernel it ran on: a reboot took it, and its
        # originals belong to that boot, not to this one; only the kernel a host runs
        # (the boot backend) outlives a boot, and is put back
        kept = [c for c in entries if registry.backend_class(c.backend).survives_reboot]
        return kept, [
            f"skipped {c.target} (was {c.original}): the host rebooted since run "
            f"{journal.run_id}, so {c.path.split('/')[0]} names another object now"
            if registry.backend_class(c.backend).per_boot else
            f"skipped {c.target} (was {c.original}): the host rebooted since run "
            f"{journal.run_id}, which took the value that run set with it"
            for c in entries if c not in kept]
    threads = [c for c in entries if c.backend == SchedBackend.name]
    if not threads:
        return entries, []
    comms, _ = read_present(transport, sorted({f"/proc/{c.path.split('/')[0]}/comm"
                                               for c in threads}))
    kept, skipped = [], []
    for change in entries:
        comm = comms.get(f"/proc/{change.path.split('/')[0]}/comm", "").strip()
        recorded = change.target.rpartition("/")[0]
        if change.backend == SchedBackend.name and comm and comm != recorded:
            skipped.append(f"skipped {change.target} (was {change.original}): PID "
                           f"{change.path.split('/')[0]} is now {comm!r}, another thread")
        else:
            kept.append(change)
    return kept, skipped


def _clear_lock(transport: Transport, left: int, break_lock: bool) -> Iterator[str]:
    """The lock goes when no journal is left and its holder is dead; so does the tracer
    (harness.hosts.tracers) the dead run left attached."""
    name = transport.host.name
    holder = lock.read_lock(transport)
    if holder is None:
        yield from _stop_tracer(transport)
        return
    path = lock.lock_path(transport)
    remaining = lock.leftover(transport) if left == 0 else []
    if left or remaining:
        yield (f"{name}: the lock {path} ({lock.describe(holder)}) stays: a journal of this "
               "host is left")
        return
    state = "corrupt" if isinstance(holder, lock.Corrupt) else identity.holder_state(holder)
    if state == identity.ALIVE or (state == identity.UNKNOWN and not break_lock):
        why = ("it is running" if state == identity.ALIVE else
               "it is another controller's (--break-lock removes it)")
        yield f"{name}: the lock {path} of {lock.describe(holder)} stays: {why}"
        return
    transport.run(["rm", "-f", "--", path])
    yield from _stop_tracer(transport)
    tidy(transport, lock.run_of(holder) or "")
    if isinstance(holder, lock.Corrupt):
        yield f"{name}: removed the corrupt lock {path} ({holder.excerpt!r})"
        return
    what = "stale" if state == identity.DEAD else "live (--break-lock)"
    yield f"{name}: removed the {what} lock of {lock.describe(holder)}"


def _stop_tracer(transport: Transport) -> Iterator[str]:
    line = tracers.stop_left(transport)
    if line:
        yield line
