"""The published site's index page in headless Chromium: no console error, no request
but the file itself, trend figures with a size, one row per run linking to a report
that exists and opens (again without fetching anything), a hostile profile description
inert. Screenshot in test-artifacts/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from napilab.reports.nightly.site import publish
from tests.browser.conftest import Browser
from tests.browser.test_report_browser import ACTIVE
from tests.report_runs import STARTED, neper_run

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "golden" / "reports" / "runs" / "demo-20261130T163215Z-7a9ae54f"
HOSTILE = "<script>alert('profile')</script><img src=x onerror=alert('img')>"
TRENDS = """() => [...document.querySelectorAll('figure.plot svg')].map(s => {
  const r = s.getBoundingClientRect(); return [r.width, r.height]; })"""


def test_site_index_and_a_report_from_it(browser: Browser, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(DEMO, results / "demo" / DEMO.name)
    for i in range(3):
        neper_run(results, run_id=f"n{i}", seed=i, reps=2, started=STARTED + i * 86400,
                  description=HOSTILE, variants=("base", f"v<b>{i}</b>"[:6]),
                  latency_samples=100)
    site = publish(results, tmp_path / "site")
    index = tmp_path / "site" / "index.html"
    browser.open(index)
    page, seen = browser.page, browser.recorder
    page.wait_for_timeout(300)
    assert seen.problems() == []
    assert seen.requests == [index.resolve().as_uri()]
    # The feed's discovery link is the one element that names another file; it is not
    # fetched (the requests above), and it stays the only one.
    assert page.evaluate(ACTIVE) == ['<link rel="alternate" type="application/atom+xml" '
                                     'title="napilab regressions" href="feed.xml">']
    assert page.locator("p.description").nth(1).inner_text() == HOSTILE  # profiles by name
    sizes = page.evaluate(TRENDS)
    # the demo's primary metrics on its sender a and its table's hard-IRQ time on b; the
    # synthetic profile on sut
    assert len(sizes) == 3 and all(w > 100 and h > 50 for w, h in sizes), sizes
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == site.runs == 4
    hrefs = page.eval_on_selector_all("table.runs a", "els => els.map(e => "
                                      "e.getAttribute('href'))")
    assert all((tmp_path / "site" / h).is_file() for h in hrefs)
    browser.screenshot("site-index.png")
    first = page.locator("table.runs a").first
    target = (tmp_path / "site" / hrefs[0]).resolve().as_uri()
    first.click()
    page.wait_for_url(target)
    page.wait_for_load_state("load")
    assert page.locator("#ab-table").is_visible()
    assert seen.requests == [index.resolve().as_uri(), target]
    assert seen.problems() == []
