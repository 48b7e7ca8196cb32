"""The column sets of the tables a run directory holds, as records (harness.records):
one row of samples.parquet (and samples/<trial>.parquet, `report --format csv`) and one
of latency/<trial>.parquet. The Arrow schemas the store writes are derived from them
(`arrow_schema`), so the published JSON Schema (`napilab schema samples`), the files
and the CSV export name the same columns with the same types."""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

from napilab.harness.records.codec import FrozenRecord

if TYPE_CHECKING:
    import pyarrow as pa


class SampleRow(FrozenRecord, frozen=True, omit_defaults=False):
    """One value a trial measured: `cpu` is null unless the value is per CPU; `source`
    is the tool or collector (neper, softnet_stat...), `metric` its snake_case name."""

    WHAT = "a samples row"

    run_id: str
    trial: int
    variant: str
    rep: int
    role: str
    host: str
    source: str
    metric: str
    cpu: int | None
    value: float
    unit: str


class LatencyRow(FrozenRecord, frozen=True, omit_defaults=False):
    """One transaction's latency, in microseconds, as the tool reported it."""

    WHAT = "a latency row"

    latency_us: float


def columns(record: type[FrozenRecord]) -> tuple[str, ...]:
    return tuple(n for n in record.__struct_fields__ if n != "extra")


def arrow_schema(record: type[FrozenRecord]) -> pa.Schema:
    """The record's columns as an Arrow schema: str -> string, int -> int32, float ->
    float64, each nullable when the field may be None. pyarrow is imported here, where a
    table is first written or read (RunStore.warm), not with this module."""
    import pyarrow as pa

    types = {str: pa.string(), int: pa.int32(), float: pa.float64()}
    hints = typing.get_type_hints(record)

    def arrow(hint: Any) -> pa.DataType:
        plain = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        return types[plain[0]]
    return pa.schema([pa.field(name, arrow(hints[name])) for name in columns(record)])
