"""report.html in headless Chromium: it loads without console errors and without any
request but the file itself, every figure has a size, the tables have their rows, and
hostile strings from a profile, a variant name, a tool's stderr and a failed trial's
error stay inert, visible text. Screenshots go to test-artifacts/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from napilab.reports.ab.compare import load_run, table
from napilab.reports.formats import run_facts
from napilab.reports.formats.render import html
from napilab.reports.plots import plots
from tests.browser.conftest import Browser
from tests.report_runs import neper_run

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "golden" / "reports" / "runs"
SCRIPT = "<script>alert('variant')</script>"
IMG = "\"><img src=x onerror=alert('description')>"
STDERR = "<script>alert('stderr')</script><svg onload=alert('svg')>"
ERROR = "tcp_rr: <iframe src=javascript:alert('error')></iframe>"

# Every element that carries an event handler, a script, or something that loads.
ACTIVE = """() => [...document.querySelectorAll('*')].filter(e =>
  ['SCRIPT', 'IMG', 'IFRAME', 'OBJECT', 'EMBED', 'LINK', 'FOREIGNOBJECT'].includes(
      e.tagName.toUpperCase()) ||
  [...e.attributes].some(a => a.name.toLowerCase().startsWith('on'))).map(e => e.outerHTML)"""
FIGURES = """() => [...document.querySelectorAll('figure.plot svg')].map(s => {
  const r = s.getBoundingClientRect(); return [s.closest('figure').id, r.width, r.height]; })"""


def rendered(run_dir: Path, tmp_path: Path) -> Path:
    """The run copied and its report.html written next to raw/, as `napilab report` does."""
    target = tmp_path / run_dir.name
    shutil.copytree(run_dir, target)
    (target / "report.html").write_text(html(load_run(target)))
    return target


@pytest.mark.parametrize("name", ["synthetic-seed-000-5e1f0000",
                                  "demo-20261130T163215Z-7a9ae54f"])
def test_report_loads_clean_and_complete(browser: Browser, tmp_path: Path, name: str) -> None:
    run_dir = rendered(RUNS / name, tmp_path)
    run = load_run(run_dir)
    tab = table(run)
    browser.open(run_dir / "report.html")
    page, seen = browser.page, browser.recorder
    assert seen.problems() == []
    assert seen.requests == [(run_dir / "report.html").resolve().as_uri()]
    figures = page.evaluate(FIGURES)
    expected = [p for p in plots.render_all(run, tab) if isinstance(p, plots.Plot)]
    assert [f[0] for f in figures] == [f"plot-{p.name}" for p in expected]
    assert all(width > 100 and height > 50 for _, width, height in figures), figures
    omitted = page.locator("#plots-omitted li")
    assert omitted.count() == len(plots.PLOTS) - len(expected)
    assert page.locator("#ab-table tbody tr").count() == len(tab.lines)
    assert page.locator("#ab-table thead th").count() == 3 + len(tab.variants) + len(
        tab.compared)
    settings = run_facts.settings_rows(run.manifest)
    assert page.locator("#settings-table tbody tr").count() == len(settings)
    assert page.locator("#trials-table tbody tr").count() == len(run.manifest.trials)
    assert page.locator("#hosts-table tbody tr").count() == len(run.manifest.host_facts or {})
    assert page.locator("#verdicts").is_visible()
    assert page.evaluate(ACTIVE) == []
    # Raw links resolve to files next to the report (relative links, no fetch on load).
    for href in page.eval_on_selector_all("#trials-table a", "els => els.map(e => "
                                          "e.getAttribute('href'))")[:20]:
        assert (run_dir / href).is_file(), href
    browser.screenshot(f"report-{name}.png")


def test_absent_and_mismatch_are_visible(browser: Browser, tmp_path: Path) -> None:
    run_dir = rendered(RUNS / "synthetic-seed-000-5e1f0000", tmp_path)
    browser.open(run_dir / "report.html")
    page = browser.page
    absent = page.locator("#ab-table td.absent")
    assert absent.count() == 3 and absent.first.inner_text() == "absent"
    mismatch = page.locator("#settings-table tr.mismatch")
    assert mismatch.count() == 1 and "mismatch" in mismatch.inner_text()
    assert page.locator("#settings-flagged").is_visible()
    assert "irqbalance runs on sut" in page.locator("#confounders").inner_text()


def test_hostile_strings_stay_inert_text(browser: Browser, tmp_path: Path) -> None:
    run_dir = neper_run(tmp_path, variants=("base", f"v{SCRIPT}"), reps=3,
                        description=IMG, failed={4: ERROR}, stderr=STDERR,
                        latency_samples=200)
    (run_dir / "report.html").write_text(html(load_run(run_dir)))
    browser.open(run_dir / "report.html")
    page, seen = browser.page, browser.recorder
    page.wait_for_timeout(300)  # an injected handler would have fired by now
    assert seen.dialogs == [] and seen.problems() == []
    assert seen.requests == [(run_dir / "report.html").resolve().as_uri()]
    assert page.evaluate(ACTIVE) == []
    assert page.locator("#description").inner_text() == IMG
    header = page.locator("#ab-table thead").inner_text()
    assert f"v{SCRIPT}" in header
    failures = page.locator("#failures").inner_text()
    assert ERROR in failures and "<script>alert('stderr')</script>" in failures
    # matplotlib's SVG text: the variant name is drawn as text in the figures.
    svg_text = page.eval_on_selector_all("figure.plot svg text", "els => els.map(e => "
                                         "e.textContent)")
    assert f"v{SCRIPT}" in svg_text
    for text in (IMG, f"v{SCRIPT}", ERROR):
        assert page.get_by_text(text, exact=False).first.is_visible()
    browser.screenshot("report-hostile-strings.png")


def test_the_recorder_sees_what_these_tests_forbid(browser: Browser, tmp_path: Path) -> None:
    """Control: a page (without the report's CSP) that fetches and runs script is
    caught, so the assertions above cannot pass by not looking."""
    page_file = tmp_path / "bad.html"
    page_file.write_text('<p>x</p><img src="http://192.0.2.1/x.png">'
                         "<img src=nothing onerror=\"alert('fired')\">")
    browser.open(page_file)
    browser.page.wait_for_timeout(300)
    seen = browser.recorder
    assert seen.blocked == ["http://192.0.2.1/x.png"]
    assert seen.dialogs == ["alert: fired"]
    assert len(browser.page.evaluate(ACTIVE)) == 2


SVG_TEXTS = "sel => [...document.querySelectorAll(sel + ' svg text')].map(e => e.textContent)"


def test_what_a_reader_sees_of_settings_drift_units_and_the_profile(
        browser: Browser, tmp_path: Path) -> None:
    """Issue 15: rps_cpus as the CPU list the profile wrote (with the mask), the folded
    profile that opens on a click, a trial-order figure where drift is flagged, one unit
    style in every figure's text, and the all-zero line named instead of drawn."""
    from tests.unit.test_report_page import drift_run

    demo = rendered(RUNS / "demo-20261130T163215Z-7a9ae54f", tmp_path)
    browser.open(demo / "report.html")
    page, seen = browser.page, browser.recorder
    assert seen.problems() == []
    remote = page.locator("#settings-table tbody tr", has_text="rps-remote").filter(
        has_text="rps data0/rx-0")
    cells = remote.locator("td").all_inner_texts()
    assert cells[3:6] == ["none (mask 0)", "1 (mask 2)", "1 (mask 2)"], cells
    # the resolved profile: one summary line until opened
    text = page.locator("#profile-text")
    assert not text.is_visible()
    folded = page.locator("#profile").bounding_box()
    assert folded is not None and folded["height"] < 150, folded
    page.locator("#profile-details summary").click()
    assert text.is_visible() and "rps-remote:" in text.inner_text()
    texts = page.evaluate(SVG_TEXTS, "figure.plot")
    assert texts and not [t for t in texts if "[" in t or "(count)" in t or ") (" in t]
    assert "Load hardirq (ms)" not in texts
    caption = page.locator("#plot-per_repetition figcaption").inner_text()
    assert "0 in every repetition of every variant: Load hardirq (ms)" in caption
    browser.screenshot("report-demo-settings-profile.png")

    run_dir = drift_run(tmp_path / "drift")
    (run_dir / "report.html").write_text(html(load_run(run_dir)))
    browser.open(run_dir / "report.html")
    assert seen.problems() == []
    figure = page.locator("#plot-trial_order svg")
    box = figure.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 100, box
    drift_texts = page.evaluate(SVG_TEXTS, "#plot-trial_order")
    assert "trial, in execution order" in drift_texts
    assert any(t.startswith("on: drift, Mann-Kendall p<0.001") for t in drift_texts)
    assert page.locator("#ab-table .drift").count() >= 1
    page.locator("#plot-trial_order").screenshot(
        path=str(browser.screenshot("report-drift.png").with_name("report-drift-plot.png")))


SVG_TEXT = "els => els.map(e => e.textContent)"
LOG_PLOTS = ("percentile_ladder", "latency_distribution")


@pytest.mark.parametrize("source", ["synthetic-seed-000-5e1f0000", "neper"])
def test_log_axes_have_plain_tick_labels(browser: Browser, tmp_path: Path, source: str) -> None:
    """No figure text is raw mathtext: matplotlib's log-axis labels would read
    `$\\mathdefault{2\\times10^{2}}$` with parse_math off (reports.svg.PlainLogFormatter)."""
    run_dir = (rendered(RUNS / source, tmp_path) if source != "neper"
               else neper_run(tmp_path, latency_samples=2000))
    if source == "neper":
        (run_dir / "report.html").write_text(html(load_run(run_dir)))
    browser.open(run_dir / "report.html")
    page = browser.page
    assert "mathdefault" not in page.content()
    assert "mathdefault" not in page.inner_text("body")
    for name in LOG_PLOTS:  # both runs have percentiles and per-transaction latencies
        ticks = page.eval_on_selector_all(f"#plot-{name} svg text", SVG_TEXT)
        assert ticks, f"{name} was not drawn"
        assert [t for t in ticks if "$" in t or "\\" in t] == [], name
        numeric = [t for t in ticks if t.replace(",", "").replace(".", "").isdigit()]
        assert numeric, f"{name}: no plain numeric tick label in {ticks}"
        page.locator(f"#plot-{name}").screenshot(
            path=str(browser.screenshot_path(f"log-ticks-{source}-{name}.png")))
    every = page.eval_on_selector_all("figure.plot svg text", SVG_TEXT)
    assert [t for t in every if "$" in t] == []
    browser.screenshot(f"log-ticks-{source}.png")
