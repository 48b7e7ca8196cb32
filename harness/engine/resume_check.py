"""`--resume` on the same hosts: the second part of a run is comparable with the first
only if the hosts are the same machines in the same state.

The facts the manifest recorded when the run started are compared with the hosts as
they are now. A different kernel, command line, CPU, NIC driver or firmware, or
workload tool version refuses the resume (exit 2, nothing touched) unless
`--allow-host-change`, which continues and records the difference as a confounder. A
reboot alone (same kernel and tools, another boot_id) is recorded and reported, not
refused: napilab applies every setting afresh in each trial.

The record is additive to the manifest: `resume_host_changes` (one entry per resume
that found a difference: `at`, `changed` {host: {fact: [before, now]}}, `rebooted`
[hosts]) and the facts' names under `hosts_changed`, which reports show as a
confounder.
"""

from __future__ import annotations

import time
from typing import Any

from napilab.harness.engine.progress import Progress
from napilab.harness.errors import InputError
from napilab.harness.records import codec
from napilab.harness.store.manifest import HostFacts, Manifest

COMPARED = ("kernel_release", "kernel_version", "cmdline", "cpu_model", "nics",
            "tool_versions")


def differences(before: HostFacts, now: HostFacts) -> dict[str, list[Any]]:
    """Facts of one host that differ (only those the first part recorded)."""
    recorded, current = codec.full(before), codec.full(now)
    return {key: [recorded.get(key), current.get(key)] for key in COMPARED
            if recorded.get(key) is not None and recorded.get(key) != current.get(key)}


def compare(manifest: Manifest, facts: dict[str, HostFacts], allow: bool,
            progress: Progress, booted: set[str] | frozenset[str] = frozenset()) -> None:
    """`booted`: hosts the profile boots into its kernels, whose reboot is expected."""
    recorded = manifest.host_facts or {}
    changed: dict[str, dict[str, list[Any]]] = {}
    rebooted: list[str] = []
    for host, now in facts.items():
        before = recorded.get(host)
        if before is None:
            changed[host] = {"host": [None, host]}
            continue
        diff = differences(before, now)
        if diff:
            changed[host] = diff
        elif before.boot_id and before.boot_id != now.boot_id and host not in booted:
            rebooted.append(host)
    if changed and not allow:
        raise InputError(
            "; ".join(f"{host}: {key} was {old!r} when the run started, is {new!r} now"
                      for host, diff in changed.items() for key, (old, new) in diff.items()),
            hint="results of the two parts would not be comparable: start a new run, or "
            "--allow-host-change to continue and record the change as a confounder")
    if not changed and not rebooted:
        return
    manifest.resume_host_changes = [*(manifest.resume_host_changes or []),
                                    {"at": time.time(), "changed": changed,
                                     "rebooted": rebooted}]
    flagged = dict(manifest.hosts_changed or {})
    for host in [*changed, *rebooted]:
        names = list(changed.get(host, {})) or ["boot_id"]
        flagged[host] = sorted({*flagged.get(host, []), *names})
        progress.note(f"host {host} is not as it was when the run started "
                      f"({', '.join(names)}): recorded as a confounder")
    manifest.hosts_changed = flagged
