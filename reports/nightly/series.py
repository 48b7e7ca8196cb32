"""Which series a run joins: the nights of one profile on one host set, whose kernel
may change from night to night (that is what a gate is for).

A host set is named by what the run recorded: the replica of a run over replicas
(`replica pair2`: harness.cli.fleet, RUN/replicas/NAME) or, for a run on one set of
hosts, the inventory names of its hosts (`hosts a+b`). Runs of other host sets are other
series: their nights are not the candidate's reference, and their noise is not its
noise. A run over replicas is not a night itself; each of its replicas is one, in that
replica's series (`runs_under`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from napilab.harness.store.manifest import Manifest
from napilab.harness.store.store import REPLICAS_DIR

MARKERS = ("summary.json", "manifest.json")
COPY_SUFFIX = "-again"  # harness.cli.analysis: the A/A copy of the baseline variant


def aa_variants(variants: Sequence[str]) -> bool:
    """The variants of an A/A night (`run --aa`): the baseline and its copy. Such a
    night is in its profile's series but never another night's reference."""
    return len(variants) == 2 and variants[1] == variants[0] + COPY_SUFFIX


def series_name(replica: str | None, hosts: Iterable[str]) -> str:
    if replica:
        return f"replica {replica}"
    names = sorted(hosts)
    return "hosts " + "+".join(names) if names else "hosts -"


def of_manifest(manifest: Manifest) -> str:
    """The series of a stored run."""
    return series_name(manifest.replica, (manifest.host_facts or {}).keys())


def nights(run: Path) -> list[Path]:
    """The nights a run directory holds: itself, or each replica's run of a run over
    replicas (those with a manifest or a summary), in name order."""
    base = run / REPLICAS_DIR
    if base.is_dir():
        return [base / e.name for e in sorted(os.scandir(base), key=lambda e: e.name)
                if e.is_dir() and not e.name.startswith(".")
                and any((base / e.name / m).exists() for m in MARKERS)]
    return [run] if any((run / m).exists() for m in MARKERS) else []


def runs_under(profile_dir: Path) -> list[Path]:
    """Every night under RESULTS/PROFILE: its runs, a run over replicas by each replica,
    hidden directories (a run being made) left out."""
    try:
        entries = sorted(e.name for e in os.scandir(profile_dir)
                         if e.is_dir() and not e.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [night for name in entries for night in nights(profile_dir / name)]


def run_key(directory: Path) -> str:
    """A night's name among the nights of its profile: the run directory's name, or
    RUN/NAME for a replica's run (every run over replicas has a replicas/pair1)."""
    if directory.parent.name == REPLICAS_DIR:
        return f"{directory.parent.parent.name}/{directory.name}"
    return directory.name
