"""The results directory (docs/design.md, "Contracts"):

    RESULTS/<profile>/<UTC timestamp>-<short id>/
      manifest.json       versioned; rewritten atomically after every trial
      raw/<trial>/<host>/<name>.{out,err,json}
      samples.parquet     run_id, trial, variant, rep, role, host, source, metric, cpu, value, unit
      latency/<trial>.parquet   per-transaction latencies (µs) when the tool gives them
      report.html

Every write goes to a temporary file renamed into place, so a crash leaves the previous
complete state. A finished run is never rewritten.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.errors import InputError

SCHEMA_VERSION = 1
COLUMNS = ("run_id", "trial", "variant", "rep", "role", "host", "source", "metric", "cpu",
           "value", "unit")
SAMPLES_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("trial", pa.int32()), ("variant", pa.string()),
    ("rep", pa.int32()), ("role", pa.string()), ("host", pa.string()),
    ("source", pa.string()), ("metric", pa.string()), ("cpu", pa.int32()),
    ("value", pa.float64()), ("unit", pa.string()),
])


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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data.encode() if isinstance(data, str) else data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def new_run_id() -> str:
    return secrets.token_hex(4)


class RunStore:
    def __init__(self, directory: Path, manifest: dict[str, Any]) -> None:
        self.dir = directory
        self.manifest = manifest
        self._rows: list[Row] = []

    @property
    def run_id(self) -> str:
        return str(self.manifest["run_id"])

    @classmethod
    def create(cls, results: str | Path, profile_name: str, manifest: dict[str, Any],
               run_id: str | None = None) -> RunStore:
        run_id = run_id or new_run_id()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        directory = Path(results) / profile_name / f"{stamp}-{run_id}"
        directory.mkdir(parents=True, exist_ok=False)
        store = cls(directory, {"schema_version": SCHEMA_VERSION, "run_id": run_id, **manifest})
        store.save_manifest()
        return store

    @classmethod
    def open(cls, directory: str | Path) -> RunStore:
        directory = Path(directory)
        manifest = load_manifest(directory)
        store = cls(directory, manifest)
        samples = directory / "samples.parquet"
        if samples.exists():
            frame = pd.read_parquet(samples)
            store._rows = [_row({str(k): v for k, v in rec.items()})
                           for rec in frame.to_dict("records")]
        return store

    def save_manifest(self) -> None:
        atomic_write(self.dir / "manifest.json", json.dumps(self.manifest, indent=1,
                                                            default=str) + "\n")

    def raw_path(self, trial: str, host: str, name: str) -> Path:
        return self.dir / "raw" / trial / host / name

    def write_raw(self, trial: str, host: str, name: str, data: str) -> None:
        atomic_write(self.raw_path(trial, host, name), data)

    def write_raw_json(self, trial: str, host: str, name: str, doc: Any) -> None:
        self.write_raw(trial, host, name, json.dumps(doc, indent=1, default=str) + "\n")

    def add_rows(self, rows: Iterable[Row]) -> None:
        """Append one trial's rows and rewrite samples.parquet atomically."""
        self._rows.extend(rows)
        self._write_samples()

    def drop_trial(self, trial: int) -> None:
        self._rows = [r for r in self._rows if r.trial != trial]
        self._write_samples()

    def _write_samples(self) -> None:
        columns: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        for row in self._rows:
            columns["run_id"].append(self.run_id)
            for name in COLUMNS[1:]:
                columns[name].append(getattr(row, name))
        table = pa.Table.from_pydict(columns, schema=SAMPLES_SCHEMA)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        atomic_write(self.dir / "samples.parquet", sink.getvalue().to_pybytes())

    def write_latencies(self, trial: str, latencies_us: Any) -> None:
        table = pa.table({"latency_us": pa.array(latencies_us, type=pa.float64())})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        atomic_write(self.dir / "latency" / f"{trial}.parquet", sink.getvalue().to_pybytes())


def _row(record: dict[str, Any]) -> Row:
    cpu = record["cpu"]
    return Row(trial=int(record["trial"]), variant=str(record["variant"]), rep=int(record["rep"]),
               role=str(record["role"]), host=str(record["host"]), source=str(record["source"]),
               metric=str(record["metric"]),
               cpu=None if cpu is None or cpu != cpu else int(cpu),
               value=float(record["value"]), unit=str(record["unit"]))


def load_manifest(directory: Path) -> dict[str, Any]:
    path = directory / "manifest.json"
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{directory}: not a napilab run directory (no manifest.json)") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: corrupt manifest: {exc}") from None
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(f"{path}: manifest schema_version {version!r}, this napilab reads "
                         f"{SCHEMA_VERSION}")
    return manifest


def load_samples(directory: Path) -> pd.DataFrame:
    path = directory / "samples.parquet"
    if not path.exists():
        return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    return pd.read_parquet(path)
