"""neper's `--all-samples` CSV: one row per snapshot per flow (docs/formats.md 1.4, neper
1.1.0 print.c).

Headers: RR `tid,flow_id,time,transactions,transactions/s,utime,stime,maxrss,minflt,
majflt,nvcsw,nivcsw,latency_min,latency_mean,latency_max,latency_stddev[,latency_pX...]`;
stream `tid,flow_id,time,bytes_read,bytes_read/s,...,nivcsw`. README's
`time,tid,flow_id,...` order is stale. Quirks:
- the first row's `latency_stddev` is `-nan` (one sample): NaN here.
- the last row is a flush snapshot whose latency columns are all 0.000000: NaN here,
  as a zero latency is not a measurement.
- the `/s` column is computed across all flows between consecutive rows and is absurd
  with several flows (two rows 2 us apart); rates are recomputed per flow instead.
- latency columns are seconds with 6 decimals (before neper 313f5e7, 2024-01, they were
  wrongly divided by 1e6 once more: such files read as sub-nanosecond latencies).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from napilab.runners.base import COUNT, US, ParseError, Value

TOOL = "neper.all_samples"
_NAN = {"nan", "-nan", "+nan"}
_FIRST = ("tid", "flow_id", "time")


@dataclass(frozen=True)
class AllSamples:
    kind: str  # "rr" or "stream"
    columns: tuple[str, ...]
    data: npt.NDArray[np.float64]  # rows x columns, latencies in seconds, NaN = none

    def column(self, name: str) -> npt.NDArray[np.float64]:
        return self.data[:, self.columns.index(name)]


def parse(text: str) -> AllSamples:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ParseError(TOOL, "empty file", text)
    columns = tuple(lines[0].split(","))
    if columns[:3] != _FIRST or len(set(columns)) != len(columns):
        raise ParseError(TOOL, "header does not start with tid,flow_id,time", lines[0])
    if "transactions" in columns and "latency_mean" in columns:
        kind, latency = "rr", [i for i, c in enumerate(columns) if c.startswith("latency_")]
    elif "bytes_read" in columns:
        kind, latency = "stream", []
    else:
        raise ParseError(TOOL, "neither an RR nor a stream header", lines[0])
    data = np.empty((len(lines) - 1, len(columns)), dtype=np.float64)
    for row, line in enumerate(lines[1:]):
        fields = line.split(",")
        if len(fields) != len(columns):
            raise ParseError(TOOL, f"{len(fields)} fields, the header has {len(columns)}", line)
        data[row] = [_number(field, line) for field in fields]
    if len(data) < 2:
        raise ParseError(TOOL, "fewer than 2 snapshots", text[:300])
    if latency:
        flush = (data[:, latency] == 0.0).all(axis=1)
        data[np.ix_(flush, latency)] = np.nan
    if np.isnan(np.delete(data, latency, axis=1)).any():
        raise ParseError(TOOL, "nan outside the latency columns", text[:300])
    return AllSamples(kind, columns, data)


def _number(field: str, line: str) -> float:
    if field in _NAN:
        return float("nan")
    try:
        number = float(field)
    except ValueError:
        raise ParseError(TOOL, f"expected a number, got {field!r}", line) from None
    if not np.isfinite(number):
        raise ParseError(TOOL, f"expected a finite number, got {field!r}", line)
    return number


def values(samples: AllSamples) -> list[Value]:
    """Snapshot and flow counts, the run's rate recomputed from the cumulative column
    per flow (as neper's coef.c does), and RR latency extremes over the intervals."""
    flows = _flows(samples)
    time = samples.column("time")
    span = float(time.max() - time.min())
    if span <= 0:
        raise ParseError(TOOL, "all snapshots have the same time")
    counter = "transactions" if samples.kind == "rr" else "bytes_read"
    total = sum(float(c[-1] - c[0]) for c in _per_flow(samples, counter, flows).values())
    rows = [Value("snapshots", len(samples.data), COUNT), Value("flows", len(flows), COUNT)]
    if samples.kind == "rr":
        rows.append(Value("throughput", total / span, "trans/s"))
        low, high = samples.column("latency_min"), samples.column("latency_max")
        if not np.isnan(low).all():
            rows.append(Value("latency_min", round(float(np.nanmin(low)) * 1e6, 3), US))
            rows.append(Value("latency_max", round(float(np.nanmax(high)) * 1e6, 3), US))
    else:
        rows.append(Value("throughput", total * 8 / span, "bits/s"))
    return rows


def _flows(samples: AllSamples) -> list[tuple[float, float]]:
    keys = zip(samples.column("tid").tolist(), samples.column("flow_id").tolist(), strict=True)
    return list(dict.fromkeys(keys))


def _per_flow(samples: AllSamples, name: str, flows: list[tuple[float, float]]
              ) -> Mapping[tuple[float, float], npt.NDArray[np.float64]]:
    tid, flow = samples.column("tid"), samples.column("flow_id")
    counter = samples.column(name)
    return {key: counter[(tid == key[0]) & (flow == key[1])] for key in flows}
