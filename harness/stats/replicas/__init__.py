"""One verdict across replicas (issue 38): each replica's change on the log scale
(effects.py), pooled by statsmodels' random-effects model (meta.py), the verdicts of a
table's primary metrics with Holm (verdicts.py). Pure; statsmodels and scipy are
imported inside the functions that compute with them.

    from napilab.harness.stats.replicas import replica_effect, pool, judge
"""

from napilab.harness.stats.replicas.effects import (
    Effect,
    Missing,
    ReplicaError,
    replica_effect,
    try_effect,
)
from napilab.harness.stats.replicas.meta import Pooled, ReplicaChange, pool
from napilab.harness.stats.replicas.verdicts import (
    Judgement,
    ReplicaVerdict,
    judge,
    judgements,
)

__all__ = ["Effect", "Judgement", "Missing", "Pooled", "ReplicaChange", "ReplicaError",
           "ReplicaVerdict", "judge", "judgements", "pool", "replica_effect", "try_effect"]
