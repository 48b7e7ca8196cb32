"""Record seed 001 as its letter ran it (tests/seed001_letter.py says how the run is cut
and what it holds) into run/, on a VM testbed of this machine made like the suite's
(tests/integration/vm/conftest.py: guests a and b on Debian's 7.2 generic kernel, 2 queue
pairs, b with 3 vCPUs, a with QEMU's RSS; prefix napilabr, taken down at the end).

The run boots guest b into 6.1-rt and 7.2-rt and back: about six minutes of QEMU TCG
here, which `make test` no longer spends. tests/unit/test_seed001_letter.py judges the
stored run (napilab's table against the letter's script, each trial on its variant's
kernel); tests/integration/vm/test_vm_kernel.py still boots b into a variant's kernel
and back in a run measured during the test, and after a SIGKILL.

Stored as napilab wrote it: manifest.json, samples.parquet and the letter's two outputs
(raw/NNN/b/client.out); the other raw outputs stay out (no check reads them).

    .venv/bin/python tests/golden/seed001/record.py
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from napilab.harness.lab.vmbed import VmTestbed  # noqa: E402
from tests.cli import run_napilab  # noqa: E402
from tests.seed001_letter import (  # noqa: E402
    COLUMNS,
    letter_output,
    letter_trial,
    short_profile,
)

KEEP = ("manifest.json", "samples.parquet")


def record(bed: VmTestbed, work: Path) -> Path:
    results = work / "results"
    done = run_napilab("run", str(short_profile(work)), "-i", str(bed.inventory_path), "-o",
                       str(results), "--format", "text", timeout=None)
    print(done.stdout + done.stderr, flush=True)
    if done.returncode != 0:
        sys.exit(f"the run failed (exit {done.returncode}); nothing stored")
    (run_dir,) = (results / "seed-001-backlog-napi-vm").iterdir()
    return run_dir


def store(run_dir: Path) -> Path:
    target = HERE / "run" / run_dir.name
    shutil.rmtree(HERE / "run", ignore_errors=True)
    target.mkdir(parents=True)
    for name in KEEP:
        shutil.copy(run_dir / name, target / name)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for column, _ in COLUMNS:
        out = letter_output(run_dir, letter_trial(manifest, column))
        kept = letter_output(target, letter_trial(manifest, column))
        kept.parent.mkdir(parents=True)
        shutil.copy(out, kept)
    return target


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("record.py needs root (taps, tc, QEMU)")
    bed = VmTestbed(prefix="napilabr")
    bed.down()
    try:
        bed.up({"a": "7.2", "b": "7.2"}, queues=2, cpus={"a": 2, "b": 3}, memory="1G",
               nic={"a": "virtio-rss"})
        with tempfile.TemporaryDirectory() as tmp:
            print("stored", store(record(bed, Path(tmp))))
    finally:
        bed.down()


if __name__ == "__main__":
    main()
