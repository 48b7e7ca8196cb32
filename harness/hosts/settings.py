"""Applying settings to a host and restoring them, with an on-host journal.

For each host, per trial, kind by kind (harness.hosts.resolve.KIND_ORDER):
  resolve items -> read originals (one exec per backend) -> journal the originals on
  the host (atomic rename) -> write what differs.
Then everything is read back and compared with what was requested. Restore writes the
originals back in reverse order, reads back, and removes the journal only when every
item is verified. A journal left behind (SIGKILL, reboot, lost host) is replayed by
`napilab restore`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from harness.errors import HostError, NapilabError, SettingMismatch
from harness.hosts import identity
from harness.hosts.backends import BACKENDS, Gone, Item, KprobeUnavailable
from harness.hosts.resolve import DYNAMIC, KIND_ORDER, QUEUE_KINDS, HostQuery, resolve
from harness.profile import knobs
from harness.transport.transport import Transport

JOURNAL_DIR = "/var/tmp/napilab"
# Writes stdin to a temp file and renames it over the journal: the journal is either
# the old or the new one, never half written. Paths are positional parameters.
ATOMIC_WRITE = ["sh", "-c", 'umask 077 && mkdir -p "$1" && cat > "$2" && mv -f "$2" "$3"',
                "napilab-journal"]
# The same, for a file that must not exist yet (a run's first journal, a lock): `ln`
# fails if it does; the temp file is removed either way.
CREATE_NEW = ["sh", "-c", 'umask 077 && mkdir -p "$1" && cat > "$2" && ln -- "$2" "$3"; '
              'rc=$?; rm -f -- "$2"; exit $rc', "napilab-create"]
JOURNAL_SCHEMA = 3


@dataclass(frozen=True)
class Change:
    """One item changed for a trial: what it was, what was asked, what the kernel shows.
    `path` is the item's address in its backend (a file path for files)."""

    role: str
    kind: str
    target: str
    path: str
    original: str
    requested: str
    effective: str | None = None
    backend: str = "file"

    @property
    def matches(self) -> bool:
        return self.effective is not None and BACKENDS[self.backend].same(
            self.path, self.effective, self.requested)

    def differs(self, value: str, reference: str) -> bool:
        return not BACKENDS[self.backend].same(self.path, value, reference)


def workdir(run_id: str) -> str:
    """Where a run's workloads write files on a host (full logs, CSVs)."""
    return f"{JOURNAL_DIR}/{run_id}"


def tidy(transport: Transport, run_id: str) -> None:
    """At the end of a run: remove its work directory and napilab's directory if
    nothing else is left in it (a kept journal or another run's lock stays)."""
    if run_id.isalnum():  # the id is napilab's own hex token; never a path
        transport.run(["rm", "-rf", "--", workdir(run_id)], check=False)
    transport.run(["rmdir", "--ignore-fail-on-non-empty", "--", JOURNAL_DIR], check=False)


def journal_path(run_id: str, host: str) -> str:
    return f"{JOURNAL_DIR}/journal-{run_id}-{host}.json"


def read_items(transport: Transport, items: Sequence[tuple[str, str]]) -> dict[str, str]:
    """(backend, key) pairs -> current values, one read per backend."""
    by_backend: dict[str, list[str]] = defaultdict(list)
    for backend, key in items:
        if key not in by_backend[backend]:
            by_backend[backend].append(key)
    values: dict[str, str] = {}
    for backend, keys in by_backend.items():
        values.update(BACKENDS[backend].read(transport, keys))
    return values


class HostSettings:
    """The settings of one host for one trial (or one `napilab restore`)."""

    def __init__(self, transport: Transport, run_id: str, *, policy: str = "fail") -> None:
        self.transport = transport
        self.run_id = run_id
        self.policy = policy
        self.changes: list[Change] = []
        self.journal = journal_path(run_id, transport.host.name)
        self._created: float | None = None  # when this journal was first written

    @property
    def host(self) -> str:
        return self.transport.host.name

    def apply(self, settings: Sequence[knobs.Setting]) -> list[Change]:
        """Journal, write and verify, kind by kind; on any failure restore what was
        written, then raise.

        Kinds whose items exist before anything is written are resolved and read up
        front, so a missing interface or knob fails before the first write. NAPI
        instances and NAPI threads are resolved in their turn: they appear only once
        earlier kinds (GRO, `threaded`) are in place.
        """
        if not settings:
            return []
        query = HostQuery(self.transport)
        dynamic = DYNAMIC + (QUEUE_KINDS if any(s.kind == "ethtool" for s in settings) else ())
        try:
            self._journal_originals([s for s in settings if s.kind not in dynamic], query)
            for kind in KIND_ORDER:
                phase = [s for s in settings if s.kind == kind]
                if kind in dynamic and phase:
                    self._journal_originals(phase, query)
                for change, value in self._phase_writes(kind):
                    self._write(change, value)
            self._verify()
        except BaseException:
            self.restore()
            raise
        return self.changes

    def _journal_originals(self, settings: list[knobs.Setting], query: HostQuery) -> None:
        """Resolve, read the originals (one read per backend) and journal them."""
        planned: dict[tuple[str, str], tuple[knobs.Setting, Item]] = {}
        for setting in settings:
            for item in resolve(setting, query):
                planned.pop((item.backend, item.key), None)  # a later setting wins
                planned[(item.backend, item.key)] = (setting, item)
        fresh = [(s, i) for key, (s, i) in planned.items()
                 if not any((c.backend, c.path) == key for c in self.changes)]
        if not fresh:
            return
        originals = read_items(self.transport, [(i.backend, i.key) for _, i in fresh])
        new = [Change(s.role, s.kind, i.target, i.key, originals[i.key], i.value,
                      backend=i.backend) for s, i in fresh]
        self.changes += new
        try:
            self._write_journal()
        except BaseException:
            del self.changes[-len(new):]  # not journalled, so not written either
            raise

    def _phase_writes(self, kind: str) -> list[tuple[Change, str]]:
        return [(c, c.requested) for c in self.changes
                if c.kind == kind and c.differs(c.original, c.requested)]

    def _verify(self) -> None:
        effective = read_items(self.transport, [(c.backend, c.path) for c in self.changes])
        self.changes = [replace(c, effective=effective[c.path]) for c in self.changes]
        # A kprobe the kernel refused is a result (the function is absent), not a fault.
        bad = [c for c in self.changes if not c.matches and c.kind != "kprobe"]
        if bad and self.policy == "fail":
            raise SettingMismatch(
                f"{self.host}: the kernel did not take "
                + "; ".join(f"{c.target}: wrote {c.requested!r}, reads {c.effective!r}"
                            for c in bad),
                hint="set `on_mismatch: warn` in the profile to measure anyway")

    def _write(self, change: Change, value: str) -> None:
        try:
            BACKENDS[change.backend].write(self.transport, change.path, value)
        except Gone:
            raise
        except KprobeUnavailable:
            return  # read back as absent, reported as absent
        except HostError as exc:
            raise HostError(f"{self.host}: cannot set {change.kind} {change.target} = "
                            f"{value!r}: {exc.message}") from None

    def _write_journal(self) -> None:
        """The first write creates the journal and fails if one is there (it would be
        another run's record of the true originals); later ones replace it."""
        first = self._created is None
        created = self._created = self._created or time.time()
        doc = {"schema": JOURNAL_SCHEMA, "run_id": self.run_id, "host": self.host,
               **identity.of(self.transport).record(), **identity.controller(),
               "created": created, "entries": [asdict(c) for c in self.changes]}
        script = CREATE_NEW if first else ATOMIC_WRITE
        result = self.transport.run([*script, JOURNAL_DIR, self.journal + ".tmp", self.journal],
                                    stdin=json.dumps(doc, indent=1), check=False)
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
        current = self._read_present(self.changes)
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
        if not failures:
            try:
                now = self._read_present([c for c in self.changes if c.path in current])
                failures = [f"{c.target} reads {now[c.path]!r}, was {c.original!r}"
                            for c in self.changes
                            if c.path in now and c.differs(now[c.path], c.original)]
            except NapilabError as exc:
                failures.append(str(exc))
        if failures:
            raise HostError(f"{self.host}: restore incomplete: " + "; ".join(failures),
                            hint=f"the journal {self.journal} is kept on the host; "
                            "`napilab restore -i INVENTORY` replays it")
        if self._created is not None:  # never another run's journal
            self.transport.run(["rm", "-f", "--", self.journal])
        self._created = None
        restored, self.changes = self.changes, []
        return restored

    def _read_present(self, changes: Sequence[Change]) -> dict[str, str]:
        """Current values of the items that still exist (one read per backend, item by
        item only when something turned out to be gone)."""
        try:
            return read_items(self.transport, [(c.backend, c.path) for c in changes])
        except Gone:
            present: dict[str, str] = {}
            for change in changes:
                with contextlib.suppress(Gone):
                    present.update(read_items(self.transport, [(change.backend, change.path)]))
            return present

    @classmethod
    def from_journal(cls, transport: Transport, doc: dict[str, Any], path: str,
                     entries: Sequence[Change] | None = None) -> HostSettings:
        """Settings left by an interrupted run, ready for `restore()` (which removes the
        journal at `path` once every entry is verified). `entries` replaces the
        journal's own (napilab restore leaves out entries that went stale)."""
        settings = cls(transport, str(doc["run_id"]))
        settings.journal = path
        settings._created = float(doc.get("created") or 0)
        settings.changes = list(journal_entries(doc) if entries is None else entries)
        return settings


class JournalError(NapilabError):
    """A journal that is not in the shape napilab writes."""


def journal_entries(doc: dict[str, Any]) -> list[Change]:
    """The changes a journal records, checked: every entry names a known backend and
    has string fields, or JournalError says what is wrong."""
    if not isinstance(doc.get("run_id"), str):
        raise JournalError("no run_id")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise JournalError("no list of entries")
    required = ("role", "kind", "target", "path", "original", "requested")
    changes = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise JournalError(f"entry {number} is not an object")
        missing = [k for k in required if not isinstance(entry.get(k), str)]
        if missing:
            raise JournalError(f"entry {number} lacks {', '.join(missing)}")
        backend = entry.get("backend", "file")
        if backend not in BACKENDS:
            raise JournalError(f"entry {number} has an unknown backend {backend!r}")
        effective = entry.get("effective")
        changes.append(Change(entry["role"], entry["kind"], entry["target"], entry["path"],
                              entry["original"], entry["requested"],
                              effective=effective if isinstance(effective, str) else None,
                              backend=backend))
    return changes
