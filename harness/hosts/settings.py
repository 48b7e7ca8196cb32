"""Applying settings to a host and restoring them, with an on-host journal.

For each host, per trial, the steps of harness.hosts.setting_steps, kind by kind in
the registry's order (harness.knobs.registry):
  resolve items -> read originals (one exec per backend) -> journal the originals on
  the host (atomic rename) -> write what differs.
Then everything is read back and judged by the kind's comparator; the verdict is kept
with the change. Restore writes the originals back in reverse order, reads back, and
removes the journal only when every item is verified. A journal left behind (SIGKILL,
reboot, lost host) is replayed by `napilab restore`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence

import msgspec

from napilab.harness.errors import (
    HostError,
    InputError,
    NapilabError,
    RestoreIncomplete,
    SettingMismatch,
)
from napilab.harness.hosts import identity
from napilab.harness.hosts.host_records import JOURNAL_SCHEMA, JournalEntry, JournalRecord
from napilab.harness.hosts.session import HostLookup, HostSession
from napilab.harness.hosts.setting_steps import (
    JOURNAL_DIR,
    RESTORE_STEPS,
    DropJournal,
    Journal,
    ReadBack,
    ReadCurrent,
    Verify,
    Write,
    WriteOriginals,
    apply_steps,
    by_backend,
    drop_journal_argv,
    journal_argv,
    journal_path,
    new_items,
)
from napilab.harness.knobs import registry
from napilab.harness.knobs.backend import Gone, Unavailable
from napilab.harness.knobs.change import Change
from napilab.harness.knobs.kind import Setting
from napilab.harness.records import codec
from napilab.harness.transport.transport import Transport


def workdir(run_id: str) -> str:
    """Where a run's workloads write files on a host (full logs, CSVs)."""
    return f"{JOURNAL_DIR}/{run_id}"


def tidy(transport: Transport, run_id: str) -> None:
    """At the end of a run: remove its work directory and napilab's directory if
    nothing else is left in it (a kept journal or another run's lock stays)."""
    if run_id.isalnum():  # the id is napilab's own hex token; never a path
        transport.run(["rm", "-rf", "--", workdir(run_id)], check=False)
    transport.run(["rmdir", "--ignore-fail-on-non-empty", "--", JOURNAL_DIR], check=False)


def read_items(session: HostSession, items: Sequence[tuple[str, str]]) -> dict[str, str]:
    """(backend, key) pairs -> current values, one read per backend."""
    values: dict[str, str] = {}
    for backend, keys in by_backend(items).items():
        values.update(session.backend(registry.backend_class(backend)).read(keys))
    return values


class HostSettings:
    """The settings of one host for one trial (or one `napilab restore`)."""

    def __init__(self, session: HostSession, run_id: str, *, policy: str = "fail",
                 journal: str | None = None) -> None:
        self.session = session
        self.transport = session.transport
        self.run_id = run_id
        self.policy = policy
        self.changes: list[Change] = []
        self.journal = journal or journal_path(run_id, session.name)
        self._before_queues: dict[str, str] = {}  # follower items before a queue change
        self._created: float | None = None  # when this journal was first written
        self._prepared: tuple[tuple[Setting, ...], HostLookup] | None = None  # by prepare

    @property
    def host(self) -> str:
        return self.session.name

    def apply(self, settings: Sequence[Setting]) -> list[Change]:
        """Journal, write and verify, kind by kind; on any failure restore what was
        written, then raise.

        Kinds whose items exist before anything is written are resolved and read up
        front, so a missing interface or knob fails before the first write. NAPI
        instances and NAPI threads are resolved in their turn: they appear only once
        earlier kinds (GRO, `threaded`) are in place.
        """
        if self._prepared is None or self._prepared[0] != tuple(settings):
            self.prepare(settings)  # restores and raises on failure
        assert self._prepared is not None
        lookup, self._prepared = self._prepared[1], None
        try:
            for step in apply_steps(settings):  # a prepared Journal step has nothing new
                match step:
                    case Journal(settings=phase):
                        self._journal_originals(phase, lookup)
                    case Write(kind=kind):
                        for change in self.changes:
                            if change.kind == kind and self._needs_write(change):
                                self._write(change, change.requested)
                    case Verify():
                        self._verify()
        except BaseException as exc:
            self._undo(exc)
            raise
        return self.changes

    def prepare(self, settings: Sequence[Setting]) -> None:
        """The first step of `apply`, done on every host before any host writes
        (harness.engine.fan_out; `apply` does it itself when it was not done for its
        settings): resolve, read and journal the settings whose items exist up front. A
        host whose journal cannot be written (a full /var/tmp) fails here, before a knob
        on any host has changed; on failure the journal is dropped."""
        lookup = HostLookup(self.session)
        self._before_queues = {}
        try:
            self._before_queues = self._read_followers(settings)
            steps = apply_steps(settings)
            if steps and isinstance(steps[0], Journal):
                self._journal_originals(steps[0].settings, lookup)
        except BaseException as exc:
            self._undo(exc)
            raise
        self._prepared = (tuple(settings), lookup)

    def rewrite(self, setting: Setting, *, force: bool = False) -> list[Change]:
        """Ask for another value of an item this instance already changed, without
        restoring it in between (a host booted from one variant's kernel into the next
        one's): journal the new request, write (even an unchanged value, with `force`:
        a fresh boot), read back and judge. On failure the item is restored to its
        original, then the error is raised."""
        lookup = HostLookup(self.session)
        items = registry.kind(setting.kind).resolve(setting, lookup)
        try:
            for item in items:
                index = next(i for i, c in enumerate(self.changes)
                             if (c.backend, c.path) == (item.backend, item.key))
                change = msgspec.structs.replace(self.changes[index], requested=item.value,
                                                 effective=None, verdict=None)
                self.changes[index] = change
                self._write_journal()
                if force or change.differs(self._current(change), item.value):
                    self._write(change, item.value)
            self._verify()
        except BaseException as exc:
            self._undo(exc)
            raise
        return self.changes

    def _undo(self, cause: BaseException) -> None:
        """Restore after `cause` stopped an apply. When the restore fails too (the host
        went with the failure: a guest whose new kernel died while booting), `cause` is
        raised, the restore's failure added to it: the first error says what went wrong.
        The journal stays on the host for the next restore (the engine's at the end of
        the trial or run, or `napilab restore`)."""
        try:
            self.restore()
        except NapilabError as failed:
            if not isinstance(cause, NapilabError):
                raise
            cause.message += f" (then: {failed.message})"
            cause.args = (cause.message,)
            cause.hint = cause.hint or failed.hint

    def _needs_write(self, change: Change) -> bool:
        """An item that follows the queues is compared with what it reads now: the
        driver may have rewritten it when the channels changed (virtio-net spreads its
        IRQs over the CPUs again), so its original says nothing of its present value."""
        if change.path in self._before_queues:
            return change.differs(self._current(change), change.requested)
        return change.differs(change.original, change.requested)

    def _current(self, change: Change) -> str:
        return read_items(self.session, [(change.backend, change.path)])[change.path]

    def _read_followers(self, settings: Sequence[Setting]) -> dict[str, str]:
        """When the settings change queues (ethtool channels), the values of the items
        that follow the queues (IRQ affinity, RPS/XPS) as they are before: the driver
        rewrites some of them when the queues change (virtio-net its IRQs' affinity), and
        the original to journal is the host's, not the driver's. The items that exist
        only before are not changed by the run."""
        kinds = [registry.kind(s.kind) for s in settings]
        if not any(k.changes_queues for k in kinds):
            return {}
        followers = [s for s, k in zip(settings, kinds, strict=True) if k.follows_queues]
        before = new_items(followers, HostLookup(self.session), ())
        if not before:
            return {}
        return read_items(self.session, [(i.backend, i.key) for _, i in before])

    def _journal_originals(self, settings: Sequence[Setting], lookup: HostLookup) -> None:
        """Resolve, read the originals (one read per backend) and journal them."""
        fresh = new_items(settings, lookup, ((c.backend, c.path) for c in self.changes))
        if not fresh:
            return
        originals = read_items(self.session, [(i.backend, i.key) for _, i in fresh])
        originals |= {k: v for k, v in self._before_queues.items() if k in originals}
        for setting, item in fresh:
            why = registry.kind(setting.kind).refuses(item, originals[item.key])
            if why is not None:
                raise HostError(f"{self.host}: {setting.kind} {item.target} = "
                                f"{_shown_value(item.value)!r}: {why}")
        new = [Change(self.host, s.role, s.kind, i.target, i.key, originals[i.key], i.value,
                      backend=i.backend) for s, i in fresh]
        self.changes += new
        try:
            self._write_journal()
        except BaseException:
            del self.changes[-len(new):]  # not journalled, so not written either
            raise

    def _verify(self) -> None:
        effective = read_items(self.session, [(c.backend, c.path) for c in self.changes])
        self.changes = [c.read_back(effective[c.path]) for c in self.changes]
        bad = [c for c in self.changes if c.verdict and c.verdict.state == "mismatch"]
        if bad and self.policy == "fail":
            raise SettingMismatch(
                f"{self.host}: the kernel did not take "
                + "; ".join(f"{c.target}: wrote {_shown(c, c.requested)!r}, reads "
                            f"{_shown(c, str(c.effective))!r}"
                            for c in bad),
                hint="set `on_mismatch: warn` in the profile to measure anyway")

    def _write(self, change: Change, value: str) -> None:
        backend = self.session.backend(registry.backend_class(change.backend))
        try:
            backend.write(change.path, value)
        except Gone:
            raise
        except Unavailable:
            return  # read back as it is, and reported so
        except HostError as exc:
            raise HostError(f"{self.host}: cannot set {change.kind} {change.target} = "
                            f"{_shown(change, value)!r}: {exc.message}") from None

    def _write_journal(self) -> None:
        """The first write creates the journal and fails if one is there (it would be
        another run's record of the true originals); later ones replace it."""
        first = self._created is None
        created = self._created = self._created or time.time()
        record = codec.convert({
            "schema": JOURNAL_SCHEMA, "run_id": self.run_id, "host": self.host,
            **identity.of(self.transport).record(), **identity.controller(),
            "created": created, "entries": [c.journalled() for c in self.changes]},
            JournalRecord, "the journal")
        result = self.transport.run(journal_argv(self.journal, first=first),
                                    stdin=codec.encode(record, indent=1).decode(), check=False)
        if result.exit_code != 0:
            self._created = None if first else created
            reason = result.stderr.strip().splitlines()[-1:] or [f"exit {result.exit_code}"]
            raise HostError(f"{self.host}: cannot write the journal {self.journal}: {reason[0]}",
                            hint="is /var/tmp full or read-only on the host? A journal that "
                            "exists already is an earlier run's: `napilab restore` replays it")

    def restore(self) -> list[Change]:
        """Write originals back in reverse order; remove the journal once verified.

        Every entry is attempted even if one fails; failures are raised together after
        the others were tried, and the journal stays for `napilab restore`. An item
        whose object is gone (a thread that exited) has nothing left to restore.
        """
        failures: list[str] = []
        current: dict[str, str] = {}
        for step in RESTORE_STEPS:
            match step:
                case ReadCurrent():
                    current = self._read_present(self.changes)
                case WriteOriginals():
                    failures = self._write_originals(current)
                case ReadBack() if not failures:
                    failures = self._read_back(current)
                case DropJournal() if not failures and self._created is not None:
                    # (_created is None: nothing journalled, so never another run's)
                    self.transport.run(drop_journal_argv(self.journal))
        if failures:
            raise RestoreIncomplete(f"{self.host}: restore incomplete: " + "; ".join(failures),
                                    hint=f"the journal {self.journal} is kept on the host; "
                                    "`napilab restore -i INVENTORY` replays it")
        self._created = None
        restored, self.changes = self.changes, []
        return restored

    def _write_originals(self, current: dict[str, str]) -> list[str]:
        """Originals back in reverse order. A kind that changes queues (ethtool
        channels) is restored after the kinds that follow them, and its restore lets the
        driver set up the queues again (virtio-net rewrites its IRQs' affinity): those
        kinds' items are then read and written once more."""
        failures = []
        requeued = False
        for change in reversed(self.changes):
            if change.path not in current:
                continue  # gone: nothing left to restore
            try:
                if change.differs(current[change.path], change.original):
                    self._write(change, change.original)
                    requeued = requeued or registry.kind(change.kind).changes_queues
            except Gone:
                current.pop(change.path)
            except NapilabError as exc:
                failures.append(str(exc))
        followers = [c for c in self.changes if c.path in current
                     and registry.kind(c.kind).follows_queues]
        if requeued and followers and not failures:
            try:
                now = self._read_present(followers)
            except NapilabError as exc:
                return [str(exc)]
            for change in reversed(followers):
                try:
                    if change.path in now and change.differs(now[change.path],
                                                             change.original):
                        self._write(change, change.original)
                except Gone:
                    current.pop(change.path)
                except NapilabError as exc:
                    failures.append(str(exc))
        return failures

    def _read_back(self, current: dict[str, str]) -> list[str]:
        try:
            now = self._read_present([c for c in self.changes if c.path in current])
        except NapilabError as exc:
            return [str(exc)]
        return [f"{c.target} reads {_shown(c, now[c.path])!r}, was {_shown(c, c.original)!r}"
                for c in self.changes if c.path in now and c.differs(now[c.path], c.original)]

    def _read_present(self, changes: Sequence[Change]) -> dict[str, str]:
        """Current values of the items that still exist (one read per backend, item by
        item only when something turned out to be gone)."""
        try:
            return read_items(self.session, [(c.backend, c.path) for c in changes])
        except Gone:
            present: dict[str, str] = {}
            for change in changes:
                with contextlib.suppress(Gone):
                    present.update(read_items(self.session, [(change.backend, change.path)]))
            return present

    @classmethod
    def from_journal(cls, session: HostSession, doc: JournalRecord, path: str,
                     entries: Sequence[Change] | None = None) -> HostSettings:
        """Settings left by an interrupted run, ready for `restore()` (which removes the
        journal at `path` once every entry is verified). `entries` replaces the
        journal's own (napilab restore leaves out entries that went stale)."""
        settings = cls(session, doc.run_id or "?")
        settings.journal = path
        settings._created = doc.created
        settings.changes = list(journal_entries(doc, settings.host) if entries is None
                                else entries)
        return settings


def _shown_value(value: str) -> str:
    return value.replace("\t", " ")


def _shown(change: Change, value: str) -> str:
    return registry.kind(change.kind).shown(value)


class JournalError(NapilabError):
    """A journal that is not in the shape napilab writes."""


def journal_entries(doc: JournalRecord, host: str) -> list[Change]:
    """The changes a journal records (on `host`), checked entry by entry: every entry is
    a JournalEntry naming a known backend, or JournalError says which is not."""
    if doc.run_id is None:
        raise JournalError("no run_id")
    if not isinstance(doc.entries, list):
        raise JournalError("no list of entries")
    changes = []
    for number, raw in enumerate(doc.entries, 1):
        try:
            entry = codec.convert(raw, JournalEntry, f"entry {number}")
        except InputError as exc:
            raise JournalError(exc.message) from None
        if entry.backend not in registry.backend_names():
            raise JournalError(f"entry {number} has an unknown backend {entry.backend!r}")
        changes.append(Change(host, entry.role, entry.kind, entry.target, entry.path,
                              entry.original, entry.requested, effective=entry.effective,
                              backend=entry.backend))
    return changes
