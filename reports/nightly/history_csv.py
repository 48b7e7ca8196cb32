"""`napilab history --format csv`: the trend as one tidy row per run, metric and variant
(the median over repetitions and how many there were), oldest run first, for
spreadsheets and notebooks."""

from __future__ import annotations

import csv
import datetime as dt
import io

from napilab.harness.store.columns import columns
from napilab.reports.nightly.check_record import HistoryCsvRow
from napilab.reports.nightly.history import History

COLUMNS = columns(HistoryCsvRow)


def history_csv(found: History) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for run in found.runs:
        started = "" if run.started is None else dt.datetime.fromtimestamp(
            run.started, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        for key, unit in found.metrics:
            for variant in found.variants:
                value = found.values.get((run.key, key, variant))
                if value is not None:
                    writer.writerow((found.profile, run.run_id, started, run.status,
                                     run.kernel(found.host), key, unit, variant,
                                     repr(value[0]), value[1]))
    return out.getvalue()
