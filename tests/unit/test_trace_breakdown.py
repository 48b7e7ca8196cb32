"""The trace breakdown (reports.trace): per comparison the stages' p50/p99 side by side
with the change and its CI, a stage new in B with the CPU it runs on, a stage the
kernel lacks with its probe, the attribution line beside the end-to-end change, and the
text and Markdown forms within 80 columns; on a synthetic stored run in the demo's
shape (tests/trace_runs.py), read as a report reads it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from napilab.reports.ab.compare import RunData, load_run, table
from napilab.reports.ab.model import format_signed
from napilab.reports.formats import markdown, render
from napilab.reports.trace import breakdown
from napilab.reports.trace import text as trace_text
from napilab.reports.trace.breakdown import Attribution, Breakdown, Change, breakdowns
from tests.trace_runs import trace_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    return load_run(trace_run(tmp_path_factory.mktemp("trace")))


@pytest.fixture(scope="module")
def found(run: RunData) -> Breakdown:
    (only,) = breakdowns(run, table(run))
    return only


def _stage(found: Breakdown, name: str):  # type: ignore[no-untyped-def]
    return next(s for s in found.stages if s.stage == name)


def test_side_by_side_values_and_changes(found: Breakdown) -> None:
    assert (found.baseline, found.variant) == ("rps-off", "rps-on")
    assert found.traced == ("rps-off+traced", "rps-on+traced") and found.reps == (4, 4)
    assert found.hosts == {"receiver": "b"}
    irq = _stage(found, "irq_to_softirq")
    # 30 us vs 6 us medians, read at a bucket's middle (within 3.2%)
    assert irq.a_p50 == pytest.approx(30, rel=0.05) and irq.b_p50 == pytest.approx(6, rel=0.05)
    assert irq.a_p99 > irq.a_p50 and irq.status == "both"
    assert irq.p50 is not None and irq.p50.moved
    assert irq.p50.low <= irq.p50.estimate <= irq.p50.high < 0
    net = _stage(found, "net_rx_action")
    assert net.p50 is not None and not net.p50.moved  # the same 5 us in both
    work = _stage(found, "napi_poll_work")
    assert work.unit == "packets" and work.a_p50 == 1


def test_a_stage_new_in_b_and_its_cpu(found: Breakdown) -> None:
    csd = _stage(found, "csd_latency")
    assert csd.status == "new in B" and csd.a_p50 is None and csd.b_p50 is not None
    assert csd.p99 is None  # no change without values in A
    assert [(c.cpu, c.a, c.b) for c in csd.cpus] == [(1, 0.0, 400.0)]
    assert [(c.cpu, c.a, c.b) for c in _stage(found, "socket_wakeup").cpus] == [
        (1, 0.0, 200.0)]
    assert _stage(found, "irq_to_softirq").cpus == ()


def test_an_absent_stage_is_listed_with_its_probe(found: Breakdown) -> None:
    assert "napi_poll" not in {s.stage for s in found.stages}
    assert found.absent == {("receiver", "napi_poll"): {
        "rps-off+traced": "kprobe:__napi_poll", "rps-on+traced": "kprobe:__napi_poll"}}
    assert trace_text.absent_lines(found, "receiver") == [
        "napi_poll (kprobe:__napi_poll) on both"]


def test_attribution_names_the_stages_that_moved(found: Breakdown) -> None:
    att = found.attribution["receiver"]
    assert att.metric == "ping.rtt_avg" and att.quantile == "p50"
    assert [s for s, _ in att.moved] == ["irq_to_softirq", "socket_wakeup"]
    assert att.change is not None and att.change.estimate == pytest.approx(-31, abs=1.5)
    assert att.total == pytest.approx(-30, abs=1.5) and att.relation == "matches"
    line = trace_text.attribution_text(att)
    assert line.startswith(f"ping.rtt_avg {format_signed(att.change.estimate, 'us')} ")
    assert "irq_to_softirq -24" in line and "no decomposition" in line


def test_a_sum_larger_than_the_end_to_end_change_is_said() -> None:
    e2e = Change(-10.0, -12.0, -8.0, "welch-t")
    att = Attribution("ping.rtt_avg", "p50", e2e,
                      (("irq_to_softirq", Change(-24.0, -27.0, -21.0, "welch-t")),
                       ("socket_wakeup", Change(-6.0, -7.0, -5.0, "welch-t"))), -30.0)
    assert att.relation == "exceeds"
    line = trace_text.attribution_text(att)
    assert "their sum -30 us exceeds the end-to-end -10 us" in line
    short = Attribution("ping.rtt_avg", "p50", Change(-60.0, -70.0, -50.0, "welch-t"),
                        att.moved, -30.0)
    assert short.relation == "falls short"
    assert "of -60 us: the rest is outside" in trace_text.attribution_text(short)
    none = Attribution("ping.rtt_avg", "p99", e2e, (), 0.0)
    assert "no stage's p99 moved" in trace_text.attribution_text(none)


def test_printed_estimates_stay_inside_their_intervals(found: Breakdown) -> None:
    for s in found.stages:
        for c in (s.p50, s.p99):
            if c is None or math.isinf(c.low):
                continue
            shown = [float(t.replace(",", "")) for t in
                     (trace_text.change_text(c), *trace_text.ci_text(c).split(".."))]
            assert shown[1] <= shown[0] <= shown[2], (s.stage, shown)


def test_text_and_markdown_fit_a_mail(run: RunData, found: Breakdown) -> None:
    text = trace_text.text([found])
    md = "\n".join(trace_text.markdown([found], markdown.md_table, markdown.escape))
    for form in (text, md):
        assert max(len(line) for line in form.splitlines()) <= 80
    assert "csd_latency" in text and "new in B" in text and "moved" in text
    tab = table(run)
    report = render.render(run, "text", tab)
    assert "Stages of the receive path: rps-on vs rps-off" in report
    assert "Stages of the receive path" in render.render(run, "md", tab)
    doc = json.loads(render.render(run, "json", tab))
    (entry,) = doc["trace"]
    assert entry["absent"] == [{"role": "receiver", "stage": "napi_poll", "probes": {
        "rps-off+traced": "kprobe:__napi_poll", "rps-on+traced": "kprobe:__napi_poll"}}]
    assert {s["stage"]: s["status"] for s in entry["stages"]}["csd_latency"] == "new in B"


def test_every_trial_traced_and_no_trace(tmp_path: Path) -> None:
    run = load_run(trace_run(tmp_path / "all", traced="all", reps=3))
    (only,) = breakdowns(run, table(run))
    assert only.traced == ("rps-off", "rps-on")
    assert "every trial traced" in trace_text.traced_text(only)
    plain = load_run(trace_run(tmp_path / "plain", reps=2))
    plain = RunData(plain.directory, plain.manifest,
                    plain.samples[plain.samples["source"] != "trace"])
    assert breakdowns(plain, table(plain)) == []


def test_the_page_has_the_section_and_its_figures(run: RunData) -> None:
    page = render.render(run, "html", table(run))
    section = page[page.index('<section id="trace">'):]
    section = section[:section.index("</section>")]
    assert 'class="trace-attribution"' in section and "kprobe:__napi_poll" in section
    assert section.count("<svg") == 2  # the distributions and the stacked medians
    assert 'id="plot-stages-0"' in section and 'id="plot-stages-stacked"' in section


def test_docs_say_what_each_stage_measures_as_its_file_does() -> None:
    from napilab.runners.collectors.trace import program

    doc = (Path(__file__).resolve().parents[2] / "docs" / "trace.md").read_text()
    for stage in program.stages().values():
        assert f"| `{stage.name}` |" in doc and stage.says in doc, stage.name


def test_a_queue_whose_irq_path_went_is_named_by_its_irq() -> None:
    """Per key (an IRQ, a NAPI): events in one arm only are listed, named as the tracer
    named them; a key with events in both arms, or under 10 in the one, is not."""
    from napilab.runners.collectors.trace.histogram import Histogram
    from napilab.runners.collectors.trace.trace import Trace

    def traced(irq_events: dict[int, int]) -> Trace:
        hists = {("irq_to_softirq", 0, irq): Histogram({4096: n})
                 for irq, n in irq_events.items()}
        names = {("irq_to_softirq", 52): "virtio10-input.3",
                 ("irq_to_softirq", 49): "virtio10-output.1"}
        return Trace(("irq_to_softirq",), {}, hists, names)

    found = {"irq+traced": {(2, "b"): traced({52: 2146, 49: 1993, 44: 3}),
                            (4, "b"): traced({52: 1000, 49: 12})},
             "bp+traced": {(6, "b"): traced({49: 221}), (8, "b"): traced({49: 30})}}
    keys = breakdown._key_counts(found, ("irq+traced", "bp+traced"), {"b": "receiver"})
    assert keys == {("receiver", "irq_to_softirq"): (
        breakdown.KeyCounts("IRQ 52 virtio10-input.3", 1573.0, 0.0),)}
