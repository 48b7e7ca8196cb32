"""`napilab compare --format html` in headless Chromium: the page of two labelled runs
loads with no request but itself and no console error, its A/B table has the label
columns and a change column per compared run, and a hostile variant name (a run's
manifest is not trusted) stays visible text. Screenshot in test-artifacts/."""

from __future__ import annotations

from pathlib import Path

import pytest

from napilab.reports.ab.compare import load_run
from napilab.reports.ab.cross_run import LabelledRun, compare_labelled
from napilab.reports.formats import compare_page
from tests.browser.conftest import Browser
from tests.report_runs import neper_run

pytestmark = pytest.mark.browser
SCRIPT = "<script>alert('variant')</script>"
ACTIVE = """() => [...document.querySelectorAll('*')].filter(e =>
  ['SCRIPT', 'IMG', 'IFRAME', 'OBJECT', 'EMBED'].includes(e.tagName.toUpperCase()) ||
  [...e.attributes].some(a => a.name.toLowerCase().startsWith('on'))).map(e => e.outerHTML)"""


def test_compare_page_loads_clean_with_label_columns(browser: Browser, tmp_path: Path) -> None:
    variants = ("busypoll", SCRIPT)
    runs = [LabelledRun(label, load_run(neper_run(tmp_path / label, variants=variants, reps=3,
                                                  run_id=f"{i}" * 8, slower=1 + i / 2,
                                                  latency_samples=100)))
            for i, label in enumerate(("Baseline", "Patched kernel"))]
    tab = compare_labelled(runs)
    noted = [compare_page.Noted("intended", "sut: kernel_release: Baseline '6.18', "
                                            f"Patched kernel '6.19 {SCRIPT}'")]
    page_path = tmp_path / "compare.html"
    page_path.write_text(compare_page.html(runs, tab, noted, compare_page.absent(
        runs, [SCRIPT, "busypoll"])))
    browser.open(page_path)
    page, seen = browser.page, browser.recorder
    assert seen.problems() == []
    assert seen.requests == [page_path.resolve().as_uri()]
    headers = page.locator("#ab-table thead th").all_inner_texts()
    assert headers[:4] == ["metric", "Baseline:busypoll", "Patched kernel:busypoll",
                           "change vs Baseline:busypoll"]
    assert f"Patched kernel:{SCRIPT}" in headers
    assert page.evaluate(ACTIVE) == []
    assert SCRIPT in page.locator("#differences").inner_text()
    assert page.locator("#ab-table tbody tr").count() == len(tab.lines)
    browser.screenshot("compare.png")
