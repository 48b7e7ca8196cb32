"""A run's summary (RUN_DIR/summary.json, `napilab schema summary`): the few numbers
that readers of many runs (`history`, `check --baseline`, `publish`, over a directory
or a store: harness.stores) scan first, so that reading a thousand runs never loads a
thousand samples files.

It holds the run's profile, id, status, start and end, profile digest, each host's
kernel and machine (CPU model, virtualization), the replica the run measured (None
for a run of one set of hosts), and per metric of the trend (the profile's primary
metrics, then its `report.table` rows, DEFAULT_METRICS in all, else the workload's
headline: `summary_keys`) and per variant: the number of trials, their median and
the per-trial values (a metric of several hosts of one role summed per trial, as
`history` and the A/B table do; run-level values only, cpu null). The trace
collector's traced twins (Manifest.twins) are left out: never judged.

It is written when a run ends (harness.engine.engine, after the manifest's final
save; again by a `--resume` that ends it) and by `napilab push` for a run that lacks
it. In a store it is the run's last object, its marker: a run whose summary is not
there is not listed (harness.stores.store).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar

import msgspec

from napilab.harness.errors import InputError
from napilab.harness.records import codec
from napilab.harness.records.codec import Document, FrozenRecord
from napilab.harness.stats.family import named_primary
from napilab.harness.store.manifest import Manifest, traced_twins
from napilab.harness.store.store import atomic_write, load_manifest, sample_files

SUMMARY_FILE = "summary.json"
DEFAULT_METRICS = 4  # metrics of the trend when the profile names none
PREFERRED = ("latency_p99", "latency_p50", "rtt_avg", "latency_mean", "throughput",
             "message_rate", "received_per_second")


class VariantValues(FrozenRecord, frozen=True):
    WHAT = "a variant's values"

    n: int = 0  # trials with a value
    median: float | None = None
    values: list[float] = msgspec.field(default_factory=list)  # per trial, in trial order


class MetricSummary(FrozenRecord, frozen=True):
    WHAT = "a metric's summary"

    source: str = ""
    metric: str = ""
    role: str = ""
    hosts: list[str] = msgspec.field(default_factory=list)  # whose values are summed
    unit: str = ""
    variants: dict[str, VariantValues] = msgspec.field(default_factory=dict)


class HostSummary(FrozenRecord, frozen=True):
    WHAT = "a host's summary"

    kernel: str | None = None  # uname -r
    machine: str | None = None  # CPU model
    virtualization: str | None = None


class RunSummary(Document, kw_only=True):
    """summary.json (module doc)."""

    WHAT: ClassVar[str] = "run summary"
    VERSION: ClassVar[int] = 1

    profile: str = ""
    run_id: str = ""
    run: str = ""  # the run directory's name: <UTC time>-<run id>
    status: str = "unknown"
    started: float | None = None
    ended: float | None = None
    digest: str = ""  # the resolved profile's
    description: str = ""
    replica: str | None = None  # the replica of a fleet run (issue 38); None: one set
    # a run over replicas (harness.cli.fleet): its replicas, each a run under
    # replicas/NAME with its own summary; this run has no trials of its own
    replicas: list[str] = msgspec.field(default_factory=list)
    napilab: str = ""
    variants: list[str] = msgspec.field(default_factory=list)
    baseline: str = ""
    trials: int = 0
    trials_ok: int = 0
    hosts: dict[str, HostSummary] = msgspec.field(default_factory=dict)
    keys: list[str] = msgspec.field(default_factory=list)  # the trend's metric names
    metrics: list[MetricSummary] = msgspec.field(default_factory=list)

    def kernels(self) -> dict[str, str]:
        return {h: f.kernel or "-" for h, f in self.hosts.items()}


def primary_keys(manifest: Manifest, table: Sequence[str]) -> list[str]:
    """The primary metrics as `source.metric`: a bare name resolves to the table row
    that has it, else to the workload's own metric."""
    source = manifest.workload_source or ""
    primary = named_primary(manifest.metrics or {})
    named = [name for name in manifest.metrics or {} if name in primary]
    if not named:
        return [f"{source}.{m}" for m in manifest.headline(source)]
    out = []
    for name in named:
        if "." in name:
            out.append(name)
            continue
        row = next((key for key in table if key.split(".", 1)[1] == name), None)
        out.append(row or f"{source}.{name}")
    return out


def summary_keys(manifest: Manifest, stored: Iterable[tuple[str, str]] = ()) -> list[str]:
    """The metrics of the trend: primary first, then the `report.table` rows
    (DEFAULT_METRICS in all, every primary one kept), else of the workload's metrics
    stored (`stored`: (source, metric) pairs) the preferred ones."""
    rows = manifest.profile.document.get("report", {}).get("table") or []
    table = [f"{r['source']}.{r['metric']}" for r in rows if "source" in r]
    primary = primary_keys(manifest, table)
    wanted = list(dict.fromkeys([*primary, *table]))
    if wanted:
        return wanted[:max(DEFAULT_METRICS, len(primary))]
    source = manifest.workload_source
    names = {m for s, m in stored if s == source}
    found = [f"{source}.{m}" for m in PREFERRED if m in names]
    return found[:DEFAULT_METRICS] or [f"{source}.{m}" for m in sorted(names)][:2]


_COLUMNS = ["trial", "variant", "role", "host", "source", "metric", "cpu", "value", "unit"]


def build_summary(directory: str | Path, manifest: Manifest | None = None, *,
                  replica: str | None = None) -> RunSummary:
    """The summary of the run in `directory` (its manifest and samples)."""
    directory = Path(directory)
    manifest = manifest or load_manifest(directory)
    twins = traced_twins(manifest)  # traced copies: no trend of their own
    rows = [r for r in _rows(sample_files(directory)) if str(r["variant"]) not in twins]
    keys = summary_keys(manifest, {(str(r["source"]), str(r["metric"])) for r in rows})
    wanted = set(keys)
    # (role, source, metric) -> variant -> trial -> sum over the role's hosts
    sums: dict[tuple[str, str, str], dict[str, dict[int, float]]] = {}
    units: dict[tuple[str, str, str], str] = {}
    hosts: dict[tuple[str, str, str], set[str]] = {}
    for row in rows:
        source, metric = str(row["source"]), str(row["metric"])
        if row.get("cpu") is not None or not ({metric, f"{source}.{metric}"} & wanted):
            continue
        key = (str(row["role"]), source, metric)
        per = sums.setdefault(key, {}).setdefault(str(row["variant"]), {})
        trial = int(row["trial"])  # type: ignore[call-overload]
        per[trial] = per.get(trial, 0.0) + float(row["value"])  # type: ignore[arg-type]
        if row.get("unit") and key not in units:
            units[key] = str(row["unit"])
        hosts.setdefault(key, set()).add(str(row.get("host")))
    metrics = []
    for (role, source, metric), per_variant in sorted(sums.items()):
        variants = {}
        for variant, by_trial in per_variant.items():
            values = [by_trial[t] for t in sorted(by_trial)]
            variants[variant] = VariantValues(n=len(values),
                                              median=statistics.median(values),
                                              values=values)
        metrics.append(MetricSummary(source=source, metric=metric, role=role,
                                     hosts=sorted(hosts[(role, source, metric)]),
                                     unit=units.get((role, source, metric), ""),
                                     variants=variants))
    facts = manifest.host_facts or {}
    return RunSummary(
        profile=manifest.profile.name or directory.parent.name,
        run_id=manifest.run_id or directory.name, run=directory.name,
        status=manifest.status or "unknown",
        started=manifest.started, ended=manifest.ended,
        digest=manifest.profile.digest or "", description=manifest.profile.description,
        replica=replica or getattr(manifest, "replica", None) or manifest.extra.get("replica"),
        replicas=[r.name for r in manifest.replicas or []],
        napilab=manifest.napilab.version or "",
        variants=[v for v in manifest.variants if v not in twins], baseline=manifest.baseline,
        trials=len(manifest.trials),
        trials_ok=sum(1 for t in manifest.trials if t.status == "ok"),
        hosts={h: HostSummary(kernel=f.kernel_release, machine=f.cpu_model,
                              virtualization=f.get("virtualization"))
               for h, f in facts.items()},
        keys=keys, metrics=metrics)


def _rows(files: Sequence[Path]) -> list[dict[str, object]]:
    """The run's rows (the columns a summary reads), a trial's own file winning over
    samples.parquet (harness.store.store.load_samples)."""
    import pyarrow.parquet as pq

    def read(path: Path) -> list[dict[str, object]]:
        present = set(pq.read_schema(path).names)
        found: list[dict[str, object]] = pq.read_table(
            path, columns=[c for c in _COLUMNS if c in present]).to_pylist()
        return found

    legacy = [f for f in files if f.name == "samples.parquet"]
    own = [row for f in files if f.name != "samples.parquet" for row in read(f)]
    trials = {row["trial"] for row in own}
    return [row for f in legacy for row in read(f) if row["trial"] not in trials] + own


def write_summary(directory: str | Path, manifest: Manifest | None = None) -> Path:
    """summary.json written (atomically) into the run directory."""
    directory = Path(directory)
    path = directory / SUMMARY_FILE
    atomic_write(path, codec.encode(build_summary(directory, manifest)) + b"\n")
    return path


def parse_summary(data: bytes, where: str) -> RunSummary:
    """A summary's bytes (a file, or an object of a store) as the record."""
    doc = codec.parse_json(data, where)
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise InputError(f"{where}: not a napilab run summary (no schema_version)")
    return codec.convert(doc, RunSummary, where)


def read_summary(directory: str | Path) -> RunSummary | None:
    """RUN_DIR/summary.json, None when the run has none (older, or not ended)."""
    path = Path(directory) / SUMMARY_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return parse_summary(data, str(path))
