"""Record the real runs the gate tests judge (tests/unit/test_gate_runs.py), on the SSH
testbed of this machine (root; it builds and removes its own, prefix napilabg):

- nightly/demo/: four nights of profiles/demo.yaml cut to 1 s trials after 2 unmeasured
  ones, 10 repetitions, 50% thresholds (NIGHTLY): A and B plain, then R and C under a
  token-bucket shaper on host b's data0 (`tbf rate 2mbit burst 3000 latency 20ms`: the
  ping flood's replies queue behind the bucket).
- ladder/ladder/: three runs of a sockperf under-load ladder at 5k and 2M msg/s (LADDER):
  first and second plain (an A/A pair), third under `tbf rate 2mbit burst 4kb latency
  50ms` on host a's data0 (the sender blocks at ~4k msg/s).

Each is stored as napilab wrote it (manifest.json and samples.parquet; the raw outputs
stay out: no judgement reads them). The verdicts are statistics over real trials of
this 2-CPU machine, measured alone on its CPUs: tests/unit/test_gate_runs.py judges
these runs, so `make test` need not measure 8 minutes of A/A nights to say the same.
tests/integration/test_cross_run.py and test_nightly_gate.py still run `check` on runs
measured during the test (a shaped night caught, a CPU cost gated), and
test_load_ladder.py a ladder run end to end.

    .venv/bin/python tests/golden/gate_runs/record.py [nightly|ladder ...]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

from napilab.harness.lab.netns import Testbed  # noqa: E402
from tests.cli import run_napilab  # noqa: E402
from tests.integration.test_load_ladder import PROFILE as LADDER  # noqa: E402

DEMO = ROOT / "profiles" / "demo.yaml"
NIGHTLY = (f"extends: {DEMO}\nworkload: {{duration: 1}}\nwarmup_trials: 2\n"
           "repeat: 10\nmetrics:\n  rtt_avg: {max_regression: 50%}\n"
           "  received: {max_regression: 50%}\n")
NIGHTLY_SHAPER = ("b", ["tbf", "rate", "2mbit", "burst", "3000", "latency", "20ms"])
LADDER_SHAPER = ("a", ["tbf", "rate", "2mbit", "burst", "4kb", "latency", "50ms"])
KEEP = ("manifest.json", "samples.parquet")


def run(bed: Testbed, profile: Path, results: Path) -> Path:
    before = set(results.glob("*/*"))
    done = run_napilab("run", str(profile), "-i", str(bed.inventory_path), "--transport", "ssh",
                       "-o", str(results), "--format", "text", timeout=None)
    if done.returncode != 0:
        sys.exit(done.stdout + done.stderr)
    (created,) = {p for p in set(results.glob("*/*")) - before if p.is_dir()}
    print(created.name, flush=True)
    return created


@contextmanager
def shaped(bed: Testbed, host: str, qdisc: list[str]) -> Iterator[None]:
    netns = next(n.netns for n in bed.nodes if n.name == host)
    tc = ["ip", "netns", "exec", netns, "tc", "qdisc"]
    subprocess.run([*tc, "add", "dev", "data0", "root", *qdisc], check=True)
    try:
        yield
    finally:
        subprocess.run([*tc, "del", "dev", "data0", "root"], check=False)


def record(bed: Testbed, what: str, work: Path) -> None:
    profile = work / f"{what}.yaml"
    profile.write_text(NIGHTLY if what == "nightly" else LADDER)
    results = work / what
    host, qdisc = NIGHTLY_SHAPER if what == "nightly" else LADDER_SHAPER
    for _ in range(2):
        run(bed, profile, results)
    for _ in range(2 if what == "nightly" else 1):
        with shaped(bed, host, qdisc):
            run(bed, profile, results)
    target = HERE / what
    shutil.rmtree(target, ignore_errors=True)
    for run_dir in sorted(results.glob("*/*")):
        kept = target / run_dir.parent.name / run_dir.name
        kept.mkdir(parents=True)
        for name in KEEP:
            shutil.copy(run_dir / name, kept / name)


def main() -> None:
    wanted = sys.argv[1:] or ["nightly", "ladder"]
    if os.geteuid() != 0:
        sys.exit("record.py needs root (it builds the netns testbed with sshd)")
    bed = Testbed(prefix="napilabg")
    bed.down()
    bed.up(ssh=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for what in wanted:
                record(bed, what, Path(tmp))
    finally:
        bed.down()


if __name__ == "__main__":
    main()
