"""CPU lists (`0-3,8`) and the kernel's hex CPU masks (`ff`, `00000000,00000003`)."""

from __future__ import annotations

import re

_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")
_MASK = re.compile(r"(0x)?[0-9a-fA-F]+(,[0-9a-fA-F]+)*")
MAX_CPUS = 8192


class CpuListError(ValueError):
    pass


def parse_list(text: str) -> tuple[int, ...]:
    """`0-3,8` -> (0, 1, 2, 3, 8). The empty string is the empty set."""
    text = text.strip()
    if text == "":
        return ()
    if not _LIST.fullmatch(text):
        raise CpuListError(f"{text!r} is not a CPU list like '0-3,8'")
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if last < first:
            raise CpuListError(f"{part!r}: range goes backwards")
        if last >= MAX_CPUS:
            raise CpuListError(f"{part!r}: CPU number too large")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_list(cpus: tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 3, 8) -> `0-3,8`."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_mask(text: str) -> tuple[int, ...]:
    """A sysfs/procfs hex mask (32-bit groups separated by commas) -> CPU numbers."""
    text = text.strip()
    if not _MASK.fullmatch(text):
        raise CpuListError(f"{text!r} is not a hex CPU mask")
    value = int(text.removeprefix("0x").replace(",", ""), 16)
    return tuple(i for i in range(value.bit_length()) if value >> i & 1)


def to_mask(cpus: tuple[int, ...] | list[int]) -> str:
    """CPU numbers -> the hex mask sysfs accepts (`0` for none)."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    return format(value, "x")
