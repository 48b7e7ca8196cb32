"""A results store (docs/stores.md): publishing a run into it (`napilab push`, `napilab
run -o URL`) and reading its runs back (`history`, `check`, `compare`, `publish`).

    STORE/PROFILE/RUN/...            the run directory's files, as they are locally
    STORE/PROFILE/RUN/summary.json   written last: the marker of a whole run

A run is pushed file by file, then its summary; a reader lists PROFILE/ (one call per
profile: S3's Delimiter='/', one SFTP readdir) and reads each run's summary.json, in
parallel for a remote store: a run without it (an upload cut short) is not a run.
Nothing in a run's prefix is ever replaced: pushing a run again uploads only what is
missing (a check.json written since), and a file that differs from the one stored is
refused. Two runners never write one object: a run's prefix holds its random id.

A remote store is read through a mirror, a directory under the cache
(~/.cache/napilab/stores/HASH/, $XDG_CACHE_HOME honoured) laid out as a results
directory: summaries first (kept: a run never changes), a run's other files only when
a report asks for them (`Mirror.materialize`). The reports read the mirror as they
read a results directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from napilab.harness.errors import InputError, StorageError
from napilab.harness.grammar.names import unsafe
from napilab.harness.records import codec
from napilab.harness.store.store import REPLICAS_DIR, atomic_write, load_manifest
from napilab.harness.store.summary import SUMMARY_FILE, parse_summary, write_summary
from napilab.harness.stores.url import StoreUrl, parse

COMPLETE = ".fetched"  # in a mirrored run: every file of the run is here


class Backend(Protocol):
    parallel: int

    def describe(self) -> str: ...
    def list_dirs(self, prefix: str) -> list[str]: ...
    def list_files(self, prefix: str) -> dict[str, int]: ...
    def read(self, key: str) -> bytes | None: ...
    def write(self, key: str, data: bytes) -> None: ...
    def close(self) -> None: ...


@dataclass
class Store:
    url: StoreUrl
    backend: Backend

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.backend.close()

    def map(self, fn: Callable[[str], bytes | None], keys: Sequence[str]
            ) -> list[bytes | None]:
        if self.backend.parallel <= 1 or len(keys) <= 1:
            return [fn(k) for k in keys]
        with ThreadPoolExecutor(self.backend.parallel) as pool:
            return list(pool.map(fn, keys))


def open_store(text: str | StoreUrl) -> Store:
    """The store a URL or a directory names (url.parse's errors: exit 2)."""
    url = text if isinstance(text, StoreUrl) else parse(text)
    backend: Backend
    if url.scheme == "file":
        from napilab.harness.stores.local import LocalBackend

        backend = LocalBackend(url.path)
    elif url.scheme == "sftp":
        from napilab.harness.stores.sftp import SftpBackend

        backend = SftpBackend(url)
    else:
        from napilab.harness.stores.s3 import S3Backend

        backend = S3Backend(url)
    return Store(url, backend)


# -- reading ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    runs: list[tuple[str, str, bytes]]  # (profile, run, summary.json's bytes)
    partial: list[str]  # PROFILE/RUN prefixes without a summary: not runs (yet)


def list_runs(store: Store, profile: str | None = None,
              known: Callable[[str], bytes | None] | None = None) -> Listing:
    """Every whole run of `profile` (of every profile when None) with its summary's
    bytes; `known(key)` gives a summary already at hand (a mirror's), read otherwise."""
    profiles = [profile] if profile else store.backend.list_dirs("")
    keys = [f"{p}/{run}/{SUMMARY_FILE}" for p in profiles
            for run in store.backend.list_dirs(p)]

    def read(key: str) -> bytes | None:
        return (known(key) if known else None) or store.backend.read(key)

    found = store.map(read, keys)
    runs, partial = [], []
    for key, data in zip(keys, found, strict=True):
        profile_name, run, _ = key.split("/")
        if data is None:
            partial.append(f"{profile_name}/{run}")
        else:
            runs.append((profile_name, run, data))
    return Listing(runs, partial)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "napilab"


@dataclass
class Mirror:
    """A remote store's runs as a results directory on this machine (module doc)."""

    store: Store
    directory: Path
    partial: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, store: Store, cache: Path | None = None) -> Mirror:
        digest = hashlib.sha256(str(store.url).encode()).hexdigest()[:16]
        return cls(store, (cache or cache_root() / "stores") / digest)

    def sync(self, profile: str | None = None) -> Path:
        """The summaries of every whole run (of `profile`) in the mirror; runs the store
        no longer lists leave it. Returns the mirror's directory."""

        def known(key: str) -> bytes | None:
            try:
                return (self.directory / key).read_bytes()
            except OSError:
                return None

        listing = list_runs(self.store, profile, known)
        self.partial = listing.partial
        listed = {(p, r) for p, r, _ in listing.runs}
        replicas: list[str] = []  # a run over replicas: each replica's summary too
        for profile_name, run, data in listing.runs:
            if unsafe(profile_name) or unsafe(run):
                continue
            path = self.directory / profile_name / run / SUMMARY_FILE
            if known(f"{profile_name}/{run}/{SUMMARY_FILE}") != data:
                atomic_write(path, data)
            with contextlib.suppress(InputError):
                replicas += [f"{profile_name}/{run}/{REPLICAS_DIR}/{name}/{SUMMARY_FILE}"
                             for name in parse_summary(data, str(path)).replicas
                             if not unsafe(name)]
        found = self.store.map(lambda key: known(key) or self.store.backend.read(key),
                               replicas)
        for key, body in zip(replicas, found, strict=True):
            if body is not None and known(key) != body:
                atomic_write(self.directory / key, body)
        for profile_dir in ([self.directory / profile] if profile else
                            [d for d in self.directory.glob("*") if d.is_dir()]):
            for run_dir in profile_dir.glob("*") if profile_dir.is_dir() else ():
                if run_dir.is_dir() and (profile_dir.name, run_dir.name) not in listed:
                    shutil.rmtree(run_dir, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.directory

    def materialize(self, runs: Iterable[Path], files: Sequence[str] | None = None) -> None:
        """The runs' files (every file, or only `files`, e.g. report.html) fetched into
        the mirror, where they are not yet."""
        todo: list[tuple[str, Path]] = []
        for run_dir in runs:
            run_dir = Path(run_dir)
            if (run_dir / COMPLETE).exists():
                continue
            prefix = run_dir.relative_to(self.directory).as_posix()
            if files is None:
                keys = list(self.store.backend.list_files(prefix))
            else:
                keys = [f"{prefix}/{name}" for name in files
                        if not (run_dir / name).exists()]
            todo += [(k, self.directory / k) for k in keys if not (self.directory / k).exists()]
        data = self.store.map(self.store.backend.read, [k for k, _ in todo])
        for (key, path), body in zip(todo, data, strict=True):
            if body is not None and not any(unsafe(p) for p in key.split("/")):
                atomic_write(path, body)
        if files is None:
            for run_dir in runs:
                (Path(run_dir) / COMPLETE).touch()


def results_dir(text: str, cache: Path | None = None, profile: str | None = None
                ) -> tuple[Path, Mirror | None]:
    """What a reader reads for RESULTS: the directory itself, or a remote store's
    mirror, synced (its summaries) for `profile` (every profile when None)."""
    url = parse(text)
    if not url.remote:
        path = Path(url.path)
        if not path.is_dir():
            raise InputError(f"{text}: no such results directory")
        return path, None
    store = open_store(text)
    mirror = Mirror.of(store, cache)
    mirror.sync(profile)
    return mirror.directory, mirror


# -- writing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Pushed:
    prefix: str  # PROFILE/RUN
    uploaded: int  # files
    present: int  # files already in the store (a run pushed before)
    bytes: int
    summary_written: bool  # summary.json was made for the run (an older run)


def _files(run_dir: Path) -> dict[str, Path]:
    """The run's files by their path in the run, hidden ones (.reserve, temporaries) and
    the summary left out."""
    out = {}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir).as_posix()
        if path.is_file() and not path.is_symlink() and rel != SUMMARY_FILE \
                and not any(p.startswith(".") for p in rel.split("/")):
            out[rel] = path
    return out


def push(store: Store, run_dir: str | Path) -> Pushed:
    """Publish a run: its files, then its summary (module doc)."""
    run_dir = Path(run_dir)
    manifest = load_manifest(run_dir)
    if manifest.status in (None, "running"):
        raise InputError(f"{run_dir} has not ended (status {manifest.status or 'unknown'})",
                         hint="a run is pushed when it ends; a run that was killed: "
                              "`napilab run PROFILE -i INV --resume RUN_DIR` ends it")
    profile, run = manifest.profile.name or run_dir.parent.name, run_dir.name
    for name in (profile, run):
        if why := unsafe(name):
            raise InputError(f"{run_dir}: cannot be pushed: {name!r} {why}")
    made = not (run_dir / SUMMARY_FILE).exists()
    if made:
        write_summary(run_dir, manifest)
    summary = (run_dir / SUMMARY_FILE).read_bytes()
    parse_summary(summary, str(run_dir / SUMMARY_FILE))
    prefix = f"{profile}/{run}"
    if not store.url.remote and Path(store.url.path, prefix).resolve() == run_dir.resolve():
        return Pushed(prefix, 0, len(_files(run_dir)) + 1, 0, made)
    there = store.backend.list_files(prefix)
    marker = f"{prefix}/{SUMMARY_FILE}"
    whole = marker in there
    if whole and store.backend.read(marker) != summary:
        raise StorageError(f"{store.url.join(prefix)} is in the store with another "
                           "summary: a stored run is never replaced",
                           hint="the local run changed after it was pushed (resumed?); "
                                "its stored copy stays as it was")
    files = _files(run_dir)
    todo = _missing(store, prefix, files, there, whole)

    def upload(item: tuple[str, Path]) -> int:
        key, path = item
        data = path.read_bytes()
        store.backend.write(key, data)
        return len(data)

    sizes = _run_all(store, upload, todo)
    if not whole:
        store.backend.write(marker, summary)  # last: from now on it is a run
    return Pushed(prefix, len(todo) + (not whole), len(files) - len(todo) + whole,
                  sum(sizes) + (0 if whole else len(summary)), made)


def _missing(store: Store, prefix: str, files: dict[str, Path], there: dict[str, int],
             whole: bool) -> list[tuple[str, Path]]:
    """The files the store lacks (or holds cut short, before its marker was written); a
    file of a whole stored run that differs in size is refused."""
    todo = []
    for rel, path in files.items():
        key = f"{prefix}/{rel}"
        size = path.stat().st_size
        if key in there:
            if there[key] != size and whole:
                raise StorageError(f"{store.url.join(key)}: {there[key]:,} bytes stored, "
                                   f"{size:,} here: a stored run is never replaced")
            if there[key] == size:
                continue
        todo.append((key, path))
    return todo


def _run_all(store: Store, fn: Callable[[tuple[str, Path]], int],
             items: list[tuple[str, Path]]) -> list[int]:
    if store.backend.parallel <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(store.backend.parallel) as pool:
        return list(pool.map(fn, items))


# -- one run, or a series, of a store, for `compare` and `check --baseline` ------------


def _parent(url: StoreUrl, levels: int) -> tuple[StoreUrl, list[str]]:
    parts = [p for p in url.path.split("/") if p]
    if len(parts) < levels:
        raise InputError(f"{url}: not a run of a store (STORE/PROFILE/RUN)")
    path = "/".join(parts[:-levels])
    if url.scheme == "sftp" and url.path.startswith("/"):
        path = "/" + path
    return StoreUrl(url.scheme, path, url.host, url.user, url.port, url.bucket), \
        parts[-levels:]


def fetch_run(text: str, cache: Path | None = None) -> Path:
    """A run of a store by its URL (STORE/PROFILE/RUN), every file of it in the store's
    mirror; an InputError when the store holds no whole run there."""
    base, (profile, run) = _parent(parse(text), 2)
    with open_store(base) as store:
        mirror = Mirror.of(store, cache)
        data = store.backend.read(f"{profile}/{run}/{SUMMARY_FILE}")
        if data is None or unsafe(profile) or unsafe(run):
            raise InputError(f"{text}: no whole run there (no {SUMMARY_FILE})",
                             hint="a run's URL is STORE/PROFILE/RUN, e.g. "
                                  "s3://bucket/prefix/demo/20261129T204634Z-bbc627aa")
        atomic_write(mirror.directory / profile / run / SUMMARY_FILE, data)
        mirror.materialize([mirror.directory / profile / run])
        return mirror.directory / profile / run


def is_run_url(text: str) -> bool:
    """The URL names a whole run of a store (its summary.json is there)."""
    url = parse(text)
    with open_store(url) as store:
        return store.backend.read(SUMMARY_FILE) is not None


def series(text: str, profile: str, started: float | None, digest: str, limit: int,
           pin_file: str, cache: Path | None = None) -> Path:
    """`check --baseline URL`: the store's mirror holding, whole, the `limit` newest
    complete runs of `profile` started before `started` (the candidate's profile digest
    first), and the profile's pin with its run; their summaries chose them."""
    with open_store(text) as store:
        mirror = Mirror.of(store, cache)
        mirror.sync(profile)
        chosen = []
        for summary_path in (mirror.directory / profile).glob(f"*/{SUMMARY_FILE}"):
            summary = parse_summary(summary_path.read_bytes(), str(summary_path))
            if summary.status == "complete" and summary.profile == profile and (
                    started is None or (summary.started or 0) < started):
                chosen.append((summary.digest == digest, summary.started or 0,
                               summary_path.parent))
        chosen.sort(reverse=True)
        runs = [d for *_, d in chosen[:limit]]
        pin = store.backend.read(f"{profile}/{pin_file}")
        if pin is not None:  # the pin and its run (reports.nightly.baselines reads it)
            atomic_write(mirror.directory / profile / pin_file, pin)
            doc = codec.parse_json(pin, f"{store.url}/{profile}/{pin_file}")
            name = doc.get("run") if isinstance(doc, dict) else None
            if isinstance(name, str) and not unsafe(name) and \
                    (mirror.directory / profile / name).is_dir():
                runs.append(mirror.directory / profile / name)
        mirror.materialize(runs)
        return mirror.directory
