"""The cover-letter table (reports/formats/text_table.py, text_stats.py) and the number
notation every format shares (reports/ab/model.py): a change and its CI in one notation,
p as 0.004 or <0.001, headings that leave no word alone on a line, every variant in one
block when the columns fit 80 characters and a clean split when they do not."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from napilab.reports.ab.compare import load_run, table
from napilab.reports.ab.model import as_ratio, format_ci, format_p, format_pct, p_text
from napilab.reports.formats.render import render, text
from napilab.reports.formats.text_stats import heading
from napilab.reports.formats.text_table import layout, narrowest, text_table, wrap_name
from tests.synthetic_runs import lognormal, store_run


@pytest.mark.parametrize(("p", "shown"), [
    (0.004, "0.004"), (0.0042, "0.004"), (4e-3, "0.004"), (1e-7, "<0.001"),
    (0.000999, "<0.001"), (0.001, "0.001"), (0.0496, "0.049"), (0.05, "0.050"),
    (0.12, "0.12"), (0.5, "0.50"), (1.0, "1.00"), (None, "-"), (math.nan, "-")])
def test_p_reads_as_a_cover_letter_writes_it(p: float | None, shown: str) -> None:
    assert format_p(p) == shown


def test_p_never_in_scientific_notation_and_agrees_with_alpha() -> None:
    for p in np.geomspace(1e-300, 1.0, 2000):
        shown = format_p(float(p))
        assert "e" not in shown and len(shown) <= 6
        if shown.startswith("<"):
            continue
        # the printed p says "significant at 0.05" exactly when p is
        assert (float(shown) < 0.05) == (p < 0.05)
    assert p_text(1e-9) == "p<0.001" and p_text(0.004) == "p=0.004"


def _notation(text: str) -> str:
    return "ratio" if text.startswith("x") else "percent" if text.endswith("%") else "?"


def test_the_issue_s_row_reads_in_one_notation() -> None:
    """x11.4 with +149..+2,397% (issue 15) becomes a ratio with a ratio CI."""
    change, ci = 10.4, (1.49, 23.97)
    assert format_pct(change, ci) == "x11.4"
    assert format_ci(ci, change) == "x2.49..x25.0"
    # a modest change whose CI reaches tenfold: ratios too, never +93.5% with x19
    assert (format_pct(0.935, (-0.483, 18.11)), format_ci((-0.483, 18.11), 0.935)) == \
        ("x1.94", "x0.517..x19.1")
    assert (format_pct(0.232, (0.22, 0.26)), format_ci((0.22, 0.26), 0.232)) == \
        ("+23.2%", "+22.0..+26.0%")


def test_change_and_ci_always_share_their_notation() -> None:
    rng = np.random.default_rng(15)
    for _ in range(5000):
        low, change, high = sorted(float(v) for v in np.exp(rng.normal(0, 1.5, 3)) - 1)
        ci = (low, high if rng.random() > 0.05 else math.inf)
        pair = (_notation(format_pct(change, ci)), _notation(format_ci(ci, change)))
        assert pair[0] == pair[1] != "?", (change, ci, pair)
        assert pair[0] == ("ratio" if as_ratio(change, ci) else "percent")


def test_heading_never_leaves_a_word_alone() -> None:
    for other, base in [("rps-remote", "rps-off"),
                        ("threaded-busypoll-defer", "sysctl-busypoll"),
                        ("v" * 40, "w" * 40), ("x" * 90, "y")]:
        lines = heading(other, base, 4)
        assert all(len(line) <= 80 for line in lines)
        # a line of one word is the compared variant's name, never `CI,` or `p`
        assert all(len(line.split()) > 1 or line.strip() == other[:78] for line in lines), lines
        assert lines[-1].startswith("  change, 95% CI, p Holm-adjusted")


def _run(tmp_path: Path, variants: list[str]) -> Path:
    values = {"ping.rtt_avg": {v: lognormal(i, 5, 40 * (1 + i / 10))
                               for i, v in enumerate(variants)},
              "ping.received": {v: lognormal(100 + i, 5, 30_000 + 500 * i)
                                for i, v in enumerate(variants)}}
    return store_run(tmp_path, values, variants=variants, units={"ping.received": "count"},
                     policies={"ping.rtt_avg": {}, "ping.received": {}})


def test_three_seed_variants_share_one_block_in_80_columns(tmp_path: Path) -> None:
    variants = ["sysctl-busypoll", "threaded-busypoll", "threaded-busypoll-defer"]
    tab = table(load_run(_run(tmp_path, variants)))
    out = text_table(tab)
    values = out.split("\n\n")[0].splitlines()
    assert max(len(line) for line in out.splitlines()) <= 80
    assert len(layout(tab, [["12,345"] * 3] * len(tab.lines)).blocks) == 1
    # the names wrap at their hyphens, bottom-aligned over the numbers
    assert values[0].split() == ["sysctl-", "threaded-", "threaded-"]
    assert values[1].split() == ["busypoll", "busypoll", "busypoll-defer"]
    assert len(tab.lines) == 2 and len(values) == 2 + len(tab.lines)


@pytest.mark.parametrize("count", [2, 4, 5, 6, 9, 20, 50])
def test_many_variants_fit_or_split_cleanly(tmp_path: Path, count: int) -> None:
    variants = [f"variant-{i:02d}" for i in range(count)]
    tab = table(load_run(_run(tmp_path, variants)))
    shape = layout(tab, [["12,345"] * count] * len(tab.lines))
    out = text_table(tab)
    assert max(len(line) for line in out.splitlines()) <= 80
    sizes = [len(b) for b in shape.blocks]
    label = min(24, max(len(line.label) for line in tab.lines))
    column = max(8, *(narrowest(v, 3) for v in variants))
    fits = 2 + label + count * (2 + column) <= 80
    assert (len(sizes) == 1) == fits, sizes
    if len(sizes) > 1:
        # every block starts with the baseline, so it reads on its own; sizes differ by
        # one at most (no block of a lone column)
        assert all(b[0] == variants[0] for b in shape.blocks)
        assert max(sizes) - min(sizes) <= 1
        shown = [v for b in shape.blocks for v in b[1:]]
        assert shown == variants[1:]
    else:
        assert shape.blocks[0] == tuple(variants)


def test_compare_columns_wrap_after_the_label() -> None:
    assert wrap_name("Baseline:threaded-busypoll", 14) == ["Baseline:", "threaded-", "busypoll"]
    assert wrap_name("short", 8) == ["short"]
    assert all(len(part) <= 6 for part in wrap_name("averyveryverylongname", 6))


def test_text_and_markdown_print_the_same_notation(tmp_path: Path) -> None:
    values = {"ping.rtt_avg": {"off": [2.0, 2.1, 1.9, 2.0, 2.2],
                               "on": [48.0, 30.0, 55.0, 47.0, 60.0]},
              "ping.rtt_max": {"off": [6523.0, 900.0, 12000.0, 3000.0, 7000.0],
                               "on": [12624.0, 3000.0, 90000.0, 11000.0, 2500.0]}}
    run = load_run(store_run(tmp_path, values, policies={"ping.rtt_avg": {}}))
    report, md = text(run), render(run, "md")
    for shown in (report, md):
        assert not re.search(r"\de-\d", shown)
    rows = [line for line in report.splitlines() if line.startswith("  rtt_")
            and ("%" in line or " x" in line)]
    assert rows
    for row in rows:
        change, ci = re.split(r"\s{2,}", row.strip())[1:3]
        assert _notation(change) == _notation(ci), row
        assert f"| {change} | {ci} |" in md
