"""Property: every parser either parses or raises ParseError, on arbitrary text and on
real captures with lines deleted, duplicated, swapped, corrupted or cut short."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from napilab.runners.base import ParseError, Value
from napilab.runners.registry import PARSERS
from napilab.runners.workloads import command, netperf

DATA = Path(__file__).parents[1] / "data"
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
# Derandomized: the same examples on every run, so CI is stable; 300 mutations a parser
# is what it took to hit `²` in a count field (the interrupts/proc_stat crash).
MUTATIONS = settings(max_examples=300, deadline=None, derandomize=True,
                     suppress_health_check=_HEALTH)
ARBITRARY = settings(max_examples=80, deadline=None, derandomize=True,
                     suppress_health_check=_HEALTH)

# One name per distinct parser (tool names alias the same function).
NAMES = sorted({id(fn): name for name, fn in sorted(PARSERS.items(), reverse=True)}.values())
_JSON_SPECS = command.metric_specs({
    "bps": {"json_path": "end.sum.bits_per_second", "unit": "bits/s"},
    "first": {"json_path": "intervals.0.sum.bytes", "unit": "bytes", "optional": True},
})
_REGEX_SPECS = command.metric_specs({
    "pps": {"regex": r"(?P<value>[\d.,]+) pps", "unit": "packets/s", "aggregate": "mean"},
    "n": {"regex": r"^n=(\d+)", "unit": "count", "optional": True},
})
EXTRA: dict[str, Callable[[str], list[Value]]] = {
    "netperf+selectors": lambda text: netperf.values(
        netperf.parse(text, selectors=["THROUGHPUT", "DIRECTION"])),
    "command.json_path": lambda text: command.values(command.parse(text, _JSON_SPECS)),
    "command.regex": lambda text: command.values(command.parse(text, _REGEX_SPECS)),
}
ALL = {**{name: PARSERS[name] for name in NAMES}, **EXTRA}
SEED_PARSER = {"netperf+selectors": "netperf", "command.json_path": "iperf3",
               "command.regex": "xdpsock"}


def _seeds(parser: str) -> list[str]:
    """Captures this parser reads (files over 100 kB left out to keep the suite fast)."""
    seeds = []
    for expected in sorted(DATA.rglob("*.expected.json")):
        if json.loads(expected.read_text())["parser"] != parser:
            continue
        stem = expected.name.removesuffix(".expected.json")
        for path in expected.parent.glob(stem + ".*"):
            if not path.name.endswith(".expected.json") and path.stat().st_size < 100_000 \
                    and path.name[len(stem) + 1:].count(".") == 0:
                seeds.append(path.read_bytes().decode("utf-8"))
    return seeds


def _run(parse: Callable[[str], list[Value]], text: str) -> None:
    try:
        rows = parse(text)
    except ParseError:
        return
    assert isinstance(rows, list)
    assert all(isinstance(v, Value) for v in rows)


_TOKENS = [*"0123456789.,:=-_ \t%/[]{}\"", "\x1b[0m", "nan", "-nan", "inf", "²", "٣", "\x00"]
# What replaces a digit: Unicode digits int() refuses (²) or accepts (٣), signs, a
# separator, nothing, a huge number, nan.
_DIGIT_SWAPS = ["²", "٣", "x", "-", ".", ",", "", "9" * 25, "nan", " "]
_NOISE = st.lists(st.characters() | st.sampled_from(_TOKENS), max_size=30).map("".join)
_SEEDS: dict[str, list[str]] = {}


@st.composite
def mutated(draw: st.DrawFn, parser: str) -> str:
    """A capture of `parser` with 1-4 line-level mutations."""
    seeds = _SEEDS[parser]
    lines = seeds[draw(st.integers(0, len(seeds) - 1))].split("\n")
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "insert",
                                   "corrupt", "digit", "digit", "truncate"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "replace":
            lines[i] = draw(_NOISE)
        elif op == "insert":
            lines.insert(i, draw(_NOISE))
        elif op == "corrupt" and lines[i]:
            k = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:k] + draw(_NOISE) + lines[i][k + 1:]
        elif op == "digit":  # numbers are where parsers convert, so aim at them
            digits = [k for k, c in enumerate(lines[i]) if c.isdigit()]
            if digits:
                k = draw(st.sampled_from(digits))
                lines[i] = lines[i][:k] + draw(st.sampled_from(_DIGIT_SWAPS)) + lines[i][k + 1:]
        elif op == "truncate":
            k = draw(st.integers(0, max(0, len(lines[i]) - 1)))
            lines = [*lines[:i], lines[i][:k]]
    return "\n".join(lines)


@pytest.mark.parametrize("name", sorted(ALL))
def test_arbitrary_text_parses_or_raises_parse_error(name: str) -> None:
    @ARBITRARY
    @given(st.text(max_size=400) | st.binary(max_size=400).map(
        lambda b: b.decode("latin-1")))
    def check(text: str) -> None:
        _run(ALL[name], text)

    check()


@pytest.mark.parametrize("name", sorted(ALL))
def test_mutated_captures_parse_or_raise_parse_error(name: str) -> None:
    seeds = _SEEDS.setdefault(name, _seeds(SEED_PARSER.get(name, name)))
    assert seeds, f"no capture for {name}"

    @MUTATIONS
    @given(mutated(name))
    def check(text: str) -> None:
        _run(ALL[name], text)

    check()
