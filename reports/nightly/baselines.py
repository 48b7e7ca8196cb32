"""What a nightly candidate is checked against (`napilab check RUN --baseline PATH`).

- PATH is a run directory: that run, compared repetition by repetition (an A/B of two
  runs: the noise is the runs' own, night-to-night noise is not known).
- PATH is a results directory (RESULTS or RESULTS/<profile>): the *series*, every
  complete run of the candidate's profile with the same profile digest started before
  it (the newest SERIES_MAX), oldest first. Each metric's reference is then the anchor
  level of that series (harness.stats.nightly): the first nights of the accepted level,
  a lucky or slow first night left out, moved forward only by an improvement beyond
  the threshold; and the night-to-night noise the series shows. A night's own gate
  status does not decide it: a status depended on that night's reference, and the
  level is derived from the data again every night, so neither a run of small steps
  (a drift) nor one outlier night can carry the reference with it.
- With a pinned run (`napilab baseline pin RUN` writes RESULTS/<profile>/PIN_FILE) the
  series starts at the pinned run, which is the anchor alone: how a new, slower level
  is accepted on purpose.
A reference whose profile digest differs from the candidate's is refused (exit 2)
unless the difference is declared intended (`--intended profile`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from napilab.harness.errors import InputError, StorageError
from napilab.harness.store.manifest import Manifest
from napilab.harness.store.store import load_manifest
from napilab.reports.ab.compare import Column, RunData, column, load_run
from napilab.reports.nightly.check_record import PIN_FILE, read_pin
from napilab.reports.nightly.series import aa_variants, of_manifest, run_key, runs_under

SERIES_MAX = 60  # nights of a series read for the anchor and the noise
_TRIAL_STRIDE = 1_000_000  # pooled trial numbers: run k's trial t becomes k*stride + t


@dataclass(frozen=True)
class Reference:
    kind: str  # run | pinned | series
    runs: tuple[RunData, ...]  # newest first
    # runs of the series left out because a file of theirs cannot be read: (dir, why)
    damaged: tuple[tuple[str, str], ...] = ()
    name: str = ""  # the series the candidate joins (reports.nightly.series)

    @property
    def newest(self) -> RunData:
        return self.runs[0]

    @property
    def series(self) -> tuple[RunData, ...]:
        """The nights oldest first (a pinned series starts at the pinned run)."""
        return tuple(reversed(self.runs))

    @property
    def nightly(self) -> bool:
        return self.kind in ("series", "pinned")

    def describe(self) -> str:
        if self.kind == "series":
            first, last = run_key(self.series[0].directory), run_key(self.newest.directory)
            which = f"series {self.name}: " if self.name else "series of "
            return (f"{which}{len(self.runs)} night(s), {first} .. {last}"
                    if len(self.runs) > 1 else f"{which}1 night, {first}")
        if self.kind == "pinned":
            return (f"pinned {self.series[0].directory}"
                    + (f" and {len(self.runs) - 1} night(s) since" if len(self.runs) > 1
                       else ""))
        return f"{self.kind} {self.newest.directory}"


def digest(run: RunData) -> str:
    return run.manifest.profile.digest or ""


def _started(run: RunData) -> float:
    value = run.manifest.started
    return float(value) if isinstance(value, int | float) else 0.0


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
        found = read_pin(pin)
    except InputError as exc:
        raise InputError(exc.message, hint="napilab baseline unpin, or pin again") from None
    if found is None:
        return None
    run = pin.parent / found.run
    if not found.run or not (run / "manifest.json").exists():
        raise InputError(f"{pin}: pinned run {found.run!r} is not there",
                         hint="napilab baseline unpin, or pin an existing run")
    return run


def _nights(profile: Path, damaged: list[tuple[str, str]],
            keep: Callable[[Path, Manifest], bool]) -> Iterator[RunData]:
    """The runs of RESULTS/PROFILE (a run over replicas: each replica's) whose manifest
    `keep` accepts, read whole only then (another series' samples are never loaded);
    the damaged ones added to `damaged`."""
    for directory in runs_under(profile):
        if not (directory / "manifest.json").exists():
            continue
        try:
            if not keep(directory, load_manifest(directory)):
                continue
            run = load_run(directory)
        except InputError:
            continue  # not a run of this napilab, or half written: no reference
        except StorageError as exc:  # damaged: no reference either, and said
            damaged.append((str(directory), exc.message))
            continue
        yield run


def _earlier_night(directory: Path, manifest: Manifest, candidate: RunData, mine: Path,
                   pinned_run: RunData | None) -> bool:
    """A run can be a night of the candidate's reference: complete, of its profile, not
    itself, started before it (and after the pinned run)."""
    def started(m: Manifest) -> float:
        return float(m.started) if isinstance(m.started, int | float) else 0.0

    ours = candidate.manifest
    return not (directory.resolve() == mine or manifest.status != "complete"
                or aa_variants(manifest.variants) != aa_variants(ours.variants)
                # an A/A night is no other's reference
                or manifest.profile.name != ours.profile.name
                or manifest.run_id == ours.run_id
                or (started(ours) and started(manifest) >= started(ours))
                or (pinned_run is not None and started(manifest) <= _started(pinned_run)))


def find_reference(path: Path, candidate: RunData, *, intended: bool = False,
                   series_max: int = SERIES_MAX) -> Reference:
    """The reference for `candidate` (module doc)."""
    mine = candidate.directory.resolve()
    name = candidate.manifest.profile.name
    if (path / "manifest.json").exists():
        if path.resolve() == mine:
            raise InputError(f"--baseline {path} is the run being checked")
        run = load_run(path)
        _same_digest(run, candidate, intended, "baseline")
        return Reference("run", (run,))
    pin = pinned(path, name)
    pinned_run = None
    if pin is not None:
        pinned_run = load_run(pin)
        _same_digest(pinned_run, candidate, intended, "pinned baseline")
    damaged: list[tuple[str, str]] = []
    other_digest = other_series = 0
    joins = of_manifest(candidate.manifest)

    def night(directory: Path, manifest: Manifest) -> bool:
        nonlocal other_series, other_digest
        if not _earlier_night(directory, manifest, candidate, mine, pinned_run):
            return False
        if of_manifest(manifest) != joins:  # another replica or host set
            other_series += 1
            return False
        if (manifest.profile.digest or "") != digest(candidate) and not intended:
            other_digest += 1
            return False
        return True

    found = list(_nights(profile_dir(path, name), damaged, night))
    found.sort(key=lambda r: (_started(r), r.directory.name), reverse=True)
    found = found[:series_max - (pinned_run is not None)]
    if pinned_run is not None:
        return Reference("pinned", (*found, pinned_run), tuple(damaged), joins)
    if not found:
        raise InputError(f"--baseline {path}: no complete run of profile {name!r} started "
                         f"before {candidate.directory}"
                         + _none_because(other_digest, other_series, joins, damaged),
                         hint="pass a run directory, or the results directory of earlier runs")
    return Reference("series", tuple(found), tuple(damaged), joins)


def _none_because(other_digest: int, other_series: int, joins: str,
                  damaged: list[tuple[str, str]]) -> str:
    why = (f"; {other_digest} ran a different profile digest (--intended profile uses "
           "them)" if other_digest else "")
    if other_series:
        why += f"; {other_series} ran in other series than {joins}"
    if damaged:
        why += f"; {len(damaged)} left out, damaged: {damaged[0][1]}"
    return why


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
