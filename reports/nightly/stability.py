"""How steady each series is (reports.nightly.series): per series the nights seen, the
nights `napilab check` judged and how often its status flipped from one checked night to
the next, the regressions it found, each trend metric's night-to-night noise (the
coefficient of variation of the baseline variant's nightly medians, from the runs'
summaries), and the A/A nights with how many of them were false alarms.

An A/A night is a run of the baseline variant against a copy of itself (`napilab run
--aa`: the variants BASE and BASE-again, as `napilab calibrate` runs them, but in the
profile's own series): its A/B table should judge no primary metric better or worse, so
every one that does is a false alarm of the verdicts on that hardware. Computed from
the stored runs every time (nothing to keep in sync)."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from napilab.reports.nightly.history import RunInfo
from napilab.reports.nightly.series import aa_variants


@dataclass(frozen=True)
class SeriesStability:
    series: str
    nights: int
    checked: int  # nights with a check.json
    flips: int  # checked nights whose status differs from the checked night before
    regressions: int  # checked nights that were regressions
    aa_nights: int
    aa_false: int  # A/A nights whose A/B table judged a primary metric better or worse
    noise: dict[str, float] = field(default_factory=dict)  # metric -> CV of the nights

    @property
    def flip_rate(self) -> float | None:
        return self.flips / (self.checked - 1) if self.checked > 1 else None

    @property
    def aa_rate(self) -> float | None:
        return self.aa_false / self.aa_nights if self.aa_nights else None

    def line(self) -> str:
        flips = (f", status flipped {self.flips} of {self.checked - 1} times"
                 if self.checked > 1 else "")
        aa = (f"; A/A nights {self.aa_nights}, false alarms {self.aa_false}"
              if self.aa_nights else "")
        noise = "; night-to-night CV " + ", ".join(f"{k} {v:.1%}" for k, v in
                                                  self.noise.items()) if self.noise else ""
        return (f"{self.series}: {self.nights} night(s), {self.checked} checked{flips}, "
                f"{self.regressions} regression(s){aa}{noise}")


def is_aa(run: RunInfo) -> bool:
    return aa_variants(run.variants)


def stability(runs: Sequence[RunInfo], false_alarm: Callable[[RunInfo], bool]
              ) -> list[SeriesStability]:
    """Each series' stability, in order of its first night; `false_alarm(run)` judges an
    A/A night (reports.ab: a primary metric better or worse)."""
    out = []
    for name in dict.fromkeys(r.series for r in runs):
        nights = [r for r in runs if r.series == name]
        checked = [r.check.status for r in nights if r.check is not None]
        flips = sum(1 for a, b in itertools.pairwise(checked) if a != b)
        aa = [r for r in nights if is_aa(r)]
        out.append(SeriesStability(
            name, len(nights), len(checked), flips, checked.count("regression"), len(aa),
            sum(1 for r in aa if false_alarm(r)),
            _noise([r for r in nights if not is_aa(r)])))
    return out


def _noise(nights: Sequence[RunInfo]) -> dict[str, float]:
    """metric -> the coefficient of variation of the baseline variant's nightly medians
    (from the summaries; two nights at least)."""
    levels: dict[str, list[float]] = {}
    for run in nights:
        if run.summary is None or not run.variants:
            continue
        for metric in run.summary.metrics:
            value = metric.variants.get(run.variants[0])
            if value is not None and value.median is not None:
                levels.setdefault(f"{metric.source}.{metric.metric}", []).append(value.median)
    out = {}
    for key, values in levels.items():
        mean = statistics.fmean(values) if values else 0.0
        if len(values) >= 2 and mean and math.isfinite(mean):
            out[key] = statistics.stdev(values) / abs(mean)
    return out
