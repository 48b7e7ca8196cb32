"""What a nightly candidate is checked against (`napilab check RUN --baseline PATH`).

- PATH is a run directory: that run.
- PATH is a results directory (RESULTS or RESULTS/<profile>) with a pinned reference
  (`napilab baseline pin RUN` writes RESULTS/<profile>/PIN_FILE): the pinned run.
- Otherwise a pool: the last POOL_SIZE complete runs of the candidate's profile with the
  same profile digest, started before the candidate, that passed their own gate
  (RUN_DIR/check.json says "pass") or were never gated (the first nights of a series,
  runs made by hand). Their repetitions are pooled per variant. A regressed or
  inconclusive night never becomes a reference, so a regression cannot ratchet itself
  into the baseline, and no single lucky or slow night decides the next one.
A reference whose profile digest differs from the candidate's is refused (exit 2)
unless the difference is declared intended (`--intended profile`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.errors import InputError
from reports.ab.compare import Column, RunData, column, load_run

POOL_SIZE = 5  # a working week of nights
PIN_FILE = "baseline-pin.json"
CHECK_FILE = "check.json"  # gate_json of the last check, kept in the candidate's RUN_DIR
_TRIAL_STRIDE = 1_000_000  # pooled trial numbers: run k's trial t becomes k*stride + t


@dataclass(frozen=True)
class Reference:
    kind: str  # run | pinned | pool
    runs: tuple[RunData, ...]  # newest first

    @property
    def newest(self) -> RunData:
        return self.runs[0]

    def describe(self) -> str:
        if self.kind == "pool":
            return (f"pool of {len(self.runs)} run(s): "
                    + ", ".join(r.directory.name for r in self.runs))
        return f"{self.kind} {self.newest.directory}"


def digest(run: RunData) -> str:
    return str((run.manifest.get("profile") or {}).get("digest") or "")


def _started(run: RunData) -> float:
    value = run.manifest.get("started")
    return float(value) if isinstance(value, int | float) else 0.0


def _gate_status(run: RunData) -> str | None:
    try:
        doc = json.loads((run.directory / CHECK_FILE).read_text())
    except (OSError, ValueError):
        return None  # never gated
    return str(doc.get("status")) if isinstance(doc, dict) else None


def _same_digest(ref: RunData, candidate: RunData, intended: bool, what: str) -> None:
    if digest(ref) != digest(candidate) and not intended:
        raise InputError(
            f"{what} {ref.directory} ran a different profile than {candidate.directory} "
            f"(digest {digest(ref)[:12] or '?'} vs {digest(candidate)[:12] or '?'})",
            hint="compare runs of one profile, or pass --intended profile if the profile "
                 "change is what you want to check")


def profile_dir(path: Path, name: str) -> Path:
    """RESULTS/<profile> for RESULTS or RESULTS/<profile>."""
    return path / name if (path / name).is_dir() else path


def pinned(path: Path, name: str) -> Path | None:
    pin = profile_dir(path, name) / PIN_FILE
    try:
        doc = json.loads(pin.read_text())
    except (OSError, ValueError):
        return None
    run = pin.parent / str(doc.get("run", "")) if isinstance(doc, dict) else None
    if run is None or not (run / "manifest.json").exists():
        raise InputError(f"{pin}: pinned run {doc!r} is not there",
                         hint="napilab baseline unpin, or pin an existing run")
    return run


def find_reference(path: Path, candidate: RunData, *, intended: bool = False,
                   pool_size: int = POOL_SIZE) -> Reference:
    """The reference for `candidate` (module doc)."""
    mine = candidate.directory.resolve()
    name = str((candidate.manifest.get("profile") or {}).get("name", ""))
    if (path / "manifest.json").exists():
        if path.resolve() == mine:
            raise InputError(f"--baseline {path} is the run being checked")
        run = load_run(path)
        _same_digest(run, candidate, intended, "baseline")
        return Reference("run", (run,))
    pin = pinned(path, name)
    if pin is not None:
        run = load_run(pin)
        _same_digest(run, candidate, intended, "pinned baseline")
        return Reference("pinned", (run,))
    found: list[RunData] = []
    other_digest = 0
    for manifest in sorted(profile_dir(path, name).glob("*/manifest.json")):
        try:
            run = load_run(manifest.parent)
        except InputError:
            continue  # not a run of this napilab, or half written: not a reference
        profile = (run.manifest.get("profile") or {}).get("name")
        if (run.directory.resolve() == mine or run.manifest.get("status") != "complete"
                or profile != name or run.manifest.get("run_id") ==
                candidate.manifest.get("run_id")
                or (_started(candidate) and _started(run) >= _started(candidate))
                or _gate_status(run) not in (None, "pass")):
            continue
        if digest(run) != digest(candidate) and not intended:
            other_digest += 1
            continue
        found.append(run)
    if not found:
        why = (f"; {other_digest} ran a different profile digest (--intended profile uses "
               "them)" if other_digest else "")
        raise InputError(f"--baseline {path}: no complete run of profile {name!r} that "
                         f"passed its gate or was never gated, other than "
                         f"{candidate.directory}{why}",
                         hint="pass a run directory, or the results directory of earlier runs")
    found.sort(key=lambda r: (_started(r), r.directory.name), reverse=True)
    return Reference("pool" if len(found) > 1 else "run", tuple(found[:pool_size]))


def reference_column(ref: Reference, variant: str, name: str) -> Column:
    """One column holding the repetitions of `variant` of every reference run."""
    parts = [column(run, variant, name) for run in ref.runs]
    if len(parts) == 1:
        return parts[0]
    frames = []
    latency: list[tuple[int, Path]] = []
    for k, part in enumerate(parts):
        frame = part.frame.copy()
        if len(frame):
            frame["trial"] = frame["trial"] + k * _TRIAL_STRIDE
        frames.append(frame)
        latency += [(k * _TRIAL_STRIDE + i, p) for i, p in part.latency]
    merged = pd.concat([f for f in frames if len(f)]) if any(len(f) for f in frames) \
        else frames[0]
    return Column(name, merged, tuple(latency))
