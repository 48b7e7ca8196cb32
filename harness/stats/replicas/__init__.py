"""One verdict across replicas: each replica's change on the log scale, pooled by a
random-effects model (harness.stats.replicas.pooling)."""

from napilab.harness.stats.replicas.pooling import Effect, Pooled, judge, pool, replica_effect

__all__ = ["Effect", "Pooled", "judge", "pool", "replica_effect"]
