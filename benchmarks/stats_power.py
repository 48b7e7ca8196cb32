"""Print the measured operating characteristics of napilab's statistics, with targets.

    .venv/bin/python benchmarks/stats_power.py [--sims 2000] [--quick]

Everything is simulated with fixed seeds, through the same functions the reports call
(harness.stats.compare.compare_metrics for a table's primary family,
harness.stats.gate.gate_metrics for `napilab check`, harness.stats.changes for history).
A *table* is one compared variant with 5 primary metrics (independent noise), Holm over
the 5. Noise kinds (per repetition, around a median of 100):
  sigma S   log-normal with log-scale SD S;
  integer   latencies of ~20 us rounded to whole microseconds, sigma 0.05: heavy ties;
  heavy     sigma 0.05, and 15% of repetitions slowed by a factor 1 + Exp(mean 0.5).
Figures are printed, not asserted; each table says its target and whether it was met.
The nightly gate's tables (pool, regression nights, drift, lock, consistency) follow,
from benchmarks/stats_nightly.py (sims / 4 per cell).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import stats_nightly
from scipy import special

from napilab.harness.stats.changes import change_points
from napilab.harness.stats.compare import MetricSamples, compare_metrics
from napilab.harness.stats.gate import GateSamples, GateStatus, gate_metrics
from napilab.harness.stats.noise import drift
from napilab.harness.stats.pool import pooled_percentiles
from napilab.harness.stats.stats import Adjust, Verdict, adjust_p, median_ci
from napilab.harness.stats.two_sample import RANK_TEST_MIN_N as RANK_SWITCH

Array = np.ndarray
NOISES = ("sigma 0.02", "sigma 0.05", "sigma 0.1", "sigma 0.2", "integer", "heavy")
PRIMARY = 5


def draw(rng: np.random.Generator, noise: str, n: int, shift: float = 0.0) -> Array:
    level = 1 + shift
    if noise.startswith("sigma"):
        return rng.lognormal(math.log(100 * level), float(noise.split()[1]), n)
    if noise == "integer":
        return np.round(rng.lognormal(math.log(20 * level), 0.05, n))
    values = rng.lognormal(math.log(100 * level), 0.05, n)
    slow = rng.random(n) < 0.15
    values[slow] *= 1 + rng.exponential(0.5, int(slow.sum()))
    return values


def table(rng: np.random.Generator, noise: str, n: int, shift: float, shifted: int,
          family: int = PRIMARY, seed: int = 0) -> list[Verdict]:
    """Verdicts of one table: `shifted` of the `family` primary metrics moved by `shift`."""
    metrics = {str(i): MetricSamples(draw(rng, noise, n),
                                     draw(rng, noise, n, shift if i < shifted else 0.0),
                                     "lower") for i in range(family)}
    found = compare_metrics(metrics, seed=seed)
    return [found[str(i)].verdict for i in range(family)]


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def aa_cell(noise: str, n: int, sims: int) -> float:
    rng = np.random.default_rng(1000 * n + NOISES.index(noise))
    return sum(any(v in (Verdict.BETTER, Verdict.WORSE) for v in table(rng, noise, n, 0.0, 0,
                                                                        seed=i))
               for i in range(sims)) / sims


def aa_table(sims: int) -> None:
    print(f"\nA/A: tables with any better/worse ({sims} tables of {PRIMARY} primary metrics "
          f"per cell, Monte Carlo SE ~{math.sqrt(0.05 * 0.95 / sims):.1%}); target <= 5.0%")
    print(f"  {'noise':<12}" + "".join(f"{f'n={n}':>9}" for n in (3, 5, 10)))
    cells = [(noise, n, sims) for noise in NOISES for n in (3, 5, 10)]
    found = dict(zip(cells, parallel(aa_cell, cells), strict=True))
    for noise in NOISES:
        print(f"  {noise:<12}" + "".join(f"{found[(noise, n, sims)]:>9.1%}" for n in (3, 5, 10)))
    worst = max(found.values())
    print(f"  worst {worst:.1%}: {verdict(worst <= 0.05)}")


def parallel(fn: Callable[..., float], cells: list[tuple[object, ...]]) -> list[float]:
    """Cells on both CPUs; each cell has its own fixed seed, so the figures do not depend
    on the number of processes."""
    with ProcessPoolExecutor(max_workers=2) as pool:
        return list(pool.map(fn, *zip(*cells, strict=True)))


def rate(which: int, *args: object) -> float:
    return rates(*args)[which]  # type: ignore[arg-type]


def rates(sims: int, seed: int, noise: str, n: int, shift: float, shifted: int,
          family: int) -> tuple[float, float, float]:
    """(tables with >= 1 right verdict and no wrong one, right verdicts per shifted
    metric, wrong-direction verdicts per shifted metric)."""
    rng = np.random.default_rng(seed)
    right_tables = right = wrong = 0
    want, bad = (Verdict.WORSE, Verdict.BETTER) if shift > 0 else (Verdict.BETTER, Verdict.WORSE)
    for i in range(sims):
        verdicts = table(rng, noise, n, shift, shifted, family, seed=i)
        moved = verdicts[:shifted]
        right += moved.count(want)
        wrong += moved.count(bad)
        right_tables += want in moved and bad not in verdicts
    return right_tables / sims, right / (sims * shifted), wrong / (sims * shifted)


def power_table(sims: int) -> None:
    print(f"\npower: +10% shift, sigma 0.05, {PRIMARY} primary metrics, Holm ({sims} tables "
          "per cell); target >= 80% at n=5 (all 5 shifted: the table reports the regression)")
    print(f"  {'case':<34}{'n=3':>9}{'n=5':>9}{'n=10':>9}")
    rows = (("all 5 shifted: table flags it", 5, 0), ("all 5 shifted: per metric", 5, 1),
            ("1 of 5 shifted: that metric", 1, 1))
    cells = [(which, sims, 7 + n, "sigma 0.05", n, 0.10, shifted, PRIMARY)
             for _, shifted, which in rows for n in (3, 5, 10)]
    found = parallel(rate, cells)
    target = found[1]
    for k, (label, _, _) in enumerate(rows):
        print(f"  {label:<34}" + "".join(f"{c:>9.1%}" for c in found[3 * k:3 * k + 3]))
    print(f"  table flags +10% at n=5: {target:.1%}: {verdict(target >= 0.80)}"
          " (per-metric power is lower: name few primary metrics)")


def x2_table(sims: int) -> None:
    print(f"\nx2 change, n=3, sigma 0.1 ({sims} tables per row); target >= 95% judged worse")
    ok = True
    for label, shifted, family in (("family of 1", 1, 1), ("5 primary, all shifted", 5, 5),
                                   ("5 primary, 1 shifted", 1, 5)):
        _, right, wrong = rates(sims, 11 + family + shifted, "sigma 0.1", 3, 1.0, shifted,
                                family)
        ok &= right >= 0.95 or shifted != family
        print(f"  {label:<28}{right:>8.1%} worse, {wrong:.1%} better"
              + ("" if shifted == family else "  (no target)"))
    print(f"  {verdict(ok)}")


def threshold_table(sims: int) -> None:
    print(f"\ngate: regression flagged against a 5% threshold, sigma 0.05, one metric "
          f"({sims} runs per cell); target <= 5% at a true +3% (at +5%, the threshold itself, "
          "a valid test is at alpha = 5% by design)")
    changes = (0.0, 0.03, 0.05, 0.10, 0.20)
    print(f"  {'arms':<16}" + "".join(f"{c:>+8.0%}" for c in changes))
    arms = ((5, 5), (10, 10), (25, 5))
    found = parallel(flagged, [(n1, n2, change, sims) for n1, n2 in arms for change in changes])
    worst = 0.0
    for k, (n1, n2) in enumerate(arms):
        row = found[k * len(changes):(k + 1) * len(changes)]
        worst = max(worst, row[1])
        print(f"  {f'{n1} vs {n2}':<16}" + "".join(f"{r:>8.1%}" for r in row))
    print(f"  worst at +3%: {worst:.1%}: {verdict(worst <= 0.05)}")


def flagged(n1: int, n2: int, change: float, sims: int) -> float:
    """Share of gates (5% threshold) that call a true `change` a regression."""
    rng = np.random.default_rng(17 + n1 + n2)
    hits = 0
    for i in range(sims):
        case = GateSamples(draw(rng, "sigma 0.05", n1), draw(rng, "sigma 0.05", n2, change),
                           "lower", 5.0)
        hits += gate_metrics({"m": case}, seed=i)["m"].status \
            is GateStatus.REGRESSION
    return hits / sims


def history_table(sims: int) -> None:
    print(f"\nchange points over 30 nights ({sims} seeds), each night the median of 5 "
          "repetitions, sigma 0.05; targets: +8% step at night 20 found within one night, "
          "A/A: no change point in >= 95%")

    def nights(rng: np.random.Generator) -> Array:
        return np.median(rng.lognormal(math.log(100), 0.05, (30, 5)), axis=1)

    quiet = found = 0
    for seed in range(sims):
        rng = np.random.default_rng(seed)
        quiet += not change_points(list(nights(rng)))
        step = nights(rng)
        step[20:] *= 1.08
        points = change_points(list(step))
        found += any(abs(p.index - 20) <= 1 for p in points)
    print(f"  +8% step found within one night: {found / sims:.1%}; A/A without a change "
          f"point: {quiet / sims:.1%}: {verdict(quiet / sims >= 0.95)}")


def welch_small_n(sims: int) -> None:
    print(f"\nWelch's t on logs at small n, unequal spreads: false verdicts of one A/A "
          f"comparison ({sims * 10} per cell); target <= 5.0%")
    ratios = (1, 2, 4, 10)
    print(f"  {'arms':<8}" + "".join(f"{f'sd x{r}':>9}" for r in ratios))
    worst = 0.0
    for n1, n2 in ((3, 3), (3, 5), (4, 4), (5, 5)):
        rng = np.random.default_rng(n1 * 10 + n2)
        row = []
        for r in ratios:
            hits = 0
            for i in range(sims * 10):
                found = compare_metrics({"m": MetricSamples(
                    rng.lognormal(4.6, 0.05, n1), rng.lognormal(4.6, 0.05 * r, n2),
                    "lower")}, seed=i)["m"]
                hits += found.verdict in (Verdict.BETTER, Verdict.WORSE)
            row.append(hits / (sims * 10))
        worst = max(worst, *row)
        print(f"  {f'{n1} vs {n2}':<8}" + "".join(f"{v:>9.2%}" for v in row))
    print(f"  worst {worst:.2%}: {verdict(worst <= 0.05)}")


def switch_power(sims: int) -> None:
    print(f"\npower around the switch to Mann-Whitney (n = {RANK_SWITCH}): +10% shift, "
          f"sigma 0.05, one metric ({sims * 2} comparisons per cell); no target: the docs "
          "quote it")
    sizes = (8, 9, 10, 11, 12)
    rng = np.random.default_rng(12)
    out = []
    for n in sizes:
        hits = sum(compare_metrics({"m": MetricSamples(
            rng.lognormal(4.6, 0.05, n), rng.lognormal(4.6 + math.log(1.1), 0.05, n),
            "lower")}, seed=i)["m"].verdict is Verdict.WORSE for i in range(sims * 2))
        out.append(hits / (sims * 2))
    print("  " + "  ".join(f"n={n}: {p:.1%}" for n, p in zip(sizes, out, strict=True)))


def coverage(sims: int) -> None:
    rng = np.random.default_rng(3)
    print("\ncoverage of the 95% CI of the median (log-normal sigma 0.05)")
    for n in (6, 10, 20):
        cis = [median_ci(s) for s in rng.lognormal(0.0, 0.05, (sims, n))]
        hit = np.mean([c.low <= 1 <= c.high for c in cis if c])
        exact = cis[0].coverage if cis[0] else math.nan
        print(f"  n={n:>2}: {hit:.1%} (exact {exact:.1%})")


def drift_rates(sims: int) -> None:
    print("\ndrift (Mann-Kendall, alpha 0.05)")
    rng = np.random.default_rng(4)
    for n in (5, 10, 20):
        fpr = np.mean([drift(rng.lognormal(0, 0.05, n)).significant for _ in range(sims)])
        trend = 1 + 0.01 * np.arange(n)  # +1% per trial
        power = np.mean([drift(trend * rng.lognormal(0, 0.05, n)).significant
                         for _ in range(sims)])
        print(f"  n={n:>2}: false-positive {fpr:.1%}; +1%/trial detected {power:.1%}")


def drift_notes(sims: int) -> None:
    print(f"\ndrift notes on A/A tables: 12 lines x 3 columns, n=5 and n=10, log-normal "
          f"sigma 0.05, no trend ({sims} tables per cell); target: a drift note in <= 5% "
          "of tables (Holm over the table's cells, as reports/ab/line_stats.py does)")
    rng = np.random.default_rng(6)
    for n in (5, 10):
        raw = holm = 0
        for _ in range(sims):
            ps = [drift(rng.lognormal(0, 0.05, n)).p_value for _ in range(36)]
            raw += min(ps) < 0.05
            holm += min(adjust_p(ps, Adjust.HOLM)) < 0.05
        print(f"  n={n:>2}: cell by cell {raw / sims:.1%}, Holm over the table "
              f"{holm / sims:.1%}: {verdict(holm / sims <= 0.05)}")


def pooled(sims: int) -> None:
    rng = np.random.default_rng(5)
    data = [rng.lognormal(math.log(30) + rng.normal(0, 0.05), 0.4, 1_000_000) for _ in range(10)]
    start = time.perf_counter()
    out = pooled_percentiles(data)
    print(f"\npooled percentiles, 10 x 1,000,000 samples, {out.n_boot} cluster resamples: "
          f"{time.perf_counter() - start:.2f} s")
    qs = [50.0, 99.0]
    spread = math.hypot(0.05, 0.4)  # per-repetition level (0.05) and per transaction (0.4)
    truth = [30 * math.exp(spread * float(special.ndtri(q / 100))) for q in qs]
    hits = np.zeros(len(qs))
    for i in range(sims):
        levels = rng.normal(math.log(30), 0.05, 10)
        reps = [np.exp(level + rng.normal(0, 0.4, 5000)) for level in levels]
        found = pooled_percentiles(reps, qs, n_boot=1000, seed=i)
        hits += [r.ci is not None and r.ci[0] <= t <= r.ci[1]
                 for r, t in zip(found.percentiles, truth, strict=True)]
    print("  cluster-bootstrap 95% CI coverage, 10 reps x 5000: "
          + ", ".join(f"p{q:g} {h / sims:.1%}" for q, h in zip(qs, hits, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="200 simulations per cell")
    args = parser.parse_args()
    sims = 200 if args.quick else args.sims
    start = time.perf_counter()
    sections: list[tuple[Callable[[int], None], int]] = [
        (aa_table, sims), (power_table, sims), (x2_table, sims), (threshold_table, sims),
        (history_table, max(200, sims // 4)), (coverage, sims // 2),
        (drift_rates, sims // 2), (drift_notes, max(100, sims // 4)),
        (pooled, max(50, sims // 40)),
        (welch_small_n, max(100, sims // 4)), (switch_power, max(100, sims // 4))]
    for section, count in sections:
        section(count)
    stats_nightly.run(max(100, sims // 4))
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
