"""The report of a real `napilab tune` study (profiles/tune-veth.yaml on the SSH
testbed: 9 candidates, the best 3 confirmed against b as deployed; tests/golden/tune/
keeps its tune.json and the confirmation run) rendered again from the stored data and
opened in headless Chromium: the answer, both tables and both figures are there and
the page loads clean. Screenshot in test-artifacts/tune.png."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from napilab.harness.records import codec
from napilab.harness.tune.record import TuneStudy
from napilab.reports.tune import report as tune_report
from napilab.reports.tune.confirm import Named, judge
from tests.browser.conftest import Browser

pytestmark = pytest.mark.browser

STUDY = Path(__file__).resolve().parents[2] / "tests" / "golden" / "tune" / "study"


def test_a_real_studys_page(browser: Browser, tmp_path: Path) -> None:
    target = tmp_path / "study"
    shutil.copytree(STUDY, target)
    state = codec.read(target / "tune.json", TuneStudy)  # written before tune.json's record
    confirmation = state.confirmation
    assert confirmation is not None and confirmation.run is not None
    conf = judge(target / confirmation.run, [(Named("latency_p99", None), "minimise")],
                 [], [name for name, _ in confirmation.candidates])
    assert conf.recommended == confirmation.recommended  # the same data, the same answer
    paths = tune_report.write(target, state, conf)
    browser.open(paths[2])
    assert browser.recorder.problems() == []
    answer = browser.page.locator("#tune-answer").inner_text()
    assert answer.startswith("recommended: " + conf.recommended[0])
    rows = browser.page.locator("#tune-table-1 tbody tr")
    assert rows.count() == 1 + len(state.candidates)  # the baseline, each candidate
    assert browser.page.locator("#tune-table-2 tbody tr").count() == 1 + len(conf.candidates)
    # what each candidate costs, though the goal names only latency
    assert "busy cores (median)" in browser.page.locator("#tune-table-2 thead").inner_text()
    figures = browser.page.locator("#tune-figures figure svg")
    assert figures.count() == 1  # one goal metric: the search's progress only
    box = figures.first.bounding_box()
    assert box is not None and box["width"] > 400 and box["height"] > 150
    browser.page.screenshot(path=str(browser.screenshot_path("tune.png")), full_page=True)
