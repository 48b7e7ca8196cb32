"""What a report says about a run besides the A/B table, read from the manifest and
raw/ only: status and failed trials (with the tail of their tools' stderr), settings as
requested and as read back, the exact commands per host, links to every raw output,
host facts, confounders, and kprobe functions a kernel does not have ("absent").

Every string here may come from a host, a tool or a profile: renderers escape it (HTML
through Jinja2's autoescape, Markdown through reports.formats.markdown.escape).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.profile import knobs, redact
from reports.ab.compare import RunData
from reports.ab.model import Line, format_number

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


def run_status(manifest: Mapping[str, Any]) -> RunStatus:
    trials = manifest.get("trials") or []
    ok = sum(1 for t in trials if t.get("status") == "ok")
    failed = sum(1 for t in trials if t.get("status") == "failed")
    return RunStatus(str(manifest.get("status", "unknown")), len(trials), ok, failed,
                     bool(manifest.get("incomplete", False)))


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
    for trial in run.manifest.get("trials") or []:
        if trial.get("status") != "failed":
            continue
        tails = []
        for path in sorted((run.directory / "raw" / str(trial["id"])).glob("*/*.err")):
            text = tail(path)
            if text.strip():
                tails.append((path.relative_to(run.directory).as_posix(), text))
        out.append(Failure(str(trial["id"]), str(trial.get("variant", "")),
                           int(trial.get("rep", 0)), str(trial.get("error", "")), tuple(tails)))
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


def same_value(path: str, a: str, b: str) -> bool:
    """Requested and read-back values in the form the kernel shows (the comparison
    harness.confounders makes); sched CPU lists are compared as lists."""
    if path.endswith("/cpus"):
        try:
            return knobs.cpu_list(a) == knobs.cpu_list(b)
        except knobs.KnobValueError:
            return a.strip() == b.strip()
    return knobs.canonical(path, a) == knobs.canonical(path, b)


def _state(change: Mapping[str, Any]) -> str:
    effective = change.get("effective")
    if change.get("kind") == "kprobe":
        return "absent" if effective == "absent" else "ok"
    if effective is None:
        return "unread"
    same = same_value(str(change.get("path", "")), str(change.get("requested", "")),
                      str(effective))
    return "ok" if same else "mismatch"


_WORST = {"ok": 0, "absent": 1, "unread": 2, "mismatch": 3}


def settings_rows(manifest: Mapping[str, Any]) -> list[SettingRow]:
    """One row per (variant, host, knob) over every trial: a knob that read back wrong
    in any repetition is flagged, with every distinct value read back."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for trial in manifest.get("trials") or []:
        for change in trial.get("settings") or []:
            key = (str(trial.get("variant")), str(change.get("host")), str(change.get("path")))
            row = rows.setdefault(key, {"change": change, "read": {}, "state": "ok"})
            row["read"].setdefault(str(change.get("effective")), None)
            state = _state(change)
            if _WORST[state] > _WORST[row["state"]]:
                row["state"] = state
    out = []
    for (variant, host, _), row in rows.items():
        change = row["change"]
        out.append(SettingRow(variant, host, str(change.get("kind", "")),
                              str(change.get("target", "")), str(change.get("original", "")),
                              str(change.get("requested", "")), " / ".join(row["read"]),
                              row["state"]))
    return out


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
    for trial in run.manifest.get("trials") or []:
        chosen.setdefault(str(trial.get("variant")), str(trial["id"]))
    for trial in reversed(run.manifest.get("trials") or []):
        if trial.get("status") == "ok":
            chosen[str(trial.get("variant"))] = str(trial["id"])  # the first ok one wins
    document = (run.manifest.get("profile") or {}).get("document") or {}
    shown = redact.shown_names(document if isinstance(document, dict) else {})
    out = []
    for variant, trial_id in chosen.items():
        for path in sorted((run.directory / "raw" / trial_id).glob("*/*.json")):
            if path.stem not in WORKLOAD_SIDES:
                continue
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            code = doc.get("exit_code")
            rel = {s: path.with_suffix(s) for s in (".out", ".err")}
            links = {s: p.relative_to(run.directory).as_posix() if p.exists() else None
                     for s, p in rel.items()}
            out.append(Command(variant, trial_id, path.parent.name, path.stem,
                               tuple(redact.stored_argv([str(a) for a in
                                                         doc.get("argv") or []], shown)),
                               code if isinstance(code, int) else None, links[".out"],
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
    for trial in run.manifest.get("trials") or []:
        base = run.directory / "raw" / str(trial["id"])
        hosts = []
        for host_dir in sorted(p for p in base.glob("*") if p.is_dir()):
            files = tuple(p.relative_to(run.directory).as_posix()
                          for p in sorted(host_dir.iterdir()) if p.is_file())
            hosts.append((host_dir.name, files))
        out.append(RawTrial(str(trial["id"]), str(trial.get("variant", "")),
                            int(trial.get("rep", 0)), str(trial.get("status", "")),
                            tuple(hosts)))
    return out


def absent_functions(manifest: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """variant -> kprobe functions the kernel could not probe in its trials."""
    out: dict[str, set[str]] = {}
    for trial in manifest.get("trials") or []:
        for function in trial.get("absent") or []:
            out.setdefault(str(trial.get("variant")), set()).add(str(function))
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
              "user_hz", "cmdline")


def hosts(manifest: Mapping[str, Any]) -> list[HostRow]:
    changed = manifest.get("hosts_changed") or {}
    out = []
    for name, facts in (manifest.get("host_facts") or {}).items():
        facts = facts if isinstance(facts, Mapping) else {}
        nics = []
        for nic, info in (facts.get("nics") or {}).items():
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


def confounders(manifest: Mapping[str, Any], settings: list[SettingRow]) -> list[str]:
    """What could explain a difference besides the variants: hosts that rebooted or
    changed kernel mid-run, settings the kernel did not take, irqbalance running where
    the run pins IRQs (it rewrites the affinity behind napilab's back)."""
    out = []
    for host, what in (manifest.get("hosts_changed") or {}).items():
        out.append(f"host {host} changed during the run ({', '.join(map(str, what))} "
                   "differ from the start): its results are suspect")
    bad = [s for s in settings if s.state in ("mismatch", "unread")]
    if bad:
        where = sorted({f"{s.variant}/{s.host}" for s in bad})
        out.append(f"{len(bad)} setting(s) did not read back as requested "
                   f"({', '.join(where)}): see Settings")
    facts = manifest.get("host_facts") or {}
    pinned = sorted({s.host for s in settings if s.kind == "irq_affinity"})
    for host in pinned:
        wanted_off = any(s.host == host and s.kind == "irqbalance" for s in settings)
        if (facts.get(host) or {}).get("irqbalance") == "running" and not wanted_off:
            out.append(f"irqbalance runs on {host} while the run sets IRQ affinity there: "
                       "it may rewrite it during a trial")
    return out
