"""The statistics of one verdict across replicas, simulated with fixed seeds through the
functions a run over replicas calls (harness.stats.replicas: replica_effect, pool,
judge), beside the alternatives they were chosen over.

    .venv/bin/python benchmarks/stats_replicas.py [--sims 1000] [--quick]

A replica: n trials of variant A and n of B, log-normal within the trial (sigma_w, the
CV), around the replica's own level (log-normal, sd 0.2: another NIC, another CPU); B's
true log change on that replica is mu + u, u ~ N(0, tau^2) the replica's own departure
(real between-replica heterogeneity). The pooled interval should cover mu.
Intervals compared (docs/statistics.md, "Across replicas"), all t with k-1 df but RE-z:
  mHK       Paule-Mandel tau^2, the modified Hartung-Knapp-Sidik-Jonkman interval (se
            never below the random-effects one); each replica weighted by the variance
            of its log change with each variant's trial variance pooled over replicas
  HKSJ      the same, unmodified
  DL        DerSimonian-Laird tau^2, unmodified HKSJ, pooled variances
  mHK own, HKSJ own   as mHK, HKSJ, each replica weighted by its own Welch variance
  RE-z      Paule-Mandel, the textbook normal interval, pooled variances
  naive     every trial of every replica in one Welch t test on logs, as if one big run:
            "same" with every replica at one level, "levels" with the replicas' own
The defaults of harness.stats.replicas.meta (TAU2_METHOD, INTERVAL, WEIGHTING) are
napilab's; the target lines judge them. "mixed CV": replicas alternate CV 0.05 and 0.10
(pooled variances assume one CV per variant: this is their robustness check).
Tables: coverage of each interval, A/A false verdicts per table of 3 primary metrics
(Holm), power for a 20% change. Each says its target and whether it was met.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy import stats as sps

from napilab.harness.stats.replicas import judge, pool, replica_effect
from napilab.harness.stats.replicas.meta import INTERVAL, TAU2_METHOD, WEIGHTING

Array = np.ndarray
LEVEL_SD = 0.2  # the replicas' own levels (log scale)
METHODS = {"mHK": ("pm", "hksj-modified", "pooled"), "HKSJ": ("pm", "hksj", "pooled"),
           "DL": ("dl", "hksj", "pooled"), "mHK own": ("pm", "hksj-modified", "own"),
           "HKSJ own": ("pm", "hksj", "own"), "RE-z": ("pm", "re-z", "pooled")}
NAPILAB = next(name for name, how in METHODS.items()
               if how == (TAU2_METHOD, INTERVAL, WEIGHTING))
OTHER = "HKSJ" if NAPILAB == "mHK" else "mHK"  # the A/A and power tables' comparison


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def parallel(fn: Callable[..., object], cells: list[tuple[object, ...]]) -> list[object]:
    with ProcessPoolExecutor(max_workers=2) as workers:
        return list(workers.map(fn, *zip(*cells, strict=True)))


def replicas(rng: np.random.Generator, k: int, n: int, mu: float, tau: float,
             sigma_w: float) -> list[tuple[Array, Array, float]]:
    """k replicas' log values of A and B (each around its own level), and the levels;
    sigma_w 0 is "mixed CV" (0.05 and 0.10 in turn)."""
    out = []
    for i in range(k):
        sigma = sigma_w or (0.05, 0.10)[i % 2]
        level = rng.normal(math.log(100), LEVEL_SD)
        u = rng.normal(0.0, tau) if tau else 0.0
        out.append((level + rng.normal(0, sigma, n),
                    level + mu + u + rng.normal(0, sigma, n), level))
    return out


def naive(logs_a: Array, logs_b: Array) -> tuple[float, float]:
    """Welch's t interval (95%) of mean(log B) - mean(log A) over all trials at once."""
    va, vb = logs_a.var(ddof=1) / logs_a.size, logs_b.var(ddof=1) / logs_b.size
    df = (va + vb) ** 2 / (va ** 2 / (logs_a.size - 1) + vb ** 2 / (logs_b.size - 1))
    half = float(sps.t.isf(0.025, df)) * math.sqrt(va + vb)
    d = float(logs_b.mean() - logs_a.mean())
    return d - half, d + half


def coverage_cell(k: int, n: int, tau: float, sigma_w: float, sims: int) -> dict[str, float]:
    """Coverage of mu (0) by each interval, and mHK's and HKSJ's median half-width."""
    rng = np.random.default_rng(1000 * k + 10 * n + int(100 * tau) + int(1000 * sigma_w))
    hits = dict.fromkeys([*METHODS, "naive same", "naive levels"], 0)
    widths: dict[str, list[float]] = {"mHK": [], "HKSJ": []}
    for _ in range(sims):
        drawn = replicas(rng, k, n, 0.0, tau, sigma_w)
        effects = {str(i): replica_effect(np.exp(a), np.exp(b))
                   for i, (a, b, _) in enumerate(drawn)}
        for name, (tau2_method, interval, weights) in METHODS.items():
            found = pool(effects, tau2_method=tau2_method, interval=interval, weights=weights)
            low, high = found.ci
            hits[name] += low <= 0 <= high
            if name in widths:
                widths[name].append(float(sps.t.isf(0.025, found.df)) * found.se)
        for name, shift in (("naive same", True), ("naive levels", False)):
            a = np.concatenate([x - level * shift for x, _, level in drawn])
            b = np.concatenate([y - level * shift for _, y, level in drawn])
            low, high = naive(a, b)
            hits[name] += low <= 0 <= high
    out = {name: h / sims for name, h in hits.items()}
    out.update({f"width {name}": float(np.median(w)) for name, w in widths.items()})
    return out


def coverage_table(sims: int) -> None:
    print(f"\ncoverage of the pooled 95% interval of mu: k replicas, n trials per variant, "
          f"within-trial CV 0.07 (or mixed), between-replica sd tau ({sims} experiments per "
          f"row); target: napilab's ({NAPILAB}) >= 93% in every row; half-width: median, "
          "log scale")
    cells = [(k, n, tau, 0.07, sims) for tau in (0.0, 0.05, 0.10) for n in (3, 5)
             for k in (2, 3, 5, 10)]
    cells += [(k, 3, 0.05, 0.0, sims) for k in (2, 3, 5, 10)]
    found = parallel(coverage_cell, cells)
    names = [*METHODS, "naive same", "naive levels"]
    print(f"  {'CV':>5} {'tau':>4} {'n':>2} {'k':>3}" + "".join(f"{m:>9}" for m in names[:-2])
          + f"{'naive':>9}{'naive':>9}{'width':>8}{'width':>8}")
    print(f"  {'':>17}" + " " * 9 * (len(names) - 2) + f"{'same':>9}{'levels':>9}"
          f"{'mHK':>8}{'HKSJ':>8}")
    worst = 1.0
    for (k, n, tau, sw, _), row in zip(cells, found, strict=True):
        assert isinstance(row, dict)
        worst = min(worst, row[NAPILAB])
        cv = f"{sw:.2f}" if sw else "mixed"
        print(f"  {cv:>5} {tau:>4.2f} {n:>2} {k:>3}" + "".join(f"{row[m]:>9.1%}" for m in names)
              + f"{row['width mHK']:>8.3f}{row['width HKSJ']:>8.3f}")
    print(f"  lowest {NAPILAB} coverage {worst:.1%}: {verdict(worst >= 0.93)}")


def table_verdicts(rng: np.random.Generator, k: int, n: int, tau: float, sigma_w: float,
                   shifts: tuple[float, ...]) -> tuple[list[str], list[str]]:
    """One table's verdicts by napilab's interval and by the other (mHK or HKSJ): one
    primary metric (lower is better) per shift, Holm over them."""
    effects = [{str(i): replica_effect(np.exp(a), np.exp(b))
                for i, (a, b, _) in enumerate(replicas(rng, k, n, mu, tau, sigma_w))}
               for mu in shifts]
    out = []
    for name in (NAPILAB, OTHER):
        tau2_method, interval, weights = METHODS[name]
        pooled = {str(m): pool(e, tau2_method=tau2_method, interval=interval,
                               weights=weights) for m, e in enumerate(effects)}
        out.append(list(judge(pooled, dict.fromkeys(pooled, True)).values()))
    return out[0], out[1]


def aa_cell(k: int, n: int, tau: float, sims: int) -> tuple[float, ...]:
    """A/A tables of 3 metrics, by napilab's interval and the other: (share with a
    better/worse, with an inconclusive) each."""
    rng = np.random.default_rng(7000 + 100 * k + 10 * n + int(100 * tau))
    counts = [0, 0, 0, 0]
    for _ in range(sims):
        for j, found in enumerate(table_verdicts(rng, k, n, tau, 0.07, (0.0, 0.0, 0.0))):
            counts[2 * j] += any(v in ("better", "worse") for v in found)
            counts[2 * j + 1] += "inconclusive" in found
    return tuple(c / sims for c in counts)


def aa_table(sims: int) -> None:
    print(f"\nA/A tables: 3 primary metrics, no true change (mu 0), CV 0.07, Holm over the 3 "
          f"({sims} tables per row); target: a better/worse verdict in <= 5% of tables "
          f"({NAPILAB}); inconclusive: replicas that differ beyond their noise (tau > 0)")
    cells = [(k, n, tau, sims) for tau in (0.0, 0.05) for n in (3, 5) for k in (2, 3, 5, 10)]
    found = parallel(aa_cell, cells)
    print(f"  {'tau':>4} {'n':>2} {'k':>3} {'false':>8} {'inconcl.':>9}   "
          f"{OTHER + ' false':>12} {'inconcl.':>9}")
    worst = 0.0
    for (k, n, tau, _), row in zip(cells, found, strict=True):
        assert isinstance(row, tuple)
        worst = max(worst, row[0])
        print(f"  {tau:>4.2f} {n:>2} {k:>3} {row[0]:>8.1%} {row[1]:>9.1%}   {row[2]:>12.1%} "
              f"{row[3]:>9.1%}")
    print(f"  worst {worst:.1%}: {verdict(worst <= 0.05)}")


def power_cell(k: int, n: int, sigma_w: float, tau: float, sims: int) -> tuple[float, ...]:
    """A 20% slower metric beside two unchanged ones: (worse, inconclusive) for it, by
    napilab's interval and by the other."""
    rng = np.random.default_rng(9000 + 100 * k + int(1000 * sigma_w) + int(100 * tau))
    counts = [0, 0, 0, 0]
    for _ in range(sims):
        for j, found in enumerate(table_verdicts(rng, k, n, tau, sigma_w,
                                                 (math.log(1.2), 0.0, 0.0))):
            counts[2 * j] += found[0] == "worse"
            counts[2 * j + 1] += found[0] == "inconclusive"
    return tuple(c / sims for c in counts)


def power_table(sims: int) -> None:
    print(f"\npower: one of 3 primary metrics 20% slower on average (Holm over the 3; "
          f"{sims} tables per row); no target: docs/statistics.md quotes it")
    cells = [(k, n, sw, tau, sims) for sw in (0.05, 0.10) for tau in (0.0, 0.05)
             for k, n in ((2, 3), (2, 5), (3, 3), (3, 5), (5, 3))]
    found = parallel(power_cell, cells)
    print(f"  {'CV':>5} {'tau':>5} {'n':>2} {'k':>3} {'worse':>8} {'inconcl.':>9}   "
          f"{OTHER + ' worse':>12} {'inconcl.':>9}")
    for (k, n, sw, tau, _), row in zip(cells, found, strict=True):
        assert isinstance(row, tuple)
        print(f"  {sw:>5.2f} {tau:>5.2f} {n:>2} {k:>3} {row[0]:>8.1%} {row[1]:>9.1%}   "
              f"{row[2]:>12.1%} {row[3]:>9.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="200 simulations per cell")
    args = parser.parse_args()
    sims = 200 if args.quick else args.sims
    start = time.perf_counter()
    coverage_table(sims)
    aa_table(sims)
    power_table(sims)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
