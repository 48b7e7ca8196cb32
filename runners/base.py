"""What every runner module shares: the parse error, the value record, and the one
`${name}` placeholder syntax of profiles and command arguments.

A runner module is a command builder plus a pure parser. Parsers take text and return
typed records; `values()` functions turn records into `Value`s, the unit of the tidy
results table (one row per value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from napilab.harness.errors import ExitCode, NapilabError

# Units used in the results table. Latencies are always microseconds.
US = "us"
MS = "ms"
COUNT = "count"
PERCENT = "percent"
# `${name}` in a profile (matrix parameters, ${iface}) and in a command's arguments
# (${target}, ${duration}, ...): one syntax, one pattern.
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# the placeholders napilab itself fills in at run time (a matrix may not name them)
RESERVED = ("iface", "target", "bind", "duration", "workdir", "trial", "variant")
# How napilab runs its own scripts on a host's python3 (the netdev netlink client, the
# bzImage banner): isolated (-I: no PYTHON* variables, no user site), without the site
# module (-S: no .pth files, no sitecustomize), UTF-8 whatever the locale. They use the
# standard library only. In a TCG guest a napi-get took 0.49-0.53 s so, 0.74-0.97 s
# with `python3 -`.
HOST_PYTHON = ("python3", "-I", "-S", "-X", "utf8")


def unresolved(value: Any) -> bool:
    """A string still holding a placeholder napilab does not fill in: the unknown
    placeholder is the error, not the value it stands for."""
    return isinstance(value, str) and any(
        name not in RESERVED for name in PLACEHOLDER.findall(value))


def fill(text: str, values: Mapping[str, str]) -> str:
    """`${name}` replaced by values[name]; placeholders of other names stay as written."""
    return PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), text)


class ParseError(NapilabError):
    """A tool's output or a kernel file did not have the expected shape."""

    exit_code = ExitCode.ERROR

    def __init__(self, tool: str, reason: str, excerpt: str = "") -> None:
        short = excerpt.strip().replace("\n", "\\n")
        if len(short) > 160:
            short = short[:157] + "..."
        message = f"cannot parse {tool} output: {reason}"
        if short:
            message += f" (near: {short!r})"
        super().__init__(message)
        self.tool = tool
        self.reason = reason
        self.excerpt = excerpt


@dataclass(frozen=True)
class Value:
    """One measured value: a row of samples.parquet without the run/trial columns."""

    metric: str
    value: float
    unit: str
    cpu: int | None = None


def parse_int(tool: str, token: str, *, base: int = 10) -> int:
    """int() that raises ParseError instead of ValueError."""
    try:
        return int(token, base)
    except ValueError:
        raise ParseError(tool, f"expected an integer, got {token!r}", token) from None


_GROUPED = re.compile(r"(?P<sign>[+-]?)(?:\d{1,3}(?:,\d{3})+|\d+)(?P<fraction>\.\d+)?")


def ungroup(token: str, *, integer: bool = False) -> str | None:
    """TOKEN without its thousands separators when it is a number written with them
    (`1,234,567`; unless `integer`, also signed and with decimals: `-1,234.5`) or a plain
    one (`1234567`); None for anything else (`1,23`, `12,345,67`, `1,234e5`)."""
    match = _GROUPED.fullmatch(token)
    if match is None or (integer and (match["sign"] or match["fraction"])):
        return None
    return token.replace(",", "")


def parse_float(tool: str, token: str) -> float:
    """float() that raises ParseError instead of ValueError; rejects nan and inf."""
    try:
        number = float(token)
    except ValueError:
        raise ParseError(tool, f"expected a number, got {token!r}", token) from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ParseError(tool, f"expected a finite number, got {token!r}", token)
    return number


class ToolFailed(NapilabError):
    """A workload ran but failed (non-zero exit, error in its output, no result)."""

    def __init__(self, tool: str, reason: str, stderr: str = "") -> None:
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        super().__init__(f"{tool} failed: {reason}" + (f": {tail}" if tail else ""))
        self.tool = tool
        self.reason = reason
        self.stderr = stderr
