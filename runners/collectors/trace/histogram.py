"""Log-linear histograms as the trace collector's programs bucket them (program.py's
HIST): a value below 16 is its own bucket; above, a bucket is a power of two split in
16, named by its lower bound, so its width is at most 1/16 of its lower bound.
Percentiles are read at the middle of the bucket they fall in: within 3.2% of the
value. Pure: merging, percentiles, the mean, a histogram's shift between two."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

SUB_BITS = 4


def width(bucket: int) -> int:
    """The width of the bucket whose lower bound is `bucket`."""
    if bucket < 1 << SUB_BITS:
        return 1
    return 1 << (bucket.bit_length() - 1 - SUB_BITS)


def bucket_of(value: int) -> int:
    """The lower bound of `value`'s bucket (what the bpftrace program computes)."""
    if value < 1 << SUB_BITS:
        return value
    shift = value.bit_length() - 1 - SUB_BITS
    return (value >> shift) << shift


def is_bucket(value: int) -> bool:
    return value >= 0 and bucket_of(value) == value


@dataclass(frozen=True)
class Histogram:
    """Counts by bucket lower bound."""

    counts: Mapping[int, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def quantile(self, q: float) -> float | None:
        """The value below which a fraction q of the events fell: the middle of the
        bucket holding the ceil(q * n)-th event (a bucket of width 1 is its value)."""
        n = self.total
        if n == 0:
            return None
        rank = max(1, -(-q * n // 1))
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                return _middle(bucket)
        raise AssertionError("unreachable: rank <= n")

    def mean(self) -> float | None:
        n = self.total
        if n == 0:
            return None
        return sum(_middle(b) * c for b, c in self.counts.items()) / n

    def buckets(self) -> list[tuple[int, int, int]]:
        """(lower bound, width, count) in order."""
        return [(b, width(b), self.counts[b]) for b in sorted(self.counts)]


def _middle(bucket: int) -> float:
    w = width(bucket)
    return float(bucket) if w == 1 else bucket + w / 2


def merge(histograms: Iterable[Histogram]) -> Histogram:
    out: dict[int, int] = {}
    for h in histograms:
        for bucket, count in h.counts.items():
            out[bucket] = out.get(bucket, 0) + count
    return Histogram(out)
