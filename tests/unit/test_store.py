"""The results directory as RunStore writes it (issue 14 items 11, 12, 14, 15): one
sample file per trial written once and merged at the end; old runs (one
samples.parquet) read and render as before; a run directory never visible without its
manifest; a write the file system refuses is a StorageError naming the file; names
that are not plain file names never reach raw/."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from napilab.harness.errors import StorageError
from napilab.harness.store.manifest import Manifest
from napilab.harness.store.store import Row, RunStore, atomic_write, load_samples, sample_files

ROOT = Path(__file__).resolve().parents[2]
DEMO = next((ROOT / "tests" / "golden" / "reports" / "runs").glob("demo-*"))  # recorded run


def rows(trial: int, n: int = 4) -> list[Row]:
    return [Row(trial, "v", 1, "client", "a", "ping", f"m{i}", None if i else 0, float(i),
                "us") for i in range(n)]


def new_store(tmp_path: Path) -> RunStore:
    return RunStore.create(tmp_path, "p", Manifest(), run_id="abcd0001")


def test_each_trial_is_its_own_file_written_once(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.add_rows(rows(1))
    first = store.dir / "samples" / "001.parquet"
    before = (first.stat().st_ino, first.stat().st_mtime_ns, first.read_bytes())
    for trial in (2, 3):
        store.add_rows(rows(trial))
    assert (first.stat().st_ino, first.stat().st_mtime_ns, first.read_bytes()) == before
    assert [p.name for p in sample_files(store.dir)] == ["001.parquet", "002.parquet",
                                                         "003.parquet"]
    frame = load_samples(store.dir)
    assert list(frame["trial"]) == [1] * 4 + [2] * 4 + [3] * 4
    assert set(frame["run_id"]) == {"abcd0001"}
    store.merge_samples()
    assert not (store.dir / "samples").exists()
    pd.testing.assert_frame_equal(load_samples(store.dir), frame)
    assert pq.read_table(store.dir / "samples.parquet").schema.names[:2] == ["run_id", "trial"]


def test_old_runs_read_as_before() -> None:
    """The recorded demo run (one samples.parquet, written before per-trial files)."""
    pd.testing.assert_frame_equal(load_samples(DEMO), pd.read_parquet(DEMO / "samples.parquet"))
    assert sample_files(DEMO) == [DEMO / "samples.parquet"]


def test_an_old_run_resumed_keeps_its_rows_and_adds_files(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.add_rows(rows(1) + rows(2))
    store.merge_samples()  # as an older napilab left it: samples.parquet with trials 1-2
    store = RunStore.open(store.dir)
    store.drop_trial(3)  # a resumed trial starts over: nothing of it stored yet
    store.add_rows(rows(3))
    assert sorted(set(load_samples(store.dir)["trial"])) == [1, 2, 3]
    store.drop_trial(2)  # rows of a trial that runs again leave samples.parquet
    assert sorted(set(load_samples(store.dir)["trial"])) == [1, 3]
    store.merge_samples()
    assert list(pd.read_parquet(store.dir / "samples.parquet")["trial"]) == [1] * 4 + [3] * 4


def test_a_merge_cut_short_counts_each_trial_once(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.add_rows(rows(1) + rows(2))
    merged = pq.read_table(store.dir / "samples" / "001.parquet")
    pq.write_table(pa.concat_tables([merged, pq.read_table(store.dir / "samples" /
                                                           "002.parquet")]),
                   store.dir / "samples.parquet")  # written, per-trial files not yet gone
    frame = load_samples(store.dir)
    assert list(frame["trial"]) == [1] * 4 + [2] * 4


def test_merge_keeps_older_columns_readable(tmp_path: Path) -> None:
    """A samples.parquet without `unit` (an older napilab) merges with new files."""
    store = new_store(tmp_path)
    store.add_rows(rows(1))
    store.merge_samples()
    legacy = store.dir / "samples.parquet"
    pq.write_table(pq.read_table(legacy).drop_columns(["unit"]), legacy)
    store.add_rows(rows(2))
    store.merge_samples()
    table = pq.read_table(legacy)
    assert table["unit"].to_pylist() == [None] * 4 + ["us"] * 4
    assert pc.max(table["trial"]).as_py() == 2


def test_run_directory_appears_with_its_manifest(tmp_path: Path) -> None:
    """A reader polling RESULTS/<profile>/ never sees a run directory without
    manifest.json (it is made under a hidden name and renamed)."""
    seen_without: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for run in (tmp_path / "p").glob("[!.]*") if (tmp_path / "p").exists() else ():
                if not (run / "manifest.json").exists():
                    seen_without.append(run.name)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for i in range(100):
            RunStore.create(tmp_path, "p", Manifest(), run_id=f"{i:08x}")
    finally:
        done.set()
        watcher.join()
    assert seen_without == []
    assert not list((tmp_path / "p").glob(".*"))  # no hidden directory left
    assert len(list((tmp_path / "p").iterdir())) == 100


def test_a_run_directory_that_cannot_be_made_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "p").write_text("a file where the profile's directory goes")
    with pytest.raises(StorageError, match="cannot create"):
        new_store(tmp_path)
    taken = tmp_path / "r" / "p"
    for offset in range(3):  # the run's name, whatever second it starts in (even empty)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() + offset))
        (taken / f"{stamp}-abcd0001").mkdir(parents=True)
    with pytest.raises(StorageError, match=r"cannot create .*exists"):
        new_store(tmp_path / "r")
    assert not list(taken.glob(".*")) and len(list(taken.iterdir())) == 3


def test_refused_write_is_a_storage_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "raw").write_text("")
    with pytest.raises(StorageError, match=f"cannot write {tmp_path}/raw/x"):
        atomic_write(tmp_path / "raw" / "x", "data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw"]


@pytest.mark.parametrize("part", ["..", "../../../../tmp/x", "a/b", "", ".hidden",
                                  "eth0\n", "x\x00y"])
def test_raw_paths_stay_under_raw(tmp_path: Path, part: str) -> None:
    store = new_store(tmp_path)
    for args in ((part, "host", "client.out"), ("001", part, "client.out"),
                 ("001", "host", part)):
        with pytest.raises(StorageError, match="cannot name a file"):
            store.write_raw(*args, "data")
    assert not (store.dir / "raw").exists()


def test_reserve_holds_room_and_goes_at_the_end(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.reserve()
    size = os.stat(store.dir / ".reserve").st_size
    assert size >= 64 * 1024
    assert store.release_reserve() and not (store.dir / ".reserve").exists()
    assert not store.release_reserve()


def test_the_final_status_lands_on_a_disk_that_stays_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21, item 9: the results disk fills mid-run and something keeps it full (every
    new write refused). The saves during the run fail and leave the reserve alone; the
    final save is written into the reserve's blocks and renamed: manifest.json says
    `failed`, not `running`, and no reserve is left (it left `running` before: the first
    failed save released the reserve, and the final write found no room)."""
    import errno

    import napilab.harness.store.store as store_mod

    store = new_store(tmp_path)
    store.manifest.status = "running"
    store.reserve()
    store.save_manifest(final=False)

    def full(path: Path, data: bytes | str) -> None:
        raise StorageError(f"cannot write {path}: {os.strerror(errno.ENOSPC)}")

    monkeypatch.setattr(store_mod, "atomic_write", full)
    with pytest.raises(StorageError, match="No space left"):
        store.save_manifest(final=False)
    assert (store.dir / ".reserve").stat().st_size >= 64 * 1024
    store.manifest.status = "failed"
    store.save_manifest()
    assert '"status": "failed"' in (store.dir / "manifest.json").read_text()
    assert RunStore.open(store.dir).manifest.status == "failed"
    assert not (store.dir / ".reserve").exists()


def test_the_reserve_grows_with_the_manifest(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    store.reserve()
    from napilab.harness.store.manifest import TrialRecord

    store.manifest.trials = [TrialRecord(i, f"{i:04d}", "variant", 1, "pending")
                             for i in range(2000)]
    store.save_manifest(final=False)
    compact = (store.dir / "manifest.json").stat().st_size
    assert (store.dir / ".reserve").stat().st_size >= 3 * compact > 64 * 1024
