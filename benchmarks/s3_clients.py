"""Which S3 client napilab's stores use (harness.stores.s3): boto3, s3fs (fsspec), or
DuckDB's httpfs. Measured on this machine against an S3 server on loopback (moto's
server, started here unless AWS_ENDPOINT_URL names one):

- install size: site-packages of a fresh venv with only the client, less pip's own
  (measured by hand: `python -m venv V && V/bin/pip install boto3`, `du -s`);
- import: a fresh interpreter, median of 5 `-c "import X"`, less the bare start;
- 1,000 objects of 2 kB (a summary's size) under one prefix: one listing (paged by the
  server, 1,000 keys a page) and a get of each, 16 at a time (boto3: a thread pool over
  one client; s3fs: its own asyncio `cat` of the list), median of 3.

    python benchmarks/s3_clients.py [--objects 1000]

Run it with each client's interpreter (the clients pin different botocore versions);
a client not importable is named and skipped. Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

BUCKET = "napilab-bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def import_ms(module: str) -> float | None:
    def once(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        return time.perf_counter() - start

    try:
        bare = statistics.median(once("pass") for _ in range(5))
        return (statistics.median(once(f"import {module}") for _ in range(5)) - bare) * 1000
    except subprocess.CalledProcessError:
        return None


def boto3_list_get(endpoint: str, prefix: str) -> tuple[int, float]:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    start = time.perf_counter()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=prefix) for o in page.get("Contents", [])]
    with ThreadPoolExecutor(16) as pool:
        sizes = list(pool.map(lambda k: len(client.get_object(Bucket=BUCKET, Key=k)
                                            ["Body"].read()), keys))
    return len(sizes), time.perf_counter() - start


def s3fs_list_get(endpoint: str, prefix: str) -> tuple[int, float]:
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True,
                           max_concurrency=16)
    start = time.perf_counter()
    keys = fs.find(f"{BUCKET}/{prefix}")
    found = fs.cat(keys)
    return len(found), time.perf_counter() - start


def duckdb_httpfs() -> str:
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("LOAD httpfs")
    except duckdb.Error as exc:
        return f"not loadable without the network: {str(exc).splitlines()[0][:120]}"
    return "loaded"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    server = None
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint is None:
        port = free_port()
        server = subprocess.Popen([os.path.join(os.path.dirname(sys.executable),
                                                "moto_server"), "-H", "127.0.0.1",
                                   "-p", str(port)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        endpoint = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
    try:
        import boto3  # the objects are put with boto3 (any client would do)

        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket=BUCKET)
        body = b"x" * 2048
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: client.put_object(Bucket=BUCKET,
                                                      Key=f"p/{i:05d}/summary.json",
                                                      Body=body), range(args.objects)))
        print(f"{args.objects} objects of {len(body)} bytes at {endpoint}")
        for name, fn in (("boto3", boto3_list_get), ("s3fs", s3fs_list_get)):
            module = name
            ms = import_ms(module)
            if ms is None:
                print(f"{name}: not importable here")
                continue
            try:
                runs = [fn(endpoint, "p/") for _ in range(3)]
            except ImportError:
                print(f"{name}: not importable here")
                continue
            count = runs[0][0]
            print(f"{name}: import {ms:.0f} ms; list + get of {count}: "
                  f"{statistics.median(t for _, t in runs):.2f} s (median of 3)")
        print(f"duckdb httpfs: {duckdb_httpfs()}")
    finally:
        if server is not None:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
