"""The verdicts of a table's primary metrics pooled across replicas, Holm over them. Pure.

A metric's verdict, from its `Pooled` record (harness.stats.replicas.meta) and its
direction, with d = the equivalence margin (a fraction: 0.05 = 5%) or none:
- "inconclusive" when it could not be judged: no replica gave an effect; or the
  replicas disagree beyond their noise (Cochran's Q p < alpha and at least one replica
  significantly better *and* one significantly worse, each by its own interval); or
  they differ beyond their noise (Q p < alpha), more than half of them changed
  significantly one way and the pooled change is not significant (three replicas at
  -10%, -20%, -30% with t on 2 df: "no change" would hide three real changes); or,
  with a margin, the interval is neither beyond nor within +-d; or the interval
  excludes no change but Holm's adjustment leaves p >= alpha. "Could not judge" is never
  "no change": a gate reads "inconclusive" as not passed;
- "better" / "worse": Holm-adjusted p < alpha, p of the one-sided t tests of the pooled
  change against +d and -d (against 0 without a margin: p = 2 min(one-sided p)), and the
  interval beyond +-d on that side; the direction decides which is better;
- "no change": with a margin, the whole interval within +-d (an equivalence claim);
  without one, just not significant: the interval holds 0 (the reason says it is no
  equivalence claim).
Holm runs over the whole family (every metric passed, those without an estimate at
p = 1), as `harness.stats.compare.compare_metrics` does for one run. The verdict never
contradicts the printed change and interval: better/worse only with the interval beyond
+-d, "no change" only with an interval that holds 0 (within +-d with a margin).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from napilab.harness.stats.replicas.meta import Pooled
from napilab.harness.stats.stats import Adjust, StatsError, adjust_p


class ReplicaVerdict(StrEnum):
    """A metric's verdict across replicas (module doc)."""

    BETTER = "better"
    WORSE = "worse"
    NO_CHANGE = "no change"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Judgement:
    """One metric's verdict with its evidence.

    verdict      ReplicaVerdict
    reason       why, in words (the test, the margin, or what kept it from a verdict)
    p_value      the p judged (against +-margin, or 0) before Holm; None without a Pooled
    p_adjusted   Holm-adjusted over the family; None without a Pooled
    better, worse, n   replicas significantly better / worse by their own intervals, of
                 n replicas named (those without a value included; 0 without a Pooled)
    summary      "better on 2 of 3 replicas, pooled -12.0% (-18.1% to -5.5%), tau 0.031"
    """

    verdict: ReplicaVerdict
    reason: str
    p_value: float | None
    p_adjusted: float | None
    better: int
    worse: int
    n: int
    summary: str


def judge(pooled_by_metric: Mapping[str, Pooled | None], lower_is_better: Mapping[str, bool], *,
          alpha: float = 0.05, margin: float | None = None) -> dict[str, str]:
    """Each primary metric's verdict ("better", "worse", "no change", "inconclusive"),
    Holm over the family (module doc). A metric is keyed the same in both mappings; its
    Pooled is None when `pool` refused it (no replica gave an effect): "inconclusive".
    `judgements` gives the reasons, p-values and replica counts too."""
    return {name: j.verdict.value for name, j in
            judgements(pooled_by_metric, lower_is_better, alpha=alpha, margin=margin).items()}


def judgements(pooled_by_metric: Mapping[str, Pooled | None], lower_is_better: Mapping[str, bool],
               *, alpha: float = 0.05, margin: float | None = None) -> dict[str, Judgement]:
    """`judge` with each verdict's reason, p-values and replica counts."""
    if not pooled_by_metric:
        raise StatsError("no metrics to judge")
    if not 0 < alpha < 1:
        raise StatsError(f"alpha must be between 0 and 1, got {alpha}")
    if margin is not None and not 0 < margin < 1:
        raise StatsError(f"margin must be in (0, 1), got {margin}")
    undirected = sorted(set(pooled_by_metric) - set(lower_is_better))
    if undirected:
        raise StatsError(f"no direction (lower or higher is better) for {undirected}")
    for name, pooled in pooled_by_metric.items():
        if pooled is not None and not math.isclose(pooled.alpha, alpha):
            raise StatsError(f"{name}: pooled at alpha {pooled.alpha:g}, judged at {alpha:g}: "
                             "its interval would not match its test")
    up, down = (math.log1p(margin), math.log1p(-margin)) if margin else (0.0, 0.0)
    raw = {name: 1.0 if p is None else
           min(1.0, 2 * min(p.p_beyond(up, "greater"), p.p_beyond(down, "less")))
           for name, p in pooled_by_metric.items()}
    adjusted = dict(zip(raw, adjust_p(list(raw.values()), Adjust.HOLM), strict=True))
    m = len(raw)
    return {name: _decide(p, lower_is_better[name], raw[name], adjusted[name], alpha, margin, m)
            for name, p in pooled_by_metric.items()}


def _decide(p: Pooled | None, lower: bool, p_raw: float, p_adj: float, alpha: float,
            margin: float | None, m: int) -> Judgement:
    if p is None:
        return Judgement(ReplicaVerdict.INCONCLUSIVE, "not judged: no replica gave an "
                         "effect", None, None, 0, 0, 0, "no pooled change")
    better, worse = p.counts(lower)
    low, high = p.ci
    d = margin or 0.0
    beyond = f" beyond +-{d:.1%}" if d else ""
    verdict = ReplicaVerdict.INCONCLUSIVE
    differ = p.q_p is not None and p.q_p < alpha
    judged = p_adj < alpha and (low > d or high < -d)
    if differ and ((better and worse) or (2 * max(better, worse) > p.k and not judged)):
        split = f"{better} significantly better, {worse} significantly worse of {p.n}"
        reason = ("the replicas disagree beyond their noise: " if better and worse else
                  "the replicas differ beyond their noise and the pooled change is not "
                  "significant: ") + f"{split} (heterogeneity Q={p.q:.3g}, p={p.q_p:.3g})"
    elif judged:
        up = low > d
        verdict = ReplicaVerdict.BETTER if up != lower else ReplicaVerdict.WORSE
        reason = f"pooled t p={p_adj:.3g} < {alpha:g}{beyond}" + \
            (f" (Holm over {m} primary metrics)" if m > 1 else "")
    elif p_adj < alpha:  # the test and its own interval agree; kept as a guard
        reason = f"p={p_adj:.3g} < {alpha:g} but the interval reaches {d:.1%}"
    elif d and -d < low and high < d:
        verdict = ReplicaVerdict.NO_CHANGE
        reason = f"within +-{d:.1%}: the whole {1 - alpha:.0%} interval is inside it"
    elif d:
        reason = f"neither beyond nor within +-{d:.1%} at these replicas and trials"
    elif low <= 0 <= high:
        verdict = ReplicaVerdict.NO_CHANGE
        reason = (f"no significant change (p={p_adj:.3g}); no margin given, so not an "
                  "equivalence claim")
    else:
        reason = (f"the {1 - alpha:.0%} interval excludes 0 but Holm over {m} primary "
                  f"metrics: p={p_raw:.3g} alone, {p_adj:.3g} adjusted >= {alpha:g}: "
                  "not judged")
    return Judgement(verdict, reason, p_raw, p_adj, better, worse, p.n,
                     summary(p, better, worse))


def summary(p: Pooled, better: int, worse: int) -> str:
    """"better on 2 of 3 replicas, worse on 0 of 3, pooled -12.0% (-18.1% to -5.5%),
    tau 0.031": the line a table prints beside the verdict."""
    tau = "tau n/a (one replica)" if p.tau is None else f"tau {p.tau:.3f}"
    failed = f" ({len(p.missing)} without a value)" if p.missing else ""
    return (f"better on {better} of {p.n}, worse on {worse} of {p.n} replicas{failed}, "
            f"pooled {p.change:+.1%} ({p.ci[0]:+.1%} to {p.ci[1]:+.1%}), {tau}")
