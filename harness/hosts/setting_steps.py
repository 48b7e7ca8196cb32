"""The steps of applying and restoring one host's settings, as typed records that both
the run (harness.hosts.settings executes them) and `napilab plan`
(harness.engine.plan_render shows their commands) consume, so the plan is the run's
order and never a second copy of it.

Apply, kind by kind in the registry's order:
  Journal(settings)  resolve the settings into items, read their originals (one read
                     per backend) and journal them on the host (the first write creates
                     the journal and fails if one exists; later ones rename over it) before
                     anything is written; kinds whose items appear only after earlier
                     writes (`late`, or `follows_queues` when queues change) get their
                     own Journal step in their turn
  Write(kind)        write the kind's items whose value differs
  Verify()           read every item back and judge it
Restore: ReadCurrent, WriteOriginals (reverse order), ReadBack, DropJournal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from napilab.harness.knobs import registry
from napilab.harness.knobs.kind import Item, Lookup, Setting

JOURNAL_DIR = "/var/tmp/napilab"
# Writes stdin to a temp file and renames it over the journal: the journal is either
# the old or the new one, never half written. Paths are positional parameters.
# The directory is made only where it is missing (`[` is sh's own: in a TCG guest each
# exec costs 53-102 ms, and a trial writes a journal twice).
ATOMIC_WRITE = ["sh", "-c", 'umask 077 && { [ -d "$1" ] || mkdir -p "$1"; } && cat > "$2" && '
                'mv -f "$2" "$3"',
                "napilab-journal"]
# The same, for a file that must not exist yet (a run's first journal, a lock): `ln`
# fails if it does; the temp file is removed either way.
CREATE_NEW = ["sh", "-c", 'umask 077 && { [ -d "$1" ] || mkdir -p "$1"; } && cat > "$2" && '
              'ln -- "$2" "$3"; '
              'rc=$?; rm -f -- "$2"; exit $rc', "napilab-create"]


@dataclass(frozen=True)
class Journal:
    settings: tuple[Setting, ...]


@dataclass(frozen=True)
class Write:
    kind: str


@dataclass(frozen=True)
class Verify:
    pass


@dataclass(frozen=True)
class ReadCurrent:
    pass


@dataclass(frozen=True)
class WriteOriginals:
    pass


@dataclass(frozen=True)
class ReadBack:
    pass


@dataclass(frozen=True)
class DropJournal:
    pass


ApplyStep = Journal | Write | Verify
RestoreStep = ReadCurrent | WriteOriginals | ReadBack | DropJournal
RESTORE_STEPS: tuple[RestoreStep, ...] = (ReadCurrent(), WriteOriginals(), ReadBack(),
                                          DropJournal())


def apply_steps(settings: Sequence[Setting]) -> list[ApplyStep]:
    """The steps that apply `settings` on one host."""
    if not settings:
        return []
    queues_change = any(registry.kind(s.kind).changes_queues for s in settings)

    def in_turn(setting: Setting) -> bool:
        kind = registry.kind(setting.kind)
        return kind.late or (kind.follows_queues and queues_change)

    upfront = tuple(s for s in settings if not in_turn(s))
    steps: list[ApplyStep] = [Journal(upfront)] if upfront else []
    for kind in registry.kinds():
        phase = tuple(s for s in settings if s.kind == kind.name)
        if not phase:
            continue
        if in_turn(phase[0]):
            steps.append(Journal(phase))
        steps.append(Write(kind.name))
    return [*steps, Verify()]


def new_items(settings: Iterable[Setting], lookup: Lookup,
              done: Iterable[tuple[str, str]]) -> list[tuple[Setting, Item]]:
    """The items `settings` resolve to that are not journalled yet (`done` holds
    (backend, key) pairs); of two settings of one item the later wins."""
    planned: dict[tuple[str, str], tuple[Setting, Item]] = {}
    for setting in settings:
        for item in registry.kind(setting.kind).resolve(setting, lookup):
            planned.pop((item.backend, item.key), None)
            planned[(item.backend, item.key)] = (setting, item)
    seen = set(done)
    return [pair for key, pair in planned.items() if key not in seen]


def by_backend(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """(backend, key) pairs grouped for one read per backend, first-seen order."""
    grouped: dict[str, list[str]] = {}
    for backend, key in pairs:
        keys = grouped.setdefault(backend, [])
        if key not in keys:
            keys.append(key)
    return grouped


def journal_path(run_id: str, host: str) -> str:
    return f"{JOURNAL_DIR}/journal-{run_id}-{host}.json"


def journal_argv(journal: str, *, first: bool) -> list[str]:
    """The command that writes the journal at `journal` from its stdin: the first write
    creates it and fails if one is there (another run's record of the true originals),
    later ones replace it atomically."""
    return [*(CREATE_NEW if first else ATOMIC_WRITE), JOURNAL_DIR, journal + ".tmp", journal]


def drop_journal_argv(journal: str) -> list[str]:
    return ["rm", "-f", "--", journal]
