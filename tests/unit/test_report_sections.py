"""Every registered report section and plot, smoke-tested on the recorded runs
(tests/golden/reports/runs/: the real demo run and the synthetic seed-000 run) and on
runs that lack what a plot needs: a plot without data is omitted with a note, never an
empty or broken figure; a failed trial, a knob the kernel did not take and a kprobe
function the kernel cannot probe are each shown where a reader looks for them."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from napilab.reports.ab.compare import load_run, table
from napilab.reports.formats import sections
from napilab.reports.formats.render import environment, html
from napilab.reports.plots import plots
from tests.report_runs import neper_run
from tests.synthetic_runs import lognormal, store_run

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "golden" / "reports" / "runs"
DEMO = RUNS / "demo-20261130T163215Z-7a9ae54f"
SYNTHETIC = RUNS / "synthetic-seed-000-5e1f0000"
# What each recorded run can show; the rest must be omitted with a reason.
DRAWN = {DEMO: {"per_repetition", "throughput_latency", "per_cpu_counters",
                "latency_cpu_cost"},
         SYNTHETIC: set(plots.PLOTS) - {"trial_order"}}  # no line drifts in either


@pytest.mark.parametrize("name", list(sections.SECTIONS))
@pytest.mark.parametrize("run_dir", [DEMO, SYNTHETIC], ids=["demo", "synthetic"])
def test_every_section_renders_on_recorded_runs(run_dir: Path, name: str) -> None:
    run = load_run(run_dir)
    ctx = sections.context(run, table(run))
    data = sections.SECTIONS[name][1](ctx)
    if data is None:  # shown only for runs that have it: a load ladder's own tests
        assert name in sections.OPTIONAL
        return
    out = environment().get_template(f"section_{name}.html.j2").render(data=data)
    assert len(out.strip()) > 20


@pytest.mark.parametrize("name", list(plots.PLOTS))
@pytest.mark.parametrize("run_dir", [DEMO, SYNTHETIC], ids=["demo", "synthetic"])
def test_every_plot_draws_or_says_why_not(run_dir: Path, name: str) -> None:
    run = load_run(run_dir)
    found = plots.render(name, run, table(run))
    if name in DRAWN[run_dir]:
        assert isinstance(found, plots.Plot), found
        root = ET.fromstring(found.svg)
        assert float(root.get("width", "0").removesuffix("pt")) > 50
        assert float(root.get("height", "0").removesuffix("pt")) > 50
        assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 5
        ids = re.findall(r'\bid="([^"]+)"', found.svg)
        assert ids and all(i.startswith(f"plot-{name}-") for i in ids)
    else:
        assert isinstance(found, plots.Omitted) and len(found.reason) > 20


@pytest.fixture(scope="module")
def synthetic_page() -> str:
    return html(load_run(SYNTHETIC))


def test_page_has_unique_ids_and_every_section_in_order(synthetic_page: str) -> None:
    page = synthetic_page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    positions = [page.index(f'<section id="{name}">') for name in sections.SECTIONS
                 if name not in sections.OPTIONAL or f'<section id="{name}">' in page]
    assert positions == sorted(positions)
    assert page.index('id="verdicts"') < page.index('id="ab-table"')
    assert "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', "")
    for name in DRAWN[SYNTHETIC]:
        assert f'id="plot-{name}"' in page


def test_a_run_without_samples_renders_every_plot_as_a_note(tmp_path: Path) -> None:
    run_dir = neper_run(tmp_path, variants=("a", "b"), reps=2,
                        failed={1: "e1", 2: "e2", 3: "e3", 4: "e4"})
    run = load_run(run_dir)
    rendered = plots.render_all(run, table(run))
    assert all(isinstance(p, plots.Omitted) for p in rendered)
    page = html(run)
    assert "<figure" not in page and page.count('class="omitted"') == 1
    assert "failed run" not in page  # status is "partial" as the engine writes it
    assert "0 of 4 trials completed" in page and "4 trial(s) failed" in page


def test_failed_trials_show_their_error_and_stderr_tail(tmp_path: Path) -> None:
    lines = "\n".join(f"connect: Connection refused ({i})" for i in range(40))
    run_dir = neper_run(tmp_path, reps=3, failed={2: "workload failed: tcp_rr exit 1"},
                        stderr=lines)
    page = html(load_run(run_dir))
    banner = page[page.index('id="status-banner"'):]
    assert "8 of 9 trials completed; 1 trial(s) failed" in banner[:300]
    failures = page[page.index('id="failures"'):]
    assert "workload failed: tcp_rr exit 1" in failures
    assert "(39)" in failures and "(27)" not in failures  # the last 12 lines only
    assert 'href="raw/002/sut/client.err"' in failures


def test_settings_mismatch_and_absent_kprobes_are_flagged(synthetic_page: str) -> None:
    page = synthetic_page
    settings = page[page.index('<section id="settings">'):page.index('<section id="hosts">')]
    assert 'id="settings-flagged"' in settings
    row = next(r for r in settings.split("<tr") if "mismatch" in r and "irq_affinity" in r)
    assert "<code>2 / 0-3</code>" in row and 'class="mismatch"' in row
    assert settings.count('class="absent"') >= 3
    table_html = page[page.index('id="ab-table"'):page.index('<section id="plots">')]
    assert table_html.count('<td class="num absent">absent</td>') == 3
    hosts = page[page.index('<section id="hosts">'):]
    assert "irqbalance runs on sut while the run sets IRQ affinity" in hosts


def test_hosts_changed_during_the_run_is_a_confounder(tmp_path: Path) -> None:
    run_dir = store_run(tmp_path, {"ping.rtt_avg": {"off": lognormal(1, 3, 100),
                                                    "on": lognormal(2, 3, 110)}})
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["hosts_changed"] = {"b": ["boot_id", "kernel_release"]}
    manifest_path.write_text(json.dumps(manifest))
    page = html(load_run(run_dir))
    assert "host b changed during the run (boot_id, kernel_release" in page
    assert '<tr class="mismatch"><td>b<br><span class="bad">changed: boot_id' in page


def test_per_repetition_caps_its_panels_and_says_so(tmp_path: Path) -> None:
    values = {f"ping.m{i:02d}": {"off": lognormal(i, 4, 100), "on": lognormal(i + 50, 4, 100)}
              for i in range(20)}
    run = load_run(store_run(tmp_path, values))
    found = plots.render("per_repetition", run, table(run))
    assert isinstance(found, plots.Plot)
    assert found.note.startswith("8 more line(s) not drawn")
    assert found.svg.count('id="plot-per_repetition-axes_') == plots.MAX_PANELS


def test_many_variants_stay_one_figure_each(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    variants = [f"v{i:02d}" for i in range(20)]
    latencies = {v: [rng.lognormal(3, 0.3, 500) for _ in range(3)] for v in variants}
    run = load_run(store_run(tmp_path, {"sockperf.latency_p99": {
        v: lognormal(i, 3, 50 + i) for i, v in enumerate(variants)}}, latencies=latencies))
    tab = table(run)
    ladder = plots.render("percentile_ladder", run, tab)
    dist = plots.render("latency_distribution", run, tab)
    assert isinstance(ladder, plots.Plot) and "8 more variant(s) not drawn" in ladder.note
    assert isinstance(dist, plots.Plot) and "8 more variant(s) not drawn" in dist.note
