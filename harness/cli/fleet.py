"""`napilab run` over several replicas: the same profile on several host sets at once.

An inventory's `replicas:` binds the host names a profile's roles name to hosts, once per
replica (harness.inventory). `napilab run` then makes one run directory,

    RESULTS/PROFILE/STAMP-RUN_ID/manifest.json      the run: its replicas, how each ended
                                 replicas/NAME/     each replica's own run, whole

and runs every replica as its own `napilab run` process (`--replicas NAME --run-dir
...`), all at once and through the same schedule (a randomized order's seed is drawn
once and given to each). A replica's process is a run as any other: it locks its
hosts, journals and restores them, stores each trial before the next, and is resumed
or restored on its own. So a replica that fails (a host unreachable, a restore that
failed) is reported, and the others go on. Each process is told SIGTERM if this one
dies (PR_SET_PDEATHSIG): a controller killed with SIGKILL leaves replicas that restore
their hosts and stop, and `napilab restore -i INVENTORY` for what a SIGKILL of them all
left. Each one's output is kept in replicas/NAME.log and comes here line by line, named
by its replica.

The report of such a run (reports.fleet) pools each primary metric's change over the
replicas and shows each replica's beside it.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napilab.harness.engine.progress import Progress
from napilab.harness.errors import ExitCode, InputError

if TYPE_CHECKING:
    from napilab.harness.inventory.inventory import Inventory
    from napilab.harness.profile.plan import Plan
    from napilab.harness.profile.profile import Profile

_PR_SET_PDEATHSIG = 1
# a replica's process: napilab's CLI in this interpreter (argv[0] shown as napilab)
_CHILD = "import sys; sys.argv[0] = 'napilab'; from napilab.harness.cli.main import main; main()"


def with_replicas(inventory: Inventory, specs: tuple[str, ...]) -> Inventory:
    """The inventory with the replicas of `--replica NAME:ALIAS=HOST[,ALIAS=HOST...]`
    added (a replica bound on the command line: a CI job that gets its pair from
    elsewhere, one runner per pair)."""
    from dataclasses import replace

    from napilab.harness.grammar.schema import suggest

    replicas = {name: dict(binding) for name, binding in inventory.replicas.items()}
    owner = {host: name for name, binding in replicas.items() for host in binding.values()}
    problems = []
    for spec in specs:
        name, sep, rest = spec.partition(":")
        pairs = [p.partition("=") for p in rest.split(",") if p.strip()]
        if not sep or not name or not pairs or any(not a or not s or not h
                                                     for a, s, h in pairs):
            problems.append(f"--replica {spec!r}: NAME:ALIAS=HOST[,ALIAS=HOST...], e.g. "
                            "pair1:a=lab1-a,b=lab1-b")
            continue
        if name in replicas:
            problems.append(f"--replica {spec!r}: {inventory.path} has a replica {name!r}")
            continue
        replicas[name] = {}
        for alias, _, host in pairs:
            if host not in inventory.hosts:
                problems.append(f"--replica {spec!r}: no host {host!r} in {inventory.path}"
                                f"{suggest(host, inventory.hosts)}")
            elif host in owner:
                problems.append(f"--replica {spec!r}: host {host!r} is in replica "
                                f"{owner[host]!r} too: a host serves one replica")
            else:
                owner[host] = name
                replicas[name][alias] = host
    if problems:
        raise InputError("; ".join(problems))
    return replace(inventory, replicas=replicas)


def chosen(inventory: Inventory, names: str | None) -> list[str]:
    """The replicas a run drives: `--replicas a,b`, or all of the inventory's."""
    if names is None or names == "all":
        return list(inventory.replicas)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in inventory.replicas]
    if unknown or not wanted:
        raise InputError(f"--replicas {names!r}: {inventory.path} has replicas "
                         f"{sorted(inventory.replicas) or 'none'}"
                         + (f" (not {unknown})" if unknown else ""))
    return list(dict.fromkeys(wanted))


def bind_all(profile: Profile, inventory: Inventory, names: list[str]) -> dict[str, Plan]:
    """Every replica's plan, all problems of all replicas at once, before any host."""
    from napilab.harness.errors import Problem
    from napilab.harness.profile.plan import bind

    plans: dict[str, Plan] = {}
    problems: list[Problem] = []
    for name in names:
        try:
            plans[name] = bind(profile, inventory, replica=name)
        except InputError as exc:
            problems += exc.problems
    if problems:
        raise InputError(sorted(set(problems), key=str))
    return plans


def run_replicas(profile_path: str, profile: Profile, inventory: Inventory,
                 plans: dict[str, Plan], results: str, *, transport: str | None,
                 keep_going: bool, break_lock: bool, formats: list[str],
                 progress: Progress, quiet: bool, passed: list[str] | None = None) -> ExitCode:
    """Run every replica at once; the run's manifest says how each ended. Exit: OK when
    every replica completed, ERROR when none did, PARTIAL otherwise. `passed`: options
    each replica's process takes as they are (--wait-lock, --wait-quiet: each waits for
    its own hosts)."""
    from napilab.harness.store.manifest import InventoryRecord, ReplicaRecord
    from napilab.harness.store.runs import new_manifest
    from napilab.harness.store.store import REPLICAS_DIR, RunStore, check_room

    check_room(results)
    manifest = new_manifest(next(iter(plans.values())))
    manifest.replica = None
    manifest.inventory = InventoryRecord(
        manifest.inventory.path, manifest.inventory.digest,
        {h.name: h.public() for p in plans.values() for h in p.hosts.values()})
    manifest.replicas = [ReplicaRecord(name, dict(inventory.replicas[name]),
                                       f"{REPLICAS_DIR}/{name}") for name in plans]
    manifest.status, manifest.started = "running", time.time()
    store = RunStore.create(results, profile.name, manifest)
    store.release_reserve()
    progress.note(f"run {store.run_id}: {len(plans)} replicas at once -> {store.dir}")
    (store.dir / REPLICAS_DIR).mkdir()
    children: dict[str, subprocess.Popen[bytes]] = {}
    readers: list[threading.Thread] = []
    lock = threading.Lock()
    try:
        for record in manifest.replicas:
            # a randomized order's seed, drawn once: the same schedule on every replica
            argv = _child_argv(profile_path, inventory.path, record.name,
                               store.dir / record.dir, profile.seed, transport=transport,
                               keep_going=keep_going, break_lock=break_lock, quiet=quiet)
            argv += passed or []
            log = store.dir / f"{record.dir}.log"
            with open(log, "wb") as out:
                children[record.name] = child = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent)
            record.status = "running"
            reader = threading.Thread(target=_relay, args=(record.name, child, log, lock),
                                      name=f"napilab-replica-{record.name}", daemon=True)
            reader.start()
            readers.append(reader)
        store.save_manifest(final=False)
        _wait(children)
    except KeyboardInterrupt:
        manifest.status = "interrupted"
    finally:
        _stop(children)  # a no-op when all ended
        for reader in readers:
            reader.join(timeout=10)
        _record_ends(store.dir, manifest.replicas, children)
        if manifest.status != "interrupted":
            manifest.status = _status(manifest.replicas)
        manifest.ended = time.time()
        store.save_manifest()
        _write_summary(store.dir, progress)
    for record in manifest.replicas:
        if record.status != "complete":
            progress.note(f"replica {record.name}: {record.status}"
                          + (f" ({record.error})" if record.error else ""))
    if manifest.status == "interrupted":
        from napilab.harness.errors import Interrupted

        raise Interrupted(f"interrupted; each replica restored its hosts; {store.dir}")
    if formats and manifest.status in ("complete", "partial"):
        from napilab.harness.cli.execute import write_reports

        error = write_reports(store.dir, formats, progress)
        if error:
            from napilab.harness.errors import NapilabError

            raise NapilabError(f"the run is stored in {store.dir}, but {error}",
                               hint=f"`napilab report {store.dir}` renders it later")
    return {"complete": ExitCode.OK, "partial": ExitCode.PARTIAL}.get(manifest.status,
                                                                      ExitCode.ERROR)


def _write_summary(run_dir: Path, progress: Progress) -> None:
    """The run's summary.json: its replicas by name (each replica's run wrote its own),
    what a store's readers list first (harness.stores)."""
    from napilab.harness.errors import NapilabError
    from napilab.harness.store.summary import write_summary

    try:
        write_summary(run_dir)
    except (NapilabError, OSError) as exc:
        progress.note(f"summary.json not written ({exc}): `napilab push` writes it")


def _child_argv(profile: str, inventory: str, name: str, directory: Path, seed: int | None,
                *, transport: str | None, keep_going: bool, break_lock: bool,
                quiet: bool) -> list[str]:
    argv = [sys.executable, "-c", _CHILD, "run", profile, "-i", inventory, "--replicas", name,
            "--run-dir", str(directory), "--format", ""]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if transport:
        argv += ["--transport", transport]
    argv += [flag for flag, on in (("--keep-going", keep_going), ("--break-lock", break_lock),
                                   ("--quiet", quiet)) if on]
    return argv


def _die_with_parent() -> None:
    """In the replica's process, before exec: SIGTERM when this controller dies (it then
    restores its hosts and stops, as on a SIGTERM it is sent)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C reaches the whole group


def _relay(name: str, child: subprocess.Popen[bytes], log: Path,
           lock: threading.Lock) -> None:
    """The replica's output, each line named by it, on this process's stderr, read from
    its log (replicas/NAME.log, kept). A file, not a pipe: a replica whose controller
    died still writes its restore's lines without a broken pipe stopping it."""
    with open(log, "rb") as source:
        pending = b""
        while True:
            ended = child.poll() is not None
            chunk = source.read()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if lines:
                with lock:
                    for raw in lines:
                        sys.stderr.write(f"[{name}] {raw.decode(errors='replace')}\n")
                    sys.stderr.flush()
            if ended and not chunk:
                break
            if not chunk:
                time.sleep(0.1)
        if pending:
            with lock:
                sys.stderr.write(f"[{name}] {pending.decode(errors='replace')}\n")


def _wait(children: dict[str, subprocess.Popen[bytes]]) -> None:
    """Until every replica's process ended. SIGTERM here is passed on to them (they
    restore their hosts), then waited for."""
    def forward(signum: int, frame: Any) -> None:
        for child in children.values():
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        for child in children.values():
            child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop(children: dict[str, subprocess.Popen[bytes]], timeout: float = 600) -> None:
    """Every replica's process ended: those still running are sent SIGTERM (a Ctrl-C
    reached them already) and given `timeout` to restore their hosts."""
    deadline = time.monotonic() + timeout
    for child in children.values():
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)
    for child in children.values():
        while child.poll() is None:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
            except KeyboardInterrupt:  # a second Ctrl-C: still wait, they restore
                continue


def _record_ends(run_dir: Path, records: list[Any],
                 children: dict[str, subprocess.Popen[bytes]]) -> None:
    """Each replica's status from its own manifest (its exit code where it has none)."""
    from napilab.harness.errors import NapilabError
    from napilab.harness.store.store import load_manifest

    for record in records:
        child = children.get(record.name)
        record.exit_code = child.returncode if child is not None else None
        try:
            own = load_manifest(run_dir / record.dir)
        except (NapilabError, OSError):
            record.status = "failed"
            record.error = (f"exit code {record.exit_code}; no run directory (it stopped "
                            "before its first trial: its output above says why)")
            continue
        record.status = own.status or "failed"
        failed = next((t.error for t in own.trials if t.status == "failed" and t.error), None)
        if record.status != "complete":
            record.error = failed or f"exit code {record.exit_code}"


def _status(records: list[Any]) -> str:
    ended = {r.status for r in records}
    if ended == {"complete"}:
        return "complete"
    if ended & {"complete", "partial"}:
        return "partial"
    return "failed"
