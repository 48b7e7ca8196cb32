"""CPU cost, derived from the counters a run stored: rows of source `cpu`.

For each trial and each host that collected `proc_stat` (its per-CPU rows), in cores:
each CPU's share of its own /proc/stat time over the window (a state's ticks over the
sum of all its states' ticks, as mpstat computes it), summed over the CPUs. Where the
kernel's ticks keep wall time this is CPU time / wall time; a TCG guest's ticks ran 2.3
times faster than its uptime here, and a share stays a share (`tick_rate`, the ticks'
seconds per wall second, says so in `notes`).

- `busy_cores`: user + nice + system + hardirq + softirq of every CPU (iowait and steal
  are time the CPU did not work for this host: shown, not counted as busy);
- `cores_<state>`: each state on its own (user, nice, system, hardirq, softirq, iowait,
  steal);
- by CPU set: `busy_cores_workload` (the CPUs the profile pins the workload to on this
  host's role), `busy_cores_irq` (the other CPUs that took at least 1% of the device
  IRQs the `interrupts` collector counted, or of softnet_stat `processed`, or of the
  NAPI kthreads' time), `busy_cores_other` (the rest); each set only where it is known;
- `napi_thread_cores`: the NAPI and busy-poll kthreads' CPU time (napi_threads) over the
  window's wall time (a task's utime and stime are scaled to its precise runtime, so
  they keep wall time where /proc/stat's ticks do not);
- `cpu_us_per_<op>`: busy cores x the window's wall time, in microseconds, per operation
  of the workload
  (`transaction`, `message`, `packet`, `MB`: the tool's `operations`, recorded in the
  manifest), counted by the workload's client role (every client's, added, with several).

Where the `perf_stat` collector counted cycles and instructions (its totals over its
`cpus`): `ipc` (instructions per cycle) and `cycles_per_<op>`. `notes` says where perf
counted no hardware event (no PMU: most VMs), so a missing IPC reads as what it is.

Pure (pandas); `reports.ab.compare.load_run` adds these rows to every run it loads, so
the A/B table, `check --max-regression`, `compare` and the frontier read them as they
read any other row. docs/reports.md documents them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from napilab.harness.grammar.cpus import CpuListError, parse_list
from napilab.harness.store.manifest import Manifest

SOURCE = "cpu"
CORES = "cores"
PERF = "perf_stat"
COUNT_UNIT = "count"
BUSY_STATES = ("user", "nice", "system", "hardirq", "softirq")
STATES = (*BUSY_STATES, "iowait", "steal")
# a CPU is in the IRQ/NAPI set when it took at least this share of a signal's count
SHARE = 0.01
_BITS = {"bits/s": 1.0, "kbit/s": 1e3, "mbit/s": 1e6, "gbit/s": 1e9,
         "10^3bits/s": 1e3, "10^6bits/s": 1e6, "10^9bits/s": 1e9}  # the last: netperf's
COLUMNS = ("run_id", "trial", "variant", "rep", "role", "host", "source", "metric", "cpu",
           "value", "unit")


def with_cpu_cost(samples: pd.DataFrame, manifest: Manifest) -> pd.DataFrame:
    """`samples` and the derived `cpu` rows (module doc); unchanged without proc_stat
    per-CPU rows (or when it already holds `cpu` rows)."""
    if not len(samples) or (samples["source"] == SOURCE).any():
        return samples
    per_cpu = samples[(samples["source"] == "proc_stat") & samples["cpu"].notna()]
    ops = _operation_counts(samples, manifest)
    rows = list(_derive(samples, per_cpu, manifest, ops)) if len(per_cpu) else []
    rows += _perf_rows(samples, ops)
    if not rows:
        return samples
    derived = pd.DataFrame(rows, columns=list(COLUMNS)).astype(
        {c: samples[c].dtype for c in COLUMNS if c in samples.columns})
    return pd.concat([samples, derived], ignore_index=True)


def _row(first: pd.Series, host: Any, metric: str, value: float,
         unit: str) -> tuple[Any, ...]:
    """A derived row of the trial and role of `first`, one of its stored rows."""
    return (first["run_id"], first["trial"], first["variant"], first["rep"], first["role"],
            host, SOURCE, metric, math.nan, float(value), unit)


def _derive(samples: pd.DataFrame, per_cpu: pd.DataFrame, manifest: Manifest,
            ops: Mapping[Any, Mapping[str, float]]) -> Iterable[tuple[Any, ...]]:
    doc = manifest.profile.document
    windows = _windows(samples)
    signals = _signals(samples)
    kthreads = samples[(samples["source"] == "napi_threads") & samples["cpu"].isna()
                       & (samples["metric"] == "cpu_time")]
    kthread_ms = kthreads.groupby(["trial", "host"])["value"].sum().to_dict()
    for (trial, host), frame in per_cpu.groupby(["trial", "host"], sort=True):
        first = frame.iloc[0]
        variant, role = str(first["variant"]), str(first["role"])
        ms = frame.pivot_table(index="cpu", columns="metric", values="value", aggfunc="sum")
        ms.index = [int(c) for c in ms.index]
        states = [c for c in (*STATES, "idle") if c in ms.columns]
        total = ms[states].sum(axis=1) if states else pd.Series(0.0, index=ms.index)
        ms, total = ms[total > 0], total[total > 0]  # a CPU without ticks: offline
        if not len(total):
            continue
        window = windows.get((trial, host))
        host_rows = _host_rows(ms.div(total, axis=0), float(total.mean()), window,
                               _workload_cpus(doc, manifest.written_as(variant), role),
                               signals.get((trial, host), {}), kthread_ms.get((trial, host)),
                               ops.get(trial, {}))
        yield from (_row(first, host, *found) for found in host_rows)


def _host_rows(share: pd.DataFrame, ticks_ms: float, window: float | None, pinned: set[int],
               signals: Mapping[str, Mapping[int, float]], kthread_ms: float | None,
               ops: Mapping[str, float]) -> Iterable[tuple[str, float, str]]:
    """One host's trial: (metric, value, unit) of every cost row (module doc). `share`:
    each CPU's state ticks over its total; `ticks_ms`: a CPU's mean total, in ms;
    `window`: the snapshot window's wall seconds (None: not recorded)."""
    busy_states = [s for s in BUSY_STATES if s in share.columns]
    busy = share[busy_states].sum(axis=1) if busy_states else pd.Series(0.0,
                                                                          index=share.index)
    yield "busy_cores", busy.sum(), CORES
    for state in STATES:
        if state in share.columns:
            yield f"cores_{state}", share[state].sum(), CORES
    cpus = set(share.index)
    workload = pinned & cpus
    irq = (_irq_cpus(signals) & cpus) - workload
    if workload:
        yield "busy_cores_workload", busy[sorted(workload)].sum(), CORES
    if irq:
        yield "busy_cores_irq", busy[sorted(irq)].sum(), CORES
    if workload or irq:
        rest = sorted(cpus - workload - irq)
        yield "busy_cores_other", busy[rest].sum() if rest else 0.0, CORES
    seconds = window if window and window > 0 else ticks_ms / 1000
    if kthread_ms is not None:  # a task's times are scaled to its precise runtime: wall
        yield "napi_thread_cores", kthread_ms / (seconds * 1000), CORES
    if window and window > 0:
        yield "tick_rate", ticks_ms / 1000 / window, "ratio"
    for op, count in ops.items():
        if count > 0:
            yield f"cpu_us_per_{op}", busy.sum() * seconds * 1e6 / count, "us"


def _perf_rows(samples: pd.DataFrame,
               ops: Mapping[Any, Mapping[str, float]]) -> list[tuple[Any, ...]]:
    totals = samples[(samples["source"] == PERF) & samples["cpu"].isna()
                     & samples["metric"].isin(["cycles", "instructions"])]
    if not len(totals):
        return []
    out = []
    for (trial, host), frame in totals.groupby(["trial", "host"], sort=True):
        first = frame.iloc[0]
        found = dict(zip(frame["metric"], frame["value"], strict=True))
        cycles, instructions = found.get("cycles"), found.get("instructions")
        rows: list[tuple[str, float, str]] = []
        if cycles and instructions is not None:
            rows.append(("ipc", instructions / cycles, "ratio"))
        if cycles:
            rows += [(f"cycles_per_{op}", cycles / n, COUNT_UNIT)
                     for op, n in ops.get(trial, {}).items() if n > 0]
        out += [_row(first, host, *found) for found in rows]
    return out


TICK_TOLERANCE = 0.1  # ticks within 10% of wall time keep it


def notes(samples: pd.DataFrame) -> list[str]:
    """What a reader must know of the derived rows: hosts whose /proc/stat ticks did not
    keep wall time, hosts where perf counted no hardware event."""
    if not len(samples):
        return []
    out = []
    rates = samples[(samples["source"] == SOURCE) & (samples["metric"] == "tick_rate")]
    for host, found in rates.groupby("host", sort=True):
        rate = float(found["value"].median())
        if abs(rate - 1) > TICK_TOLERANCE:
            out.append(f"/proc/stat on {host} counted {rate:.2g} s of time per CPU per "
                       "second of wall time (a TCG guest's ticks do not keep time): busy "
                       "cores are shares of its own ticks, CPU-us per operation is scaled "
                       "to wall time")
    found = samples[(samples["source"] == PERF) & (samples["metric"] == "hardware_events")]
    hosts = sorted({str(h) for h, v in zip(found["host"], found["value"], strict=True)
                    if v == 0})
    if hosts:
        out.append(f"perf_stat counted no hardware event on {', '.join(hosts)} (no PMU, as "
                   "in most VMs): cycles, instructions and IPC are not measured there; "
                   "context switches, migrations and cpu-clock are software events")
    return out


def _windows(samples: pd.DataFrame) -> dict[tuple[Any, Any], float]:
    found = samples[(samples["source"] == "snapshot") & (samples["metric"] == "interval")]
    return {(t, h): float(v) for t, h, v in zip(found["trial"], found["host"], found["value"],
                                                 strict=True)}


def _signals(samples: pd.DataFrame) -> dict[tuple[Any, Any], dict[str, dict[int, float]]]:
    """(trial, host) -> signal -> cpu -> count: device IRQs, softnet `processed`, NAPI
    kthread time."""
    per_cpu = samples[samples["cpu"].notna()]
    picks = {
        "irq": (per_cpu["source"] == "interrupts") & per_cpu["metric"].str.startswith("irq_"),
        "softnet": (per_cpu["source"] == "softnet_stat") & (per_cpu["metric"] == "processed"),
        "kthread": (per_cpu["source"] == "napi_threads") & (per_cpu["metric"] == "cpu_time"),
    }
    out: dict[tuple[Any, Any], dict[str, dict[int, float]]] = {}
    for name, mask in picks.items():
        chosen = per_cpu[mask]
        if not len(chosen):
            continue
        sums = chosen.groupby(["trial", "host", "cpu"])["value"].sum()
        for key, value in sums.items():
            where: tuple[Any, Any, Any] = key  # type: ignore[assignment]
            out.setdefault(where[:2], {}).setdefault(name, {})[int(where[2])] = float(value)
    return out


def _irq_cpus(signals: Mapping[str, Mapping[int, float]]) -> set[int]:
    chosen: set[int] = set()
    for counts in signals.values():
        total = sum(counts.values())
        if total > 0:
            chosen |= {cpu for cpu, n in counts.items() if n >= SHARE * total}
    return chosen


def workload_spec(doc: Mapping[str, Any], variant: str) -> dict[str, Any]:
    """The variant's workload section: the profile's, with the variant's over it."""
    base = dict(doc.get("workload") or {})
    over = ((doc.get("variants") or {}).get(variant) or {}).get("workload") or {}
    for key, value in over.items():
        if key in ("client", "server") and isinstance(value, Mapping):
            base[key] = {**(base.get(key) or {}), **value}
        elif key == "clients" and isinstance(value, Mapping):  # role by role
            base[key] = {**(base.get(key) or {}), **{
                role: {**((base.get(key) or {}).get(role) or {}), **(part or {})}
                for role, part in value.items()}}
        else:
            base[key] = value
    return base


def _workload_cpus(doc: Mapping[str, Any], variant: str, role: str) -> set[int]:
    spec = workload_spec(doc, variant)
    out: set[int] = set()
    several = spec.get("clients")
    parts = [spec.get(side) or {} for side in ("client", "server")]
    if isinstance(several, Mapping):
        parts += [{**(p or {}), "role": r} for r, p in several.items()]
    for part in parts:
        if isinstance(part, Mapping) and part.get("role") == role and part.get("cpus"):
            try:
                out |= set(parse_list(str(part["cpus"])))
            except CpuListError:
                continue
    return out


def _operation_counts(samples: pd.DataFrame, manifest: Manifest) -> dict[Any, dict[str, float]]:
    """trial -> operation -> how many the workload did (its client role's rows)."""
    source = manifest.workload_source
    operations = manifest.operation(source)
    if not source or not operations:
        return {}
    doc = manifest.profile.document
    rows = samples[(samples["source"] == source) & samples["cpu"].isna()]
    out: dict[Any, dict[str, float]] = {}
    for trial, frame in rows.groupby("trial"):
        variant = str(frame.iloc[0]["variant"])
        spec = workload_spec(doc, manifest.written_as(variant))
        client = (spec.get("client") or {}).get("role")
        several = spec.get("clients")
        duration = spec.get("duration")
        for op, metrics in operations.items():
            metric = next((m for m in metrics if (frame["metric"] == m).any()), None)
            found = frame[frame["metric"] == metric]
            if isinstance(several, Mapping) and found["role"].isin(list(several)).any():
                # several clients (`workload.clients`): the work of all of them
                mine = found[found["role"].isin(list(several))]
                counts = [_count(float(v), str(u), op, duration)
                          for v, u in zip(mine["value"], mine["unit"], strict=True)]
                if counts and None not in counts:
                    out.setdefault(trial, {})[op] = sum(c for c in counts if c is not None)
                continue
            if client is not None and (found["role"] == client).any():
                found = found[found["role"] == client]
            if not len(found):
                continue
            count = _count(float(found["value"].iloc[0]), str(found["unit"].iloc[0]), op,
                           duration)
            if count is not None:
                out.setdefault(trial, {})[op] = count
    return out


def _count(value: float, unit: str, op: str, duration: Any) -> float | None:
    """How many `op` a value of `unit` stands for: a count as it is, a rate times the
    workload's duration, a bit rate in MB (10^6 bytes) for `MB`; None when the unit is
    not one of `op`'s."""
    seconds = float(duration) if isinstance(duration, int | float) else None
    bits = _BITS.get(unit.lower())
    if op == "MB":
        if bits is None or seconds is None:
            return None
        return value * bits * seconds / 8 / 1e6
    if bits is not None:
        return None
    if unit in ("count", "packets"):
        return value
    if unit.endswith("/s") and seconds is not None:
        return value * seconds
    return None
