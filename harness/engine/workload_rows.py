"""A trial's workload values as rows of the results table, client by client.

Each client's values keep its own role and host: values of several clients are never
averaged (a mean of two clients' p99 is no percentile of anything) nor added here. A
`report.table` row that names no role adds a metric over every role
(reports.ab.compare), which is the sum a rate or a count of several clients wants; for
latencies a profile names the role. The server's values come once (every client's parse
reads the one server output). Per-transaction latencies, where the tool writes them, are
pooled over the clients into the trial's one latency file, so the pooled percentiles
are of every client's transactions.
"""

from __future__ import annotations

from typing import Any

from napilab.harness.profile.plan import Plan
from napilab.harness.profile.profile import Trial
from napilab.harness.profile.sections import ProcessSpec, WorkloadSpec
from napilab.harness.store.store import Row
from napilab.runners.base import Value
from napilab.runners.workloads.workload import ToolResult


def rows(plan: Plan, trial: Trial, spec: WorkloadSpec,
         results: list[tuple[ProcessSpec, ToolResult]]) -> tuple[list[Row], Any]:
    """The rows of each reporting client and of the server, and the pooled
    per-transaction latencies (None when no client wrote any)."""
    out: list[Row] = []

    def add(role: str, values: list[Value]) -> None:
        host = plan.host_of(role).name
        out.extend(Row(trial.index, trial.variant, trial.rep, role, host, spec.source,
                       v.metric, v.cpu, float(v.value), v.unit) for v in values)

    for process, result in results:
        add(process.role, result.client)
    add(spec.server.role, results[0][1].server)
    samples = [r.latencies_us for _, r in results if r.latencies_us is not None]
    if len(samples) <= 1:
        return out, samples[0] if samples else None
    import numpy as np

    return out, np.concatenate(samples)
