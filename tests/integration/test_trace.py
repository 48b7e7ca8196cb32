"""The trace collector on the netns testbed (real bpftrace over real SSH): the shipped
demo-trace profile, shortened, gives the RPS variant the IPI/CSD stages and the NET_RX
softirq on CPU 1 that rps-off lacks (alone, `serial`: a tracer sees every namespace's
packets, and other workers' traffic once put 23,466 NET_RX softirqs per trial on
rps-off's CPU 1); a SIGKILLed napilab leaves its tracer attached until `napilab
restore` stops it, and `hosts check` (over SSH) says none is left."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from napilab.harness.lab import netns as tb
from tests.cli import run_napilab
from tests.conftest import NapilabRuns, comm, netns_pids

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("bpftrace") is None,
                                reason="bpftrace is not installed (make test installs it)")


def profile(tmp_path: Path, duration: float, repeat: int) -> Path:
    path = tmp_path / "demo-trace-short.yaml"
    path.write_text(f"extends: {REPO / 'profiles' / 'demo-trace.yaml'}\n"
                    f"name: demo-trace-short\nrepeat: {repeat}\n"
                    f"workload: {{duration: {duration}}}\n")
    return path


def tracers(bed: tb.Testbed) -> list[str]:
    return [p for p in netns_pids(bed, "b") if comm(p) == "bpftrace"]


@pytest.mark.serial  # the tracer counts every namespace's traffic: alone on the machine
def test_demo_trace_shows_the_rps_stages(testbed: tb.Testbed, tmp_path: Path) -> None:
    started = time.time()
    result = run_napilab("run", str(profile(tmp_path, 1, 2)), "-i",
                         str(testbed.inventory_path), "-o", str(tmp_path / "results"),
                         "--format", "text", timeout=400)
    took = time.time() - started
    assert result.returncode in (0, 4), result.stderr[-3000:]
    run_dir = next((tmp_path / "results" / "demo-trace-short").iterdir())
    samples = pd.read_parquet(run_dir / "samples.parquet")
    traced = samples[samples.source == "trace"]
    assert not traced.empty
    counts = traced[traced.metric.str.endswith("_count") & traced.cpu.notna()]
    per = counts.groupby([counts.variant.str.removesuffix("+traced"), "metric", "cpu"]) \
        .value.median()
    # RPS hands each packet to CPU 1 through a cross-CPU call: its IPI and CSD stages
    # and the NET_RX softirq on CPU 1, which rps-off lacks (a few stray events at most)
    for stage in ("csd_latency_count", "net_rx_action_count"):
        remote, off = per["rps-remote", stage, 1.0], per["rps-off", stage, 1.0]
        assert remote > 1000 and remote > 20 * max(off, 1), (stage, remote, off)
    assert "p99" in " ".join(traced.metric.unique())
    assert not tracers(testbed)
    print(f"demo-trace, 2 variants and their twins x 2 repetitions of 1 s: {took:.1f} s")


def test_sigkill_leaves_the_tracer_until_restore(testbed: tb.Testbed, tmp_path: Path,
                                                 napilab_runs: NapilabRuns) -> None:
    run = napilab_runs.start("run", str(profile(tmp_path, 30, 1)), "-i",
                             str(testbed.inventory_path), "-o", str(tmp_path / "results"))
    deadline = time.time() + 60
    while not tracers(testbed):
        assert run.poll() is None, run.communicate()[1][-2000:]
        assert time.time() < deadline, "no tracer started"
        time.sleep(0.2)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=30)
    left = tracers(testbed)
    assert left, "the tracer went with napilab: nothing for restore to do"
    restore = run_napilab("restore", "-i", str(testbed.inventory_path), timeout=120)
    assert restore.returncode == 0, restore.stderr
    assert f"b: stopped the tracer (bpftrace, pid {left[0]})" in restore.stdout
    assert not tracers(testbed)
    check = run_napilab("hosts", "check", "-i", str(testbed.inventory_path), "--json",
                        timeout=120)
    assert check.returncode == 0, check.stderr
    found = {r["host"]: r["tracers"] for r in json.loads(check.stdout)}
    assert found["b"]["napilab"] is None and found["a"]["napilab"] is None
