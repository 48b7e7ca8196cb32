"""The trace collector's traced twins (`collect.trace.traced`): the grammar, the twins
in the profile's order (interleaved, randomized, blocked, a load ladder), their absence
from every verdict of a stored run (the A/B table's family, `check`'s exit code, the
summary's trend), and the tracer's overhead table (reports.trace.overhead)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napilab.harness.engine.plan_render import plan_text
from napilab.harness.errors import ExitCode, InputError
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.profile.design import traced_lines, traced_warnings
from napilab.harness.profile.plan import bind
from napilab.harness.profile.profile import load_profile
from napilab.harness.store.summary import build_summary
from napilab.reports.ab.compare import load_run, table
from napilab.reports.formats.markdown import escape, md_table
from napilab.reports.trace import overhead
from tests.cli import run_cli
from tests.synthetic_runs import lognormal, store_run

ROOT = Path(__file__).resolve().parents[2]
PROFILE = """\
name: twins
hosts:
  sender: {host: sender}
  receiver: {host: receiver}
workload: {tool: ping, duration: 1, client: {role: sender}, server: {role: receiver}}
collect:
  proc_stat: {roles: [receiver]}
  trace: {roles: [receiver]TRACED}
variants:
  off: {}
  on: {workload: {client: {args: {size: 16}}}}
repeat: 3
ORDER
"""


def _profile(tmp_path: Path, traced: str = "", order: str = "", text: str = PROFILE) -> Path:
    path = tmp_path / "twins.yaml"
    path.write_text(text.replace("TRACED", traced).replace("ORDER", order))
    return path


def test_a_wrong_traced_value_is_bad_input_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_profile(_profile(tmp_path, ", traced: twin"))
    text = str(info.value)
    assert "twins.yaml:8:" in text and "collect.trace.traced" in text
    assert "expected one of ['twins', 'all'], got 'twin'; did you mean 'twins'?" in text
    assert info.value.exit_code == ExitCode.BAD_INPUT


def test_each_variant_has_its_traced_twin_right_after_it(tmp_path: Path) -> None:
    profile = load_profile(_profile(tmp_path))
    assert [v.name for v in profile.variants] == ["off", "off+traced", "on", "on+traced"]
    assert profile.twins == {"off+traced": "off", "on+traced": "on"}
    assert profile.comparisons == (("off", "on"),)
    off, twin = profile.variant("off"), profile.variant("off+traced")
    assert [c.name for c in off.collect] == ["proc_stat"]
    assert [c.name for c in twin.collect] == ["proc_stat", "trace"]
    assert (twin.settings, twin.workload, twin.kernels) == (off.settings, off.workload,
                                                            off.kernels)
    order = [t.variant for t in profile.trials()]
    assert order[:4] == ["off", "off+traced", "on", "on+traced"] and len(order) == 12


def test_randomized_and_blocked_orders_keep_every_twin_in_every_repetition(
        tmp_path: Path) -> None:
    shuffled = load_profile(_profile(tmp_path, order="order: randomized\nseed: 7"))
    trials = shuffled.trials()
    for rep in (1, 2, 3):
        assert sorted(t.variant for t in trials if t.rep == rep) == [
            "off", "off+traced", "on", "on+traced"]
    blocked = load_profile(_profile(tmp_path, order="order: blocked"))
    assert [t.variant for t in blocked.trials()] == [
        v for v in ("off", "off+traced", "on", "on+traced") for _ in range(3)]


def test_a_load_ladder_twins_each_rung_and_compares_within_the_rung(
        tmp_path: Path) -> None:
    text = PROFILE.replace("workload: {tool: ping, duration: 1, client: {role: sender}, "
                           "server: {role: receiver}}",
                           "workload: {tool: sockperf.under-load, duration: 1, load: [10k, "
                           "20k], client: {role: sender}, server: {role: receiver}}"
                           ).replace("{workload: {client: {args: {size: 16}}}}",
                                     "{setup: {receiver: {netdev: {data0: "
                                     "{napi_defer_hard_irqs: 2}}}}}")
    profile = load_profile(_profile(tmp_path, text=text))
    assert [v.name for v in profile.variants] == [
        "off+10k", "off+10k+traced", "on+10k", "on+10k+traced",
        "off+20k", "off+20k+traced", "on+20k", "on+20k+traced"]
    assert profile.comparisons == (("off+10k", "on+10k"), ("off+20k", "on+20k"))
    twin = profile.variant("on+20k+traced")
    assert twin.rung == profile.variant("on+20k").rung and twin.traced_of == "on+20k"


def test_traced_all_has_no_twins_and_says_what_it_costs(tmp_path: Path) -> None:
    profile = load_profile(_profile(tmp_path, ", traced: all"))
    assert [v.name for v in profile.variants] == ["off", "on"] and not profile.twins
    assert all("trace" in {c.name for c in v.collect} for v in profile.variants)
    assert traced_lines(profile) == []
    (warning,) = traced_warnings(profile)
    assert "include the tracer's overhead" in warning and "cannot measure" in warning
    code, out, err = run_cli(None, "validate", str(_profile(tmp_path, ", traced: all")))
    assert code == 0 and "2 variant(s), 6 trial(s)" in out
    assert "napilab: warning: collect.trace.traced: all" in err


def test_validate_and_plan_say_twice_the_trials(tmp_path: Path) -> None:
    code, out, err = run_cli(None, "validate", str(_profile(tmp_path)))
    assert code == 0 and "4 variant(s), 12 trial(s)" in out
    assert "napilab: note: traced twins (collect.trace.traced: twins): off+traced, " \
           "on+traced" in err and "twice the trials" in err
    plan = bind(load_profile(_profile(tmp_path)),
                load_inventory(ROOT / "profiles" / "inventory.example.yaml"))
    text = plan_text(plan, summary_only=True)
    assert "twice the trials" in text.splitlines()[1]
    assert "off+traced (off with the trace collector, not compared)" in text


SIGMA = 0.01
N = 6


def _twin_run(results: Path, *, twin_factor: float = 2.0, on_factor: float = 1.0,
              seed: int = 0) -> Path:
    """off, off+traced, on, on+traced, stored as the engine does, the twins' rtt
    `twin_factor` times their variant's (the tracer's cost)."""
    rtt = {"off": lognormal(seed, N, 100, SIGMA), "on": lognormal(seed + 1, N, 100 * on_factor,
                                                                  SIGMA)}
    received = {v: lognormal(seed + 2 + i, N, 1e6, SIGMA) for i, v in enumerate(rtt)}
    values = {"ping.rtt_avg": {}, "ping.received": {}}
    for variant in ("off", "on"):
        values["ping.rtt_avg"] |= {variant: rtt[variant], variant + "+traced":
                                   [v * twin_factor for v in rtt[variant]]}
        values["ping.received"] |= {variant: received[variant],
                                    variant + "+traced": received[variant]}
    directory = store_run(results, values, profile="twins", units={"ping.received": "count"},
                          policies={"rtt_avg": {}, "received": {}}, started=1000.0 + seed)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest |= {"twins": {"off+traced": "off", "on+traced": "on"},
                 "comparisons": [["off", "on"]]}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


def test_twins_take_no_part_in_verdicts_but_their_trials_are_stored(tmp_path: Path) -> None:
    run = load_run(_twin_run(tmp_path / "results"))
    assert run.variants == ["off", "on"] and run.ran == ["off", "off+traced", "on",
                                                         "on+traced"]
    assert run.twins == {"off+traced": "off", "on+traced": "on"}
    tab = table(run)
    assert tab.variants == ["off", "on"] and tab.pairs == (("off", "on"),)
    assert tab.family == 2  # 2 primary lines x 1 pair: no twin in the Holm family
    assert set(run.samples["variant"]) == set(run.ran)
    summary = build_summary(run.directory)
    assert summary.variants == ["off", "on"]
    assert all(set(m.variants) == {"off", "on"} for m in summary.metrics)


def test_check_judges_no_twin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The candidate's twins are twice as slow as the reference's: no regression, since
    only the untraced variants are gated."""
    results = tmp_path / "results"
    _twin_run(results, twin_factor=1.0)
    candidate = _twin_run(tmp_path / "new", twin_factor=2.0, seed=10)
    code, out, _ = run_cli(capsys, "check", str(candidate), "--baseline", str(results))
    assert code == 0 and out.startswith("napilab check: pass"), out
    assert "+traced" not in out


def test_the_overhead_table_of_each_variant_against_its_twin(tmp_path: Path) -> None:
    run = load_run(_twin_run(tmp_path / "results", twin_factor=1.10))
    tab = table(run)
    found = overhead.overhead(run, tab)
    assert found is not None and [(p.variant, p.twin) for p in found.pairs] == [
        ("off", "off+traced"), ("on", "on+traced")]
    rtt = next(r for r in found.pairs[0].rows if r.metric == "rtt_avg")
    assert rtt.change is not None and rtt.ci is not None
    assert rtt.change == pytest.approx(0.10, abs=0.005) and rtt.ci[0] > 0.05
    assert rtt.ci[0] <= rtt.change <= rtt.ci[1] and len(rtt.untraced) == N
    received = next(r for r in found.pairs[0].rows if r.metric == "received")
    assert received.change == pytest.approx(0.0, abs=1e-9)
    block = overhead.text(found)
    assert all(len(line) <= 80 for line in block.splitlines())
    assert "off (twin off+traced):" in block and "+10.0%" in block
    assert "| off | rtt\\_avg (sender, us) |" in "\n".join(
        overhead.markdown(found, md_table, escape))
    doc = overhead.json_doc(found)
    assert doc["measured"] and doc["pairs"][0]["rows"][0]["change"] == pytest.approx(
        rtt.change)


def test_traced_all_says_the_overhead_was_not_measured(tmp_path: Path) -> None:
    directory = store_run(tmp_path, {"ping.rtt_avg": {"off": [1.0, 1.1], "on": [1.2, 1.3]}})
    manifest = json.loads((directory / "manifest.json").read_text())
    (directory / "manifest.json").write_text(json.dumps(manifest | {"traced_all": ["off",
                                                                                   "on"]}))
    run = load_run(directory)
    found = overhead.overhead(run, table(run))
    assert found is not None and not found.pairs and found.unmeasured == ("off", "on")
    assert "overhead was not measured" in overhead.text(found)
    assert overhead.overhead(load_run(store_run(tmp_path / "plain", {
        "ping.rtt_avg": {"off": [1.0, 1.1]}})), table(run)) is None


def test_every_report_format_shows_the_overhead(tmp_path: Path) -> None:
    from napilab.reports.formats import render

    run = load_run(_twin_run(tmp_path / "results", twin_factor=1.10))
    tab = table(run)
    text = render.render(run, "text", tab)
    assert "off (twin off+traced):" in text[text.index(overhead.TITLE):]
    assert "#### Tracer overhead" in render.render(run, "md", tab)
    assert json.loads(render.render(run, "json", tab))["trace_overhead"]["measured"]
    assert 'id="trace-overhead-table"' in render.render(run, "html", tab)
