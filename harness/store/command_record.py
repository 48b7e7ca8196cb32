"""raw/TRIAL/HOST/SIDE.json: how a workload command ran (its argv, env values redacted,
its exit code, start and duration), beside its .out and .err; the report's commands
section and `napilab publish` read it through `read_command`."""

from __future__ import annotations

from pathlib import Path

import msgspec

from napilab.harness.records import codec
from napilab.harness.records.codec import FrozenRecord


class CommandRecord(FrozenRecord, frozen=True):
    WHAT = "a workload command record"

    argv: list[str] = msgspec.field(default_factory=list)
    exit_code: int | None = None
    start: float | None = None  # time.time() when it started
    duration: float | None = None  # seconds


def read_command(path: Path) -> CommandRecord:
    """The record at `path`: OSError when it cannot be read, InputError when it is not
    a command record."""
    return codec.read(path, CommandRecord)
