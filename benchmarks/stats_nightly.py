"""The nightly gate's promises, simulated with fixed seeds through the functions
`napilab check` calls (harness.stats.gate.gate_metrics with a nightly series, its
anchor level and night-to-night noise from harness.stats.nightly, and the one rule for
a night, harness.stats.gate.night_status), plus the consistency of every printed row.

    .venv/bin/python benchmarks/stats_nightly.py [--sims 500] [--quick]

A night: n repetitions of a metric around 100, log-normal within the night (sigma_w),
the night's own level off by a log-normal night effect (sigma_b, "between-night sd").
Each night is checked against the series of every earlier night (oldest first), as
`napilab check RUN --baseline RESULTS` does. A *regression night* of the scenarios
below regresses one of two gated metrics (the other unchanged). Targets are the
issue's; each table prints whether it was met. `benchmarks/stats_power.py` runs these
tables after its own.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from napilab.harness.stats.compare import MetricSamples, Verdict, compare_metrics
from napilab.harness.stats.family import Direction
from napilab.harness.stats.gate import GateSamples, GateStatus, gate_metrics, night_status
from napilab.harness.stats.nightly import anchor, level_t, night_noise

Array = np.ndarray
THRESHOLD = 5.0  # percent


def night(rng: np.random.Generator, level: float, sigma_b: float, sigma_w: float,
          n: int) -> Array:
    effect = rng.normal(0.0, sigma_b) if sigma_b else 0.0
    return np.exp(math.log(100) + math.log1p(level) + effect + rng.normal(0, sigma_w, n))


def check(series: Sequence[Sequence[Array]], candidate: Sequence[Array]) -> str:
    """The night's status for gated metrics m (series[m]: the earlier nights)."""
    cases = {str(m): GateSamples([], candidate[m], "lower", THRESHOLD,
                                 series=tuple(series[m]))
             for m in range(len(candidate))}
    return night_status([r.status.value for r in gate_metrics(cases).values()])


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def parallel(fn: Callable[..., object], cells: list[tuple[object, ...]]) -> list[object]:
    with ProcessPoolExecutor(max_workers=2) as pool:
        return list(pool.map(fn, *zip(*cells, strict=True)))


def pool_cell(nights: int, sigma_b: float, shift: float, sims: int
              ) -> tuple[float, float, float, float]:
    """(coverage of the 95% CI, red, green, inconclusive) of one night after `nights`
    A/A nights, its one gated metric shifted by `shift`; sigma_w 0.05, n 5."""
    rng = np.random.default_rng(int(1000 * sigma_b) + 10 * nights + int(100 * shift))
    cover = red = green = 0
    for _ in range(sims):
        series = [night(rng, 0, sigma_b, 0.05, 5) for _ in range(nights)]
        cand = night(rng, shift, sigma_b, 0.05, 5)
        noise = night_noise(series, True)
        nights_used, dropped = anchor(series, True, noise, math.log1p(THRESHOLD / 100),
                                      Direction.LOWER)
        if dropped:
            noise = night_noise([v for i, v in enumerate(series) if i not in dropped], True)
        low, high = level_t(series, nights_used, cand, True, noise).ci(0.95)
        cover += low <= shift <= high
        status = check([series], [cand])
        red += status == "regression"
        green += status == "pass"
    return cover / sims, red / sims, green / sims, (sims - red - green) / sims


def pool_table(sims: int) -> None:
    print(f"\nnightly pool: one night after N A/A nights, sigma_w 0.05, n 5, threshold "
          f"{THRESHOLD:g}% ({sims} nights per cell); targets: 95% CI coverage >= 93% at "
          "between-night sd 0.03, a true +3% red <= 5% (sd up to 0.05), A/A red <= 2%")
    print(f"  {'nights':>6} {'sd_b':>5} {'change':>7} {'coverage':>9} {'red':>7} "
          f"{'green':>7} {'inconcl.':>9}")
    cells = [(k, sb, shift, sims) for k in (5, 10, 20) for sb in (0.0, 0.03, 0.05)
             for shift in (0.0, 0.03, 0.15)]
    found = parallel(pool_cell, cells)
    ok = True
    for (k, sb, shift, _), (cov, red, green, inc) in zip(cells, found, strict=True):
        print(f"  {k:>6} {sb:>5.2f} {shift:>+7.0%} {cov:>9.1%} {red:>7.1%} {green:>7.1%} "
              f"{inc:>9.1%}")
        if k >= 10 and sb == 0.03:
            ok &= cov >= 0.93
        if k >= 10:
            ok &= (shift != 0.03 or red <= 0.05) and (shift != 0.0 or red <= 0.02)
            ok &= shift != 0.15 or green <= 0.02
    print(f"  (targets on series of 10 nights or more) {verdict(ok)}")


def regression_cell(shift: float, sims: int) -> tuple[float, float]:
    """Nights with one of two gated metrics regressed by `shift` after 10 normal nights
    (sigma_w 0.05, n 5, sigma_b 0.02): (green, red)."""
    rng = np.random.default_rng(int(shift * 1000) + 7)
    green = red = 0
    for _ in range(sims):
        series = [[night(rng, 0, 0.02, 0.05, 5) for _ in range(10)] for _ in range(2)]
        cand = [night(rng, shift, 0.02, 0.05, 5), night(rng, 0, 0.02, 0.05, 5)]
        status = check(series, cand)
        green += status == "pass"
        red += status == "regression"
    return green / sims, red / sims


def regression_table(sims: int) -> None:
    print(f"\nregression nights: 1 of 2 gated metrics regressed, after 10 normal nights "
          f"(sigma_w 0.05, n 5, between-night sd 0.02; {sims} nights per row); target: "
          "+15% nights green <= 2%")
    found = parallel(regression_cell, [(s, sims) for s in (0.08, 0.15)])
    for shift, (green, red) in zip((0.08, 0.15), found, strict=True):
        print(f"  {shift:+.0%}: green {green:.1%}, red {red:.1%}, inconclusive "
              f"{1 - green - red:.1%}")
    print(f"  {verdict(found[1][0] <= 0.02)}")


def drift_cell(sigma_w: float, n: int, sims: int) -> tuple[float, float]:
    """30 nights, each +0.7% worse than the one before (sigma_b 0): the share of
    histories red at least once by the night the cumulative drift reaches +10%, and the
    median night of the first red."""
    rng = np.random.default_rng(int(sigma_w * 1000) + n)
    by_ten = math.ceil(math.log(1.10) / math.log(1.007))  # night 14: +10.2%
    caught = 0
    first: list[int] = []
    for _ in range(sims):
        nights = [night(rng, 1.007 ** k - 1, 0.0, sigma_w, n) for k in range(30)]
        red = next((k for k in range(1, 30)
                    if check([nights[:k]], [nights[k]]) == "regression"), 99)
        caught += red <= by_ten
        first.append(red)
    return caught / sims, float(np.median(first))


def drift_table(sims: int) -> None:
    print(f"\ndrift: 30 nights, +0.7% each (+22% in all), threshold {THRESHOLD:g}% ({sims} "
          "histories per row); target: red by +10% cumulative (night 14) in >= 90%")
    cells = [(sw, n, sims) for sw, n in ((0.02, 5), (0.02, 10), (0.05, 10))]
    found = parallel(drift_cell, cells)
    ok = True
    for (sw, n, _), (caught, median) in zip(cells, found, strict=True):
        print(f"  sigma_w {sw}, n={n:>2}: red by night 14 in {caught:.1%}; median first red "
              f"night {median:g}")
        ok &= sw != 0.02 or caught >= 0.90
    print(f"  (target at sigma_w 0.02) {verdict(ok)}")


def step_cell(sims: int) -> tuple[float, float]:
    """+8% step at night 20 of 30 (sigma_w 0.02, n 5): the share of the step's nights
    (20-29) that are red, and that are green."""
    rng = np.random.default_rng(8)
    red = green = total = 0
    for _ in range(sims):
        nights = [night(rng, 0.08 if k >= 20 else 0.0, 0.0, 0.02, 5) for k in range(30)]
        for k in range(20, 30):
            status = check([nights[:k]], [nights[k]])
            red += status == "regression"
            green += status == "pass"
            total += 1
    return red / total, green / total


def lock_cell(first: float, sims: int) -> tuple[float, float, float]:
    """A first night `first` off, then 6 normal nights (sigma_w 0.05, n 5, sigma_b
    0.02): (mean red nights of the 6, share of histories with <= 1 red, mean green)."""
    rng = np.random.default_rng(int(first * 100) + 50)
    reds, greens = [], []
    for _ in range(sims):
        nights = [night(rng, first, 0.02, 0.05, 5)] + \
            [night(rng, 0.0, 0.02, 0.05, 5) for _ in range(6)]
        statuses = [check([nights[:k]], [nights[k]]) for k in range(1, 7)]
        reds.append(statuses.count("regression"))
        greens.append(statuses.count("pass"))
    return float(np.mean(reds)), float(np.mean(np.array(reds) <= 1)), float(np.mean(greens))


def mirror_cell(sims: int) -> float:
    """A +20% slow first night, 5 normal nights, then a +15% regression: share green."""
    rng = np.random.default_rng(99)
    green = 0
    for _ in range(sims):
        nights = [night(rng, 0.20, 0.02, 0.05, 5)] + \
            [night(rng, 0.0, 0.02, 0.05, 5) for _ in range(5)]
        green += check([nights], [night(rng, 0.15, 0.02, 0.05, 5)]) == "pass"
    return green / sims


def lock_table(sims: int) -> None:
    print(f"\nlock: a lucky (-15%) or slow (+20%) first night, then normal nights "
          f"(sigma_w 0.05, n 5, between-night sd 0.02; {sims} histories); target: after a "
          "lucky first night, normal nights red <= 1 of 6")
    lucky, slow = parallel(lock_cell, [(-0.15, sims), (0.20, sims)])
    for label, (mean_red, ok_share, mean_green) in (("lucky -15%", lucky),
                                                     ("slow +20%", slow)):
        print(f"  {label}: red {mean_red:.2f} of 6 on average, <= 1 red in {ok_share:.1%} "
              f"of histories; green {mean_green:.2f} of 6")
    print(f"  after a slow first night and 5 normal ones, a +15% regression is green in "
          f"{mirror_cell(sims):.1%}")
    red, green = step_cell(max(20, sims // 5))
    print(f"  after a +8% step at night 20 (sigma_w 0.02): the step's nights red {red:.1%}, "
          f"green {green:.1%}")
    print(f"  {verdict(lucky[1] >= 0.95)}")


def slow_night_cell(slow: int, shift: float, sims: int) -> float:
    """Five nights (sigma_w 0.03, n 5, between-night sd 0.01), night `slow` +20% slow
    (-1: none), then a night `shift` off: the share of such nights red."""
    rng = np.random.default_rng(1000 + 10 * slow + int(shift * 100))
    red = 0
    for _ in range(sims):
        nights = [night(rng, 0.20 if k == slow else 0.0, 0.01, 0.03, 5) for k in range(5)]
        red += check([nights], [night(rng, shift, 0.01, 0.03, 5)]) == "regression"
    return red / sims


def slow_night_table(sims: int) -> None:
    print(f"\none slow night (+20%) in a reference of five (sigma_w 0.03, n 5, between-night "
          f"sd 0.01; {sims} series per cell); target: a +15% night red as often as with no "
          "slow night (within 5 points), an unchanged night red <= 5%")
    cells = [(slow, shift, sims) for slow in (-1, 0, 2, 4) for shift in (0.15, 0.0)]
    found = dict(zip(cells, parallel(slow_night_cell, cells), strict=True))
    ok = True
    for slow in (-1, 0, 2, 4):
        caught, false = found[(slow, 0.15, sims)], found[(slow, 0.0, sims)]
        where = "none" if slow < 0 else f"night {slow + 1}"
        print(f"  slow night {where:>7}: +15% red {caught:6.1%}, unchanged red {false:5.1%}")
        ok &= caught >= found[(-1, 0.15, sims)] - 0.05 and false <= 0.05
    print(f"  {verdict(ok)}")


def consistency_cell(seed: int, sims: int) -> tuple[int, int]:
    """Random tables (n 3-12 per arm, log-normal with sigma 0.01-0.5, shifts, zeros,
    heavy tails, ties) through compare_metrics and gate_metrics: (rows, rows whose change
    is outside its CI or whose verdict/status the CI contradicts)."""
    rng = np.random.default_rng(seed)
    rows = bad = 0
    for _ in range(sims):
        family = {}
        gated = {}
        for m in range(int(rng.integers(1, 6))):
            n1, n2 = (int(v) for v in rng.integers(3, 13, 2))
            sigma = float(rng.choice([0.01, 0.05, 0.2, 0.5]))
            shift = float(rng.choice([0.0, 0.03, 0.1, 0.5]))
            x = rng.lognormal(math.log(50), sigma, n1)
            y = rng.lognormal(math.log(50 * (1 + shift)), sigma, n2)
            kind = rng.integers(0, 4)
            if kind == 1:
                x, y = np.round(x), np.round(y)  # ties
            elif kind == 2:
                x[rng.random(n1) < 0.3] = 0.0  # a counter with zeros
                y[rng.random(n2) < 0.3] = 0.0
            elif kind == 3:
                y = np.where(rng.random(n2) < 0.5, y, y * 3)  # bimodal
            family[str(m)] = MetricSamples(x, y, "lower")
            gated[str(m)] = GateSamples(x, y, "lower", 5.0)
        for c in compare_metrics(family).values():
            rows += 1
            low, high = c.change_ci
            bad += not low <= c.change <= high
            if c.verdict in (Verdict.BETTER, Verdict.WORSE):
                bad += low <= c.min_effect and high >= -c.min_effect
            if c.verdict is Verdict.SAME:
                bad += not low <= 0 <= high
        for r in gate_metrics(gated).values():
            rows += 1
            c = r.comparison
            low, high = c.change_ci
            bad += not low <= c.change <= high
            if r.status is GateStatus.WITHIN and c.min_effect and c.scale != "absolute":
                bad += high >= c.min_effect
            if r.status is GateStatus.REGRESSION:
                bad += low <= c.min_effect
    return rows, bad


def consistency_table(sims: int) -> None:
    print(f"\nconsistency: random tables and gates ({4 * sims} of each, fixed seeds); "
          "target: rows that contradict their own CI: 0")
    found = parallel(consistency_cell, [(s, sims) for s in range(4)])
    rows = sum(f[0] for f in found)
    bad = sum(f[1] for f in found)
    print(f"  {rows} rows, {bad} contradict their CI: {verdict(bad == 0)}")


SECTIONS: tuple[tuple[Callable[[int], None], float], ...] = (
    (pool_table, 1.0), (regression_table, 1.0), (drift_table, 0.2), (lock_table, 0.5),
    (slow_night_table, 1.0), (consistency_table, 0.5))


def run(sims: int) -> None:
    for section, share in SECTIONS:
        section(max(20, int(sims * share)))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sims", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="100 simulations per cell")
    args = parser.parse_args()
    start = time.perf_counter()
    run(100 if args.quick else args.sims)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
