"""Report benchmark: rendering a large run, and a history query over many runs.

    .venv/bin/python benchmarks/report.py [--variants 50] [--reps 10] [--metrics 30]
                                          [--runs 1000] [--latency N] [--keep DIR]

1. A synthetic run of VARIANTS x REPS trials with METRICS run-level metrics (plus
   per-CPU softnet_stat/interrupts/proc_stat counters on 4 CPUs, as collectors store
   them), written through harness.store.store.RunStore; `napilab report --format html` of it
   (load, A/B table with statistics, plots, page), timed in this process, with where the
   time went. Target: <= 10 s for 50 x 10 x 30. With --latency N every trial also
   stores N per-transaction latencies (pooled percentile lines, distribution plots).
2. RUNS runs of one profile (3 variants x 5 repetitions x 10 metrics each) and
   `napilab history` over them (DuckDB over every run's samples plus the manifests).
   Target: <= 1 s for 1,000 runs.
Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from napilab.harness.store.manifest import Manifest, TrialRecord  # noqa: E402
from napilab.harness.store.store import Row, RunStore  # noqa: E402
from napilab.reports.ab.compare import load_run, table  # noqa: E402
from napilab.reports.formats import sections  # noqa: E402
from napilab.reports.formats.render import html  # noqa: E402
from napilab.reports.nightly.history import history  # noqa: E402
from napilab.reports.plots import plots  # noqa: E402

TARGET_HTML_S = 10.0
TARGET_HISTORY_S = 1.0
CPUS = (0, 1, 2, 3)
COUNTERS = (("softnet_stat", "processed"), ("interrupts", "function_call_interrupts"),
            ("proc_stat", "softirq"))


def _manifest(name: str, variants: list[str], reps: int, started: float) -> dict[str, Any]:
    return {"profile": {"name": name, "path": f"{name}.yaml", "digest": "0" * 64,
                        "description": "benchmark", "repeat": reps, "order": "interleaved",
                        "seed": None, "document": {"name": name}},
            "variants": variants, "baseline": variants[0], "metrics": {},
            "workload_source": "bench", "started": started,
            "host_facts": {"sut": {"kernel_release": "6.18.0"}},
            "napilab": {"version": "bench", "git_sha": None}}


def store_run(results: Path, name: str, variants: int, reps: int, metrics: int, *,
              run_id: str, started: float, per_cpu: bool = True, latency: int = 0,
              seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    names = [f"variant-{i:02d}" for i in range(variants)]
    directory = results / name / f"{run_id}"
    directory.mkdir(parents=True)
    store = RunStore(directory, Manifest.from_json(
        {"run_id": run_id, **_manifest(name, names, reps, started)}))
    rows: list[Row] = []
    trials = []
    index = 0
    for rep in range(1, reps + 1):
        for v, variant in enumerate(names):
            index += 1
            trials.append(TrialRecord(index, f"{index:03d}", variant, rep, "ok", settings=[]))
            values = 100 * (1 + 0.01 * v) * np.exp(rng.normal(0, 0.03, metrics))
            rows += [Row(index, variant, rep, "client", "sut", "bench",
                         f"latency_p{m}" if m < 5 else f"metric_{m:02d}", None, float(x),
                         "us" if m < 5 else "count") for m, x in enumerate(values)]
            if per_cpu:
                for source, metric in COUNTERS:
                    counts = rng.poisson(1000 * (1 + v % 3), len(CPUS)).astype(float)
                    rows += [Row(index, variant, rep, "client", "sut", source, metric, cpu,
                                 float(c), "count") for cpu, c in zip(CPUS, counts, strict=True)]
            if latency:
                store.write_latencies(f"{index:03d}", rng.lognormal(3 + 0.01 * v, 0.3, latency))
    store.add_rows(rows)
    store.merge_samples()  # as at the end of a run
    store.manifest.trials, store.manifest.status = trials, "complete"
    store.manifest.incomplete, store.manifest.ended = False, started
    store.save_manifest()
    return directory


def bench_html(root: Path, variants: int, reps: int, metrics: int, latency: int) -> float:
    directory = store_run(root, "big", variants, reps, metrics, run_id="big0",
                          started=time.time(), latency=latency)
    start = time.perf_counter()
    run = load_run(directory)
    tab = table(run)
    after_table = time.perf_counter()
    ctx = sections.context(run, tab)
    for name in plots.PLOTS:
        plots.render(name, run, tab)
    after_plots = time.perf_counter()
    page = html(run, tab)
    total = (after_table - start) + (time.perf_counter() - after_plots)
    print(f"html report of {variants} variants x {reps} reps x {metrics} metrics"
          + (f" (+{latency:,} latencies per trial)" if latency else "") + ":")
    print(f"  load + A/B table with statistics  {after_table - start:6.2f} s "
          f"({len(tab.lines)} lines, {tab.family} comparisons)")
    print(f"  plots (all {len(plots.PLOTS)}, timed apart)     {after_plots - after_table:6.2f} s")
    print(f"  page (sections, plots, template)  {time.perf_counter() - after_plots:6.2f} s "
          f"({len(page) / 1e6:.1f} MB, {len(ctx.settings)} settings rows)")
    print(f"  total (load + table + page)       {total:6.2f} s  (target <= {TARGET_HTML_S:g} s)")
    return total


def bench_history(root: Path, runs: int) -> float:
    start = time.perf_counter()
    base = time.time() - runs * 3600
    for i in range(runs):
        store_run(root, "nightly", 3, 5, 10, run_id=f"{i:05d}", started=base + 3600 * i,
                  per_cpu=False, seed=i)
    made = time.perf_counter() - start
    start = time.perf_counter()
    found = history(root, "nightly", ["latency_p1", "bench.metric_07"])
    elapsed = time.perf_counter() - start
    cells = sum(1 for _ in found.values)
    print(f"history over {runs:,} runs (generated in {made:.1f} s): {elapsed:.3f} s for "
          f"{cells:,} medians (target <= {TARGET_HISTORY_S:g} s)")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, default=50)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--latency", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="write the runs here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        html_s = bench_html(root, args.variants, args.reps, args.metrics, args.latency)
        history_s = bench_history(root, args.runs)
    ok = html_s <= TARGET_HTML_S and history_s <= TARGET_HISTORY_S
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
