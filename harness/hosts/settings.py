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
import json
import os
import socket
import time
from collections.abc import Sequence

from harness.errors import HostError, NapilabError, RestoreIncomplete, SettingMismatch
from harness.hosts.session import HostLookup, HostSession
from harness.hosts.setting_steps import (
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
from harness.knobs import registry
from harness.knobs.backend import Gone, Unavailable
from harness.knobs.change import Change
from harness.knobs.kind import Setting
from harness.transport.transport import Transport


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

    def __init__(self, session: HostSession, run_id: str, *, policy: str = "fail") -> None:
        self.session = session
        self.transport = session.transport
        self.run_id = run_id
        self.policy = policy
        self.changes: list[Change] = []
        self.journal = journal_path(run_id, session.name)

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
        lookup = HostLookup(self.session)
        try:
            for step in apply_steps(settings):
                match step:
                    case Journal(settings=phase):
                        self._journal_originals(phase, lookup)
                    case Write(kind=kind):
                        for change in self.changes:
                            if change.kind == kind and change.differs(change.original,
                                                                      change.requested):
                                self._write(change, change.requested)
                    case Verify():
                        self._verify()
        except BaseException:
            self.restore()
            raise
        return self.changes

    def _journal_originals(self, settings: Sequence[Setting], lookup: HostLookup) -> None:
        """Resolve, read the originals (one read per backend) and journal them."""
        fresh = new_items(settings, lookup, ((c.backend, c.path) for c in self.changes))
        if not fresh:
            return
        originals = read_items(self.session, [(i.backend, i.key) for _, i in fresh])
        self.changes += [Change(self.host, s.role, s.kind, i.target, i.key, originals[i.key],
                                i.value, backend=i.backend) for s, i in fresh]
        self._write_journal()

    def _verify(self) -> None:
        effective = read_items(self.session, [(c.backend, c.path) for c in self.changes])
        self.changes = [c.read_back(effective[c.path]) for c in self.changes]
        bad = [c for c in self.changes if c.verdict and c.verdict.state == "mismatch"]
        if bad and self.policy == "fail":
            raise SettingMismatch(
                f"{self.host}: the kernel did not take "
                + "; ".join(f"{c.target}: wrote {c.requested!r}, reads {c.effective!r}"
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
                            f"{value!r}: {exc.message}") from None

    def _write_journal(self) -> None:
        doc = {"schema": 2, "run_id": self.run_id, "host": self.host,
               "controller": socket.gethostname(), "pid": os.getpid(), "created": time.time(),
               "entries": [c.journalled() for c in self.changes]}
        self.transport.run(journal_argv(self.journal), stdin=json.dumps(doc, indent=1))

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
                case DropJournal() if not failures:
                    self.transport.run(drop_journal_argv(self.journal))
        if failures:
            raise RestoreIncomplete(f"{self.host}: restore incomplete: " + "; ".join(failures),
                                    hint=f"the journal {self.journal} is kept on the host; "
                                    "`napilab restore -i INVENTORY` replays it")
        restored, self.changes = self.changes, []
        return restored

    def _write_originals(self, current: dict[str, str]) -> list[str]:
        failures = []
        for change in reversed(self.changes):
            if change.path not in current:
                continue  # gone: nothing left to restore
            try:
                if change.differs(current[change.path], change.original):
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
        return [f"{c.target} reads {now[c.path]!r}, was {c.original!r}"
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
    def from_journal(cls, session: HostSession, text: str) -> HostSettings:
        """Settings left by an interrupted run, ready for `restore()`."""
        doc = json.loads(text)
        settings = cls(session, str(doc["run_id"]))
        settings.changes = [Change.from_json({"host": settings.host, **entry})
                            for entry in doc["entries"]]
        return settings
