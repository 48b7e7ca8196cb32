"""Is the measurement good enough to believe? Noise vs effect, drift, A/A calibration.

Pure (numpy + scipy). Inputs are per-repetition values of one metric, as in
`harness.stats`; `drift` additionally needs them in trial (execution) order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from napilab.harness.stats.power import minimal_detectable_effect, pooled_noise
from napilab.harness.stats.stats import StatsError, Summary, clean, summarize


@dataclass(frozen=True)
class NoiseCheck:
    """Whether the baseline's own uncertainty is larger than the effect being claimed."""

    cv: float | None  # coefficient of variation of the baseline
    half_width: float | None  # of the baseline's 95% CI, relative to its median; None: unknown
    effect: float  # |relative change| being judged
    exceeds: bool  # only ever True when the noise is known
    reason: str

    @property
    def known(self) -> bool:
        return self.half_width is not None


def noise_exceeds_effect(baseline: npt.ArrayLike, effect: float,
                         confidence: float = 0.95) -> NoiseCheck:
    """Flag an effect smaller than the baseline's noise, when that noise is known.

    Method: the larger half of the binomial order-statistic CI of the baseline median
    (`harness.stats.stats.median_ci`, n >= 6), relative to the median; with 2-5 values, which
    have no such CI, the half-width of the t interval of the mean of the logs (all
    values positive). Compared with |effect|. With one value, a median of 0 or a value
    <= 0 at n < 6 the noise is unknown: `exceeds` is False and the reason says so.
    """
    s = summarize(baseline, confidence)
    size = abs(effect)
    half = None
    if s.median_ci is not None and s.median != 0:
        half = max(s.median - s.median_ci.low, s.median_ci.high - s.median) / abs(s.median)
        how = "median CI"
    else:
        x, _ = clean(baseline)
        if x.size >= 2 and bool(np.all(x > 0)):
            sd = float(np.std(np.log(x), ddof=1))
            half = math.expm1(float(sps.t.ppf((1 + confidence) / 2, x.size - 1)) * sd
                              / math.sqrt(x.size))
            how = "t interval of the log mean"
    if half is None:
        why = s.note if s.n < 2 or s.median == 0 else "values <= 0 and n < 6"
        return NoiseCheck(s.cv, None, size, False, f"noise unknown: {why or 'one value'}")
    exceeds = half > size
    verb = "exceeds" if exceeds else "is below"
    return NoiseCheck(s.cv, half, size, exceeds,
                      f"baseline {how} half-width {half:.1%} {verb} the effect {size:.1%}")


@dataclass(frozen=True)
class Drift:
    """Monotonic trend of one variant's values along its trials (Mann-Kendall)."""

    n: int
    tau: float  # Kendall tau-b of value vs trial index
    p_value: float  # two-sided
    slope_per_trial: float  # Theil-Sen slope relative to the median, per trial index unit
    testable: bool  # False when n is too small for p to reach alpha at all
    significant: bool


def drift(values: npt.ArrayLike, trial_index: Sequence[int] | None = None, *,
          alpha: float = 0.05) -> Drift:
    """Mann-Kendall trend test: Kendall tau-b of value against trial index.

    Method: `scipy.stats.kendalltau` (exact null distribution for small n without ties,
    normal approximation with tie correction otherwise), two-sided; the trend size is the
    Theil-Sen median slope. Pass the global `trial_index` of each value when the variant's
    trials are interleaved with others (ABAB): the test only uses their order, the slope
    their spacing. NaN values (failed trials) are dropped with their index. Without ties
    the smallest attainable p is 2/n!, so n < 5 is never significant at 0.05 and is
    reported as not testable.
    """
    y = np.asarray(values, dtype=np.float64).ravel()
    x = np.arange(y.size, dtype=np.float64) if trial_index is None else np.asarray(
        trial_index, dtype=np.float64)
    if x.shape != y.shape:
        raise StatsError(f"drift: {y.size} values but {x.size} trial indices")
    if np.isinf(y).any():
        raise StatsError("drift: infinite value")
    keep = ~np.isnan(y)
    x, y = x[keep], y[keep]
    if y.size < 2:
        raise StatsError(f"drift: needs at least 2 finite values, got {y.size}")
    testable = 2 / math.factorial(y.size) <= alpha
    if np.all(y == y[0]):
        return Drift(y.size, 0.0, 1.0, 0.0, testable, False)
    result = sps.kendalltau(x, y)
    tau, p = float(result.statistic), float(result.pvalue)
    median = float(np.median(y))
    slope = float(sps.theilslopes(y, x).slope) / (abs(median) if median else 1.0)
    return Drift(y.size, tau, p, slope, testable, testable and p < alpha)


@dataclass(frozen=True)
class Calibration:
    """What an A/A run says about a setup: its noise and what it can detect."""

    summary: Summary  # includes cv and the median CI
    ci_rel_width: float | None  # (high - low) / median of the median CI
    log_sd: float | None  # SD used by the power formulas (log scale if all values > 0)
    alpha: float
    power: float
    n_per_arm: int
    mde: float | None  # smallest relative change detectable with n_per_arm per arm
    mde_by_n: tuple[tuple[int, float | None], ...]
    drift: Drift | None  # trend along the given order, if there are >= 2 values


def calibrate(baseline: npt.ArrayLike, *, n_per_arm: int | None = None, alpha: float = 0.05,
              power: float = 0.8, confidence: float = 0.95,
              ns: Sequence[int] = (3, 5, 10, 20, 30)) -> Calibration:
    """A/A calibration from baseline-only repetitions (in trial order).

    Noise: CV and the binomial CI of the median. Detectability: the MDE of a two-arm
    comparison with `n_per_arm` repetitions each (default: as many as given) by the test
    that applies at that n (`harness.stats.two_sample.choose_test`), normal approximation on
    the log scale with this SD (`harness.stats.power`); None below 2 repetitions. Also
    runs `drift` (Mann-Kendall), since a trend inflates the SD and invalidates the
    exchangeability the tests assume.
    """
    x, _ = clean(baseline, "baseline")
    s = summarize(baseline, confidence)
    n = x.size if n_per_arm is None else n_per_arm
    if n < 1:
        raise StatsError(f"n_per_arm must be positive, got {n}")
    noise = pooled_noise([x])
    ci = s.median_ci
    width = (ci.high - ci.low) / abs(s.median) if ci and s.median else None

    def mde(k: int) -> float | None:
        return None if noise is None else minimal_detectable_effect(noise, k, k, alpha, power)

    trend = drift(baseline, alpha=alpha) if x.size >= 2 else None
    return Calibration(s, width, noise.sd if noise else None, alpha, power, n, mde(n),
                       tuple((k, mde(k)) for k in ns), trend)
