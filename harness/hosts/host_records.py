"""What napilab leaves on a host while a run holds it, as records (harness.records):
the lock (`/var/tmp/napilab/lock-<machine>.json`, harness.hosts.lock) and each run's
settings journal (`journal-<run>-<host>.json`, harness.hosts.settings). Both name the
host (machine key, machine-id, boot_id, network namespace: harness.hosts.identity) and
the controller process that holds them, every key always written; a field napilab of
an older version did not write is None, and what the holder's state can be judged from says so
(identity.holder_state).

A journal is versioned by its `schema` (3: the host's identity and the controller's);
every entry is checked on its own (`entry N: ...`), so `napilab restore` can say which
one is wrong."""

from __future__ import annotations

from typing import Any

import msgspec

from napilab.harness.records.codec import FrozenRecord

JOURNAL_SCHEMA = 3  # 3: the host's identity (machine, namespace, boot) and the controller's


class Holder(FrozenRecord, frozen=True, kw_only=True):
    """The host a lock or journal was written on, and the process that wrote it."""

    WHAT = "a lock or journal"

    # the host (identity.HostIdentity.record)
    machine: str | None = None
    machine_id: str | None = None
    boot_id: str | None = None
    netns: str | None = None
    # the controller (identity.controller)
    controller: str | None = None
    controller_machine_id: str | None = None
    controller_boot_id: str | None = None
    controller_pidns: str | None = None
    pid: int | None = None
    pid_start: int | None = None


class LockRecord(Holder, frozen=True, kw_only=True, omit_defaults=False):
    WHAT = "a napilab lock"

    run_id: str
    host: str = ""  # the inventory's name of the host
    started: float = 0.0
    argv: list[str] = msgspec.field(default_factory=list)


class JournalEntry(FrozenRecord, frozen=True):
    """One knob item as it was before the run (Change.journalled)."""

    WHAT = "a journal entry"

    role: str
    kind: str
    target: str
    path: str
    original: str
    requested: str
    effective: str | None = None
    backend: str = "file"


class JournalRecord(Holder, frozen=True, kw_only=True, omit_defaults=False):
    """Every key always written (a person reads it on the host, an older napilab replays
    it). `run_id` and `entries` are checked by harness.hosts.settings.journal_entries,
    entry by entry, so a journal of the wrong shape is still claimed by its host and
    named with what is wrong."""

    WHAT = "a settings journal"

    schema: int = JOURNAL_SCHEMA
    run_id: str | None = None
    host: str = ""
    created: float = 0.0
    entries: Any = msgspec.field(default_factory=list)
