"""The latency-CPU frontier of a real 9-variant matrix run (napi_defer_hard_irqs x
gro_flush_timeout, profiles/frontier-defer-gro.yaml on the SSH testbed, 3 repetitions;
tests/golden/frontier/ keeps its manifest and samples) in headless Chromium: the figure
is drawn with a panel per matrix axis and its caption names the frontier, the page
loads clean. Screenshot in test-artifacts/frontier.png."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from napilab.reports.ab import frontier
from napilab.reports.ab.compare import load_run, table
from napilab.reports.formats.render import html
from tests.browser.conftest import Browser

pytestmark = pytest.mark.browser

RUN = Path(__file__).resolve().parents[2] / "tests" / "golden" / "frontier" / \
    "20261202T010604Z-c0c48373"


def test_the_frontier_of_a_nine_variant_matrix(browser: Browser, tmp_path: Path) -> None:
    target = tmp_path / RUN.name
    shutil.copytree(RUN, target)
    run = load_run(target)
    found = frontier.frontier(table(run))
    assert isinstance(found, frontier.Frontier) and len(found.points) == 9
    (target / "report.html").write_text(html(run))
    browser.open(target / "report.html")
    assert browser.recorder.problems() == []
    figure = browser.page.locator("figure#plot-frontier")
    box = figure.locator("svg").bounding_box()
    assert box is not None and box["width"] > 600 and box["height"] > 150
    caption = figure.inner_text()
    assert "a panel per matrix axis" in caption
    assert all(p.variant in caption for p in found.front)
    # one axes per panel: all variants, by defer, by gro
    titles = figure.locator("svg text").all_text_contents()
    assert {"all 9 variants", "by defer", "by gro"} <= {t.strip() for t in titles}
    figure.screenshot(path=str(browser.screenshot_path("frontier.png")))
