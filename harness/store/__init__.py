"""The results directory: manifest and samples written atomically, the run's record
for `--resume`, and what differs between two runs' manifests (confounders)."""
