"""Starting a run's record and reopening it: the manifest written before the first
trial, and the checks `--resume` makes before it continues an interrupted run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from napilab.harness import __version__, redact
from napilab.harness.errors import InputError
from napilab.harness.profile.plan import Plan
from napilab.harness.profile.sections import ALL, traced_mode
from napilab.harness.store.manifest import (
    InventoryRecord,
    Manifest,
    NapilabRecord,
    ProfileRecord,
    headlines,
    operations,
)
from napilab.harness.store.store import RunStore


def git_sha() -> str | None:
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5, check=False)
    except OSError:
        return None
    return proc.stdout.strip() or None


def inventory_digest(plan: Plan) -> str:
    hosts = {name: host.public() for name, host in sorted(plan.hosts.items())}
    roles = {role: host.name for role, host in sorted(plan.role_hosts.items())}
    text = json.dumps({"hosts": hosts, "roles": roles}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def new_manifest(plan: Plan) -> Manifest:
    profile = plan.profile
    return Manifest(
        profile=ProfileRecord(profile.name, profile.path, profile.digest, profile.description,
                              profile.repeat, profile.order, profile.seed,
                              redact.document(profile.document)),
        variants=[v.name for v in profile.variants], baseline=profile.baseline,
        groups={v.name: v.group for v in profile.variants if v.group is not None},
        comparisons=[list(pair) for pair in profile.comparisons],
        metrics={name: asdict(policy) for name, policy in profile.metrics.items()},
        workload_source=profile.variants[0].workload.source,
        headlines=headlines([v.workload.source for v in profile.variants]),
        operations=operations([v.workload.source for v in profile.variants]),
        parameters={v.name: dict(v.parameters) for v in profile.variants if v.parameters}
        or None,
        budgets={v.name: dict(v.cores) for v in profile.variants if v.cores} or None,
        load=None if profile.load is None else profile.load.record() | {"variants": {
            v.name: {"base": v.base, "rung": v.rung.label, "rate": v.rung.rate}
            for v in profile.variants if v.rung is not None and v.traced_of is None}},
        twins=profile.twins or None,
        traced_all=[v.name for v in profile.variants if traced_mode(v.collect) == ALL]
        or None,
        inventory=InventoryRecord(plan.inventory.path, inventory_digest(plan),
                                  {n: h.public() for n, h in plan.hosts.items()}),
        napilab=NapilabRecord(__version__, git_sha()),
        argv=list(sys.argv), pid=os.getpid(), replica=plan.replica)


def open_for_resume(plan: Plan, run_dir: str | Path) -> RunStore:
    """The interrupted run at `run_dir`, if it is the same profile on the same hosts."""
    store = RunStore.open(run_dir)
    manifest = store.manifest
    problems = []
    if manifest.status == "complete":
        problems.append(f"{run_dir} is complete: nothing to resume")
    if manifest.profile.digest != plan.profile.digest:
        problems.append(f"the profile changed since {run_dir} started (resolved document "
                        "differs); start a new run")
    if manifest.inventory.digest != inventory_digest(plan):
        problems.append(f"the inventory or --transport changed since {run_dir} started; "
                        "start a new run")
    if problems:
        raise InputError("; ".join(problems))
    manifest.argv_resume = list(sys.argv)
    return store
