"""A results store at a fleet's scale (issue 38: targets `history` of one series <= 2 s
from a directory and <= 20 s over S3, `publish` of the whole store <= 60 s from a
directory, under 1 GiB of memory).

Synthetic runs in napilab's layout: PROFILES profiles x NIGHTS nights, each night a run
over REPLICAS replicas (RUN/replicas/NAME), so PROFILES x NIGHTS x REPLICAS replica
nights (10,000 by default). Each replica night holds what a real one holds that these
commands read: its summary.json (a RunSummary with 4 trend metrics x 2 variants x 5
trials, two hosts) and its report.html (REPORT_KB of text); each run its own summary
naming its replicas, written last (the store's marker). The S3 store is moto's server on
loopback (as the tests use), filled with boto3 directly.

Timed, each a fresh `napilab` process (its wall time and peak RSS, GNU time):
  - history of one series (`--series 'replica r03'`) of one profile, from the
    directory, then over S3 twice (a cold mirror, then a warm one);
  - publish of the whole store from the directory (--raw none).

    .venv/bin/python benchmarks/store_scale.py [--profiles 20] [--replicas 10] [--nights 50]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from napilab.harness.records import codec  # noqa: E402
from napilab.harness.store.summary import (  # noqa: E402
    HostSummary,
    MetricSummary,
    RunSummary,
    VariantValues,
)

NAPILAB = str(Path(sys.executable).parent / "napilab")
MOTO = Path(sys.executable).parent / "moto_server"
METRICS = (("ping", "rtt_avg", "sender", "us"), ("ping", "received", "sender", ""),
           ("proc_stat", "softirq", "receiver", "ms"), ("proc_stat", "hardirq", "receiver", "ms"))
START = 1_790_000_000.0


def summary(profile: str, run: str, run_id: str, night: int, replica: str | None,
            replicas: list[str], rng: random.Random) -> bytes:
    metrics = []
    if replica is not None:
        for source, metric, role, unit in METRICS:
            variants = {}
            for variant, level in (("base", 100.0), ("changed", 90.0)):
                values = [level * rng.lognormvariate(0, 0.05) for _ in range(5)]
                variants[variant] = VariantValues(n=5, median=sorted(values)[2], values=values)
            metrics.append(MetricSummary(source=source, metric=metric, role=role,
                                         hosts=[f"{replica}-a"], unit=unit,
                                         variants=variants))
    doc = RunSummary(profile=profile, run_id=run_id, run=run,
                     status="complete", started=START + 86400 * night,
                     ended=START + 86400 * night + 600, digest="0" * 64,
                     description="synthetic", replica=replica, replicas=replicas,
                     napilab="0.1.0", variants=["base", "changed"], baseline="base",
                     trials=0 if replica is None else 10,
                     trials_ok=0 if replica is None else 10,
                     hosts={} if replica is None else {
                         "a": HostSummary(kernel="6.18.0", machine="cpu"),
                         "b": HostSummary(kernel="6.18.0", machine="cpu")},
                     keys=[f"{s}.{m}" for s, m, _, _ in METRICS] if replica else [],
                     metrics=metrics)
    return codec.encode(doc, indent=1) + b"\n"


def layout(profiles: int, replicas: int, nights: int, report_kb: int
           ) -> list[tuple[str, bytes]]:
    """(key, bytes) of the store, each run's own summary last of its run's keys."""
    rng = random.Random(1)
    report = (b"<!DOCTYPE html><html><body><pre>" + b"x" * (report_kb * 1024) +
              b"</pre></body></html>\n")
    names = [f"r{i:02d}" for i in range(1, replicas + 1)]
    out = []
    for p in range(profiles):
        profile = f"profile{p:02d}"
        for night in range(nights):
            run = f"2026{night // 28 + 1:02d}{night % 28 + 1:02d}T020000Z-{p:02d}{night:06d}"
            for name in names:
                base = f"{profile}/{run}/replicas/{name}"
                out.append((f"{base}/report.html", report))
                out.append((f"{base}/summary.json",
                            summary(profile, name, f"{p:02d}{night:04d}{name}", night, name,
                                    [], rng)))
            out.append((f"{profile}/{run}/summary.json",
                        summary(profile, run, run.rsplit("-", 1)[-1], night, None, names,
                                rng)))
    return out


def timed(*args: str, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Seconds, peak RSS in MiB and stdout of `napilab ARGS`."""
    start = time.monotonic()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", NAPILAB, *args], capture_output=True,
                          text=True, env=env, check=False)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"napilab {' '.join(args)}: exit {done.returncode}: {done.stderr[-2000:]}")
    rss = int(done.stderr.strip().splitlines()[-1]) / 1024
    return seconds, rss, done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=10)
    parser.add_argument("--nights", type=int, default=50)
    parser.add_argument("--report-kb", type=int, default=8)
    args = parser.parse_args()
    keys = layout(args.profiles, args.replicas, args.nights, args.report_kb)
    total = args.profiles * args.replicas * args.nights
    print(f"{total:,} replica nights ({args.profiles} profiles x {args.nights} nights x "
          f"{args.replicas} replicas), {len(keys):,} objects, "
          f"{sum(len(b) for _, b in keys) / 2**20:.0f} MiB")
    series = f"replica r{min(3, args.replicas):02d}"
    profile = f"profile{min(7, args.profiles - 1):02d}"
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        for key, body in keys:
            path = store / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        seconds, rss, out = timed("history", str(store), "--profile", profile,
                                  "--series", series, "--metric", "rtt_avg", env=env)
        nights = re.search(r"(\d+) run\(s\)", out)
        print(f"history of one series ({nights.group(1) if nights else '?'} nights), "
              f"directory: {seconds:6.2f} s, peak {rss:5.0f} MiB   (target <= 2 s)")
        seconds, rss, _ = timed("publish", str(store), str(Path(tmp) / "site"), "--raw",
                                "none", env=env)
        print(f"publish of the whole store, directory: {seconds:6.2f} s, peak {rss:5.0f} MiB"
              "   (target <= 60 s)")
        shutil.rmtree(Path(tmp) / "site")
        if not MOTO.exists():
            print(f"S3: skipped, {MOTO} missing (pip install 'moto[server]')")
            return
        port = free_port()
        server = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            import boto3

            s3_env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                      "AWS_ACCESS_KEY_ID": "AKIABENCH", "AWS_SECRET_ACCESS_KEY": "bench",
                      "AWS_REGION": "us-east-1"}
            deadline = time.monotonic() + 30
            while True:
                try:
                    client = boto3.client("s3", endpoint_url=s3_env["AWS_ENDPOINT_URL"],
                                          aws_access_key_id="AKIABENCH",
                                          aws_secret_access_key="bench",
                                          region_name="us-east-1")
                    client.create_bucket(Bucket="fleet")
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            started = time.monotonic()
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda kv: client.put_object(Bucket="fleet", Key=f"lab/{kv[0]}",
                                                           Body=kv[1]), keys))
            print(f"S3 filled in {time.monotonic() - started:.0f} s (moto on loopback)")
            env = {**env, **s3_env, "XDG_CACHE_HOME": str(Path(tmp) / "cache-s3")}
            for label in ("cold mirror", "warm mirror"):
                seconds, rss, _ = timed("history", "s3://fleet/lab", "--profile",
                                        profile, "--series", series, "--metric",
                                        "rtt_avg", env=env)
                print(f"history of one series over S3, {label}: {seconds:6.2f} s, peak "
                      f"{rss:5.0f} MiB   (target <= 20 s)")
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
