"""The report of a run over replicas in headless Chromium: the page loads with no
request but itself and no console error, its pooled table has a column per replica
and a row per primary comparison, each replica links to its own report, and a hostile
error text in the manifest (not trusted) stays visible text. Screenshot in
test-artifacts/."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.reports.formats.render import report_files
from tests.browser.conftest import Browser
from tests.unit.test_fleet_report import HOSTILE, fleet_run

pytestmark = pytest.mark.browser
ACTIVE = """() => [...document.querySelectorAll('*')].filter(e =>
  ['SCRIPT', 'IMG', 'IFRAME', 'OBJECT', 'EMBED'].includes(e.tagName.toUpperCase()) ||
  [...e.attributes].some(a => a.name.toLowerCase().startsWith('on'))).map(e => e.outerHTML)"""


def test_the_fleet_page_loads_clean_with_a_column_per_replica(browser: Browser,
                                                               tmp_path: Path) -> None:
    run = fleet_run(tmp_path, {"pair1": 1.3, "pair2": 1.3}, failed="pair3")
    report_files(run, ["html"])
    page_path = run / "report.html"
    browser.open(page_path)
    page, seen = browser.page, browser.recorder
    assert seen.problems() == []
    assert seen.requests == [page_path.resolve().as_uri()]
    headers = page.locator("#pooled thead th").all_inner_texts()
    assert headers == ["metric", "variant", "pooled change (95% CI)", "tau", "verdict",
                       "pair1", "pair2"]
    assert page.locator("#pooled tbody tr").count() >= 2
    links = page.locator("#replicas a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert links == ["replicas/pair1/report.html", "replicas/pair2/report.html"]
    assert HOSTILE in page.locator("#replicas").inner_text()
    assert page.evaluate(ACTIVE) == []
    browser.screenshot("fleet.png")
