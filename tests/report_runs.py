"""A synthetic but realistic stored run for the report tests: seed 000's experiment
(neper tcp_rr on the host under test `sut`, server on `peer`) with everything a report
shows: per-transaction latencies (latency/<trial>.parquet) and the percentiles neper
prints, throughput, per-CPU softnet_stat, interrupts, proc_stat, softirqs and NAPI
kthread time on CPUs 0-3, a kprobe function the kernel cannot probe (absent), an IRQ
affinity irqbalance rewrote in one trial (read back differently), and raw outputs.

Raw outputs and samples are written through harness.store.store.RunStore as the engine
writes them; the manifest is written as napilab 0.1 wrote it (schema_version 1, no
verdicts), so every test of a report also loads a run of the pre-change format through
the migration. The copy under tests/golden/reports/runs/ was made with
`python -m tests.report_runs DIR`; tests also build variants of it (failed trials,
hostile strings) in temporary directories.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from napilab.harness.store.manifest import Manifest
from napilab.harness.store.store import Row, RunStore, atomic_write

RUN_ID = "5e1f0000"
STARTED = 1795990000.0  # 2026-11-29 22:06:40 UTC
NAME = "synthetic-seed-000"
DESCRIPTION = ("Synthetic run in the shape of seed 000: neper tcp_rr latency with "
               "application busy polling versus NAPI threaded busy polling.")
VARIANTS = ("sysctl-busypoll", "threaded-busypoll", "threaded-busypoll-defer")
MEDIAN_US = {"sysctl-busypoll": 28.0, "threaded-busypoll": 22.5,
             "threaded-busypoll-defer": 22.0}
CPUS = (0, 1, 2, 3)
IRQ_CPU = 2
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
KPROBES = ("napi_busy_loop", "napi_threaded_poll_loop")
ABSENT = "napi_threaded_poll_loop"  # inlined by this kernel build: cannot be probed
DURATION = 10.0
FACTS = {"kernel_release": "6.18.0-synthetic", "kernel_version": "#1 SMP PREEMPT_DYNAMIC",
         "cmdline": "quiet isolcpus=2-3", "cpu_model": "Synthetic Xeon", "online_cpus": "0-3",
         "user_hz": 100, "irqbalance": "running",
         "nics": {"eth0": {"driver": "mlx5_core", "version": "6.18.0",
                           "firmware-version": "22.39.1002"}},
         "tool_versions": {"neper": "1.1.0", "onload": "9.0.1"}}
DOCUMENT: dict[str, Any] = {
    "name": NAME, "description": DESCRIPTION,
    "hosts": {"sut": {"host": "sut"}, "peer": {"host": "peer"}},
    "workload": {"tool": "neper.tcp_rr", "duration": DURATION,
                 "client": {"role": "sut", "cpus": "3", "args": {"T": 1, "F": 50,
                                                                 "p": "50,90,99,99.9"}},
                 "server": {"role": "peer"}},
    "collect": {"softnet_stat": {"roles": ["sut"]}, "interrupts": {"roles": ["sut"]},
                "proc_stat": {"roles": ["sut"]}, "softirqs": {"roles": ["sut"]},
                "napi_threads": {"roles": ["sut"]},
                "kprobes": {"roles": ["sut"], "functions": list(KPROBES)}},
    "variants": {v: {} for v in VARIANTS}, "repeat": 8, "order": "interleaved",
    "metrics": {"latency_p99": {"direction": "lower", "min_effect": 5},
                "throughput": {"direction": "higher"}},
    "report": {"table": [
        {"label": "latency p50 (us)", "source": "neper", "metric": "latency_p50", "role": "sut"},
        {"label": "latency p99 (us)", "source": "neper", "metric": "latency_p99", "role": "sut"},
        {"label": "latency p99.9 (us)", "source": "neper", "metric": "latency_p99.9",
         "role": "sut"},
        {"label": "transactions/s", "source": "neper", "metric": "throughput", "role": "sut"},
        {"label": "NAPI kthread CPU (ms)", "source": "napi_threads", "metric": "cpu_time",
         "role": "sut"},
        {"label": "softirq time (ms)", "source": "proc_stat", "metric": "softirq",
         "role": "sut"},
        {"label": "NET_RX softirqs", "source": "softirqs", "metric": "net_rx", "role": "sut"},
        {"label": "NIC IRQs (irq 45)", "source": "interrupts", "metric": "irq_45",
         "role": "sut"},
        {"label": "napi_busy_loop()", "source": "kprobes", "metric": "napi_busy_loop",
         "role": "sut"},
        {"label": "napi_threaded_poll_loop()", "source": "kprobes",
         "metric": "napi_threaded_poll_loop", "role": "sut"}]},
}


def _settings(variant: str, trial: int) -> list[dict[str, Any]]:
    def change(kind: str, target: str, path: str, original: str, requested: str,
               effective: str | None = None) -> dict[str, Any]:
        return {"host": "sut", "role": "sut", "kind": kind, "target": target, "path": path,
                "original": original, "requested": requested,
                "effective": requested if effective is None else effective, "backend": "file"}

    irq = "0-3" if variant == "threaded-busypoll-defer" and trial == 12 else "2"
    out = [change("irq_affinity", "eth0/irq 45", "/proc/irq/45/smp_affinity_list", "0-3",
                  "2", irq)]
    if variant == "sysctl-busypoll":
        out += [change("sysctl", "net.core.busy_poll", "/proc/sys/net/core/busy_poll", "0",
                       "400"),
                change("netdev", "eth0/napi_defer_hard_irqs",
                       "/sys/class/net/eth0/napi_defer_hard_irqs", "0", "2")]
    else:
        out += [{**change("napi", "eth0/napi 8193/threaded", "2/8193/threaded", "disabled",
                          "busy-poll"), "backend": "napi"}]
        if variant.endswith("defer"):
            out.append(change("netdev", "eth0/gro_flush_timeout",
                              "/sys/class/net/eth0/gro_flush_timeout", "0", "20000"))
    out += [{**change("kprobe", f, f, "absent", "present",
                      "absent" if f == ABSENT else "present"), "backend": "kprobe"}
            for f in KPROBES]
    return out


def _neper_out(percentiles: dict[float, float], mean: float, count: int) -> str:
    lines = ["VERSION=1.1.0", f"total_run_time={DURATION:g}", "num_flows=50",
             f"num_transactions={count}", f"latency_min={mean * 0.4e-6:.9f}",
             f"latency_mean={mean * 1e-6:.9f}"]
    lines += [f"latency_p{q:g}={v * 1e-6:.9f}" for q, v in percentiles.items()]
    lines.append(f"throughput={count / DURATION:.2f}")
    return "\n".join(lines) + "\n"


def _collector_rows(rng: np.random.Generator, index: int, variant: str,
                    rep: int) -> list[Row]:
    threaded = variant != "sysctl-busypoll"
    rows: list[Row] = []

    def add(source: str, metric: str, unit: str, per_cpu: Sequence[float]) -> None:
        for cpu, value in zip(CPUS, per_cpu, strict=True):
            rows.append(Row(index, variant, rep, "sut", "sut", source, metric, cpu,
                            float(round(value)), unit))
        rows.append(Row(index, variant, rep, "sut", "sut", source, metric, None,
                        float(sum(round(v) for v in per_cpu)), unit))

    noise = rng.normal(1.0, 0.02, 8)
    processed = 3.5e5 * noise[0]
    add("softnet_stat", "processed", "count", [900, 1200, processed, 400])
    add("softnet_stat", "time_squeeze", "count", [0, 0, (120 if threaded else 40) * noise[1], 0])
    add("softnet_stat", "received_rps", "count", [0, 0, 0, 0])
    add("interrupts", "function_call_interrupts", "count", [30, 25, 60 * noise[2], 18])
    irqs = 2e3 if threaded else 9e4  # threaded busy polling keeps the IRQ masked
    add("interrupts", "irq_45", "count", [0, 0, irqs * noise[3], 0])
    softirq = 900 if threaded else 4200
    add("proc_stat", "softirq", "ms", [5, 4, softirq * noise[4], 10])
    add("proc_stat", "hardirq", "ms", [1, 1, (20 if threaded else 180) * noise[5], 1])
    # the kthread's busy polling is system time on its CPU, which it keeps busy
    add("proc_stat", "system", "ms", [300, 280, 8900 if threaded else 800, 5200 * noise[6]])
    add("proc_stat", "user", "ms", [200, 210, 100, 4300 * noise[7]])
    add("proc_stat", "idle", "ms", [9500, 9510, 80 if threaded else 4720, 400])
    add("softirqs", "net_rx", "count", [10, 12, processed / 64, 3])
    if threaded:
        add("napi_threads", "cpu_time", "ms", [0, 0, 9800 * noise[1], 0])
    else:  # no NAPI kthread ran: the engine stores its cost as one cpu-less 0
        rows.append(Row(index, variant, rep, "sut", "sut", "napi_threads", "cpu_time", None,
                        0.0, "ms"))
    hits = 4.1e6 * noise[2] if not threaded else 1.2e4 * noise[2]
    rows.append(Row(index, variant, rep, "sut", "sut", "kprobes", "napi_busy_loop", None,
                    float(round(hits)), "count"))
    return rows


def neper_run(results: Path, *, variants: Sequence[str] = VARIANTS, reps: int = 8,
              name: str = NAME, description: str = DESCRIPTION, run_id: str = RUN_ID,
              failed: dict[int, str] | None = None, stderr: str = "",
              latency_samples: int = 2000, seed: int = 0, started: float = STARTED,
              kernel: str = str(FACTS["kernel_release"]), slower: float = 1.0) -> Path:
    """The run at results/<name>/<time>-<run_id>; `failed` maps trial index -> error
    (those trials store their client's stderr `stderr` and no values); `slower`
    multiplies every latency (a regression to find)."""
    rng = np.random.default_rng(seed)
    document = {**DOCUMENT, "name": name, "description": description,
                "variants": {v: {} for v in variants}, "repeat": reps}
    manifest: dict[str, Any] = {
        "schema_version": 1, "run_id": run_id,
        "profile": {"name": name, "path": f"profiles/{name}.yaml", "digest": "0" * 64,
                    "description": description, "repeat": reps, "order": "interleaved",
                    "seed": None, "document": document},
        "variants": list(variants), "baseline": variants[0],
        "metrics": {"latency_p99": {"direction": "lower", "min_effect": 5.0,
                                    "max_regression": None},
                    "throughput": {"direction": "higher", "min_effect": None,
                                   "max_regression": None}},
        "workload_source": "neper",
        "inventory": {"path": "inventory.yaml", "hosts": {}},
        "napilab": {"version": "0.1.0", "git_sha": None}, "argv": ["napilab", "run"], "pid": 1,
        "host_facts": {"sut": {**FACTS, "kernel_release": kernel},
                       "peer": {**FACTS, "irqbalance": "not running"}},
    }
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    directory = results / name / f"{stamp}-{run_id}"
    directory.mkdir(parents=True)
    store = RunStore(directory, Manifest(run_id=run_id))  # raw/, samples, latency/
    trials: list[dict[str, Any]] = []
    rows: list[Row] = []
    index = 0
    for rep in range(1, reps + 1):
        for variant in variants:
            index += 1
            trial_id = f"{index:03d}"
            start = started + 15 * (index - 1)
            entry: dict[str, Any] = {"index": index, "id": trial_id, "variant": variant,
                                     "rep": rep, "start": start, "end": start + 12,
                                     "settings": _settings(variant, index)}
            entry["absent"] = [ABSENT]
            argv = ["env", "LC_ALL=C", "timeout", "-k", "5", "40", "taskset", "-c", "3",
                    "tcp_rr", "-c", "-H", "192.0.2.2", "-l", f"{DURATION:g}", "-T", "1",
                    "-F", "50", "-p", "50,90,99,99.9"]
            if failed and index in failed:
                entry.update(status="failed", error=failed[index])
                store.write_raw(trial_id, "sut", "client.out", "")
                store.write_raw(trial_id, "sut", "client.err", stderr)
                store.write_raw_json(trial_id, "sut", "client.json", {
                    "argv": argv, "exit_code": 1, "start": start, "duration": 0.2})
                trials.append(entry)
                continue
            entry["status"] = "ok"
            median = MEDIAN_US.get(variant, 25.0) * slower * float(np.exp(rng.normal(0, 0.02)))
            samples = median * np.exp(rng.normal(0, 0.25, latency_samples))
            samples[: latency_samples // 200] *= 4  # a tail: a few slow transactions
            store.write_latencies(trial_id, samples)
            pcts = {q: float(np.percentile(samples, q)) for q in PERCENTILES}
            mean = float(samples.mean())
            count = int(50 * DURATION / (mean * 1e-6) / 60)
            for q, v in pcts.items():
                rows.append(Row(index, variant, rep, "sut", "sut", "neper",
                                f"latency_p{q:g}", None, v, "us"))
            for metric, value, unit in (("latency_mean", mean, "us"),
                                        ("latency_max", float(samples.max()), "us"),
                                        ("num_transactions", float(count), "count"),
                                        ("throughput", count / DURATION, "trans/s")):
                rows.append(Row(index, variant, rep, "sut", "sut", "neper", metric, None,
                                value, unit))
            rows += _collector_rows(rng, index, variant, rep)
            store.write_raw(trial_id, "sut", "client.out", _neper_out(pcts, mean, count))
            store.write_raw(trial_id, "sut", "client.err", stderr)
            store.write_raw_json(trial_id, "sut", "client.json", {
                "argv": argv, "exit_code": 0, "start": start + 1, "duration": DURATION})
            store.write_raw(trial_id, "peer", "server.out", "VERSION=1.1.0\n")
            store.write_raw(trial_id, "peer", "server.err", "")
            store.write_raw_json(trial_id, "peer", "server.json", {
                "argv": ["env", "LC_ALL=C", "tcp_rr", "-l", "40"], "exit_code": 0,
                "start": start, "duration": DURATION + 1.5})
            store.write_raw_json(trial_id, "sut", "settings.json", entry["settings"])
            trials.append(entry)
    store.add_rows(rows)
    store.merge_samples()  # as at the end of a run
    ok = sum(1 for t in trials if t["status"] == "ok")
    status = "complete" if ok == len(trials) else "partial"
    manifest.update(trials=trials, status=status, incomplete=status != "complete",
                    started=started, ended=started + 15 * index)
    atomic_write(directory / "manifest.json", json.dumps(manifest, indent=1, default=str) + "\n")
    return directory


if __name__ == "__main__":
    print(neper_run(Path(sys.argv[1])))
