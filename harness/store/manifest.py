"""manifest.json as typed records (docs/design.md, "Results directory").

`Manifest` is the run's record: written before the first trial and rewritten after
every trial, so it and its `TrialRecord`s are filled in as the run goes (mutable); what
they hold is frozen (`Change`, `RestoreRecord`, `HostFacts`, `ProfileRecord`...).
Every record has `to_json()` and `from_json()` (a change is harness.knobs.change.Change,
the record settings apply returns); keys a record does not know (written by
a newer napilab) are kept in `extra` and written back unchanged.

Schema versions: 1 is napilab 0.1's (no verdicts); 2 stores with every change the
verdict taken when it was read back. `from_json` migrates version 1 once, computing
each verdict with the same comparator the run uses (the knob kind's, from the
registry), so reports and comparisons read the stored verdict and never recompute it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, ClassVar, Self

from napilab.harness.errors import InputError
from napilab.harness.knobs.change import Change
from napilab.harness.stats.family import Workload

SCHEMA_VERSION = 2
READS = (1, 2)  # the versions this napilab loads (1 through the migration)
JSON = dict[str, Any]


@cache
def _names(cls: type) -> frozenset[str]:
    return frozenset(_ordered(cls))


@cache
def _ordered(cls: type) -> tuple[str, ...]:
    """A record's field names in order, without `extra`."""
    return tuple(f.name for f in fields(cls) if f.name != "extra")


def _known(cls: type, doc: Mapping[str, Any]) -> tuple[JSON, JSON]:
    """`doc` split into the keys `cls` has as fields and the rest."""
    names = _names(cls)
    return ({k: v for k, v in doc.items() if k in names},
            {k: v for k, v in doc.items() if k not in names})


def _dump(record: Any, skip_none: tuple[str, ...] = ()) -> JSON:
    """A record's fields as JSON (nested records through their to_json), `extra` last;
    fields named in `skip_none` are left out while None."""
    out: JSON = {}
    cls: type = type(record)
    for name in _ordered(cls):
        value = getattr(record, name)
        if value is None and name in skip_none:
            continue
        out[name] = _plain(value)
    return {**out, **getattr(record, "extra", {})}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float):
        return value
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _mapping(doc: Any, what: str) -> Mapping[str, Any]:
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise InputError(f"manifest: {what} is not an object")
    return doc


class Record:
    """to_json/from_json of a record whose fields are JSON values or records, with
    `extra`; `OPTIONAL` fields are left out of the JSON while None, `WHAT` names the
    record in errors."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    WHAT: ClassVar[str] = "a record"

    def to_json(self) -> JSON:
        return _dump(self, skip_none=self.OPTIONAL)

    @classmethod
    def from_json(cls, doc: Any) -> Self:
        known, extra = _known(cls, _mapping(doc, cls.WHAT))
        return cls(**known, extra=extra)  # type: ignore[call-arg]  # records have `extra`


@dataclass(frozen=True)
class RestoreRecord(Record):
    WHAT = "a restore entry"

    host: str
    target: str
    path: str
    restored: str
    extra: JSON = field(default_factory=dict)

    def to_json(self) -> JSON:  # by hand: the manifest holds one per change, rewritten
        # after every trial (benchmarks/store.py)
        return {"host": self.host, "target": self.target, "path": self.path,
                "restored": self.restored, **self.extra}


@dataclass
class TrialRecord(Record):
    """One trial's entry: filled in as it runs (status pending -> running -> ok |
    failed | interrupted)."""

    OPTIONAL = ("start", "end", "error", "settings", "restore", "absent")
    WHAT = "a trial"

    index: int
    id: str
    variant: str
    rep: int
    status: str = "pending"
    start: float | None = None
    end: float | None = None
    error: str | None = None
    settings: list[Change] | None = None
    restore: list[RestoreRecord] | None = None
    absent: list[str] | None = None  # kprobe functions the kernel could not probe
    # lab faults the trial was run again after (a VM guest that dropped: the error),
    # kept when it starts over (harness.engine.lab_faults)
    lab_faults: list[str] | None = None
    extra: JSON = field(default_factory=dict)

    def to_json(self) -> JSON:
        """By hand, as Change and RestoreRecord: one per trial, rewritten after each."""
        out: JSON = {"index": self.index, "id": self.id, "variant": self.variant,
                     "rep": self.rep, "status": self.status}
        for name, value in (("start", self.start), ("end", self.end), ("error", self.error)):
            if value is not None:
                out[name] = value
        if self.settings is not None:
            out["settings"] = [c.to_json() for c in self.settings]
        if self.restore is not None:
            out["restore"] = [r.to_json() for r in self.restore]
        if self.absent is not None:
            out["absent"] = list(self.absent)
        if self.lab_faults is not None:
            out["lab_faults"] = list(self.lab_faults)
        return {**out, **self.extra}

    def restart(self) -> None:
        """Forget a previous attempt's outcome (a resumed trial starts over)."""
        for name in self.OPTIONAL:
            if name != "start":
                setattr(self, name, None)

    @classmethod
    def from_json(cls, doc: Any) -> Self:
        known, extra = _known(cls, _mapping(doc, cls.WHAT))
        settings = known.pop("settings", None)
        restore = known.pop("restore", None)
        return cls(**known, extra=extra,
                   settings=None if settings is None else
                   [Change.from_json(c) for c in settings],
                   restore=None if restore is None else
                   [RestoreRecord.from_json(r) for r in restore])


# harness.hosts.facts' `virtualization` of a QEMU guest without KVM: its timings are
# not latency numbers (reports flag them), its counters and settings are real.
TCG = "QEMU TCG, emulated"


@dataclass(frozen=True)
class HostFacts(Record):
    """What a comparison must know of a host (harness.hosts.facts)."""

    OPTIONAL = ("boot_id", "kernel_release", "kernel_version", "cmdline", "online_cpus",
                "cpu_model", "user_hz", "irqbalance", "tool_versions")
    WHAT = "host facts"

    boot_id: str | None = None
    kernel_release: str | None = None
    kernel_version: str | None = None
    cmdline: str | None = None
    online_cpus: str | None = None
    cpu_model: str | None = None
    user_hz: int | None = None
    irqbalance: str | None = None
    nics: dict[str, dict[str, str]] = field(default_factory=dict)
    tool_versions: dict[str, str] | None = None
    extra: JSON = field(default_factory=dict)

    def get(self, name: str) -> Any:
        """A fact by name (a field or one of `extra`), None when not recorded."""
        if name in self.OPTIONAL or name == "nics":
            return getattr(self, name)
        return self.extra.get(name)


@dataclass(frozen=True)
class ProfileRecord(Record):
    WHAT = "profile"

    name: str = ""
    path: str | None = None
    digest: str | None = None
    description: str = ""
    repeat: int = 0
    order: str = ""
    seed: int | None = None
    document: JSON = field(default_factory=dict)  # the resolved profile, as YAML data
    extra: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class InventoryRecord(Record):
    OPTIONAL = ("digest",)
    WHAT = "inventory"

    path: str | None = None
    digest: str | None = None
    hosts: JSON = field(default_factory=dict)  # name -> the host without secrets
    extra: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class NapilabRecord(Record):
    WHAT = "napilab"

    version: str = "?"
    git_sha: str | None = None
    extra: JSON = field(default_factory=dict)


@dataclass
class Manifest:
    """A run's manifest.json."""

    OPTIONAL: ClassVar[tuple[str, ...]] = (
        "groups", "comparisons", "status", "incomplete", "started", "ended", "host_facts",
        "hosts_changed", "resume_host_changes", "resumed", "argv_resume", "headlines",
        "operations", "parameters", "budgets", "load")

    run_id: str = ""
    profile: ProfileRecord = field(default_factory=ProfileRecord)
    variants: list[str] = field(default_factory=list)
    baseline: str = ""
    groups: dict[str, str] | None = None  # variant -> its comparison group (profile `group`)
    comparisons: list[list[str]] | None = None  # (baseline, variant) pairs; None: napilab
    # 0.1 and runs before comparison groups, every variant against the baseline
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # profile `metrics:`
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
    inventory: InventoryRecord = field(default_factory=InventoryRecord)
    napilab: NapilabRecord = field(default_factory=NapilabRecord)
    argv: list[str] = field(default_factory=list)
    pid: int = 0
    trials: list[TrialRecord] = field(default_factory=list)
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
    schema_version: int = SCHEMA_VERSION
    extra: JSON = field(default_factory=dict)

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

    def to_json(self) -> JSON:
        out = {"schema_version": self.schema_version, "run_id": self.run_id,
               **_dump(self, skip_none=self.OPTIONAL)}
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], where: str = "manifest") -> Manifest:
        """A manifest of any version this napilab reads, migrated to the current one."""
        doc = _mapping(doc, "the manifest")
        version = doc.get("schema_version", SCHEMA_VERSION)
        if version not in READS:
            raise InputError(f"{where}: manifest schema_version {version!r}, this napilab "
                             f"reads {', '.join(map(str, READS))}")
        try:
            return cls._from_json(doc)
        except (TypeError, AttributeError) as exc:  # a field missing or of the wrong shape
            raise InputError(f"{where}: not a manifest napilab can read: {exc}") from None

    @classmethod
    def _from_json(cls, doc: Mapping[str, Any]) -> Manifest:
        known, extra = _known(cls, doc)
        for nested in ("profile", "inventory", "napilab", "trials", "host_facts",
                       "schema_version"):
            known.pop(nested, None)
        facts = _mapping(doc.get("host_facts"), "host_facts")
        if known.get("headlines") is None:
            known["headlines"] = headlines([str(doc.get("workload_source") or "")])
        if known.get("operations") is None:
            known["operations"] = operations([str(doc.get("workload_source") or "")])
        return cls(**known, extra=extra,
                   profile=ProfileRecord.from_json(doc.get("profile") or {}),
                   inventory=InventoryRecord.from_json(doc.get("inventory") or {}),
                   napilab=NapilabRecord.from_json(doc.get("napilab") or {}),
                   trials=[TrialRecord.from_json(t) for t in doc.get("trials") or []],
                   host_facts={str(h): HostFacts.from_json(f) for h, f in facts.items()}
                   if "host_facts" in doc else None)


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
