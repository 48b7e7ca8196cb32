"""Ingest benchmark: a 10-million-sample sockperf --full-log, parsed and stored.

    .venv/bin/python benchmarks/ingest.py [--samples N] [--keep DIR]

Writes, in a temporary directory, a full log in sockperf 3.7's format (parameter line,
summary block with its colour codes, `packet, txTime(sec), rxTime(sec), latency(usec)`
rows `%zu, %.9lf, %.9lf, %.3lf`, closing dashed line; shape copied from
tests/data/sockperf/3.7/pp_udp_fulllog.csv), then in a fresh Python process reads it,
parses it with runners.workloads.sockperf.parse_full_log and stores the latencies as Parquet (one
float64 column `latency_us`). The fresh process keeps the generator's memory out of the
peak RSS. Targets: >= 5 M samples/s for the parse, peak RSS <= 2x the file size.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DASHES = "-" * 30
MAGENTA, END = "\x1b[2;35m", "\x1b[0m"
TARGET_RATE = 5e6
TARGET_RSS_RATIO = 2.0


def generate(path: Path, samples: int, seed: int = 1) -> None:
    """A full log of `samples` ping-pong messages at ~600k msg/s, one-way latency
    = (rx - tx) / 2 as sockperf computes it."""
    rng = np.random.default_rng(seed)
    tx = 2.4 + np.cumsum(rng.uniform(1.2e-6, 2.2e-6, samples))
    rtt = rng.gamma(4.0, 25.0e-6, samples) + 8e-6
    rx = tx + rtt
    latency = np.round((rx - tx) / 2 * 1e6, 3)
    run_time = float(tx[-1] - tx[0])
    with path.open("w") as out:
        out.write(_header(samples, run_time, latency))
        chunk = 500_000
        for start in range(0, samples, chunk):
            end = min(samples, start + chunk)
            # sockperf's "%zu, %.9lf, %.9lf, %.3lf\n"
            out.write("".join(f"{i}, {t:.9f}, {r:.9f}, {v:.3f}\n" for i, t, r, v in zip(
                range(start, end), tx[start:end].tolist(), rx[start:end].tolist(),
                latency[start:end].tolist(), strict=True)))
        out.write(DASHES + "\n")


def _header(samples: int, run_time: float, latency: np.ndarray) -> str:
    lines = [DASHES,
             "test was performed using the following parameters: --mps=600000 --burst=1 "
             "--reply-every=1 --msg-size=14 --time=20",
             DASHES,
             f"sockperf: [Total Run] RunTime={run_time + 0.45:.3f} sec; Warm up time=400 msec; "
             f"SentMessages={samples + 1000}; ReceivedMessages={samples + 999}",
             "sockperf: ========= Printing statistics for Server No: 0",
             f"sockperf: [Valid Duration] RunTime={run_time:.3f} sec; "
             f"SentMessages={samples}; ReceivedMessages={samples}",
             f"sockperf: {MAGENTA}====> avg-latency={latency.mean():.3f} "
             f"(std-dev={latency.std():.3f}){END}",
             "sockperf: # dropped messages = 0; # duplicated messages = 0; "
             "# out-of-order messages = 0",
             f"sockperf: {MAGENTA}Total {samples} observations{END}; each percentile "
             f"contains {samples / 100:.2f} observations",
             f"sockperf: ---> <MAX> observation = {latency.max():8.3f}"]
    for p in (99.999, 99.99, 99.9, 99.0, 90.0, 75.0, 50.0, 25.0):
        lines.append(f"sockperf: ---> percentile {p:6.3f} = {np.percentile(latency, p):8.3f}")
    lines += [f"sockperf: ---> <MIN> observation = {latency.min():8.3f}", DASHES,
              "packet, txTime(sec), rxTime(sec), latency(usec)"]
    return "\n".join(lines) + "\n"


def measure(log: Path, parquet: Path) -> dict[str, float]:
    """Run in a fresh process: read, parse, store; times and this process's peak RSS."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from napilab.runners.workloads.sockperf import parse_full_log

    start = time.perf_counter()
    raw = log.read_bytes()
    read_done = time.perf_counter()
    latencies = parse_full_log(raw).latencies_us
    parse_done = time.perf_counter()
    pq.write_table(pa.table({"latency_us": pa.array(latencies, type=pa.float64())}), parquet)
    store_done = time.perf_counter()
    return {"samples": float(len(latencies)), "read_s": read_done - start,
            "parse_s": parse_done - read_done, "store_s": store_done - parse_done,
            "peak_rss_bytes": float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000_000)
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    parser.add_argument("--repeat", type=int, default=3, help="measurements (median kept)")
    parser.add_argument("--measure", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return 0
    with tempfile.TemporaryDirectory(prefix="napilab-ingest-") as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        log, parquet = where / "full-log.csv", where / "latency.parquet"
        began = time.perf_counter()
        generate(log, args.samples)
        print(f"generated {args.samples:,} samples in {time.perf_counter() - began:.1f} s")
        runs = []
        for _ in range(args.repeat):  # a fresh process each time; the machine is shared
            child = subprocess.run([sys.executable, __file__, "--measure", str(log),
                                    str(parquet)], check=True, capture_output=True, text=True)
            runs.append(json.loads(child.stdout))
        return report(runs, log.stat().st_size, parquet.stat().st_size)


def report(runs: list[dict[str, float]], log_size: int, parquet_size: int) -> int:
    """Median of the runs (best in brackets); peak RSS is the largest of the runs."""
    result = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    best_parse = min(run["parse_s"] for run in runs)
    peak_rss = max(run["peak_rss_bytes"] for run in runs)
    samples = result["samples"]
    parse_rate = samples / result["parse_s"]
    total = result["read_s"] + result["parse_s"] + result["store_s"]
    ratio = peak_rss / log_size
    print(f"full log         {log_size / 1e6:,.1f} MB, {samples:,.0f} samples, "
          f"median of {len(runs)} runs")
    print(f"read             {result['read_s']:.2f} s")
    print(f"parse            {result['parse_s']:.2f} s  {parse_rate / 1e6:.1f} M samples/s "
          f"(best {samples / best_parse / 1e6:.1f}; target >= {TARGET_RATE / 1e6:.0f})")
    print(f"store parquet    {result['store_s']:.2f} s  ({parquet_size / 1e6:.1f} MB)")
    print(f"read+parse+store {total:.2f} s  {samples / total / 1e6:.1f} M samples/s")
    print(f"peak RSS         {peak_rss / 1e6:,.1f} MB = {ratio:.2f}x the file "
          f"(target <= {TARGET_RSS_RATIO:.0f}x)")
    ok = parse_rate >= TARGET_RATE and ratio <= TARGET_RSS_RATIO
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
