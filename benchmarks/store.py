"""What storing one trial costs as a run grows: RunStore.add_rows (the trial's samples)
and RunStore.save_manifest (the manifest with one more trial) at trial 1, 100 and 400,
the median of 5 trials around each, through the real RunStore on this machine's
results file system; then the one merge of the per-trial files into samples.parquet at
the end of the run.

    python benchmarks/store.py [--trials 400] [--rows 500] [--dir DIR]

`--rows` is the rows of one trial (the demo stores ~130 on 2 CPUs; per-CPU counters of
a 16-CPU host give ~500). Storing the samples must cost the same at trial 400 as at
trial 1 (napilab before per-trial files rewrote samples.parquet whole after every
trial: 37 ms at trial 1, about 1 s at trial 400). Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from napilab.harness.store.manifest import Manifest, ProfileRecord, TrialRecord  # noqa: E402
from napilab.harness.store.store import Row, RunStore  # noqa: E402

POINTS = (1, 100, 400)
WINDOW = 5  # trials measured around each point (median)


def trial_rows(index: int, rows: int) -> list[Row]:
    variant = f"variant-{index % 5}"
    rep = 1 + index // 5
    out = [Row(index, variant, rep, "client", "sut", "bench", f"latency_p{m}", None,
               100.0 + m + index * 1e-3, "us") for m in range(10)]
    cpus = max(1, (rows - 10) // 10)
    out += [Row(index, variant, rep, "server", "peer", "softnet_stat", f"counter_{c}", cpu,
                float(index * cpu + c), "count")
            for c in range(10) for cpu in range(cpus)]
    return out[:rows]


def trial_entry(index: int) -> dict[str, object]:
    """A manifest trial entry the size of a real one (five settings read back)."""
    settings = [{"host": "peer", "role": "receiver", "kind": "netdev",
                 "target": f"data0/knob_{k}", "path": f"/sys/class/net/data0/knob_{k}",
                 "original": "0", "requested": "20000", "effective": "20000",
                 "backend": "file"} for k in range(5)]
    return {"index": index, "id": f"{index:03d}", "variant": f"variant-{index % 5}",
            "rep": 1 + index // 5, "status": "ok", "start": 0.0, "end": 1.0,
            "settings": settings, "restore": [{"host": "peer", "target": s["target"],
                                               "path": s["path"], "restored": "0"}
                                              for s in settings]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--dir", type=Path, help="results directory (default: a temporary "
                        "one under /tmp)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = RunStore.create(tmp, "bench", Manifest(profile=ProfileRecord(name="bench")))
        samples: dict[int, float] = {}
        manifest: dict[int, float] = {}
        for index in range(1, args.trials + 1):
            rows = trial_rows(index, args.rows)
            start = time.perf_counter()
            store.add_rows(rows)
            samples[index] = time.perf_counter() - start
            store.manifest.trials.append(TrialRecord.from_json(trial_entry(index)))
            start = time.perf_counter()
            store.save_manifest(final=False)
            manifest[index] = time.perf_counter() - start
        merge = getattr(store, "merge_samples", None)
        start = time.perf_counter()
        if merge is not None:
            merge()
        merged = time.perf_counter() - start
        size = (store.dir / "manifest.json").stat().st_size
    print(f"store cost per trial, {args.rows} rows a trial, {args.trials} trials "
          f"(median of {WINDOW} trials around each point):")
    print(f"  {'trial':>5}  {'samples':>10}  {'manifest':>10}")
    for point in (p for p in POINTS if p <= args.trials):
        around = [i for i in range(point - WINDOW // 2, point + WINDOW // 2 + 1)
                  if 1 <= i <= args.trials]
        print(f"  {point:>5}  {statistics.median(samples[i] for i in around) * 1e3:8.1f} ms"
              f"  {statistics.median(manifest[i] for i in around) * 1e3:8.1f} ms")
    print(f"  merge into samples.parquet at the end: {merged * 1e3:.0f} ms "
          f"({args.trials * args.rows:,} rows); manifest at the end {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
