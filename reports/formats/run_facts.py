"""What a report says about a run besides the A/B table, read from the manifest and
raw/ only: status and failed trials (with the tail of their tools' stderr), settings as
requested and as read back, the exact commands per host, links to every raw output,
host facts, confounders, and kprobe functions a kernel does not have ("absent").

Every string here may come from a host, a tool or a profile: renderers escape it (HTML
through Jinja2's autoescape, Markdown through reports.formats.markdown.escape).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napilab.harness import redact
from napilab.harness.errors import HostError, InputError
from napilab.harness.grammar import cpus
from napilab.harness.knobs import registry
from napilab.harness.knobs.change import Change
from napilab.harness.store.command_record import read_command
from napilab.harness.store.manifest import TCG, Manifest
from napilab.reports.ab import queue_traffic
from napilab.reports.ab.compare import RunData, column_of
from napilab.reports.ab.model import Line, format_number

if TYPE_CHECKING:
    import pandas as pd

TAIL_LINES = 12  # of a failing command's stderr shown in a report
TAIL_CHARS = 1500
WORKLOAD_SIDES = ("client", "server")


@dataclass(frozen=True)
class RunStatus:
    status: str  # complete | partial | failed | interrupted | running
    total: int
    ok: int
    failed: int
    incomplete: bool

    @property
    def complete(self) -> bool:
        return self.status == "complete" and not self.incomplete and self.ok == self.total


def run_status(manifest: Manifest) -> RunStatus:
    trials = manifest.trials
    ok = sum(1 for t in trials if t.status == "ok")
    failed = sum(1 for t in trials if t.status == "failed")
    return RunStatus(manifest.status or "unknown", len(trials), ok, failed,
                     bool(manifest.incomplete))


def tail(path: Path, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last lines of a raw output ("" when absent), undecodable bytes replaced."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-chars * 4:].decode("utf-8", "replace")
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])[-chars:]


@dataclass(frozen=True)
class Failure:
    trial: str
    variant: str
    rep: int
    error: str
    stderr: tuple[tuple[str, str], ...]  # (raw path relative to RUN_DIR, its last lines)


def failures(run: RunData) -> list[Failure]:
    out = []
    for trial in run.manifest.trials:
        if trial.status != "failed":
            continue
        tails = []
        for path in sorted((run.directory / "raw" / trial.id).glob("*/*.err")):
            text = tail(path)
            if text.strip():
                tails.append((path.relative_to(run.directory).as_posix(), text))
        out.append(Failure(trial.id, trial.variant, trial.rep, trial.error or "",
                           tuple(tails)))
    return out


@dataclass(frozen=True)
class SettingRow:
    variant: str
    host: str
    kind: str
    target: str
    original: str
    requested: str
    effective: str  # read back; several values joined by " / " when trials differ
    state: str  # ok | mismatch | absent (a kprobe the kernel cannot probe) | unread
    path: str = ""  # the file written, which says how its values read

    def shown(self, value: str) -> str:
        """A value as a reader compares it with the profile: a CPU mask file's value as
        the CPU list the profile wrote, with the mask the kernel shows (`1 (mask 2)`)."""
        return " / ".join(cpu_mask_text(self.path, part) for part in value.split(" / "))


MASK_FILES = ("/rps_cpus", "/xps_cpus", "/smp_affinity")


def cpu_mask_text(path: str, text: str) -> str:
    """`2` in rps_cpus -> `1 (mask 2)`, `0` -> `none (mask 0)`; anything else as is."""
    if not path.endswith(MASK_FILES):
        return text
    try:
        listed = cpus.format_list(cpus.parse_mask(text))
    except cpus.CpuListError:
        return text
    return f"{listed or 'none'} (mask {text.strip()})"


# The verdict stored with each change (taken when it was read back), as reports say it.
_STATES = {"taken": "ok", "mismatch": "mismatch", "absent": "absent", "unread": "unread"}
_WORST = {"ok": 0, "absent": 1, "unread": 2, "mismatch": 3}


def settings_rows(manifest: Manifest) -> list[SettingRow]:
    """One row per (variant, host, knob) over every trial: a knob that read back wrong
    in any repetition is flagged, with every distinct value read back."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for trial in manifest.trials:
        for change in trial.settings or []:
            key = (trial.variant, change.host, change.path)
            row = rows.setdefault(key, {"change": change, "read": {}, "state": "ok"})
            row["read"].setdefault(_shown(change.kind, str(change.effective)), None)
            state = _STATES[change.state]
            if _WORST[state] > _WORST[row["state"]]:
                row["state"] = state
    out = []
    for (variant, host, _), row in rows.items():
        first: Change = row["change"]
        out.append(SettingRow(variant, host, first.kind, first.target,
                              _shown(first.kind, first.original),
                              _shown(first.kind, first.requested), " / ".join(row["read"]),
                              row["state"],
                              first.path))
    return out


def _shown(kind: str, value: str) -> str:
    """A value as its kind shows it (the kernel: release, version, additions)."""
    try:
        return registry.kind(kind).shown(value)
    except HostError:  # a kind of another napilab: as stored
        return value


@dataclass(frozen=True)
class Command:
    variant: str
    trial: str
    host: str
    side: str  # client | server
    argv: tuple[str, ...]
    exit_code: int | None
    out: str | None  # raw path relative to RUN_DIR, when stored
    err: str | None
    stderr_tail: str  # when the command failed

    @property
    def shell(self) -> str:
        """The command as one pastes it into a shell (quoted once, like the transport)."""
        return shlex.join(self.argv)


def commands(run: RunData) -> list[Command]:
    """The workload commands of each variant's first completed trial (or first trial)."""
    chosen: dict[str, str] = {}
    for trial in run.manifest.trials:
        chosen.setdefault(trial.variant, trial.id)
    for trial in reversed(run.manifest.trials):
        if trial.status == "ok":
            chosen[trial.variant] = trial.id  # the first ok one wins
    shown = redact.shown_names(run.manifest.profile.document)
    out = []
    for variant, trial_id in chosen.items():
        for path in sorted((run.directory / "raw" / trial_id).glob("*/*.json")):
            if path.stem not in WORKLOAD_SIDES:
                continue
            try:
                record = read_command(path)
            except (OSError, InputError):
                continue
            code = record.exit_code
            rel = {s: path.with_suffix(s) for s in (".out", ".err")}
            links = {s: p.relative_to(run.directory).as_posix() if p.exists() else None
                     for s, p in rel.items()}
            out.append(Command(variant, trial_id, path.parent.name, path.stem,
                               tuple(redact.stored_argv(record.argv, shown)),
                               code, links[".out"],
                               links[".err"], tail(rel[".err"]) if code not in (0, None) else ""))
    return out


@dataclass(frozen=True)
class RawTrial:
    trial: str
    variant: str
    rep: int
    status: str
    files: tuple[tuple[str, tuple[str, ...]], ...]  # (host, raw paths relative to RUN_DIR)


def raw_outputs(run: RunData) -> list[RawTrial]:
    out = []
    for trial in run.manifest.trials:
        base = run.directory / "raw" / trial.id
        hosts = []
        for host_dir in sorted(p for p in base.glob("*") if p.is_dir()):
            files = tuple(p.relative_to(run.directory).as_posix()
                          for p in sorted(host_dir.iterdir()) if p.is_file())
            hosts.append((host_dir.name, files))
        out.append(RawTrial(trial.id, trial.variant, trial.rep, trial.status, tuple(hosts)))
    return out


def absent_functions(manifest: Manifest) -> dict[str, frozenset[str]]:
    """column (a variant, or its `report.columns` column) -> kprobe functions the
    kernel could not probe in its trials."""
    columns = column_of(manifest)
    out: dict[str, set[str]] = {}
    for trial in manifest.trials:
        for function in trial.absent or []:
            # the kprobe kind's target is `kprobe FUNCTION`; the table's metric FUNCTION
            out.setdefault(columns.get(trial.variant, trial.variant), set()).add(
                str(function).split()[-1])
    return {variant: frozenset(names) for variant, names in out.items()}


def is_absent(line: Line, column: str, absent: Mapping[str, frozenset[str]]) -> bool:
    """A kprobe line's cell without values because the function does not exist there:
    printed "absent" (as seed 001's cover letter does), never "-" or 0."""
    return (line.source == "kprobes" and not line.cells[column].values
            and line.metric in absent.get(column, frozenset()))


def cell_text(line: Line, column: str, absent: Mapping[str, frozenset[str]]) -> str:
    if is_absent(line, column, absent):
        return "absent"
    return format_number(line.cells[column].value)


@dataclass(frozen=True)
class HostRow:
    name: str
    facts: dict[str, str]  # kernel_release, kernel_version, cpu_model, ... as text
    nics: tuple[tuple[str, str], ...]  # (interface, "driver version firmware" or error)
    tools: tuple[tuple[str, str], ...]  # (tool, version) when the facts record them
    changed: tuple[str, ...]  # facts that changed during the run (hosts_changed)


HOST_FACTS = ("kernel_release", "kernel_version", "cpu_model", "online_cpus", "irqbalance",
              "user_hz", "cmdline", "virtualization")


def hosts(manifest: Manifest) -> list[HostRow]:
    changed = manifest.hosts_changed or {}
    out = []
    for name, facts in (manifest.host_facts or {}).items():
        nics = []
        for nic, info in facts.nics.items():
            info = info if isinstance(info, Mapping) else {}
            desc = info.get("error") or " ".join(
                str(info[k]) for k in ("driver", "version", "firmware-version") if info.get(k))
            nics.append((str(nic), str(desc or "?")))
        tools = facts.get("tool_versions") or facts.get("tools") or {}
        out.append(HostRow(str(name), {k: _text(facts.get(k)) for k in HOST_FACTS},
                           tuple(nics), tuple((str(t), _text(v)) for t, v in tools.items())
                           if isinstance(tools, Mapping) else (),
                           tuple(str(c) for c in changed.get(name) or [])))
    return out


def _text(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def kernels(manifest: Manifest) -> dict[str, dict[str, str]]:
    """column (a variant, or its `report.columns` column) -> host -> the kernel its
    trials ran on, for the runs that boot hosts into kernels (the profile's `kernel:`):
    `RELEASE (VERSION)`, each distinct one once."""
    columns = column_of(manifest)
    out: dict[str, dict[str, list[str]]] = {}
    for trial in manifest.trials:
        for change in trial.settings or []:
            if change.kind == "kernel" and change.effective:
                ran = _shown(change.kind, change.effective).split(", command line")[0]
                seen = out.setdefault(columns.get(trial.variant, trial.variant), {})
                if ran not in seen.setdefault(change.host, []):
                    seen[change.host].append(ran)
    return {col: {host: " / ".join(ran) for host, ran in hosts.items()}
            for col, hosts in out.items()}


def emulated_hosts(manifest: Manifest) -> list[str]:
    """Hosts whose every instruction was emulated (QEMU TCG guests)."""
    return sorted(host for host, facts in (manifest.host_facts or {}).items()
                  if facts.get("virtualization") == TCG)


def confounders(manifest: Manifest, settings: list[SettingRow],
                samples: pd.DataFrame | None = None) -> list[str]:
    """What could explain a difference besides the variants: hosts that rebooted or
    changed kernel mid-run, settings the kernel did not take, irqbalance running where
    the run pins IRQs (it rewrites the affinity behind napilab's back), per-queue
    settings on queues that carried little of the traffic (with `samples`)."""
    out = []
    for host, what in (manifest.hosts_changed or {}).items():
        out.append(f"host {host} changed during the run ({', '.join(map(str, what))} "
                   "differ from the start): its results are suspect")
    bad = [s for s in settings if s.state in ("mismatch", "unread")]
    if bad:
        where = sorted({f"{s.variant}/{s.host}" for s in bad})
        out.append(f"{len(bad)} setting(s) did not read back as requested "
                   f"({', '.join(where)}): see Settings")
    facts = manifest.host_facts or {}
    for host in emulated_hosts(manifest):
        out.append(f"host {host} is a {TCG} guest: its timings (latencies, rates, CPU "
                   "times) are not representative of hardware; counters and settings are")
    pinned = sorted({s.host for s in settings if s.kind == "irq_affinity"})
    for host in pinned:
        wanted_off = any(s.host == host and s.kind == "irqbalance" for s in settings)
        if host in facts and facts[host].irqbalance == "running" and not wanted_off:
            out.append(f"irqbalance runs on {host} while the run sets IRQ affinity there: "
                       "it may rewrite it during a trial")
    if samples is not None:
        out += queue_traffic.missed(samples, settings)
    return out
