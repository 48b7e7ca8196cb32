"""One napilab run per host at a time.

The lock is a file on the host, `/var/tmp/napilab/lock-<host>.json`, created with the
shell's noclobber (O_EXCL), so two runs starting together cannot both take it. It
names the run, the controller machine and PID, and the start time. A lock whose PID no
longer runs on this controller is stale: napilab explains it and still refuses, since
the dead run may have left settings behind; `napilab restore` replays its journal and
clears the stale lock, and `--break-lock` overrides.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterable
from typing import Any

from harness.errors import HostError
from harness.hosts.settings import JOURNAL_DIR
from harness.transport.transport import Transport

# Creates the lock only if it does not exist (`set -C`); paths are positional.
_CREATE = ["sh", "-c", 'umask 077 && mkdir -p "$1" && set -C && cat > "$2"', "napilab-lock"]


def lock_path(host: str) -> str:
    return f"{JOURNAL_DIR}/lock-{host}.json"


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def describe(doc: dict[str, Any]) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(doc.get("started", 0))))
    return (f"run {doc.get('run_id')} (pid {doc.get('pid')} on {doc.get('controller')}, "
            f"since {started})")


def is_stale(doc: dict[str, Any]) -> bool:
    """The holder ran on this controller and its process is gone."""
    return doc.get("controller") == socket.gethostname() and not pid_alive(doc.get("pid"))


def read_lock(transport: Transport) -> dict[str, Any] | None:
    result = transport.run(["cat", "--", lock_path(transport.host.name)], check=False)
    if result.exit_code != 0:
        return None
    try:
        doc = json.loads(result.stdout)
    except json.JSONDecodeError:
        return {"run_id": "?", "pid": None, "controller": "?", "started": 0,
                "corrupt": result.stdout[:200]}
    return doc if isinstance(doc, dict) else None


def acquire(transport: Transport, run_id: str, *, break_lock: bool = False) -> None:
    host = transport.host.name
    doc = {"run_id": run_id, "controller": socket.gethostname(), "pid": os.getpid(),
           "started": time.time(), "argv": sys.argv}
    for attempt in (1, 2):
        result = transport.run([*_CREATE, JOURNAL_DIR, lock_path(host)],
                               stdin=json.dumps(doc), check=False)
        if result.exit_code == 0:
            return
        holder = read_lock(transport)
        if holder is None and attempt == 1:
            continue  # released between our create and our read
        if break_lock and attempt == 1:
            transport.run(["rm", "-f", "--", lock_path(host)])
            continue
        if holder is None:
            raise HostError(f"{host}: cannot create {lock_path(host)}: {result.stderr.strip()}")
        if is_stale(holder):
            raise HostError(f"{host}: locked by {describe(holder)}, which is no longer running",
                            hint="it may have left settings changed: `napilab restore -i "
                            "INVENTORY` replays its journal and clears the stale lock; "
                            "--break-lock runs anyway")
        raise HostError(f"{host}: locked by {describe(holder)}",
                        hint="one napilab run per host at a time; wait for it, or use "
                        "--break-lock if you know it is dead")


def release(transport: Transport, run_id: str) -> None:
    """Remove the lock if it is still ours."""
    holder = read_lock(transport)
    if holder is not None and holder.get("run_id") == run_id:
        transport.run(["rm", "-f", "--", lock_path(transport.host.name)], check=False)


def acquire_all(transports: Iterable[Transport], run_id: str, *,
                break_lock: bool = False) -> list[Transport]:
    """Lock every host or none."""
    taken: list[Transport] = []
    try:
        for transport in transports:
            acquire(transport, run_id, break_lock=break_lock)
            taken.append(transport)
    except BaseException:
        for transport in taken:
            release(transport, run_id)
        raise
    return taken
