"""One napilab run per host at a time, and never over settings a dead run left behind.

The lock is a file on the host, `/var/tmp/napilab/lock-<machine>.json`, keyed by the
machine and network namespace (harness.identity), so one machine reached under two
inventory names has one lock. It is written to a temporary file and hard-linked into
place: `ln` fails if the lock exists, and a lock is either complete or absent (a full
disk leaves no empty lock). It names the run, the controller (host name, machine-id,
boot_id, PID and the PID's start time) and the start time.

A lock whose process is gone (the controller rebooted, the PID no longer runs or now
belongs to another process) is stale: napilab explains it and still refuses, since the
dead run may have left settings behind; `napilab restore` replays its journal and
clears the lock. `--break-lock` takes the lock anyway. A corrupt lock (empty, not
JSON) is refused the same way and cleared by `napilab restore`.

Taking a lock also looks for journals on the machine: while one is there, some run's
settings were not restored, and a new run would record the changed values as its
"originals". The run is refused, even with `--break-lock`, until `napilab restore`
replayed them. A lock is released only when the run's own journals are gone.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from napilab.harness.errors import HostError, InputError, NapilabError
from napilab.harness.hosts import identity
from napilab.harness.hosts.host_records import JournalRecord, LockRecord
from napilab.harness.hosts.setting_steps import CREATE_NEW, JOURNAL_DIR
from napilab.harness.hosts.settings import tidy
from napilab.harness.records import codec
from napilab.harness.transport.transport import Transport

# Journals on the host with their modification times, one per line: "MTIME PATH".
LIST_JOURNALS = ["find", JOURNAL_DIR, "-maxdepth", "1", "-name", "journal-*.json",
                 "-printf", "%T@ %p\\n"]
RESTORE_HINT = "`napilab restore -i INVENTORY` replays it and clears the lock"


def lock_path(transport: Transport) -> str:
    return f"{JOURNAL_DIR}/lock-{identity.of(transport).key}.json"


class Locked(HostError):
    """A host is locked by another run that is alive: the one refusal that waiting can
    end (`napilab run --wait-lock`, harness.hosts.waits)."""


@dataclass(frozen=True)
class Corrupt:
    """A lock file that is empty or not a lock napilab wrote (its first bytes)."""

    excerpt: str


def describe(holder: LockRecord | Corrupt) -> str:
    if isinstance(holder, Corrupt):
        return f"a corrupt lock ({holder.excerpt!r})"
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(holder.started))
    return f"run {holder.run_id} (pid {holder.pid} on {holder.controller}, since {started})"


def is_stale(holder: LockRecord | Corrupt) -> bool:
    """The holder's process is gone (judged only for this controller's runs)."""
    return isinstance(holder, LockRecord) and identity.holder_state(holder) == identity.DEAD


def run_of(holder: LockRecord | Corrupt | None) -> str | None:
    """The run that holds the lock (None: no lock, or a corrupt one)."""
    return holder.run_id if isinstance(holder, LockRecord) else None


def read_lock(transport: Transport) -> LockRecord | Corrupt | None:
    """The lock (None: there is none); Corrupt when it is empty or not a lock."""
    result = transport.run(["cat", "--", lock_path(transport)], check=False)
    if result.exit_code != 0:
        return None
    try:
        return codec.parse(result.stdout, LockRecord, lock_path(transport))
    except InputError:
        return Corrupt(result.stdout[:80])


@dataclass(frozen=True)
class Journal:
    """A journal file on a host and what it says, as far as it could be read."""

    path: str
    mtime: float
    doc: JournalRecord | None  # None: unreadable, not JSON or not a journal (`error`)
    error: str = ""

    @property
    def run_id(self) -> str:
        return (self.doc.run_id if self.doc is not None else None) or "?"

    @property
    def created(self) -> float:
        return self.doc.created if self.doc is not None and self.doc.created else self.mtime


def journals(transport: Transport) -> list[Journal]:
    """Every journal file in napilab's directory on the host (of any machine sharing
    the directory), read."""
    listing = transport.run(LIST_JOURNALS, check=False)
    found = []
    for line in listing.stdout.splitlines():
        mtime, _, path = line.partition(" ")
        if not path.startswith(f"{JOURNAL_DIR}/journal-"):
            continue
        text = transport.run(["cat", "--", path], check=False)
        try:
            stamp = float(mtime)
        except ValueError:
            stamp = 0.0
        if text.exit_code != 0:
            found.append(Journal(path, stamp, None, text.stderr.strip() or "unreadable"))
            continue
        found.append(_journal(path, stamp, text.stdout))
    return found


def _journal(path: str, stamp: float, text: str) -> Journal:
    try:
        raw = codec.parse_json(text, path)
    except InputError as exc:
        return Journal(path, stamp, None, "not valid JSON " + exc.message.removeprefix(
            f"{path}: not JSON "))
    if not isinstance(raw, dict):
        return Journal(path, stamp, None, "not a journal (not a JSON object)")
    try:
        return Journal(path, stamp, codec.convert(raw, JournalRecord, path))
    except InputError as exc:
        return Journal(path, stamp, None, exc.message.removeprefix(f"{path}: "))


def belongs(journal: Journal, transport: Transport) -> bool:
    """The journal was written for this machine: by its machine key, or for journals
    of older napilab versions (and unreadable ones) by the host name in the file."""
    machine = journal.doc.machine if journal.doc is not None else None
    if machine is not None:
        return machine in identity.of(transport).keys
    name = transport.host.name
    if journal.doc is not None:
        return journal.doc.host == name
    return journal.path.endswith(f"-{name}.json")


def leftover(transport: Transport, run_id: str | None = None) -> list[Journal]:
    """This machine's journals (of `run_id` only, when given)."""
    return [j for j in journals(transport) if belongs(j, transport)
            and (run_id is None or j.run_id == run_id)]


def acquire(transport: Transport, run_id: str, *, break_lock: bool = False) -> None:
    host = transport.host.name
    path = lock_path(transport)
    record = codec.convert({"run_id": run_id, **identity.controller(), "started": time.time(),
                            "argv": list(sys.argv), "host": host,
                            **identity.of(transport).record()}, LockRecord, "the lock")
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    for attempt in (1, 2):
        result = transport.run([*CREATE_NEW, JOURNAL_DIR, tmp, path],
                               stdin=codec.encode(record).decode(), check=False)
        if result.exit_code == 0:
            break
        holder = read_lock(transport)
        if isinstance(holder, LockRecord) and holder.run_id == run_id and \
                identity.holder_state(holder) == identity.ALIVE:
            return  # this run already holds it: the machine is in the inventory twice
        if holder is None and attempt == 1:
            continue  # released between our create and our read
        if break_lock and attempt == 1:
            transport.run(["rm", "-f", "--", path])
            continue
        _refuse(host, path, holder, result.stderr)
    _refuse_leftover_journals(transport, run_id)


def _refuse(host: str, path: str, holder: LockRecord | Corrupt | None, stderr: str) -> None:
    if holder is None:
        raise HostError(f"{host}: cannot create {path}: {stderr.strip()}")
    if isinstance(holder, Corrupt):
        raise HostError(f"{host}: the lock {path} is empty or corrupt ({holder.excerpt!r}); "
                        "a full disk or a crash while it was written leaves that",
                        hint="`napilab restore -i INVENTORY` replays any journal and clears "
                        "it; --break-lock runs anyway")
    if is_stale(holder):
        raise HostError(f"{host}: locked by {describe(holder)}, which is no longer running",
                        hint="it may have left settings changed: `napilab restore -i "
                        "INVENTORY` replays its journal and clears the stale lock; "
                        "--break-lock runs anyway")
    raise Locked(f"{host}: locked by {describe(holder)}",
                 hint="one napilab run per host at a time; wait for it (--wait-lock "
                 "DURATION), or use --break-lock if you know it is dead")


def _refuse_leftover_journals(transport: Transport, run_id: str) -> None:
    """With the lock held: refuse (and release) if a journal is left on the machine."""
    try:
        left = leftover(transport)
    except BaseException:
        release(transport, run_id)
        raise
    if left:
        release(transport, run_id, check_journals=False)
        first = left[0]
        what = (f"of run {first.run_id}" if first.doc is not None
                else f"({first.error})")
        raise HostError(f"{transport.host.name}: the journal {first.path} {what} is still on "
                        "the host: settings changed by an earlier run were not restored"
                        + (f" (and {len(left) - 1} more journal(s))" if len(left) > 1 else ""),
                        hint="`napilab restore -i INVENTORY` replays it; a new run would "
                        "record the changed values as the originals")


def release(transport: Transport, run_id: str, *, check_journals: bool = True) -> str | None:
    """Remove the lock if it is still ours and the run left no journal on the machine;
    returns why the lock was kept, or None."""
    if check_journals:
        kept = leftover(transport, run_id)
        if kept:
            return (f"{transport.host.name}: lock kept: {kept[0].path} was not restored; "
                    + RESTORE_HINT)
    if run_of(read_lock(transport)) == run_id:
        transport.run(["rm", "-f", "--", lock_path(transport)], check=False)
    tidy(transport, run_id)
    return None


def release_all(transports: Iterable[Transport], run_id: str) -> list[str]:
    """Release every host's lock, all hosts at once (each is a few round trips: 17 ms
    a host on the SSH testbed here); a host that cannot be reached (or keeps a journal)
    keeps its lock and does not stop the others. Returns a line per kept lock, in the
    hosts' order."""
    def one(transport: Transport) -> str | None:
        try:
            return release(transport, run_id)
        except NapilabError as exc:
            return (f"{transport.host.name}: lock kept (cannot reach the host: "
                    f"{exc.message}); {RESTORE_HINT} once the host is back")

    return [note for note in _each(list(transports), one) if note]


def acquire_all(transports: Iterable[Transport], run_id: str, *,
                break_lock: bool = False) -> list[Transport]:
    """Lock every host or none, all hosts at once (a lock is tried, never waited for:
    two runs that start together on the same hosts may both be refused, never both
    run). On any failure, or Ctrl-C, the locks taken are released once every host's
    attempt has ended, and the first host's error (in the hosts' order) is raised."""
    items = list(transports)
    outcomes: list[BaseException | None] = [None] * len(items)

    def one(index: int) -> None:
        try:
            acquire(items[index], run_id, break_lock=break_lock)
        except BaseException as exc:  # raised below, the first in the hosts' order
            outcomes[index] = exc
            raise

    try:
        _each(list(range(len(items))), one)
    except BaseException:
        release_all([t for t, o in zip(items, outcomes, strict=True) if o is None], run_id)
        first = next((o for o in outcomes if o is not None), None)
        if first is None:  # Ctrl-C while the hosts were being locked
            raise
        raise first from None
    return items


def _each(items: list[Any], call: Any) -> list[Any]:
    """`call` on every item at once (threads), results in the items' order; when one
    raises, waits for the others, then raises the first (in the items' order)."""
    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(len(items), thread_name_prefix="napilab-lock") as pool:
        futures = [pool.submit(call, item) for item in items]
        try:
            wait(futures)
        except BaseException:
            wait(futures)  # Ctrl-C: the attempts under way end (they hold their shells)
            raise
    return [future.result() for future in futures]
