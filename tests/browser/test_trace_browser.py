"""The trace breakdown's section of report.html (a synthetic traced run,
tests/trace_runs.py) in headless Chromium: the stage table with the stage new in B, the
absent stage, the attribution line and both figures drawn, the page loading clean.
Screenshot in test-artifacts/trace.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.reports.ab.compare import load_run
from napilab.reports.formats.render import html
from tests.browser.conftest import Browser
from tests.trace_runs import trace_run

pytestmark = pytest.mark.browser


def test_the_trace_section_renders(browser: Browser, tmp_path: Path) -> None:
    run = load_run(trace_run(tmp_path))
    page = run.directory / "report.html"
    page.write_text(html(run))
    browser.open(page)
    assert browser.recorder.problems() == []
    section = browser.page.locator("section#trace")
    assert section.locator("tr.trace-new-in-b td").first.inner_text() == "csd_latency"
    assert "kprobe:__napi_poll" in section.locator("li.trace-absent").inner_text()
    assert "stages that moved" in section.locator("li.trace-attribution").inner_text()
    for name in ("plot-stages-0", "plot-stages-stacked"):
        box = section.locator(f"figure#{name} svg").bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 100, name
    section.screenshot(path=str(browser.screenshot_path("trace.png")))
