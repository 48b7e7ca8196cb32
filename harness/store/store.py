"""The results directory (docs/design.md, "Contracts"):

    RESULTS/<profile>/<UTC timestamp>-<short id>/
      manifest.json       versioned; rewritten atomically after every trial
      raw/<trial>/<host>/<name>.{out,err,json}
      samples/<trial>.parquet   while the run goes on: one file per trial, written once
      samples.parquet     the samples table: run_id, trial, variant, rep, role, host,
                          source, metric, cpu, value, unit; the per-trial files merged
                          into it when the run (or a part of it) ends
      latency/<trial>.parquet   per-transaction latencies (µs) when the tool gives them
      report.html

The directory is made under a hidden name and renamed once its manifest is in it, so a
run directory is never seen without its manifest. Every write goes to a temporary file
renamed into place, so a crash leaves the previous complete state. A trial's rows go
to their own file, written once, so storing a trial costs the same at trial 1 and
trial 400; at the end they are merged once into samples.parquet, so that a finished
run is one file to read (as it always was). Readers take both (load_samples): a run
that stopped before the merge has per-trial files, and a trial's own file wins over
samples.parquet. A finished run is never rewritten.

A write that fails (disk full, read-only, quota) raises StorageError naming the file.
Room for the manifest is held in `.reserve` while a run is going on and given back
when the disk fills up, so the run can still record which trial failed and why.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import re
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napilab.harness.errors import InputError, StorageError
from napilab.harness.grammar.names import unsafe
from napilab.harness.records import codec
from napilab.harness.store.columns import LatencyRow, SampleRow, arrow_schema, columns
from napilab.harness.store.manifest import Manifest

if TYPE_CHECKING:  # pandas is imported by the readers only: a run never loads it
    import pandas as pd
    import pyarrow as pa

COLUMNS = columns(SampleRow)  # samples.parquet's, in order


def samples_schema() -> pa.Schema:
    """The samples table's Arrow schema (harness.store.columns: from SampleRow)."""
    return arrow_schema(SampleRow)

SAMPLES_DIR = "samples"
REPLICAS_DIR = "replicas"  # a run over replicas: each replica's run (harness.cli.fleet)
LEGACY_SAMPLES = "samples.parquet"
RESERVE = ".reserve"
RESERVE_MIN = 64 * 1024
# A name under RUN_DIR/raw: a trial id, an inventory host name, a file name. Never a
# path: no separator, no "..", no control character.
_COMPONENT = re.compile(r"[A-Za-z0-9_@:+-][A-Za-z0-9_.@:+-]{0,127}")


@dataclass(frozen=True)
class Row:
    trial: int
    variant: str
    rep: int
    role: str
    host: str
    source: str
    metric: str
    cpu: int | None
    value: float
    unit: str


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write `path` whole or not at all; StorageError (naming the path) when the file
    system refuses."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}",
                           hint=_storage_hint(exc)) from None


def _storage_hint(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the results file system is full: free some space"
    if exc.errno == errno.EROFS:
        return "the results file system is read-only"
    return ""


def check_room(results: str | Path) -> None:
    """Refuse, before any host is touched, a results file system without room for a
    run's reserve (RESERVE_MIN): the directory or its nearest existing parent."""
    where = Path(results).absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        st = os.statvfs(where)
    except OSError:
        return  # not ours to judge: creating the run directory says what is wrong
    free = st.f_bavail * st.f_frsize
    if free < RESERVE_MIN:
        raise StorageError(f"{results}: {free:,} bytes free on its file system; a run "
                           f"holds {RESERVE_MIN:,} bytes for its final manifest",
                           hint="the results file system is full: free some space, or "
                                "give -o another directory")


def new_run_id() -> str:
    return secrets.token_hex(4)


class RunStore:
    def __init__(self, directory: Path, manifest: Manifest) -> None:
        self.dir = directory
        self.manifest = manifest
        self._merged: set[int] | None = None  # trials in samples.parquet, once read

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @classmethod
    def create(cls, results: str | Path, profile_name: str, manifest: Manifest,
               run_id: str | None = None, *, directory: Path | None = None) -> RunStore:
        """A new run directory, which appears (renamed from a hidden name) with its
        manifest in it: RESULTS/PROFILE/STAMP-RUN_ID, or `directory` (a replica's run,
        under its fleet run)."""
        if why := unsafe(profile_name):  # validate refuses it first: never outside RESULTS
            raise StorageError(f"profile name {why}")
        run_id = run_id or new_run_id()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        directory = directory or Path(results) / profile_name / f"{stamp}-{run_id}"
        hidden = directory.with_name(f".{directory.name}.tmp")
        manifest.run_id = run_id
        store = cls(hidden, manifest)
        try:
            if directory.exists():  # rename() would replace an empty directory
                raise FileExistsError(errno.EEXIST, "the run directory exists")
            hidden.mkdir(parents=True, exist_ok=False)
            store.save_manifest()
            store.reserve(required=True)
            os.rename(hidden, directory)
        except (OSError, StorageError) as exc:
            _remove_tree(hidden)
            with contextlib.suppress(OSError):  # the profile's directory, if it is new
                hidden.parent.rmdir()
            if isinstance(exc, StorageError):
                raise
            raise StorageError(f"cannot create {directory}: {exc.strerror or exc}",
                               hint=_storage_hint(exc)) from None
        store.dir = directory
        return store

    @classmethod
    def open(cls, directory: str | Path) -> RunStore:
        directory = Path(directory)
        return cls(directory, load_manifest(directory))

    def save_manifest(self, *, final: bool = True) -> None:
        """Write the manifest. `final=False` (the saves during a run, after each trial)
        writes it compact (the indented form a run ends with costs another pass, which
        matters once a run has hundreds of trials: benchmarks/store.py); each such save
        tops up the reserve. The final save, when the file system refuses it (full),
        is written into the reserve's own blocks and renamed into place: the run's last
        status lands even while something else keeps filling the disk."""
        data = codec.encode(self.manifest, indent=1 if final else None) + b"\n"
        try:
            atomic_write(self.dir / "manifest.json", data)
        except StorageError:
            if not final or not self._into_reserve(data):
                raise
            return
        if not final:
            self.reserve(len(data))

    def reserve(self, compact: int | None = None, *, required: bool = False) -> None:
        """Hold room for the final manifest write (three times the compact manifest,
        which the indented one is under twice; at least 64 KiB) while the run is going
        on; kept for that write only. `required` (a run's start, before its first
        trial): a file system that cannot hold it is a StorageError, since a run that
        cannot hold its reserve may end without a final status; else best effort (the
        top-up after a trial), a disk too full for it being found by the next write."""
        if compact is None:
            compact = len(codec.encode(self.manifest))
        size = max(RESERVE_MIN, 3 * compact)
        path = self.dir / RESERVE
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                if os.fstat(fd).st_size < size:
                    os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
        except OSError as exc:
            if required:
                raise StorageError(
                    f"cannot hold {size:,} bytes in {path} for the run's final manifest: "
                    f"{exc.strerror or exc}", hint=_storage_hint(exc) or
                    "a run needs that room to record how it ended") from None

    def _into_reserve(self, data: bytes) -> bool:
        """The manifest written over the reserve's allocated blocks, then renamed to
        manifest.json (atomic, and it needs no new space); False when there is no
        reserve big enough."""
        path = self.dir / RESERVE
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError:
            return False
        try:
            if os.fstat(fd).st_size < len(data):
                return False
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        except OSError:
            return False
        finally:
            os.close(fd)
        try:
            os.replace(path, self.dir / "manifest.json")
        except OSError:
            return False
        return True

    def discard(self) -> None:
        """Remove a run directory that holds nothing but its first manifest (a run refused
        before its first trial), and its profile's directory if that is then empty."""
        try:
            if set(os.listdir(self.dir)) <= {"manifest.json", RESERVE}:
                shutil.rmtree(self.dir)
                with contextlib.suppress(OSError):
                    self.dir.parent.rmdir()
        except OSError:
            pass

    def release_reserve(self) -> bool:
        """Give the reserved room back (the run ends); True if there was some."""
        try:
            (self.dir / RESERVE).unlink()
        except OSError:
            return False
        return True

    def raw_path(self, trial: str, host: str, name: str) -> Path:
        for part in (trial, host, name):
            if not _COMPONENT.fullmatch(part) or ".." in part:
                raise StorageError(f"{part!r} cannot name a file under {self.dir / 'raw'}")
        return self.dir / "raw" / trial / host / name

    def write_raw(self, trial: str, host: str, name: str, data: str) -> None:
        atomic_write(self.raw_path(trial, host, name), data)

    def write_raw_record(self, trial: str, host: str, name: str,
                         record: codec.AnyRecord) -> None:
        self.write_raw(trial, host, name, codec.encode(record, indent=1).decode() + "\n")

    def write_raw_json(self, trial: str, host: str, name: str, doc: Any) -> None:
        self.write_raw(trial, host, name, json.dumps(doc, indent=1, default=str) + "\n")

    def warm(self) -> None:
        """Import pyarrow and pandas in a thread now. The first trial's rows need
        pyarrow, and pyarrow imports pandas the first time rows are stored (it checks
        every column for a pandas object): 0.5-0.7 s here that would otherwise sit
        between the first trial's workload and the next. The engine calls this once a
        workload's clients run (a no-op but the first time; started before them, the
        import held the GIL as the clients' reader threads started: 44 ms of the cold
        run's two starts), when the run waits on its hosts:
        imported with the run instead, they slowed connecting to two hosts over SSH
        (0.34 s alone, 0.57 s beside the imports, here) and the first trial's settings
        from 20 ms to 50-68 ms (benchmarks/overhead.py). The thread imports nothing of
        napilab, so it never waits on a module the run is importing."""
        if "pandas" not in sys.modules:
            threading.Thread(target=_import_all, args=("pyarrow.parquet", "pandas"),
                             name="napilab-import-pyarrow").start()

    def add_rows(self, rows: Iterable[Row]) -> None:
        """Store rows: each trial's in its own file, written once."""
        by_trial: dict[int, list[Row]] = {}
        for row in rows:
            by_trial.setdefault(row.trial, []).append(row)
        for trial, trial_rows in by_trial.items():
            atomic_write(self.dir / SAMPLES_DIR / f"{trial:03d}.parquet",
                         _parquet(self.run_id, trial_rows))

    def drop_trial(self, trial: int) -> None:
        """Forget a trial's rows (it runs again on --resume)."""
        (self.dir / SAMPLES_DIR / f"{trial:03d}.parquet").unlink(missing_ok=True)
        legacy = self.dir / LEGACY_SAMPLES
        if self._merged is None and not legacy.exists():  # a new run: pyarrow not needed
            return
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if self._merged is None:  # the trials samples.parquet holds, read once
            self._merged = set(pq.read_table(legacy, columns=["trial"])["trial"].to_pylist()) \
                if legacy.exists() else set()
        if trial in self._merged:  # rare: rows stored, then the trial did not end "ok"
            table = pq.read_table(legacy)
            sink = pa.BufferOutputStream()
            pq.write_table(table.filter(pc.not_equal(table["trial"], trial)), sink,
                           compression="zstd")
            atomic_write(legacy, sink.getvalue().to_pybytes())
            self._merged.discard(trial)

    def merge_samples(self) -> None:
        """At the end of a run (or of a part of it): the per-trial files and any earlier
        samples.parquet become one samples.parquet, the run's samples table in one file
        as other tools and older napilab versions read it; then the per-trial files go.
        If napilab stops in between, both are there and readers take a trial's own file
        over samples.parquet (load_samples, reports.nightly.history)."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        per_trial = sorted((self.dir / SAMPLES_DIR).glob("[0-9]*.parquet"))
        if not per_trial:
            return
        tables = [pq.read_table(path) for path in per_trial]
        legacy = self.dir / LEGACY_SAMPLES
        if legacy.exists():
            own = pa.array({t for table in tables for t in table["trial"].to_pylist()},
                           type=pa.int32())
            old = pq.read_table(legacy)
            tables.insert(0, old.filter(pc.invert(pc.is_in(old["trial"].cast(pa.int32()),
                                                           value_set=own))))
        merged = pa.concat_tables(tables, promote_options="default")
        merged = merged.take(pc.sort_indices(merged, [("trial", "ascending")]))
        sink = pa.BufferOutputStream()
        pq.write_table(merged, sink, compression="zstd")
        atomic_write(legacy, sink.getvalue().to_pybytes())
        self._merged = None
        for path in per_trial:
            path.unlink()
        (self.dir / SAMPLES_DIR).rmdir()

    def write_latencies(self, trial: str, latencies_us: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({"latency_us": pa.array(latencies_us, type=pa.float64())},
                         schema=arrow_schema(LatencyRow))
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        atomic_write(self.dir / "latency" / f"{trial}.parquet", sink.getvalue().to_pybytes())


def _import_all(*modules: str) -> None:
    for module in modules:
        importlib.import_module(module)


def _parquet(run_id: str, rows: list[Row]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for row in rows:
        columns["run_id"].append(run_id)
        for name in COLUMNS[1:]:
            columns[name].append(getattr(row, name))
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pydict(columns, schema=samples_schema()), sink,
                   compression="zstd")
    return bytes(sink.getvalue().to_pybytes())


def _remove_tree(directory: Path) -> None:
    if not directory.exists():
        return
    for path in sorted(directory.rglob("*"), reverse=True):
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink()
    directory.rmdir()


def load_manifest(directory: Path) -> Manifest:
    """A run's manifest, typed; one written by an older napilab is migrated."""
    path = directory / "manifest.json"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{directory}: not a napilab run directory (no manifest.json)") from None
    try:
        doc = codec.parse_json(data, str(path))
    except InputError as exc:
        raise InputError(f"{path}: corrupt manifest: {exc}") from None
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise InputError(f"{path}: not a napilab manifest (no schema_version)")
    return Manifest.from_json(doc, str(path))


def sample_files(directory: Path) -> list[Path]:
    """The files that hold a run's samples: samples.parquet (runs of older napilab
    versions) and samples/<trial>.parquet, in trial order."""
    legacy = directory / LEGACY_SAMPLES
    return ([legacy] if legacy.exists() else []) + sorted(
        (directory / SAMPLES_DIR).glob("[0-9]*.parquet"))


PARQUET_MAGIC = b"PAR1"  # a Parquet file's first and last four bytes


def damaged_samples(directory: Path) -> str | None:
    """Why a run's sample files cannot be read, from their first and last bytes alone (a
    file cut short, or not Parquet), or None: a reader of many runs (history, publish)
    leaves such a run out and names the file, without reading any file whole."""
    for path in sample_files(directory):
        try:
            with path.open("rb") as f:
                head = f.read(4)
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - 4))
                tail = f.read(4)
        except OSError as exc:
            return f"{path}: cannot read the run's samples ({exc.strerror or exc})"
        if size < 12 or head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
            return (f"{path}: not a whole Parquet file ({size:,} bytes"
                    f"{', cut short' if head == PARQUET_MAGIC else ''})")
    return None


def _read(path: Path, read: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    import pyarrow as pa

    try:
        return read()
    except (OSError, ValueError, pa.ArrowException) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StorageError(f"{path}: cannot read the run's samples ({first})",
                           hint="the run directory is damaged: restore it from a copy, "
                                "or run the profile again") from None


def read_parquet_files(files: list[Path], columns: list[str] | None = None) -> pd.DataFrame:
    """Several Parquet files of one schema as one frame (as pandas.read_parquet reads
    one)."""
    import pyarrow.parquet as pq

    frame: pd.DataFrame = pq.read_table([str(f) for f in files], columns=columns).to_pandas()
    return frame


def load_samples(directory: Path) -> pd.DataFrame:
    """A run's samples as one table (a trial's own file wins over samples.parquet). A
    file that cannot be read (truncated, not Parquet) is a StorageError naming it."""
    import pandas as pd

    legacy = directory / LEGACY_SAMPLES
    per_trial = sorted((directory / SAMPLES_DIR).glob("[0-9]*.parquet"))
    frames = [_read(legacy, lambda: pd.read_parquet(legacy))] if legacy.exists() else []
    if per_trial:
        trials = _read(directory / SAMPLES_DIR, lambda: read_parquet_files(per_trial))
        if frames:
            frames[0] = frames[0][~frames[0]["trial"].isin(set(trials["trial"]))]
        frames.append(trials)
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    if len(frames) == 1:
        return frames[0]
    return pd.concat(frames, ignore_index=True)
