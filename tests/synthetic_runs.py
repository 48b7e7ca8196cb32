"""Stored runs with known samples, written through harness.store.store.RunStore exactly as the
engine writes them (manifest, samples.parquet, latency/<trial>.parquet), for tests of
everything that reads a RUN_DIR: the A/B table, compare, check, calibrate."""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from napilab.harness.store.manifest import Manifest, TrialRecord
from napilab.harness.store.store import Row, RunStore

FACTS = {"kernel_release": "6.18.0", "kernel_version": "#1 SMP PREEMPT_DYNAMIC",
         "cmdline": "quiet", "cpu_model": "Test CPU", "online_cpus": "0-1", "user_hz": 100,
         "irqbalance": "not running",
         "nics": {"data0": {"driver": "veth", "version": "1.0", "firmware-version": ""}}}

# metric key "source.metric" -> variant -> per-repetition values (trial order)
Values = Mapping[str, Mapping[str, Sequence[float]]]


def lognormal(seed: int, n: int, median: float, sigma: float = 0.02) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in median * np.exp(rng.normal(0.0, sigma, n))]


def store_run(results: Path, values: Values, *, profile: str = "synth",
              variants: Sequence[str] | None = None, policies: Mapping[str, Any] | None = None,
              units: Mapping[str, str] | None = None, host_facts: Mapping[str, Any] | None = None,
              settings: Mapping[str, Sequence[dict[str, Any]]] | None = None,
              latencies: Mapping[str, Sequence[Sequence[float]]] | None = None,
              document: Mapping[str, Any] | None = None, status: str = "complete",
              started: float | None = None) -> Path:
    """A complete run; trials interleaved (rep 1 of every variant, then rep 2, ...)."""
    names = list(variants or next(iter(values.values())).keys())
    reps = max(len(per[v]) for per in values.values() for v in per)
    doc = dict(document or {"name": profile, "workload": {"tool": "ping", "duration": 1},
                            "hosts": {"sender": {"host": "a"}, "receiver": {"host": "b"}}})
    manifest: dict[str, Any] = {
        # the keys harness.cli.execute writes
        "profile": {"name": profile, "path": f"{profile}.yaml", "digest": "0" * 64,
                    "description": "", "repeat": reps, "order": "interleaved", "seed": None,
                    "document": doc},
        "variants": names, "baseline": names[0], "metrics": dict(policies or {}),
        "workload_source": "ping",
        "host_facts": copy.deepcopy(dict(host_facts or {"a": FACTS, "b": FACTS})),
        "inventory": {"path": "inventory.yaml", "hosts": {}},
        "napilab": {"version": "test", "git_sha": None}, "argv": [], "pid": 0,
    }
    store = RunStore.create(results, profile, Manifest.from_json(manifest))
    trials = []
    rows = []
    index = 0
    for rep in range(1, reps + 1):
        for variant in names:
            index += 1
            trial = TrialRecord.from_json({
                "index": index, "id": f"{index:03d}", "variant": variant, "rep": rep,
                "status": "ok", "settings": list((settings or {}).get(variant, []))})
            trials.append(trial)
            for key, per_variant in values.items():
                source, metric = key.split(".", 1)
                series = per_variant.get(variant, ())
                if rep <= len(series):
                    rows.append(Row(index, variant, rep, "sender", "a", source, metric, None,
                                    float(series[rep - 1]), (units or {}).get(key, "us")))
            per_rep = (latencies or {}).get(variant)
            if per_rep is not None and rep <= len(per_rep):
                store.write_latencies(trial.id, np.asarray(per_rep[rep - 1]))
    store.add_rows(rows)
    store.merge_samples()  # as at the end of a run
    store.manifest.trials, store.manifest.status = trials, status
    store.manifest.incomplete = status != "complete"
    store.manifest.started = started if started is not None else time.time()
    store.manifest.ended = time.time()
    store.save_manifest()
    return store.dir
