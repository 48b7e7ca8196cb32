"""CPU cost rows (reports.ab.cpu_cost) from hand-made samples whose answers are known:
busy cores and their split by state and by CPU set, the NAPI kthreads' cores, CPU-us
per operation from a count, a rate and a bit rate, the wall time without a snapshot
window; and the trade-off lines, equal-cores notes and the frontier built on them
(reports.ab.tradeoff, reports.ab.frontier)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from napilab.harness.store.manifest import Manifest
from napilab.reports.ab import frontier, tradeoff
from napilab.reports.ab.compare import load_run, table
from napilab.reports.ab.cpu_cost import with_cpu_cost
from tests.cli import run_cli
from tests.report_runs import neper_run

COLUMNS = ["run_id", "trial", "variant", "rep", "role", "host", "source", "metric", "cpu",
           "value", "unit"]


def _manifest(workload: dict[str, Any], source: str = "neper",
              operations: dict[str, list[str]] | None = None,
              variants: dict[str, Any] | None = None) -> Manifest:
    return Manifest.from_json({
        "schema_version": 2, "run_id": "c0570000", "workload_source": source,
        "operations": {source: operations or {"transaction": ["num_transactions"]}},
        "profile": {"document": {"workload": workload, "variants": variants or {"a": {}}}}})


def _rows(per_cpu: dict[int, dict[str, float]], *, interval: float | None = 2.0,
          extra: list[tuple[str, str, int | None, float, str]] | None = None,
          role: str = "sut") -> pd.DataFrame:
    rows = []
    for cpu, states in per_cpu.items():
        rows += [("c0570000", 1, "a", 1, role, "h", "proc_stat", s, cpu, v, "ms")
                 for s, v in states.items()]
    if interval is not None:
        rows.append(("c0570000", 1, "a", 1, role, "h", "snapshot", "interval", None,
                     interval, "s"))
    rows += [("c0570000", 1, "a", 1, role, "h", source, metric, cpu, value, unit)
             for source, metric, cpu, value, unit in extra or []]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame.astype({"cpu": "Int64"}).astype({"cpu": "float64"})


def _cost(frame: pd.DataFrame, manifest: Manifest) -> dict[str, float]:
    out = with_cpu_cost(frame, manifest)
    derived = out[out["source"] == "cpu"]
    assert derived["cpu"].isna().all() and set(derived["role"]) == {"sut"}
    return dict(zip(derived["metric"], derived["value"], strict=True))


# CPU 0: the workload's (pinned), 1500 ms busy of 2 s; CPU 1: took the NIC's IRQs and
# ran the NAPI kthread, 1000 ms busy; CPU 2: 100 ms busy, nothing else.
STATES = {0: {"user": 1000.0, "system": 500.0, "idle": 500.0, "iowait": 0.0, "steal": 0.0},
          1: {"system": 200.0, "softirq": 700.0, "hardirq": 100.0, "idle": 990.0,
              "iowait": 10.0},
          2: {"user": 50.0, "nice": 50.0, "idle": 1800.0, "steal": 100.0}}
SIGNALS = [("interrupts", "irq_45", 0, 0.0, "count"), ("interrupts", "irq_45", 1, 5000.0,
                                                           "count"),
           ("interrupts", "irq_45", 2, 20.0, "count"),  # 0.4%: a stray one, not the set
           ("napi_threads", "cpu_time", 1, 600.0, "ms"),
           ("napi_threads", "cpu_time", None, 600.0, "ms"),
           ("neper", "num_transactions", None, 13000.0, "count")]
CLIENT = {"duration": 2, "client": {"role": "sut", "cpus": "0"}, "server": {"role": "peer"}}


def test_busy_cores_by_state_and_by_cpu_set() -> None:
    cost = _cost(_rows(STATES, extra=SIGNALS), _manifest(CLIENT))
    assert cost["busy_cores"] == pytest.approx((1500 + 1000 + 100) / 2000)
    assert cost["cores_user"] == pytest.approx(1050 / 2000)
    assert cost["cores_nice"] == pytest.approx(50 / 2000)
    assert cost["cores_system"] == pytest.approx(700 / 2000)
    assert cost["cores_softirq"] == pytest.approx(700 / 2000)
    assert cost["cores_hardirq"] == pytest.approx(100 / 2000)
    # iowait and steal are shown, never counted as busy
    assert cost["cores_iowait"] == pytest.approx(10 / 2000)
    assert cost["cores_steal"] == pytest.approx(100 / 2000)
    assert cost["busy_cores_workload"] == pytest.approx(0.75)
    assert cost["busy_cores_irq"] == pytest.approx(0.5)
    assert cost["busy_cores_other"] == pytest.approx(0.05)
    assert cost["napi_thread_cores"] == pytest.approx(0.3)
    assert cost["cpu_us_per_transaction"] == pytest.approx(2600 * 1000 / 13000)


def test_without_pinning_or_irq_signals_no_cpu_set_is_made_up() -> None:
    cost = _cost(_rows(STATES, extra=SIGNALS[-1:]),
                 _manifest({"duration": 2, "client": {"role": "sut"}}))
    assert cost["busy_cores"] == pytest.approx(1.3)
    assert not {"busy_cores_workload", "busy_cores_irq", "busy_cores_other",
                "napi_thread_cores"} & set(cost)


def test_wall_time_without_a_snapshot_window_is_the_mean_per_cpu_time() -> None:
    cost = _cost(_rows(STATES, interval=None), _manifest(CLIENT))
    # every CPU's states add up to 2,000 ms here
    assert cost["busy_cores"] == pytest.approx(1.3)


@pytest.mark.parametrize(("op", "metrics", "value", "unit", "count"), [
    ("MB", ["throughput"], 8e9, "bits/s", 8e9 * 2 / 8 / 1e6),
    ("MB", ["throughput"], 800.0, "Mbit/s", 800e6 * 2 / 8 / 1e6),
    ("MB", ["throughput"], 941.5, "10^6bits/s", 941.5e6 * 2 / 8 / 1e6),  # netperf's unit
    ("message", ["sent", "message_rate"], 5000.0, "msg/s", 10000.0),
    ("packet", ["transmitted"], 4000.0, "count", 4000.0),
])
def test_operations_from_counts_rates_and_bit_rates(op: str, metrics: list[str],
                                                     value: float, unit: str,
                                                     count: float) -> None:
    frame = _rows(STATES, extra=[("tool", metrics[-1], None, value, unit)])
    cost = _cost(frame, _manifest(CLIENT, "tool", {op: metrics}))
    assert cost[f"cpu_us_per_{op}"] == pytest.approx(2600 * 1000 / count)


def test_a_rate_of_the_wrong_kind_is_no_operation() -> None:
    """neper tcp_rr's throughput is transactions/s: never read as MB."""
    frame = _rows(STATES, extra=[("neper", "throughput", None, 6500.0, "trans/s")])
    cost = _cost(frame, _manifest(CLIENT, operations={"MB": ["throughput"]}))
    assert not any(m.startswith("cpu_us_per_") for m in cost)


def test_a_variant_pins_its_own_workload() -> None:
    variants = {"a": {"workload": {"client": {"cpus": "1"}}}}
    cost = _cost(_rows(STATES, extra=SIGNALS), _manifest(CLIENT, variants=variants))
    assert cost["busy_cores_workload"] == pytest.approx(0.5)
    assert "busy_cores_irq" not in cost  # CPU 1 is the workload's; CPU 0 took no IRQ


def test_runs_without_proc_stat_are_unchanged() -> None:
    frame = _rows({}, extra=SIGNALS)
    assert with_cpu_cost(frame, _manifest(CLIENT)) is frame


def test_an_old_manifest_reads_the_tools_operations() -> None:
    manifest = Manifest.from_json({"schema_version": 2, "run_id": "x",
                                   "workload_source": "neper"})
    assert manifest.operation("neper")["transaction"] == ["num_transactions"]


@pytest.fixture(scope="module")
def seed000(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return neper_run(tmp_path_factory.mktemp("runs"), reps=5, latency_samples=200)


def test_a_verdict_says_what_it_cost(seed000: Path) -> None:
    tab = table(load_run(seed000))
    cost = tradeoff.cost(tab, "threaded-busypoll")
    assert cost.startswith("at +0.4") and "cores busy (sut, 95% CI +0.4" in cost
    assert "CPU-us per transaction (sut)" in cost
    line = next(ln for ln in tab.lines if ln.metric == "busy_cores")
    shift = tradeoff.busy_shift(line, "sysctl-busypoll", "threaded-busypoll")
    assert shift is not None and shift.ci[0] <= shift.change <= shift.ci[1]
    kthread = next(ln for ln in tab.lines if ln.metric == "napi_thread_cores")
    found = kthread.comparisons["threaded-busypoll"]
    assert found.scale == "absolute" and found.change_ci[0] <= found.change <= \
        found.change_ci[1] and 0.9 < found.change < 1.0  # "+0.98 cores", not n/a


def test_unequal_cores_and_budgets_are_said(seed000: Path, tmp_path: Path) -> None:
    notes = tradeoff.notes(table(load_run(seed000)))
    assert any(n.startswith("unequal cores: threaded-busypoll used 0.4") for n in notes)
    budgets = tradeoff.budgets({"variants": {"a": {"cores": 2}, "b": {"cores": {"sut": 1}},
                                             "c": {"cores": True}}}, ["a", "b", "c"])
    assert budgets == {"a": {"": 2.0}, "b": {"sut": 1.0}}
    tab = table(load_run(seed000))
    over = tradeoff.notes(type(tab)(**{**tab.__dict__, "budgets": {
        "sysctl-busypoll": {"sut": 2.0}, "threaded-busypoll": {"sut": 1.0}}}))
    assert over[0].startswith("unequal cores: threaded-busypoll has a budget of 1 core on "
                              "sut and sysctl-busypoll of 2 cores on sut")
    assert any(n.startswith("over budget: threaded-busypoll used 2.0") for n in over)


def _point(name: str, latency: float, cores: float, spread: float = 0.01) -> frontier.Point:
    return frontier.Point(name, latency, (latency * (1 - spread), latency * (1 + spread)),
                          cores, (cores - spread, cores + spread))


def test_dominated_only_beyond_the_noise() -> None:
    points = [_point("a", 50, 1.0), _point("b", 40, 2.0), _point("c", 60, 2.0),
              _point("d", 40.1, 2.001), _point("e", 55, 1.002, spread=0.05)]
    judged = {p.variant: p.dominated_by for p in frontier._judged(points)}
    assert judged["c"] == "b"  # clearly slower at the same cores
    assert judged["a"] is None and judged["b"] is None
    assert judged["d"] is None  # a hair from b on both: the repetitions cannot tell
    assert judged["e"] == "a"  # noisy, but a is clearly faster at no more cores


def test_the_frontier_needs_three_variants_and_busy_cores(seed000: Path) -> None:
    tab = table(load_run(seed000))
    assert "needs 3" in str(frontier.frontier(tab, tab.variants[:2]))
    found = frontier.frontier(tab)
    assert isinstance(found, frontier.Frontier) and found.latency_label == "latency p99 (us)"
    assert math.isfinite(found.points[0].cores)


def test_matrix_axes_group_the_variants() -> None:
    parameters = {"g0-d0": {"gro": 0, "defer": 0}, "g0-d2": {"gro": 0, "defer": 2},
                  "g2-d0": {"gro": 20000, "defer": 0}, "x": {"gro": 0, "defer": 0}}
    assert frontier.axes(parameters, ["g0-d0", "g0-d2", "g2-d0"]) == {
        "gro": {"0": ["g0-d0", "g0-d2"], "20000": ["g2-d0"]},
        "defer": {"0": ["g0-d0", "g2-d0"], "2": ["g0-d2"]}}
    assert frontier.axes(None, ["a"]) == {}


def test_the_recorded_nine_variant_matrix_lists_its_frontier() -> None:
    """A real run: profiles/frontier-defer-gro.yaml on the SSH testbed, 3 repetitions.
    On a veth pair the 9 settings differ by hairs: 3 are dominated (every repetition of
    another used fewer cores at a latency inside their range), 6 stay on the frontier."""
    run = load_run(Path(__file__).resolve().parents[1] / "golden" / "frontier" /
                   "20261202T010604Z-c0c48373")
    tab = table(run)
    found = frontier.frontier(tab)
    assert isinstance(found, frontier.Frontier)
    lines = frontier.text(found)
    assert lines[0].startswith("frontier of latency_p99 (client) vs busy cores (6 of 9")
    assert lines[-1] == ("dominated: defer0-gro20000 (by defer0-gro200000), defer2-gro0 (by "
                         "defer0-gro200000), defer2-gro20000 (by defer0-gro200000)")
    assert frontier.axes(run.manifest.parameters, tab.variants).keys() == {"defer", "gro"}
    busy = next(ln for ln in tab.lines if ln.metric == "busy_cores")
    assert all(1.7 < v < 1.9 for c in busy.cells.values() for v in c.values)


def test_compare_draws_the_frontier_across_runs(tmp_path: Path) -> None:
    from napilab.reports.ab.cross_run import LabelledRun, compare_labelled
    from napilab.reports.formats import compare_page
    from napilab.reports.plots import plots

    old = neper_run(tmp_path / "old", reps=5, latency_samples=100,
                    variants=("sysctl-busypoll", "threaded-busypoll"))
    new = neper_run(tmp_path / "new", reps=5, latency_samples=100, seed=1, slower=1.5,
                    variants=("sysctl-busypoll", "threaded-busypoll"))
    runs = [LabelledRun("old", load_run(old)), LabelledRun("new", load_run(new))]
    tab = compare_labelled(runs)
    found = frontier.frontier(tab)
    assert isinstance(found, frontier.Frontier) and len(found.points) == 4
    # 50% slower at the same cores: the new run's variants are clearly dominated
    assert {p.variant for p in found.points if not p.on_frontier} == {
        "new:sysctl-busypoll", "new:threaded-busypoll"}
    assert isinstance(plots.frontier_of(tab), plots.Plot)
    page = compare_page.html(runs, tab, [], {})
    assert 'id="plot-frontier"' in page


def test_ipc_and_cycles_per_operation_from_perf_stat() -> None:
    extra = [("perf_stat", "cycles", None, 2.6e9, "count"),
             ("perf_stat", "instructions", None, 1.3e9, "count"),
             ("perf_stat", "hardware_events", None, 2.0, "count"), *SIGNALS[-1:]]
    cost = _cost(_rows(STATES, extra=extra), _manifest(CLIENT))
    assert cost["ipc"] == pytest.approx(0.5)
    assert cost["cycles_per_transaction"] == pytest.approx(2.6e9 / 13000)
    from napilab.reports.ab.cpu_cost import notes
    assert notes(_rows(STATES, extra=extra)) == []


def test_a_host_without_a_pmu_is_said() -> None:
    from napilab.reports.ab.cpu_cost import notes
    frame = _rows(STATES, extra=[("perf_stat", "hardware_events", None, 0.0, "count"),
                                 ("perf_stat", "context_switches", None, 500.0, "count")])
    cost = _cost(frame, _manifest(CLIENT))
    assert "ipc" not in cost and not any(m.startswith("cycles_per_") for m in cost)
    assert notes(frame) == ["perf_stat counted no hardware event on h (no PMU, as in most "
                            "VMs): cycles, instructions and IPC are not measured there; "
                            "context switches, migrations and cpu-clock are software events"]


def test_matrix_variants_keep_their_cores_budget() -> None:
    from napilab.harness.profile.profile import load_profile

    root = Path(__file__).resolve().parents[2] / "profiles"
    profile = load_profile(root / "seed-003-afxdp-busy-budget.yaml")
    cores = {v.name: v.cores for v in profile.variants}
    assert cores["1c-plain"] == {"sut": 1.0} and cores["2c-plain"] == {"sut": 2.0}
    assert cores["1c-budget-256"] == {"sut": 1.0} and cores["2c-budget-0"] == {"sut": 2.0}


def test_xdpsock_counts_packets_for_cpu_per_packet() -> None:
    frame = _rows(STATES, extra=[("command", "rx_packets", None, 26000.0, "packets"),
                                 ("command", "rx_pps", None, 13000.0, "packets/s")])
    cost = _cost(frame, _manifest(CLIENT, "command", {"packet": ["rx_packets", "rx_pps"]}))
    assert cost["cpu_us_per_packet"] == pytest.approx(2600 * 1000 / 26000)


def test_check_gates_busy_cores_by_an_absolute_threshold(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """`check --max-regression cpu.busy_cores=+0.2` gates the derived rows of two stored
    nights like any metric: in cores, beside the latency."""
    from tests.report_runs import STARTED

    variants = ("sysctl-busypoll", "threaded-busypoll")
    base = neper_run(tmp_path, run_id="aaaa0001", seed=1, reps=5, variants=variants)
    night = neper_run(tmp_path, run_id="bbbb0002", seed=2, reps=5, variants=variants,
                      started=STARTED + 86400)
    code, out, _ = run_cli(capsys, "check", str(night), "--baseline", str(base),
                           "--max-regression", "cpu.busy_cores=+0.2", "--max-regression",
                           "cpu.cpu_us_per_transaction=5%")
    assert code == 0, out
    busy = [line for line in out.splitlines() if "busy cores" in line]
    assert len(busy) == 2 and all(line.split()[0] == "within" and line.endswith("+0.2")
                                  for line in busy)
    assert sum("CPU-us/transaction" in line for line in out.splitlines()) == 2
