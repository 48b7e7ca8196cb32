"""The trace collector's tracers (bpftrace) on a host: which are running, and stopping
one a dead run left behind (`napilab restore`). A tracer's probes are attached through
its file descriptors, so they go when its process does: stopping it detaches them.

A tracer is napilab's when /var/tmp/napilab/trace-NETNS.pid names it (NETNS: the host's
network namespace inode, as runners.collectors.trace.trace writes it); any other
bpftrace on the host is someone else's, reported by `hosts check`, never stopped."""

from __future__ import annotations

from napilab.harness.transport.transport import Transport
from napilab.runners import registry

# one line per napilab tracer of this host (`PID`), then `others N`: other bpftraces
_LIST = ["sh", "-c", 'ns=$(readlink /proc/self/ns/net | tr -dc 0-9)\n'
         'f=/var/tmp/napilab/trace-$ns.pid; mine=\n'
         'if [ -f "$f" ]; then p=$(cat "$f")\n'
         '  if [ "$(cat /proc/$p/comm 2>/dev/null)" = bpftrace ]; then mine=$p; '
         'echo "napilab $p"; fi; fi\n'
         'n=0; for c in /proc/[0-9]*/comm; do [ "$(cat "$c" 2>/dev/null)" = bpftrace ] '
         '|| continue; p=${c#/proc/}; p=${p%/comm}; [ "$p" = "$mine" ] || n=$((n+1)); done\n'
         'echo "others $n"', "napilab-tracers"]


def running(transport: Transport) -> tuple[int | None, int]:
    """(the PID of napilab's tracer on this host or None, how many other bpftrace
    processes run on it)."""
    mine: int | None = None
    others = 0
    for line in transport.run(_LIST, check=False).stdout.splitlines():
        word, _, number = line.partition(" ")
        if word == "napilab" and number.isdigit():
            mine = int(number)
        elif word == "others" and number.isdigit():
            others = int(number)
    return mine, others


def stop_left(transport: Transport) -> str | None:
    """Stop the tracer a dead run left on this host (SIGINT, then SIGKILL after 20 s),
    with its files; a line saying so, or None when there was none."""
    pid, _ = running(transport)
    if pid is None:
        return None
    transport.run(registry.snapshot_argv(["trace"], "stop"), check=False,
                  timeout=registry.snapshot_timeout(["trace"], "stop"))
    return f"{transport.host.name}: stopped the tracer (bpftrace, pid {pid}) a dead run left"
