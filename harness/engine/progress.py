"""Progress of a run: a live status line on a terminal, one plain line per event
otherwise, JSON events for machines (`--json`), or nothing but errors (`--quiet`).

The engine reports events; a reporter decides how they look. ETA = trials left x the
mean duration of the finished ones (the plan's estimate before the first finishes).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from typing import Any, TextIO


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """Plain lines (the default when stderr is not a terminal)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.total = 0
        self.done = 0
        self.trial_started = 0.0
        self.trial_seconds: list[float] = []
        self.estimate_per_trial = 0.0
        self.current = ""

    # events ------------------------------------------------------------------------------
    def run_start(self, run_id: str, directory: str, total: int, per_trial: float) -> None:
        self.total, self.estimate_per_trial = total, per_trial
        self.emit("run", f"napilab: run {run_id}: {total} trials -> {directory}",
                  run_id=run_id, directory=directory, trials=total)

    def trial_start(self, index: int, variant: str, rep: int) -> None:
        self.trial_started = time.monotonic()
        self.current = f"trial {index}/{self.total} {variant} rep {rep}"
        self.emit("trial", f"trial {index}/{self.total}: {variant} rep {rep}", index=index,
                  variant=variant, rep=rep, eta=round(self.eta(), 1))

    def phase(self, phase: str, host: str | None = None, detail: str = "") -> None:
        where = f"{host}: " if host else ""
        self.emit("phase", f"  {where}{phase}{' ' + detail if detail else ''}", phase=phase,
                  host=host, detail=detail)

    def trial_end(self, index: int, status: str, error: str | None = None) -> None:
        self.done += 1
        self.trial_seconds.append(time.monotonic() - self.trial_started)
        if status != "ok":
            self.emit("trial_end", f"trial {index}/{self.total}: {status.upper()}"
                      + (f": {error}" if error else ""), index=index, status=status, error=error)
        else:
            self.emit("trial_end", "", index=index, status=status,
                      seconds=round(self.trial_seconds[-1], 2))

    def note(self, text: str) -> None:
        self.emit("note", f"napilab: {text}", text=text)

    def run_end(self, status: str) -> None:
        self.emit("run_end", "", status=status, seconds=round(self.elapsed(), 1))

    # helpers -----------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self) -> float:
        left = self.total - self.done
        mean = (sum(self.trial_seconds) / len(self.trial_seconds) if self.trial_seconds
                else self.estimate_per_trial)
        return left * mean

    def emit(self, event: str, line: str, **fields: Any) -> None:
        if line:
            print(line, file=self.stream, flush=True)


def _columns() -> int:
    """The terminal's width (COLUMNS, else the tty's, else 80)."""
    return shutil.get_terminal_size((80, 24)).columns


class TerminalProgress(Progress):
    """One status line rewritten in place, the failures kept above it."""

    def emit(self, event: str, line: str, **fields: Any) -> None:
        if event in ("run", "note") or (event == "trial_end" and fields.get("status") != "ok"):
            self._clear()
            print(line, file=self.stream, flush=True)
        if event == "run_end":
            self._clear()
            return
        status = (f"{self.current} | {fields.get('host') or ''}{': ' if fields.get('host') else ''}"
                  f"{fields.get('phase', '')} | {_clock(self.elapsed())} elapsed, "
                  f"ETA {_clock(self.eta())}")
        # one line of the terminal's width, less one: a line that wraps is not rewritten
        # in place, it smears (issue 21, item 11)
        self.stream.write("\r\x1b[2K" + status[: max(20, _columns() - 1)])
        self.stream.flush()

    def _clear(self) -> None:
        self.stream.write("\r\x1b[2K")
        self.stream.flush()


class JsonProgress(Progress):
    """One JSON object per event on stdout (`--json`)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream or sys.stdout)

    def emit(self, event: str, line: str, **fields: Any) -> None:
        doc = {"event": event, "time": round(time.time(), 3), **fields}
        print(json.dumps(doc), file=self.stream, flush=True)


class QuietProgress(Progress):
    """Only failed trials."""

    def emit(self, event: str, line: str, **fields: Any) -> None:
        if event == "trial_end" and fields.get("status") != "ok":
            print(line, file=self.stream, flush=True)


def reporter(*, quiet: bool = False, as_json: bool = False) -> Progress:
    if as_json:
        return JsonProgress()
    if quiet:
        return QuietProgress()
    return TerminalProgress() if sys.stderr.isatty() else Progress()
