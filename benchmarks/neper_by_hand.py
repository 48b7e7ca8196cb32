"""neper tcp_rr through napilab versus the same commands by hand (issue 12's check that
napilab starts both sides right: within 25% of a hand run's transactions).

On a local testbed (root; builds and removes its own, prefix `napilabn`), ROUNDS times,
alternating which goes first:
  napilab  `napilab run` of a one-trial profile, local transport: neper.tcp_rr,
           client {Q: 200, R: 400, T: 1, F: 1}, client on CPU 0, server on CPU 1
  by hand  ip netns exec napilabn-b taskset -c 1 tcp_rr --nolog -H 192.0.2.2 -l S
               -Q 200 -R 400 -F 1 &
           ip netns exec napilabn-a taskset -c 0 tcp_rr -c -H 192.0.2.2 -l S --nolog
               -Q 200 -R 400 -T 1 -F 1
and prints the client's num_transactions of each, and the ratio of the medians.
neper is not packaged: build google/neper and put its directory on PATH.

    PATH=/path/to/neper:$PATH .venv/bin/python benchmarks/neper_by_hand.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402

from napilab.harness.lab.netns import Testbed  # noqa: E402
from napilab.runners.workloads.neper import neper  # noqa: E402

PROFILE = """\
name: neper-by-hand
hosts:
  client: {{host: a}}
  server: {{host: b}}
workload:
  tool: neper.tcp_rr
  duration: {seconds}
  client: {{role: client, cpus: "0", args: {{Q: 200, R: 400, T: 1, F: 1}}}}
  server: {{role: server, cpus: "1"}}
variants:
  sizes: {{}}
repeat: 1
"""
SIZES = ["-Q", "200", "-R", "400"]


def through_napilab(inventory: Path, work: Path, seconds: int, index: int) -> float:
    profile = work / "neper.yaml"
    profile.write_text(PROFILE.format(seconds=seconds))
    results = work / f"r{index}"
    subprocess.run([str(Path(sys.executable).parent / "napilab"), "run", str(profile),
                    "-i", str(inventory), "--transport", "local", "-o", str(results),
                    "--quiet", "--format", "text"], check=True, capture_output=True)
    samples = pd.read_parquet(next(results.glob("*/*/samples.parquet")))
    rows = samples[(samples.role == "client") & (samples.metric == "num_transactions")]
    return float(rows["value"].iloc[0])


def by_hand(bed: Testbed, seconds: int) -> float:
    a, b = (node.netns for node in bed.nodes)
    server = subprocess.Popen(["ip", "netns", "exec", b, "taskset", "-c", "1", "tcp_rr",
                               "--nolog", "-H", "192.0.2.2", "-l", str(seconds), *SIZES,
                               "-F", "1"], stdout=subprocess.PIPE, text=True)
    try:
        wait_listening(b, 12866)
        client = subprocess.run(["ip", "netns", "exec", a, "taskset", "-c", "0", "tcp_rr",
                                 "-c", "-H", "192.0.2.2", "-l", str(seconds), "--nolog",
                                 *SIZES, "-T", "1", "-F", "1"],
                                check=True, capture_output=True, text=True, timeout=60)
        server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return neper.parse(client.stdout).report["num_transactions"]


def wait_listening(netns: str, port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ss = subprocess.run(["ip", "netns", "exec", netns, "ss", "-Htln", f"sport = {port}"],
                            capture_output=True, text=True).stdout
        if ss.strip():
            return
        time.sleep(0.05)
    raise RuntimeError(f"neper server not listening on {port} in {netns}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("tcp_rr") is None:
        print("neper's tcp_rr is not on PATH", file=sys.stderr)
        return 2
    bed = Testbed(prefix="napilabn")
    inventory = bed.up()
    napilab: list[float] = []
    hand: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.rounds):
                order = (("napilab", "hand") if i % 2 == 0 else ("hand", "napilab"))
                for which in order:
                    if which == "napilab":
                        napilab.append(through_napilab(inventory, Path(tmp), args.seconds, i))
                    else:
                        hand.append(by_hand(bed, args.seconds))
                print(f"round {i + 1}: napilab {napilab[-1]:.0f}  by hand {hand[-1]:.0f}",
                      flush=True)
    finally:
        bed.down()
    ratio = statistics.median(napilab) / statistics.median(hand)
    print(f"median transactions in {args.seconds} s: napilab {statistics.median(napilab):.0f}, "
          f"by hand {statistics.median(hand):.0f}; ratio {ratio:.2f} (target 0.75..1.25)")
    return 0 if 0.75 <= ratio <= 1.25 else 1


if __name__ == "__main__":
    sys.exit(main())
