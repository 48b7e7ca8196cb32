"""`napilab restore`: replay the on-host journals an interrupted run left behind."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Iterator

from harness.errors import HostError, NapilabError
from harness.hosts import lock
from harness.hosts.settings import JOURNAL_DIR, HostSettings, tidy
from harness.profile.inventory import Host
from harness.transport.connect import close, transport_for


def _running_here(doc: dict[str, object]) -> bool:
    """The run that wrote the journal is still alive on this controller."""
    return (doc.get("controller") == socket.gethostname() and lock.pid_alive(doc.get("pid"))
            and doc.get("pid") != os.getpid())


def replay(hosts: Iterable[Host]) -> Iterator[str]:
    failures: list[str] = []
    for host in hosts:
        transport = transport_for(host)
        try:
            listing = transport.run(["find", JOURNAL_DIR, "-maxdepth", "1", "-name",
                                     "journal-*.json"], check=False)
            paths = sorted(listing.stdout.split()) if listing.exit_code == 0 else []
            found = 0
            for path in paths:
                text = transport.read_file(path)
                try:
                    doc = json.loads(text)
                except json.JSONDecodeError:
                    failures.append(f"{host.name}: {path} is not valid JSON; left in place")
                    continue
                if doc.get("host") != host.name:
                    continue  # another host's journal (namespaces share /var/tmp)
                found += 1
                if _running_here(doc):
                    yield (f"{host.name}: run {doc.get('run_id')} is still running "
                           f"(pid {doc.get('pid')}); its journal was left alone")
                    continue
                settings = HostSettings.from_journal(transport, text)
                settings.journal = path
                restored = settings.restore()
                tidy(transport, settings.run_id)
                yield (f"{host.name}: restored {len(restored)} setting(s) of run "
                       f"{doc.get('run_id')}: "
                       + (", ".join(f"{c.target}={c.original}" for c in restored) or "-"))
            if not found:
                yield f"{host.name}: no journal, nothing to restore"
            holder = lock.read_lock(transport)
            if holder is not None and lock.is_stale(holder):
                transport.run(["rm", "-f", "--", lock.lock_path(host.name)])
                tidy(transport, str(holder.get("run_id", "")))
                yield f"{host.name}: removed the stale lock of {lock.describe(holder)}"
        except NapilabError as exc:
            failures.append(str(exc))
        finally:
            close([transport])
    if failures:
        raise HostError("; ".join(failures), hint="fix the host and run napilab restore again")
