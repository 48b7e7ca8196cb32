"""Applying settings to a host and restoring them, with an on-host journal.

For each host, per trial:
  resolve files -> read originals (one exec) -> journal originals on the host (one exec,
  atomic rename) -> write what differs -> read back (one exec) and compare.
Restore writes the originals back in reverse order, reads back, and removes the journal
only when every file is verified. A journal left behind (SIGKILL, reboot, lost host)
is replayed by `napilab restore`.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from harness import knobs
from harness.errors import CommandError, HostError, SettingMismatch
from harness.transport import Transport
from runners.collector import split_tail

JOURNAL_DIR = "/var/tmp/napilab"
# Writes stdin to a temp file and renames it over the journal: the journal is either
# the old or the new one, never half written. Paths are positional parameters.
ATOMIC_WRITE = ["sh", "-c", 'umask 077 && mkdir -p "$1" && cat > "$2" && mv -f "$2" "$3"',
                 "napilab-journal"]


@dataclass(frozen=True)
class Change:
    """One file changed for a trial: what it was, what was asked, what the kernel shows."""

    role: str
    kind: str
    target: str
    path: str
    original: str
    requested: str
    effective: str | None = None

    @property
    def matches(self) -> bool:
        return self.effective is not None and (
            knobs.canonical(self.path, self.effective) == knobs.canonical(self.path,
                                                                          self.requested))


def journal_path(run_id: str, host: str) -> str:
    return f"{JOURNAL_DIR}/journal-{run_id}-{host}.json"


def read_files(transport: Transport, paths: Sequence[str]) -> dict[str, str]:
    """Every path's content in one exec; a missing path is an error naming it."""
    result = transport.run(["tail", "-v", "-n", "+1", "--", *paths], check=False)
    files = split_tail(result.stdout) if result.stdout.startswith("==> ") else {}
    missing = [p for p in paths if p not in files]
    if missing:
        raise HostError(f"{transport.host.name}: cannot read {', '.join(missing)}: "
                        f"{result.stderr.strip()}",
                        hint="is the interface or knob present on this host and kernel?")
    return files


class HostSettings:
    """The settings of one host for one trial (or one `napilab restore`)."""

    def __init__(self, transport: Transport, run_id: str, *, policy: str = "fail") -> None:
        self.transport = transport
        self.run_id = run_id
        self.policy = policy
        self.changes: list[Change] = []
        self.journal = journal_path(run_id, transport.host.name)

    def _queues(self, iface: str) -> list[str]:
        result = self.transport.run(["ls", "-1", f"/sys/class/net/{iface}/queues"], check=False)
        if result.exit_code != 0:
            raise HostError(f"{self.transport.host.name}: no interface {iface!r}: "
                            f"{result.stderr.strip()}")
        return result.stdout.split()

    def _resolve(self, settings: Sequence[knobs.Setting]) -> list[tuple[knobs.Setting,
                                                                        knobs.FileWrite]]:
        queues: dict[str, list[str]] = {}
        writes: dict[str, tuple[knobs.Setting, knobs.FileWrite]] = {}
        for setting in settings:
            iface = setting.target.partition("/")[0]
            if knobs.needs_queues(setting) and iface not in queues:
                queues[iface] = self._queues(iface)
            for write in knobs.files(setting, queues.get(iface, [])):
                writes.pop(write.path, None)  # a later setting of the same file wins
                writes[write.path] = (setting, write)
        return list(writes.values())

    def apply(self, settings: Sequence[knobs.Setting]) -> list[Change]:
        """Journal, write and verify; on any failure restore what was written, then raise."""
        if not settings:
            return []
        plan = self._resolve(settings)
        originals = read_files(self.transport, [w.path for _, w in plan])
        self.changes = [Change(s.role, s.kind, w.target, w.path, originals[w.path].strip(),
                               w.value) for s, w in plan]
        self._write_journal()
        try:
            for change in self.changes:
                if knobs.canonical(change.path, change.original) != knobs.canonical(
                        change.path, change.requested):
                    self._write(change.path, change.requested, change)
            effective = read_files(self.transport, [c.path for c in self.changes])
            self.changes = [Change(**{**asdict(c), "effective": effective[c.path].strip()})
                            for c in self.changes]
            bad = [c for c in self.changes if not c.matches]
            if bad and self.policy == "fail":
                raise SettingMismatch(
                    f"{self.transport.host.name}: the kernel did not take "
                    + "; ".join(f"{c.target}: wrote {c.requested!r}, reads {c.effective!r}"
                                for c in bad),
                    hint="set `on_mismatch: warn` in the profile to measure anyway")
        except BaseException:
            self.restore()
            raise
        return self.changes

    def _write(self, path: str, value: str, change: Change) -> None:
        try:
            self.transport.write_file(path, value + "\n")
        except CommandError as exc:
            reason = exc.stderr.strip().rpartition(": ")[2] or f"exit {exc.returncode}"
            raise HostError(f"{self.transport.host.name}: cannot set {change.kind} "
                            f"{change.target} = {value!r}: {reason}") from None

    def _write_journal(self) -> None:
        doc = {"schema": 1, "run_id": self.run_id, "host": self.transport.host.name,
               "controller": socket.gethostname(), "pid": os.getpid(), "created": time.time(),
               "entries": [asdict(c) for c in self.changes]}
        self.transport.run([*ATOMIC_WRITE, JOURNAL_DIR, self.journal + ".tmp", self.journal],
                           stdin=json.dumps(doc, indent=1))

    def restore(self) -> list[Change]:
        """Write originals back in reverse order; remove the journal once verified.

        Every entry is attempted even if one fails; the first failure is raised after
        the others were tried, and the journal stays for `napilab restore`.
        """
        failures: list[str] = []
        paths = [c.path for c in self.changes]
        current = read_files(self.transport, paths) if paths else {}
        for change in reversed(self.changes):
            if knobs.canonical(change.path, current[change.path]) == knobs.canonical(
                    change.path, change.original):
                continue
            try:
                self._write(change.path, change.original, change)
            except HostError as exc:
                failures.append(str(exc))
        if not failures and paths:
            now = read_files(self.transport, paths)
            failures = [f"{c.target} reads {now[c.path].strip()!r}, was {c.original!r}"
                        for c in self.changes
                        if knobs.canonical(c.path, now[c.path]) != knobs.canonical(c.path,
                                                                                   c.original)]
        if failures:
            raise HostError(f"{self.transport.host.name}: restore incomplete: "
                            + "; ".join(failures),
                            hint=f"the journal {self.journal} is kept on the host; "
                            "`napilab restore -i INVENTORY` replays it")
        self.transport.run(["rm", "-f", "--", self.journal])
        restored, self.changes = self.changes, []
        return restored

    @classmethod
    def from_journal(cls, transport: Transport, text: str) -> HostSettings:
        """Settings left by an interrupted run, ready for `restore()`."""
        doc = json.loads(text)
        settings = cls(transport, str(doc["run_id"]))
        fields = {f for f in Change.__dataclass_fields__}
        settings.changes = [Change(**{k: v for k, v in e.items() if k in fields})
                            for e in doc["entries"]]
        return settings
