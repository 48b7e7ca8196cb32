"""`napilab report --format csv`: the run's tidy samples table as CSV (RUN_DIR/samples.csv)
for spreadsheets and notebooks: one row per value, the columns of samples.parquet
(run_id, trial, variant, rep, role, host, source, metric, cpu, value, unit); `cpu` is
empty for totals, as it is null in the table. The stored rows come first, then the CPU
cost rows napilab derives from them (source `cpu`: reports.ab.cpu_cost)."""

from __future__ import annotations

import pandas as pd

from napilab.harness.store.store import COLUMNS
from napilab.reports.ab.compare import RunData


def samples_csv(run: RunData) -> str:
    frame = run.samples.reindex(columns=list(COLUMNS))
    frame = frame.assign(cpu=pd.to_numeric(frame["cpu"]).astype("Int64"))
    return str(frame.to_csv(index=False, lineterminator="\n"))
