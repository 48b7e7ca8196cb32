"""Executing a plan: the trial loop, the per-host fan-out of set-up and snapshots,
the workload's processes, progress, and the plan rendered as commands (`napilab plan`)."""
