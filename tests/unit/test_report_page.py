"""What report.html shows a reader (issue 15): RPS/XPS masks as the CPU lists the profile
wrote (with the mask), a trial-order plot for each line drift was flagged on, the
resolved profile folded away, units in one style (`name (unit)`, never `[unit]`), and a
note instead of a panel that would be empty or all zero."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from napilab.reports.ab.compare import load_run, table
from napilab.reports.ab.model import with_unit
from napilab.reports.formats import run_facts
from napilab.reports.formats.render import html, render
from napilab.reports.plots import plots
from napilab.reports.plots.trial_order import drifting_lines
from tests.synthetic_runs import lognormal, store_run

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "tests" / "golden" / "reports" / "runs"
DEMO = RUNS / "demo-20261130T163215Z-7a9ae54f"
SYNTHETIC = RUNS / "synthetic-seed-000-5e1f0000"
SVG_TEXT = "{http://www.w3.org/2000/svg}text"


def svg_texts(svg: str) -> list[str]:
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(SVG_TEXT)]


def drift_run(tmp_path: Path) -> Path:
    """rtt_avg of `on` climbs 2% a trial over 8 trials (warm-up never ended); `off` is
    flat; `received` stays 0 in every trial of both."""
    climbing = [100.0 * (1 + 0.02 * i) for i in range(8)]
    values = {"ping.rtt_avg": {"off": lognormal(1, 8, 100.0, 0.01), "on": climbing},
              "ping.rtt_max": {"off": lognormal(2, 8, 300.0), "on": lognormal(3, 8, 310.0)},
              "ping.received": {"off": [0.0] * 8, "on": [0.0] * 8}}
    return store_run(tmp_path, values, units={"ping.received": "count"},
                     policies={"ping.rtt_avg": {}})


def test_rps_masks_read_as_the_profile_s_cpu_lists() -> None:
    """demo.yaml asks rps-remote for CPU "1"; the kernel's rps_cpus shows mask "2"."""
    run = load_run(DEMO)
    rows = {(s.variant, s.kind): s for s in run_facts.settings_rows(run.manifest)}
    remote = rows[("rps-remote", "rps")]
    assert (remote.requested, remote.effective) == ("2", "2")  # the data stays raw
    assert remote.shown(remote.requested) == "1 (mask 2)"
    assert remote.shown(remote.original) == "none (mask 0)"
    page = html(run)
    assert "<td><code>1 (mask 2)</code></td><td><code>1 (mask 2)</code></td>" in page
    assert "| rps-remote | b | rps data0/rx-0 | none (mask 0) | 1 (mask 2) | 1 (mask 2) | ok |" \
        in render(run, "md")
    assert run_facts.cpu_mask_text("/sys/class/net/e/queues/tx-0/xps_cpus",
                                   "00000000,00000003") == "0-1 (mask 00000000,00000003)"
    assert run_facts.cpu_mask_text("/proc/irq/45/smp_affinity_list", "2") == "2"
    assert run_facts.cpu_mask_text("/sys/class/net/e/queues/rx-0/rps_cpus", "zz") == "zz"


def test_a_drifting_line_gets_a_trial_order_panel(tmp_path: Path) -> None:
    run = load_run(drift_run(tmp_path))
    tab = table(run)
    assert [ln.metric for ln in drifting_lines(tab)] == ["rtt_avg"]
    found = plots.render("trial_order", run, tab)
    assert isinstance(found, plots.Plot), found
    texts = svg_texts(found.svg)
    assert "rtt_avg (sender, us)" in texts
    assert "trial, in execution order" in texts
    legend = next(t for t in texts if t.startswith("on: drift"))
    assert "Mann-Kendall p<0.001" in legend and "per trial" in legend
    assert "bold: the variant(s) that drifted" in found.note
    page = html(run)
    assert 'id="plot-trial_order"' in page and ">drift</span>" in page


def test_no_drift_no_trial_order_panel_but_a_note() -> None:
    run = load_run(SYNTHETIC)
    found = plots.render("trial_order", run, table(run))
    assert isinstance(found, plots.Omitted) and "no line drifted" in found.reason


def test_all_zero_lines_are_named_not_drawn(tmp_path: Path) -> None:
    run = load_run(drift_run(tmp_path))
    found = plots.render("per_repetition", run, table(run))
    assert isinstance(found, plots.Plot)
    titles = svg_texts(found.svg)
    assert not any(t.startswith("received") for t in titles)
    assert "0 in every repetition of every variant: received (sender)" in found.note
    demo = plots.render("per_repetition", load_run(DEMO), table(load_run(DEMO)))
    assert isinstance(demo, plots.Plot) and "Load hardirq (ms)" not in svg_texts(demo.svg)
    assert "Load hardirq (ms)" in demo.note
    cpu = plots.render("per_cpu_counters", load_run(DEMO), table(load_run(DEMO)))
    assert isinstance(cpu, plots.Plot) and "hardirq time (ms)" not in svg_texts(cpu.svg)
    assert "not drawn: softnet_stat dropped, hardirq time (ms)" in cpu.note


def test_one_unit_style_in_every_figure(tmp_path: Path) -> None:
    assert with_unit("latency p99 (us)", "us") == "latency p99 (us)"
    assert with_unit("NET_RX softirqs", "count") == "NET_RX softirqs"
    assert with_unit("rtt_avg (sender)", "us") == "rtt_avg (sender, us)"
    assert with_unit("napi_busy_loop()", "calls") == "napi_busy_loop() (calls)"
    for run_dir in (DEMO, SYNTHETIC, drift_run(tmp_path)):
        run = load_run(run_dir)
        for found in plots.render_all(run, table(run)):
            if isinstance(found, plots.Plot):
                for text in svg_texts(found.svg):
                    assert not re.search(r"\[[^\]]*\]", text), (found.name, text)
                    assert "(count)" not in text and ") (" not in text, (found.name, text)


def test_resolved_profile_is_folded_yaml() -> None:
    page = html(load_run(DEMO))
    section = page[page.index('<section id="profile">'):]
    assert '<details id="profile-details"><summary>' in section
    assert "<details id=\"profile-details\" open" not in section
    assert "91 lines of YAML" in section
    assert "\nvariants:\n  rps-off:\n" in section and "{" not in section.split("<pre")[1][:200]
