"""The trace collector's bpftrace program: the stage files of stages/, each a piece of
bpftrace whose header says what it measures in the kernel's words and which probes it
needs, put together into the one program a host runs.

A stage file's header, one `// key: value` line each:
  id      its number in the histogram map (fixed: stored runs are read by it)
  stage   its name (a metric prefix: `napi_poll_p99`)
  says    what it measures and from which tracepoints or probes
  needs   the probes it attaches to; a host lacking one leaves the stage out (absent,
          never 0): `tracepoint:GROUP:EVENT` needs tracefs' events/GROUP/EVENT,
          `kprobe:FUNC` a kernel with kprobe_events and FUNC among the functions it
          can probe (tracefs' available_filter_functions: not inlined, not notrace)
  key     what its histograms are split by besides the CPU: none, irq, napi (NAPI id),
          function (a cross-CPU call's function)
  unit    ns (a time) or packets (a count per poll)

The body uses one macro, `HIST(KEY, VALUE);` on a line of its own, which this module
expands into the log-linear bucket of VALUE (16 buckets per power of two: each is at
most 1/16 of its lower bound wide, so a percentile read at a bucket's middle is within
3.2%) and `@hist[ID, cpu, KEY, BUCKET] = count();`. Maps named `@s_...` are a stage's
own state (bpftrace prints them at its exit too; the parser reads only `@hist` and
`@name` and `@func`, a key's name: a NAPI's device, a function's symbol).
"""

from __future__ import annotations

import base64
import functools
import gzip
import re
from dataclasses import dataclass
from importlib import resources

# 2**SUB_BITS buckets per power of two: the program buckets as histogram.py reads
from napilab.runners.collectors.trace.histogram import SUB_BITS

KEYS = ("none", "irq", "napi", "function")
UNITS = ("ns", "packets")
TIMEOUT_S = 900  # a tracer a killed run left behind ends by itself after 15 minutes
_HEADER = re.compile(r"^// (id|stage|says|needs|key|unit): (.+)$")
_MACRO = re.compile(r"^(\s*)HIST\((.+)\);\s*$")
_PROBE = re.compile(r"(tracepoint:[a-z0-9_]+:[a-z0-9_]+|kprobe:[A-Za-z0-9_.]+)")


@dataclass(frozen=True)
class Stage:
    id: int
    name: str
    says: str
    needs: tuple[str, ...]
    key: str
    unit: str
    body: str  # the bpftrace text, HIST expanded


def expand(body: str, stage_id: int) -> str:
    """Each `HIST(KEY, VALUE);` line as its bucket computation (branch-free of loops:
    bpftrace 0.17 verifies no loop here) and the map update."""
    out = []
    for line in body.splitlines():
        match = _MACRO.match(line)
        if not match:
            out.append(line)
            continue
        pad, args = match[1], match[2]
        key, _, value = _split_args(args)
        steps = "".join(f"{pad}if ($hv >= {1 << bits}) {{ $he += {bits}; $hv >>= {bits}; }}\n"
                        for bits in (32, 16, 8, 4, 2))
        out.append(
            f"{pad}$hd = (uint64)({value}); $hv = $hd; $he = (uint64)0;\n{steps}"
            f"{pad}if ($hv >= 2) {{ $he += 1; }}\n"
            f"{pad}$hb = $hd;\n"
            f"{pad}if ($he > {SUB_BITS}) {{ $hb = ($hd >> ($he - {SUB_BITS})) << "
            f"($he - {SUB_BITS}); }}\n"
            f"{pad}@hist[{stage_id}, cpu, (uint64)({key}), $hb] = count();")
    return "\n".join(out) + "\n"


def _split_args(args: str) -> tuple[str, str, str]:
    """`KEY, VALUE` split at the first comma outside parentheses."""
    depth = 0
    for i, ch in enumerate(args):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            return args[:i].strip(), ",", args[i + 1:].strip()
    raise ValueError(f"HIST needs KEY, VALUE: {args!r}")


def parse_stage(text: str, source: str) -> Stage:
    head: dict[str, str] = {}
    body: list[str] = []
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match and not body:
            head[match[1]] = match[2].strip()
        else:
            body.append(line)
    missing = [k for k in ("id", "stage", "says", "needs", "key", "unit") if k not in head]
    if missing:
        raise ValueError(f"{source}: header lacks {', '.join(missing)}")
    if head["key"] not in KEYS or head["unit"] not in UNITS:
        raise ValueError(f"{source}: key {head['key']!r} or unit {head['unit']!r}")
    needs = tuple(head["needs"].split())
    bad = [n for n in needs if not _PROBE.fullmatch(n)]
    if bad:
        raise ValueError(f"{source}: needs {bad}: expected tracepoint:G:E or kprobe:F")
    stage_id = int(head["id"])
    return Stage(stage_id, head["stage"], head["says"], needs, head["key"], head["unit"],
                 expand("\n".join(body).strip("\n"), stage_id))


@functools.cache
def stages() -> dict[str, Stage]:
    """Every stage of stages/, by name, in id order."""
    found = []
    for entry in resources.files(__package__).joinpath("stages").iterdir():
        if entry.name.endswith(".bt"):
            found.append(parse_stage(entry.read_text(), entry.name))
    found.sort(key=lambda s: s.id)
    ids = [s.id for s in found]
    assert len(set(ids)) == len(ids), f"two stages with one id: {ids}"
    return {s.name: s for s in found}


def by_id() -> dict[int, Stage]:
    return {s.id: s for s in stages().values()}


def source(chosen: tuple[str, ...] | None = None) -> str:
    """The stage sections a host filters, in id order: `//== STAGE NEEDS...` then its
    body; the last, `//== end`, ends a tracer a killed run left behind. The host keeps
    the sections whose probes it has (trace.py's snapshot section)."""
    picked = [s for s in stages().values() if chosen is None or s.name in chosen]
    return ("".join(f"//== {s.name} {' '.join(s.needs)}\n{s.body}" for s in picked)
            + f"//== end\ninterval:s:{TIMEOUT_S} {{ exit(); }}\n")


def payload(chosen: tuple[str, ...] | None = None) -> str:
    """The stage sections, gzip'd and base64'd: one word of the snapshot's argv."""
    data = gzip.compress(source(chosen).encode(), mtime=0)
    return base64.b64encode(data).decode()
