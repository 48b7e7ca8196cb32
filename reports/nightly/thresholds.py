"""`--max-regression` thresholds: relative (`latency_p99=5`, `rtt_avg=3%`) or absolute
(`cpu_time=+500ms`, `softirq=+0.1cores`, `drops=+10`: a leading `+`).

An absolute threshold is in the metric's own unit after conversion: a time unit (ns,
us, ms, s) converts to the metric's time unit; `cores` is CPU time per second of the
measured window (the median of the baseline's `snapshot.interval` for the line's role),
so `+0.1cores` on a CPU time in ms over a 10 s window is +1,000 ms; no unit means the
metric's unit. A unit that does not fit the metric is bad input (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from napilab.harness.errors import InputError
from napilab.reports.ab.model import Line, format_number

_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_ABSOLUTE = re.compile(r"\+\s*(?P<value>[0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(?P<unit>[a-z/]*)",
                       re.IGNORECASE)


@dataclass(frozen=True)
class Threshold:
    pct: float | None = None  # relative, percent
    value: float | None = None  # absolute, in `unit` (the metric's own when "")
    unit: str = ""

    @property
    def text(self) -> str:
        if self.value is None:
            return f"{self.pct:g}%"
        return f"+{format_number(self.value)}" + (f" {self.unit}" if self.unit else "")

    def in_unit(self, line: Line, window: Callable[[str | None], float | None]
                ) -> float | None:
        """The absolute threshold in `line`'s unit (None for a relative one)."""
        if self.value is None:
            return None
        unit = self.unit.lower()
        if unit in ("", line.unit.lower()):
            return self.value
        if unit in _SECONDS and line.unit in _SECONDS:
            return self.value * _SECONDS[unit] / _SECONDS[line.unit]
        if unit == "cores" and line.unit in _SECONDS:
            seconds = window(line.role)
            if seconds is None:
                raise InputError(f"+{self.value:g}cores needs the measured window "
                                 "(snapshot.interval), which these runs do not have",
                                 hint="give the threshold in the metric's time unit")
            return self.value * seconds / _SECONDS[line.unit]
        raise InputError(f"unit {self.unit!r} does not fit the metric's unit "
                         f"{line.unit or '(none)'!r}",
                         hint="use ns, us, ms or s for a time, cores for a CPU time, or "
                              "no unit for the metric's own")


def parse_thresholds(items: Sequence[str]) -> dict[str, Threshold]:
    """`METRIC=PCT` (5 or 5%) or `METRIC=+VALUE[UNIT]` -> {METRIC: Threshold}; METRIC is
    `metric` or `source.metric`, as in the profile's `metrics:`."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        text = value.strip()
        found = _ABSOLUTE.fullmatch(text) if sep and name.strip() else None
        if found is not None:
            number = float(found["value"])
            if number > 0:
                out[name.strip()] = Threshold(None, number, found["unit"])
                continue
        try:
            pct = float(text.removesuffix("%")) if sep and name.strip() and \
                not text.startswith("+") else None
        except ValueError:
            pct = None
        if pct is None or not 0 < pct <= 1000:
            raise InputError(f"--max-regression {item!r}: expected METRIC=PCT with PCT in "
                             "(0, 1000], e.g. latency_p99=5 or ping.rtt_avg=3%, or an "
                             "absolute METRIC=+VALUE[UNIT], e.g. cpu_time=+500ms or "
                             "softirq=+0.1cores")
        out[name.strip()] = Threshold(pct)
    return out
