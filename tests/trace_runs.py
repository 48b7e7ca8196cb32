"""A stored run in the shape of the demo with the trace collector (issue 39): ping from
`sender` (host a) to `receiver` (host b), variants rps-off and rps-on, each with its
traced twin `V+traced` (the default `traced: twins`), 4 repetitions interleaved. The
twins' trials carry trace rows as the collector stores them (runners.collectors.trace:
STAGE_count per CPU and cpu-less, p50/p99/p999/mean) and the raw snapshot after the
workload with the `@trace` section bpftrace's maps make; the receiver's kernel lacks
`kprobe:__napi_poll` (napi_poll absent on both), rps-on has csd_latency's events on
CPU 1 that rps-off lacks (new in B), and irq_to_softirq's p99 falls by 24 us."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from napilab.harness.store.manifest import Manifest, TrialRecord
from napilab.harness.store.store import Row, RunStore
from napilab.runners.collectors.trace import program
from napilab.runners.collectors.trace.histogram import bucket_of
from napilab.runners.collectors.trace.trace import parse, stage_values
from tests.synthetic_runs import FACTS

VARIANTS = ("rps-off", "rps-on")
ABSENT = {"napi_poll": "kprobe:__napi_poll"}
# stage -> variant -> (CPU -> events, median ns); a stage with no CPU has no event
STAGES: dict[str, dict[str, tuple[dict[int, int], float]]] = {
    "irq_to_softirq": {"rps-off": ({0: 400}, 30_000.0), "rps-on": ({0: 400}, 6_000.0)},
    "socket_wakeup": {"rps-off": ({0: 400}, 12_000.0), "rps-on": ({0: 200, 1: 200},
                                                                   6_000.0)},
    "net_rx_action": {"rps-off": ({0: 400}, 5_000.0), "rps-on": ({0: 400, 1: 400},
                                                                  5_000.0)},
    "csd_latency": {"rps-off": ({}, 0.0), "rps-on": ({1: 400}, 3_000.0)},
    "napi_poll_work": {"rps-off": ({0: 400}, 1.0), "rps-on": ({0: 400}, 1.0)},
}


def trace_text(variant: str, rng: np.random.Generator, shift: float = 1.0) -> str:
    """The @trace section of a snapshot after the workload: stage and absent lines,
    then bpftrace's @hist map as one JSON line."""
    every = program.stages()
    lines = [f"stage {s}" for s in STAGES]
    lines += [f"absent {s}: {probe}" for s, probe in ABSENT.items()]
    hist: dict[str, int] = {}
    for stage, per_variant in STAGES.items():
        cpus, median = per_variant[variant]
        for cpu, n in cpus.items():
            if every[stage].unit == "packets":
                values = np.ones(n)
            else:  # a tail: every 50th event 2x slower
                values = median * shift * np.exp(rng.normal(0, 0.05, n))
                values[::50] *= 2
            for value in values:
                key = f"{every[stage].id},{cpu},0,{bucket_of(int(value))}"
                hist[key] = hist.get(key, 0) + 1
    lines.append(json.dumps({"type": "map", "data": {"@hist": hist}}))
    return "\n".join(lines) + "\n"


def trace_run(results: Path, *, reps: int = 4, rtt_us: Mapping[str, float] | None = None,
              traced: str = "twins") -> Path:
    """The run (module doc); `rtt_us`: each untraced variant's ping rtt_avg median;
    `traced`: "twins" or "all" (every variant traced itself, no twins)."""
    rtt = dict(rtt_us or {"rps-off": 60.0, "rps-on": 29.0})
    names = [*VARIANTS, *(f"{v}+traced" for v in VARIANTS)] if traced == "twins" \
        else list(VARIANTS)
    doc: dict[str, Any] = {
        "name": "demo-trace", "workload": {"tool": "ping", "duration": 1},
        "hosts": {"sender": {"host": "a"}, "receiver": {"host": "b"}},
        "collect": {"trace": {"roles": ["receiver"], "traced": traced}},
        "variants": {v: {} for v in VARIANTS}}
    manifest = Manifest.from_json({
        "profile": {"name": "demo-trace", "path": "demo-trace.yaml", "digest": "0" * 64,
                    "description": "", "repeat": reps, "order": "interleaved", "seed": None,
                    "document": doc},
        "variants": names, "baseline": VARIANTS[0],
        "comparisons": [[VARIANTS[0], VARIANTS[1]]],
        "metrics": {"rtt_avg": {"direction": "lower", "min_effect": None,
                                "max_regression": None}},
        **({"twins": {f"{v}+traced": v for v in VARIANTS}} if traced == "twins"
           else {"traced_all": list(VARIANTS)}),
        "workload_source": "ping", "host_facts": {"a": FACTS, "b": FACTS},
        "inventory": {"path": "inventory.yaml", "hosts": {}},
        "napilab": {"version": "test", "git_sha": None}, "argv": [], "pid": 0})
    store = RunStore.create(results, "demo-trace", manifest)
    rng = np.random.default_rng(7)
    trials, rows = [], []
    index = 0
    for rep in range(1, reps + 1):
        for variant in names:
            index += 1
            trial = TrialRecord.from_json({"index": index, "id": f"{index:03d}",
                                           "variant": variant, "rep": rep, "status": "ok"})
            trials.append(trial)
            plain = variant.removesuffix("+traced")
            value = rtt[plain] * float(np.exp(rng.normal(0, 0.02)))
            rows.append(Row(index, variant, rep, "sender", "a", "ping", "rtt_avg", None,
                            round(value, 3), "us"))
            if traced == "all" or variant.endswith("+traced"):
                text = trace_text(plain, rng, float(np.exp(rng.normal(0, 0.03))))
                store.write_raw(trial.id, "b", "snapshot-after.out",
                                "==> /proc/uptime <==\n100.0 50.0\n\n"
                                f"==> @trace <==\n{text}")
                rows += [Row(index, variant, rep, "receiver", "b", "trace", v.metric, v.cpu,
                             float(v.value), v.unit) for v in stage_values(parse(text))]
    store.add_rows(rows)
    store.merge_samples()
    store.manifest.trials, store.manifest.status = trials, "complete"
    store.manifest.incomplete = False
    store.manifest.started, store.manifest.ended = 1795990000.0, 1795990100.0
    store.save_manifest()
    return store.dir
