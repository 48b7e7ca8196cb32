"""The cover-letter table: metric labels on the left, one right-aligned column per
variant (or per label x variant in `napilab compare`), every column one width as in
seed 001's table, at most 80 columns.

Column names longer than their numbers wrap onto up to three header lines, broken after
a `-`, `_`, `.`, `:`, `/` or space (`threaded-` / `busypoll-defer`), so seed 000's three
variants share one block. Only when the columns cannot fit next to labels of
LABEL_MIN characters do they split into blocks: a comparison group (a baseline column
and the columns compared with it) is never cut while it fits one block, and when a
group is larger than a block (a 50-variant matrix) each block starts with the group's
baseline column again and the blocks are of equal size, so every block reads on its own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from napilab.reports.ab.model import Table
from napilab.reports.formats import run_facts
from napilab.reports.formats.text_stats import stats_block

LABEL_MIN = 24  # a label is cut to no less than this before the columns split into blocks
MIN_COLUMN = 8
MAX_HEADER_LINES = 3
_BREAK = re.compile(r"[^-_.:,/ ]*[-_.:,/ ]+|[^-_.:,/ ]+$")


def wrap_name(name: str, width: int) -> list[str]:
    """`name` in lines of at most `width` characters, each line ending at a break
    character where one exists (greedy), a piece longer than `width` cut hard. A name
    that needs wrapping breaks first after the label of compare's `LABEL:variant`."""
    if len(name) <= width:
        return [name]
    label, colon, variant = name.partition(":")
    if colon and variant:
        return _wrap(label + colon, width) + _wrap(variant, width)
    return _wrap(name, width)


def _wrap(name: str, width: int) -> list[str]:
    pieces: list[str] = []
    for piece in _BREAK.findall(name) or [name]:
        pieces += [piece[i:i + width] for i in range(0, len(piece), width)]
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return [line.strip() for line in lines]


def narrowest(name: str, lines: int) -> int:
    """The smallest width at which `name` wraps onto at most `lines` lines without
    cutting a word (`Baseline:` stays whole)."""
    words = max((len(p.strip()) for p in _BREAK.findall(name)), default=0)
    return next(w for w in range(max(1, words), len(name) + 1)
                if len(wrap_name(name, w)) <= lines) if name else 0


@dataclass(frozen=True)
class Layout:
    column: int  # width of every value column
    label: int  # width of the label column
    blocks: tuple[tuple[str, ...], ...]  # the columns of each block, in table order


def groups(tab: Table) -> list[list[str]]:
    """The table's columns as comparison groups: each baseline column followed by the
    columns compared with it, in table order; a column in no pair is its own group."""
    compared = {other for _, other in tab.pairs}
    out: list[list[str]] = []
    for column in tab.variants:
        if column in compared:
            continue
        out.append([column, *(other for base, other in tab.pairs if base == column)])
    return out


def _split(units: list[list[str]], per_block: int) -> list[tuple[str, ...]]:
    blocks: list[list[str]] = []
    for unit in units:
        if len(unit) <= per_block:
            if blocks and len(blocks[-1]) + len(unit) <= per_block:
                blocks[-1] += unit
            else:
                blocks.append(list(unit))
            continue
        base, others = (unit[0], unit[1:]) if per_block >= 2 else (None, unit)
        room = per_block - (base is not None)
        count = math.ceil(len(others) / room)
        # sizes differ by one at most: no lone column in the last block
        size, longer = divmod(len(others), count)
        start = 0
        for k in range(count):
            end = start + size + (k < longer)
            blocks.append(([base] if base is not None else []) + others[start:end])
            start = end
    return [tuple(b) for b in blocks]


def layout(tab: Table, cells: Sequence[Sequence[str]], width: int = 80) -> Layout:
    """The fewest blocks first, then the fewest header lines, then the narrowest columns."""
    longest = max([len(ln.label) for ln in tab.lines] + [10])
    label_min = min(longest, LABEL_MIN)
    numbers = max([len(c) for row in cells for c in row] + [MIN_COLUMN])
    units = groups(tab)
    best: tuple[int, int, Layout] | None = None
    for lines in range(1, MAX_HEADER_LINES + 1):
        column = max([numbers] + [narrowest(v, lines) for v in tab.variants])
        column = min(column, width - 4 - label_min)
        per_block = max(1, (width - 2 - label_min) // (2 + column))
        blocks = _split(units, per_block) if len(tab.variants) > per_block \
            else [tuple(tab.variants)]
        widest = max(len(b) for b in blocks)
        label = max(label_min, min(longest, width - 2 - widest * (2 + column)))
        found = (len(blocks), lines, Layout(column, label, tuple(blocks)))
        if best is None or found[:2] < best[:2]:
            best = found
        if len(blocks) == 1:
            break
    assert best is not None
    return best[2]


def text_table(tab: Table, width: int = 80,
               absent: Mapping[str, frozenset[str]] | None = None) -> str:
    """The values table, then the statistics per compared column under it."""
    absent = absent or {}
    cells = [[run_facts.cell_text(ln, v, absent) for v in tab.variants] for ln in tab.lines]
    shape = layout(tab, cells, width)
    index = {v: i for i, v in enumerate(tab.variants)}
    out: list[str] = []
    for block in shape.blocks:
        if out:
            out.append("")
        heads = [wrap_name(v, shape.column) for v in block]
        height = max(len(h) for h in heads)
        heads = [[""] * (height - len(h)) + h for h in heads]  # names sit on the numbers
        for row in range(height):
            out.append(("  " + " " * shape.label + "".join(
                f"  {h[row]:>{shape.column}}" for h in heads)).rstrip())
        for line, row_cells in zip(tab.lines, cells, strict=True):
            out.append("  " + f"{line.label[:shape.label]:<{shape.label}}" + "".join(
                f"  {row_cells[index[v]]:>{shape.column}}" for v in block))
    values = "\n".join(out) + "\n"
    stats = stats_block(tab, width)
    # The cover letter's table first, unchanged in shape; the evidence under it.
    return values + ("\n" + stats if stats else "")
