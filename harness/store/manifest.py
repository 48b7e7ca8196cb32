"""manifest.json as typed records (docs/design.md, "Results directory").

`Manifest` is the run's record (a harness.records Document): written before the first
trial and rewritten after every trial, so it and its `TrialRecord`s are filled in as
the run goes (mutable); what they hold is frozen (`Change`, `RestoreRecord`,
`HostFacts`, `ProfileRecord`...). harness.records.codec encodes and parses them (keys of
a newer napilab kept in `extra` and written back unchanged; a field at its default left
out, docs/records/Manifest.json states it).

Schema versions: 1 is napilab 0.1's (no verdicts); 2 stores with every change the
verdict taken when it was read back; 3 is the first written by the records codec
(fields at their default left out, none renamed: 2 reads as 3 unchanged). Reading
version 1 computes each verdict once with the same comparator the run uses (the knob
kind's, from the registry), so reports and comparisons read the stored verdict and
never recompute it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import msgspec

from napilab.harness.knobs.change import Change
from napilab.harness.records import codec
from napilab.harness.records.codec import JSON, Document, FrozenRecord, Record
from napilab.harness.stats.family import Workload

SCHEMA_VERSION = 3
READS = (1, 2, 3)  # the versions this napilab loads (older ones through MIGRATIONS)


def _same(doc: JSON) -> JSON:
    return doc


class RestoreRecord(FrozenRecord, frozen=True):
    WHAT = "a restore entry"

    host: str
    target: str
    path: str
    restored: str


class TrialRecord(Record):
    """One trial's entry: filled in as it runs (status pending -> running -> ok |
    failed | interrupted)."""

    WHAT = "a trial"

    index: int
    id: str
    variant: str
    rep: int
    status: str  # always written (no default): pending until the trial starts
    start: float | None = None
    end: float | None = None
    error: str | None = None
    settings: list[Change] | None = None
    restore: list[RestoreRecord] | None = None
    absent: list[str] | None = None  # kprobe functions the kernel could not probe
    # lab faults the trial was run again after (a VM guest that dropped: the error),
    # kept when it starts over (harness.engine.lab_faults)
    lab_faults: list[str] | None = None

    def restart(self) -> None:
        """Forget a previous attempt's outcome (a resumed trial starts over)."""
        for name in ("end", "error", "settings", "restore", "absent"):  # lab_faults kept
            setattr(self, name, None)


# harness.hosts.facts' `virtualization` of a QEMU guest without KVM: its timings are
# not latency numbers (reports flag them), its counters and settings are real.
TCG = "QEMU TCG, emulated"


class HostFacts(FrozenRecord, frozen=True):
    """What a comparison must know of a host (harness.hosts.facts); facts of a later
    napilab (or found on this host only, as af_xdp) are in `extra`."""

    WHAT = "host facts"

    boot_id: str | None = None
    kernel_release: str | None = None
    kernel_version: str | None = None
    cmdline: str | None = None
    online_cpus: str | None = None
    cpu_model: str | None = None
    user_hz: int | None = None
    irqbalance: str | None = None
    nics: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    tool_versions: dict[str, str] | None = None

    def get(self, name: str) -> Any:
        """A fact by name (a field or one of `extra`), None when not recorded."""
        if name in self.__struct_fields__ and name != "extra":
            return getattr(self, name)
        return self.extra.get(name)


class ProfileRecord(FrozenRecord, frozen=True):
    WHAT = "profile"

    name: str = ""
    path: str | None = None
    digest: str | None = None
    description: str = ""
    repeat: int = 0
    order: str = ""
    seed: int | None = None
    document: JSON = msgspec.field(default_factory=dict)  # the resolved profile, as YAML data


class InventoryRecord(FrozenRecord, frozen=True):
    WHAT = "inventory"

    path: str | None = None
    digest: str | None = None
    hosts: JSON = msgspec.field(default_factory=dict)  # name -> the host without secrets


class NapilabRecord(FrozenRecord, frozen=True):
    WHAT = "napilab"

    version: str = "?"
    git_sha: str | None = None


class ReplicaRecord(Record):
    """One replica of a run over several host sets (inventory `replicas:`): its hosts,
    where its own run directory is (relative to the fleet run's), and how it ended."""

    name: str
    hosts: dict[str, str]  # a profile's host name -> the inventory host
    dir: str  # replicas/NAME
    status: str = "pending"  # pending | running | complete | partial | failed | interrupted
    exit_code: int | None = None
    error: str | None = None


class WaitRecord(FrozenRecord, frozen=True):
    """What a run waited for before its first trial and how long (`napilab run
    --wait-lock`, `--wait-quiet`: harness.hosts.waits)."""

    WHAT = "a wait"

    what: str  # lock: hosts locked by another run | quiet: load average and CPU steal
    started: float  # seconds since the epoch
    seconds: float  # how long it waited
    max_seconds: float  # the most it would have waited
    reason: str = ""  # what it waited for, as it said it (empty: it did not wait)
    # quiet: the limits (load1, steal_pct) and each host's last reading of them
    limits: dict[str, float] | None = None
    hosts: dict[str, dict[str, float]] | None = None


class Manifest(Document):
    """A run's manifest.json."""

    WHAT = "a manifest"
    VERSION = SCHEMA_VERSION
    # 1 -> 2: verdicts, computed in from_json; 2 -> 3: the codec's (nothing renamed)
    MIGRATIONS: ClassVar[Mapping[int, Callable[[JSON], JSON]]] = {1: _same, 2: _same}

    run_id: str = ""
    profile: ProfileRecord = msgspec.field(default_factory=ProfileRecord)
    variants: list[str] = msgspec.field(default_factory=list)
    baseline: str = ""
    groups: dict[str, str] | None = None  # variant -> its comparison group (profile `group`)
    comparisons: list[list[str]] | None = None  # (baseline, variant) pairs; None: napilab
    # 0.1 and runs before comparison groups, every variant against the baseline
    metrics: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)  # profile `metrics:`
    workload_source: str = ""
    # source -> the metrics its tool or collector calls its headline (runners.registry),
    # as napilab knew them when the run was made: what reports judge and show when the
    # profile names nothing. Runs before it was recorded read today's (from_json).
    headlines: dict[str, list[str]] | None = None
    # workload source -> operation (transaction, message, packet, MB) -> the metric that
    # counts it, first found first (the tool's `operations`): CPU cost per operation
    # (reports.ab.cpu_cost). Runs before it was recorded read today's (from_json).
    operations: dict[str, dict[str, list[str]]] | None = None
    # variant -> its `matrix` values (parameter -> value); None before they were recorded
    parameters: dict[str, dict[str, Any]] | None = None
    # variant -> role ("" for all roles) -> its `cores` budget; None before recorded
    budgets: dict[str, dict[str, float]] | None = None
    # the offered-load ladder (harness.profile.load.Ladder.record) and `variants`:
    # variant -> {base, rung, rate} (rate None: `max`); None without a ladder
    load: dict[str, Any] | None = None
    # the trace collector's traced twins (Variant.traced_of): twin -> the variant it
    # is the traced copy of; their trials are stored, never judged (`traced_twins`)
    twins: dict[str, str] | None = None
    # variants whose every trial is traced (collect.trace.traced: all): their verdicts'
    # latencies include the tracer's overhead, which the run did not measure
    traced_all: list[str] | None = None
    inventory: InventoryRecord = msgspec.field(default_factory=InventoryRecord)
    napilab: NapilabRecord = msgspec.field(default_factory=NapilabRecord)
    argv: list[str] = msgspec.field(default_factory=list)
    pid: int = 0
    trials: list[TrialRecord] = msgspec.field(default_factory=list)
    status: str | None = None  # running | complete | partial | failed | interrupted
    incomplete: bool | None = None
    started: float | None = None
    ended: float | None = None
    host_facts: dict[str, HostFacts] | None = None
    hosts_changed: dict[str, list[str]] | None = None  # host -> identity facts that changed
    # one entry per `--resume` that found a host changed (harness.engine.resume_check):
    # at, changed {host: {fact: [before, now]}}, rebooted [hosts]
    resume_host_changes: list[JSON] | None = None
    resumed: list[float] | None = None
    argv_resume: list[str] | None = None
    # a replica's run: the inventory replica whose hosts it ran on (harness.cli.fleet)
    replica: str | None = None
    # a run over several replicas: each replica's run, under replicas/NAME; such a run
    # has no trials of its own
    replicas: list[ReplicaRecord] | None = None
    # what the run waited for before its first trial (run --wait-lock, --wait-quiet); a
    # resumed run adds its own waits; None: it was not asked to wait
    waits: list[WaitRecord] | None = None

    def trial(self, index: int) -> TrialRecord:
        return self.trials[index - 1]

    def written_as(self, variant: str) -> str:
        """The name VARIANT has in the profile's `variants:` (a load ladder's rung
        `busy+10k` is written as `busy`)."""
        found = ((self.load or {}).get("variants") or {}).get(variant) or {}
        return str(found.get("base") or variant)

    def headline(self, source: str) -> tuple[str, ...]:
        return tuple((self.headlines or {}).get(source, ()))

    def operation(self, source: str) -> dict[str, list[str]]:
        return dict((self.operations or {}).get(source, {}))

    @property
    def workload(self) -> Workload | None:
        """The workload as harness.stats.family judges it (None: no workload source)."""
        if not self.workload_source:
            return None
        return Workload(self.workload_source, self.headline(self.workload_source))

    @classmethod
    def from_json(cls, doc: Any, where: str = "manifest") -> Manifest:
        """A manifest of any version this napilab reads, migrated to the current one:
        a change stored without its verdict (version 1) gets it now, once; headlines
        and operations not recorded are today's."""
        manifest = codec.convert(doc, cls, where)
        for trial in manifest.trials:
            if trial.settings and any(c.verdict is None and c.effective is not None
                                      for c in trial.settings):
                trial.settings = [c.read_back(c.effective)
                                  if c.verdict is None and c.effective is not None else c
                                  for c in trial.settings]
        if manifest.headlines is None:
            manifest.headlines = headlines([manifest.workload_source])
        if manifest.operations is None:
            manifest.operations = operations([manifest.workload_source])
        return manifest


def traced_twins(manifest: Manifest) -> dict[str, str]:
    """A stored run's traced twins: twin -> the variant it is the traced copy of (empty
    without). The one place reports, summaries and gates learn which variants take no
    part in verdicts."""
    return dict(manifest.twins or {})


def operations(workloads: list[str]) -> dict[str, dict[str, list[str]]]:
    """The operations (name -> metric counting it) of these workload sources' tools."""
    from napilab.runners import registry

    found = {s: registry.operations(s) for s in dict.fromkeys(w for w in workloads if w)}
    return {s: ops for s, ops in found.items() if ops}


def headlines(workloads: list[str]) -> dict[str, list[str]]:
    """The headline metrics of these workload sources and of every collector, from the
    tools' and collectors' classes (imported here: a report that reads a recorded run
    never needs the tools otherwise)."""
    from napilab.runners import registry

    sources = [*dict.fromkeys(w for w in workloads if w), *registry.COLLECTORS]
    found = {s: list(registry.headline(s)) for s in sources}
    return {s: metrics for s, metrics in found.items() if metrics}
