"""Print the measured operating characteristics of harness.stats.stats (and time the pooling).

    .venv/bin/python benchmarks/stats_power.py [--sims 2000] [--quick]

Everything is simulated with fixed seeds: log-normal noise (sigma on the log scale) around
a median of 100, n repetitions per arm. Figures are printed, not asserted; the unit tests
assert the acceptance thresholds on smaller runs.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import special

from harness.stats.noise import drift
from harness.stats.pool import pooled_percentiles
from harness.stats.power import Noise, minimal_detectable_effect
from harness.stats.stats import Verdict, compare, median_ci, relative_change

Array = np.ndarray


def arms(rng: np.random.Generator, n: int, sigma: float, shift: float) -> tuple[Array, Array]:
    return (rng.lognormal(math.log(100), sigma, n),
            rng.lognormal(math.log(100 * (1 + shift)), sigma, n))


def detection(n: int, sigma: float, shift: float, sims: int, seed: int) -> tuple[float, float]:
    """(rate of the verdict in the shift's direction, rate of any better/worse) for latency."""
    rng = np.random.default_rng(seed)
    right = anything = 0
    for i in range(sims):
        v = compare(*arms(rng, n, sigma, shift), "lower", seed=i).verdict
        right += v is (Verdict.WORSE if shift > 0 else Verdict.BETTER)
        anything += v in (Verdict.BETTER, Verdict.WORSE)
    return right / sims, anything / sims


def verdict_table(sims: int) -> None:
    print(f"\nverdict rates ({sims} simulations per cell, alpha 0.05, no min effect)")
    print(f"{'n/arm':>6} {'sigma':>6} {'A/A FPR':>8}  power at shift: +5%    +10%    -10%    +20%")
    for n in (5, 10, 20):
        for sigma in (0.02, 0.05, 0.10):
            _, fpr = detection(n, sigma, 0.0, sims, seed=n * 1000 + int(sigma * 100))
            powers = [detection(n, sigma, s, sims, seed=7 + n)[0] for s in (0.05, 0.1, -0.1, 0.2)]
            print(f"{n:>6} {sigma:>6} {fpr:>8.1%}  " + " ".join(f"{p:>7.1%}" for p in powers))


def mde_calibration(sims: int) -> None:
    print("\nsimulated power at the reported MDE (target 80%, alpha 0.05)")
    for n in (6, 10, 20):
        for sigma in (0.05, 0.10):
            mde = minimal_detectable_effect(Noise(sigma, True), n, n)
            assert mde is not None
            power, _ = detection(n, sigma, mde, sims, seed=n)
            print(f"  n={n:>2} sigma={sigma}: MDE {mde:6.1%}  power {power:.1%}")


def coverage(sims: int) -> None:
    rng = np.random.default_rng(3)
    print("\ncoverage of 95% intervals (log-normal sigma 0.05)")
    for n in (6, 10, 20, 40):
        samples = rng.lognormal(0.0, 0.05, (sims, n))
        cis = [median_ci(s) for s in samples]
        hit = np.mean([c.low <= 1 <= c.high for c in cis if c])
        exact = cis[0].coverage if cis[0] else math.nan
        boot = 0
        for i in range(sims):
            _, low, high = relative_change(*arms(rng, n, 0.05, 0.10), seed=i)
            boot += low <= 0.10 <= high
        print(f"  n={n:>2}: median CI {hit:.1%} (exact {exact:.1%});"
              f" bootstrap CI of the change {boot / sims:.1%}")


def drift_rates(sims: int) -> None:
    rng = np.random.default_rng(4)
    for n in (5, 10, 20):
        fpr = np.mean([drift(rng.lognormal(0, 0.05, n)).significant for _ in range(sims)])
        trend = 1 + 0.01 * np.arange(n)  # +1% per trial
        power = np.mean([drift(trend * rng.lognormal(0, 0.05, n)).significant
                         for _ in range(sims)])
        print(f"  drift n={n:>2}: false-positive {fpr:.1%}; +1%/trial detected {power:.1%}")


def pooled_timing(reps: int, per_rep: int) -> None:
    rng = np.random.default_rng(5)
    data = [rng.lognormal(math.log(30) + rng.normal(0, 0.05), 0.4, per_rep) for _ in range(reps)]
    start = time.perf_counter()
    out = pooled_percentiles(data)
    took = time.perf_counter() - start
    start = time.perf_counter()
    np.sort(np.concatenate(data))
    sort = time.perf_counter() - start
    print(f"\npooled percentiles, {reps} x {per_rep:,} samples, {out.n_boot} cluster resamples: "
          f"{took:.2f} s (of which ~{sort:.2f} s is sorting the pooled samples once)")
    for row in out.percentiles:
        low, high = row.ci or (math.nan, math.nan)
        print(f"  p{row.percentile:<6g} {row.value:8.2f} µs  CI [{low:.2f}, {high:.2f}]"
              f"  per-repetition {row.spread[0]:.2f}..{row.spread[1]:.2f}")


def pooled_coverage(sims: int) -> None:
    """Cluster bootstrap with 10 repetitions whose level varies (sigma 0.05 between reps)."""
    rng = np.random.default_rng(6)
    qs = [50.0, 99.0]
    # per transaction log-normal (0.4) around a log-normal per-repetition level (0.05): the
    # population is log-normal with sigma sqrt(0.05^2 + 0.4^2), so its percentiles are exact
    spread = math.hypot(0.05, 0.4)
    truth = [30 * math.exp(spread * float(special.ndtri(q / 100))) for q in qs]
    hits = np.zeros(len(qs))
    for i in range(sims):
        levels = rng.normal(math.log(30), 0.05, 10)
        data = [np.exp(lvl + rng.normal(0, 0.4, 5000)) for lvl in levels]
        out = pooled_percentiles(data, qs, n_boot=1000, seed=i)
        hits += [r.ci is not None and r.ci[0] <= t <= r.ci[1]
                 for r, t in zip(out.percentiles, truth, strict=True)]
    print("  cluster-bootstrap 95% CI coverage, 10 reps x 5000: "
          + ", ".join(f"p{q:g} {h / sims:.1%}" for q, h in zip(qs, hits, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="200 simulations per cell")
    args = parser.parse_args()
    sims = 200 if args.quick else args.sims
    pooled_timing(10, 1_000_000)
    verdict_table(sims)
    mde_calibration(sims)
    coverage(sims)
    print("\ndrift (Mann-Kendall, alpha 0.05)")
    drift_rates(sims)
    print("\npooled percentiles")
    pooled_coverage(max(100, sims // 10))


if __name__ == "__main__":
    main()
