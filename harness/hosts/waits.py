"""What a run waits for before its first trial, when asked (`napilab run`):

- `--wait-lock DURATION`: a host locked by another run that is alive (harness.hosts.lock's
  `Locked`) is tried again every few seconds instead of refusing the run at once; the
  run says once what it waits for and for how long at most, and fails as without the
  option when DURATION has passed. Every try takes all hosts or none (lock.acquire_all),
  so two runs waiting for each other's hosts never hold some of them while they wait. A
  stale or corrupt lock and a journal left on a host are refused at once: waiting does
  not end them.
- `--wait-quiet LOAD[,STEAL]`: once the hosts are locked, until every host's 1-minute
  load average (/proc/loadavg) is at most LOAD and, with STEAL, its CPU steal (from two
  reads of /proc/stat's `cpu` line STEAL_WINDOW apart: steal ticks over all ticks but
  guest time, which user and nice already hold) at most STEAL percent; at most
  `--wait-quiet-max DURATION`, after which the run fails, before any trial, naming each
  host's numbers. As the netdev CI waits for a quiet machine before it runs its tests
  (NIPA, contest/remote/lib/loadavg.py `wait_loadavg`: the 1-minute load average and
  dirty memory, checked every 30 s until three checks in a row are below the target,
  with no maximum), but checked every POLL seconds (a tenth of a shorter maximum) and
  passed at the first quiet check: the hosts are locked by then, so no other napilab
  run starts on them while this one waits, and the 1-minute load average is already a
  smoothed number.

Each wait is recorded in the manifest (harness.store.manifest.WaitRecord: what, when,
how long, the most it would have waited, what it said; for quiet the limits and each
host's last reading), also when it did not have to wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from napilab.harness.errors import HostError, NapilabError
from napilab.harness.hosts import lock
from napilab.harness.store.manifest import WaitRecord
from napilab.harness.transport.transport import Transport
from napilab.runners.base import ParseError
from napilab.runners.collectors import proc_stat

POLL = 5.0  # seconds between two checks (or a tenth of a shorter maximum wait)
STEAL_WINDOW = 1.0  # seconds between the two /proc/stat reads steal is measured over
READ = ["cat", "/proc/loadavg", "/proc/stat"]
NOT_GUEST = proc_stat.FIELDS[:8]  # guest and guest_nice are inside user and nice


@dataclass(frozen=True)
class Quiet:
    load: float  # the 1-minute load average every host must be at or below
    steal_pct: float | None  # the CPU steal (percent) every host must be at or below
    max_seconds: float

    def text(self) -> str:
        steal = "" if self.steal_pct is None else f", CPU steal <= {self.steal_pct:g}%"
        return f"1-minute load average <= {self.load:g}{steal}"


@dataclass(frozen=True)
class Waits:
    lock_seconds: float | None = None  # --wait-lock
    quiet: Quiet | None = None  # --wait-quiet, --wait-quiet-max


@dataclass(frozen=True)
class Reading:
    load1: float
    steal_pct: float | None  # None: not measured (no limit, or a kernel without steal)

    def text(self) -> str:
        steal = "" if self.steal_pct is None else f", steal {self.steal_pct:.1f}%"
        return f"load {self.load1:g}{steal}"


def poll_interval(max_seconds: float) -> float:
    return max(0.05, min(POLL, max_seconds / 10))


def seconds_text(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"


def lock_hosts(transports: Sequence[Transport], run_id: str, *, break_lock: bool,
               waits: Waits, say: Callable[[str], None]
               ) -> tuple[list[Transport], list[WaitRecord]]:
    """Every host locked (waiting for a live run's lock when asked), then quiet when
    asked; the locks taken are released again when the quiet wait fails or is
    interrupted."""
    records = []
    if waits.lock_seconds is None:
        locked = lock.acquire_all(transports, run_id, break_lock=break_lock)
    else:
        locked, record = acquire_waiting(transports, run_id, break_lock=break_lock,
                                         max_seconds=waits.lock_seconds, say=say)
        records.append(record)
    if waits.quiet is not None:
        try:
            records.append(wait_quiet(locked, waits.quiet, say))
        except BaseException:
            lock.release_all(locked, run_id)
            raise
    return locked, records


def acquire_waiting(transports: Sequence[Transport], run_id: str, *, break_lock: bool,
                    max_seconds: float, say: Callable[[str], None]
                    ) -> tuple[list[Transport], WaitRecord]:
    started, start = time.time(), time.monotonic()
    poll = poll_interval(max_seconds)
    reason = ""
    while True:
        try:
            locked = lock.acquire_all(transports, run_id, break_lock=break_lock)
        except lock.Locked as exc:
            waited = time.monotonic() - start
            if waited + poll > max_seconds:
                raise lock.Locked(f"{exc.message} (waited {seconds_text(waited)}: "
                                  f"--wait-lock {max_seconds:g})", hint=exc.hint) from None
            if not reason:
                reason = exc.message
                say(f"waiting up to {seconds_text(max_seconds)} for the hosts' locks: "
                    f"{reason}")
            time.sleep(poll)
            continue
        return locked, WaitRecord(what="lock", started=started,
                                  seconds=round(time.monotonic() - start, 3),
                                  max_seconds=max_seconds, reason=reason)


def parse_loadavg(text: str, host: str) -> float:
    """The 1-minute load average of /proc/loadavg's line (`0.52 0.58 0.59 1/467 12345`)."""
    fields = text.split()
    try:
        return float(fields[0])
    except (IndexError, ValueError):
        raise HostError(f"{host}: /proc/loadavg reads {text[:80]!r}, not a load "
                        "average") from None


def steal_pct(before: proc_stat.ProcStat, after: proc_stat.ProcStat) -> float | None:
    """CPU steal between two reads, percent of all CPU time (None: the kernel has no
    steal field, before 2.6.11)."""
    old, new = before.total.ticks, after.total.ticks
    if "steal" not in new or "steal" not in old:
        return None
    total = sum(new[k] - old[k] for k in NOT_GUEST if k in new and k in old)
    return 0.0 if total <= 0 else round(100.0 * (new["steal"] - old["steal"]) / total, 2)


def _read(transport: Transport) -> tuple[float, proc_stat.ProcStat]:
    host = transport.host.name
    text = transport.run(READ, timeout=30).stdout
    first, _, rest = text.partition("\n")
    try:
        return parse_loadavg(first, host), proc_stat.parse(rest)
    except ParseError as exc:
        raise HostError(f"{host}: /proc/stat: {exc}") from None


def readings(transports: Sequence[Transport], steal: bool) -> dict[str, Reading]:
    """Each host's load average and (with `steal`) CPU steal over STEAL_WINDOW."""
    first = {t.host.name: _read(t) for t in transports}
    if not steal:
        return {host: Reading(load, None) for host, (load, _) in first.items()}
    time.sleep(STEAL_WINDOW)
    out = {}
    for transport in transports:
        load, now = _read(transport)
        out[transport.host.name] = Reading(load, steal_pct(first[transport.host.name][1],
                                                           now))
    return out


def _quiet(reading: Reading, quiet: Quiet) -> bool:
    return reading.load1 <= quiet.load and (
        quiet.steal_pct is None or reading.steal_pct is None
        or reading.steal_pct <= quiet.steal_pct)


def wait_quiet(transports: Sequence[Transport], quiet: Quiet,
               say: Callable[[str], None]) -> WaitRecord:
    started, start = time.time(), time.monotonic()
    poll = poll_interval(quiet.max_seconds)
    reason = ""
    while True:
        found = readings(transports, quiet.steal_pct is not None)
        busy = {h: r for h, r in found.items() if not _quiet(r, quiet)}
        waited = time.monotonic() - start
        if not busy:
            limits = {"load1": quiet.load} | (
                {} if quiet.steal_pct is None else {"steal_pct": quiet.steal_pct})
            hosts = {h: {"load1": r.load1} | ({} if r.steal_pct is None
                                               else {"steal_pct": r.steal_pct})
                     for h, r in found.items()}
            return WaitRecord(what="quiet", started=started, seconds=round(waited, 3),
                              max_seconds=quiet.max_seconds, reason=reason, limits=limits,
                              hosts=hosts)
        text = "; ".join(f"{h}: {r.text()}" for h, r in busy.items())
        if waited + poll > quiet.max_seconds:
            raise NapilabError(f"the hosts were not quiet ({quiet.text()}) within "
                               f"--wait-quiet-max {quiet.max_seconds:g} s: {text}",
                               hint="no trial ran; wait longer (--wait-quiet-max) or allow "
                                    "more (--wait-quiet LOAD[,STEAL])")
        if not reason:
            reason = f"{quiet.text()}; {text}"
            say(f"waiting up to {seconds_text(quiet.max_seconds)} for quiet hosts: {reason}")
        time.sleep(poll)
