"""trace: where the microseconds of the receive path went, per stage, from kernel
tracepoints (bpftrace on the host; docs/trace.md).

Like perf_stat it counts *during* the trial: the snapshot before the workload decodes
the stage sections (program.py) it was given as one argv word (`@trace:BASE64`), keeps
those whose probes the host has, starts `bpftrace -f json` on the rest in the background
and waits until its probes are attached; the snapshot after stops it with SIGINT, and
bpftrace prints its maps. Files: /var/tmp/napilab/trace-NETNS.* (the network
namespace's inode: two lab hosts of one machine have their own), the PID among them;
`napilab restore` stops a tracer a dead run left (harness.hosts.tracers), and its own
`interval:s:900` ends it otherwise.

The stop section's text: `stage NAME` per stage kept, `absent NAME: PROBE` per stage
left out (the probe the host lacks), then bpftrace's JSON lines (`{"type": "map",
"data": {"@hist": {"ID,CPU,KEY,BUCKET": COUNT}}}`, `@name` and `@func` (a key's
device or function): {"ID,KEY": NAME}; other
maps are the stages' own state and ignored), then `stderr: LINE` per line bpftrace
wrote there (its warnings; "couldn't set RLIMIT_MEMLOCK" is left out: harmless).

Refusals are said at the start: bpftrace not installed, no tracefs, no BTF
(/sys/kernel/btf/vmlinux), neither root nor CAP_BPF, or bpftrace failing to attach
(its stderr).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from napilab.harness.errors import NapilabError
from napilab.runners.base import COUNT, ParseError, Value
from napilab.runners.collectors.collector import HostInfo
from napilab.runners.collectors.trace import program
from napilab.runners.collectors.trace.histogram import Histogram, is_bucket, merge

TOOL = "trace"
SECTION = "@trace"
STARTED = "started"
# SIGINT is sent again every second until bpftrace exits: one that lands before bpftrace
# installed its handler is lost (a background job of sh starts with SIGINT ignored; a
# start right after a start hung here on it).
# bpftrace's start under QEMU TCG (both Debian kernels, 2 vCPUs): 34-45 s to attach the
# 42 probes of every stage, 7.5 s of it reading the kernel's BTF; its exit 1-6 s
ATTACH_S = 300
EXIT_S = 120
KILLED = "exit killed"
QUANTILES = (("p50", 0.50), ("p99", 0.99), ("p999", 0.999))
US = "us"
PACKETS = "packets"


class TraceRefused(NapilabError):
    """bpftrace cannot trace on this host: the reason names what to change."""


@dataclass(frozen=True)
class Started:
    """The snapshot before the workload: the tracer is attached."""

    stages: tuple[str, ...] = ()
    absent: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Trace:
    """What a tracer recorded over the window: histograms by (stage, cpu, key)."""

    stages: tuple[str, ...]
    absent: Mapping[str, str]
    hists: Mapping[tuple[str, int, int], Histogram]
    names: Mapping[tuple[str, int], str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def stage(self, name: str, cpus: set[int] | None = None,
              key: int | None = None) -> Histogram:
        """A stage's histogram over `cpus` (all when None) and one key (all when None)."""
        return merge(h for (s, cpu, k), h in self.hists.items()
                     if s == name and (cpus is None or cpu in cpus)
                     and (key is None or k == key))


def parse(text: str) -> Trace:
    """The stop section's text (see the module docstring)."""
    stages: list[str] = []
    absent: dict[str, str] = {}
    counts: dict[tuple[str, int, int], dict[int, int]] = {}
    names: dict[tuple[str, int], str] = {}
    warnings: list[str] = []
    known = program.by_id()
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("stage "):
            stages.append(_stage_name(line.removeprefix("stage ").strip(), line))
        elif line.startswith("absent "):
            name, sep, why = line.removeprefix("absent ").partition(": ")
            if not sep:
                raise ParseError(TOOL, "`absent NAME: PROBE` expected", line)
            absent[_stage_name(name, line)] = why
        elif line == KILLED:
            raise ParseError(TOOL, f"bpftrace did not exit within {EXIT_S} s of SIGINT and "
                             "was killed: its histograms were never printed", line)
        elif line.startswith("stderr: "):
            warnings.append(line.removeprefix("stderr: "))
        elif line.startswith("{"):
            _json_line(line, known, counts, names)
        else:
            raise ParseError(TOOL, "a line that is neither `stage`, `absent`, `stderr:` nor "
                             "bpftrace's JSON", line)
    if not stages and not absent:
        raise ParseError(TOOL, "no `stage` or `absent` line: not the trace section's text",
                         text[:200])
    hists = {key: Histogram(c) for key, c in counts.items()}
    stray = sorted({s for s, _, _ in hists} - set(stages))
    if stray:
        raise ParseError(TOOL, f"histograms of stages not started: {stray}", text[:200])
    return Trace(tuple(stages), absent, hists, names, tuple(warnings))


def _stage_name(name: str, line: str) -> str:
    if name not in program.stages():
        raise ParseError(TOOL, f"unknown stage {name!r}", line)
    return name


def _json_line(line: str, known: Mapping[int, program.Stage],
               counts: dict[tuple[str, int, int], dict[int, int]],
               names: dict[tuple[str, int], str]) -> None:
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ParseError(TOOL, f"bad JSON ({exc.msg}): a cut line", line[:200]) from None
    if not isinstance(doc, dict) or doc.get("type") != "map":
        return  # attached_probes, printf, lost events: nothing to count
    data = doc.get("data")
    if not isinstance(data, dict):
        raise ParseError(TOOL, "a map line without data", line[:200])
    for map_name, entries in data.items():
        if map_name not in ("@hist", "@name", "@func"):
            continue  # a stage's own state
        if not isinstance(entries, dict):
            raise ParseError(TOOL, f"{map_name} is not a keyed map", line[:200])
        for key_text, value in entries.items():
            stage, numbers = _key(map_name, str(key_text), known, line)
            if map_name != "@hist":
                if len(numbers) != 1:
                    raise ParseError(TOOL, f"{map_name} key {key_text!r}: expected ID,KEY",
                                     line[:200])
                names[(stage, numbers[0] % 2**64)] = str(value)
                continue
            if len(numbers) != 3 or not isinstance(value, int) or value < 0:
                raise ParseError(TOOL, f"@hist entry {key_text!r}: {value!r}: expected "
                                 "ID,CPU,KEY,BUCKET: COUNT", line[:200])
            cpu, key, bucket = numbers
            if cpu < 0 or not is_bucket(bucket):
                raise ParseError(TOOL, f"@hist entry {key_text!r}: CPU {cpu}, bucket "
                                 f"{bucket} (not a bucket's lower bound)", line[:200])
            slot = counts.setdefault((stage, cpu, key % 2**64), {})
            slot[bucket] = slot.get(bucket, 0) + value


def _key(map_name: str, text: str, known: Mapping[int, program.Stage],
         line: str) -> tuple[str, list[int]]:
    """A map key `ID,...` as its stage's name and the numbers after the ID."""
    try:
        numbers = [int(p) for p in text.split(",")]
    except ValueError:
        raise ParseError(TOOL, f"{map_name} key {text!r} is not numbers", line[:200]) from None
    stage = known.get(numbers[0])
    if stage is None:
        raise ParseError(TOOL, f"{map_name} of unknown stage id {numbers[0]}", line[:200])
    return stage.name, numbers[1:]


def stage_values(trace: Trace, cpus: set[int] | None = None) -> list[Value]:
    """Per stage the host kept: events per CPU (`STAGE_count`), and over `cpus` (all when
    None) its p50, p99, p99.9 and mean in microseconds (packets for a work stage); a
    stage without an event has its count only, a stage the host lacked no row at all."""
    out: list[Value] = []
    all_stages = program.stages()
    for name in trace.stages:
        stage = all_stages[name]
        per_cpu: dict[int, int] = {}
        for (s, cpu, _), h in trace.hists.items():
            if s == name:
                per_cpu[cpu] = per_cpu.get(cpu, 0) + h.total
        out += [Value(f"{name}_count", n, COUNT, cpu) for cpu, n in sorted(per_cpu.items())]
        if not per_cpu:
            out.append(Value(f"{name}_count", 0, COUNT))
        hist = trace.stage(name, cpus)
        scale, unit = (1e-3, US) if stage.unit == "ns" else (1.0, PACKETS)
        for label, q in QUANTILES:
            value = hist.quantile(q)
            if value is not None:
                out.append(Value(f"{name}_{label}", value * scale, unit))
        mean = hist.mean()
        if mean is not None:
            out.append(Value(f"{name}_mean", mean * scale, unit))
    return out


def read_section(text: str, *, host: str = "the host") -> Trace | Started:
    """A snapshot's @trace section: `started` (with the stage lines), a refusal, or what
    the tracer recorded."""
    lines = text.strip().splitlines()
    first = lines[0] if lines else ""
    if first.startswith("refused: "):
        raise TraceRefused(f"trace on {host}: {first.removeprefix('refused: ')}",
                           hint="remove trace from the profile's collect:, or fix the host "
                                "as the message says")
    if first == STARTED:
        rest = parse("\n".join(lines[1:]))
        return Started(rest.stages, rest.absent)
    return parse(text)


# `$a` is this section's argv word: `@trace:PAYLOAD` when starting, `@trace` to stop.
_SCRIPT = f"""echo "==> {SECTION} <=="
  d=/var/tmp/napilab; ns=$(readlink /proc/self/ns/net | tr -dc 0-9); f=$d/trace-$ns
  if [ -f "$f.pid" ]; then old=$(cat "$f.pid"); rm -f "$f.pid"; else old=; fi
  stop() {{ [ -n "$1" ] && [ "$(cat /proc/$1/comm 2>/dev/null)" = bpftrace ] || return 0
    t=$(($(date +%s) + {EXIT_S})); n=0
    while runs "$1" && [ "$(date +%s)" -lt $t ]; do
      [ $((n % 20)) = 0 ] && kill -INT "$1" 2>/dev/null; n=$((n+1)); sleep 0.05; done
    runs "$1" || return 0; kill -KILL "$1" 2>/dev/null; echo "exit killed"; }}
  T=/sys/kernel/tracing; [ -d $T/events ] || T=/sys/kernel/debug/tracing
  cap=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
  if [ "$phase" = start ]; then
    stop "$old"
    if ! command -v bpftrace >/dev/null 2>&1; then
      echo "refused: bpftrace is not installed (Debian: apt-get install bpftrace)"
    elif [ ! -d $T/events ]; then
      echo "refused: tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)"
    elif [ ! -r /sys/kernel/btf/vmlinux ]; then
      echo "refused: the kernel has no BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF)"
    elif [ "$(id -u)" != 0 ] && [ $(( 0x$cap >> 39 & 1 )) = 0 ]; then
      echo "refused: bpftrace needs root or CAP_BPF and CAP_PERFMON"
    else
      mkdir -p -m 0700 "$d"; rm -f "$f.out" "$f.err" "$f.bt" "$f.stages"
      printf %s "${{a#{SECTION}:}}" | base64 -d | gzip -dc > "$f.all"
      keep=; while IFS= read -r line; do
        case "$line" in
        "//== end") keep=1;;
        "//== "*) name=; keep=1
          for probe in ${{line#//== }}; do [ -n "$name" ] || {{ name=$probe; continue; }}
            case "$probe" in
            tracepoint:*) g=${{probe#tracepoint:}}; [ -d "$T/events/${{g%%:*}}/${{g#*:}}" ];;
            kprobe:*) [ -e $T/kprobe_events ] && grep -Eq "^${{probe#kprobe:}}( |$)" \
              $T/available_filter_functions 2>/dev/null;;
            esac || {{ keep=; echo "absent $name: $probe" >> "$f.stages"; break; }}
          done
          [ -n "$keep" ] && echo "stage $name" >> "$f.stages";;
        *) [ -n "$keep" ] && printf '%s\\n' "$line" >> "$f.bt";;
        esac
      done < "$f.all"; rm -f "$f.all"
      BPFTRACE_MAP_KEYS_MAX=65536 bpftrace -f json "$f.bt" </dev/null >"$f.out" 2>"$f.err" &
      echo $! > "$f.pid"; t=$(($(date +%s) + {ATTACH_S}))
      while runs "$(cat "$f.pid")" && ! grep -q attached_probes "$f.out" \\
        && [ "$(date +%s)" -lt $t ]; do sleep 0.05; done
      if grep -q attached_probes "$f.out"; then echo {STARTED}; cat "$f.stages"
      else stop "$(cat "$f.pid")"; rm -f "$f.pid"
        echo "refused: bpftrace did not attach: $(grep -v RLIMIT_MEMLOCK "$f.err" \\
          | tr '\\n' ' ' | cut -c1-400)"
      fi
    fi
  elif [ -n "$old" ]; then
    cat "$f.stages" 2>/dev/null; stop "$old"; cat "$f.out" 2>/dev/null
    grep -v RLIMIT_MEMLOCK "$f.err" 2>/dev/null | sed 's/^/stderr: /'
    rm -f "$f.out" "$f.err" "$f.bt" "$f.stages"
  else rm -f "$f.out" "$f.err" "$f.bt" "$f.stages" "$f.all"
    echo "refused: no tracer was running (the snapshot before the workload did not\\
 start one)"; fi"""


class TraceCollector:
    """Options: `stages` (names of program.stages(); all when absent), `traced` (twins:
    traced repetitions beside untraced ones, verdicts from the untraced; all: every
    trial traced); `cpus:` (every collector's) selects the CPUs of the percentiles."""

    name = "trace"
    paths: tuple[str, ...] = (SECTION,)
    options: Mapping[str, str] = {"stages": "stages", "traced": "traced"}
    headline: tuple[str, ...] = ("irq_to_softirq_p99", "net_rx_action_p99",
                                 "socket_wakeup_p99", "receive_to_copy_p99",
                                 "csd_latency_p99")
    metrics: tuple[str, ...] = tuple(f"{s}_{m}" for s in program.stages()
                                     for m in ("count", "p50", "p99", "p999", "mean"))
    sections: Mapping[str, str] = {f"{SECTION}|{SECTION}:*": _SCRIPT}
    counts_during = True  # started by a window's first snapshot: a failed trial stops it
    seconds: Mapping[str, float] = {"start": ATTACH_S + 60, "stop": EXIT_S + 60}  # timeouts
    wants_cpus = True  # delta() gets the spec's `cpus` as options["cpus"]
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "trace": lambda text: stage_values(parse(text))}

    def word(self, options: Mapping[str, Any], phase: str) -> str:
        """This section's argv word: the stage sections to start, or `@trace` to stop."""
        if phase != "start":
            return SECTION
        chosen = options.get("stages")
        return f"{SECTION}:{program.payload(tuple(chosen) if chosen else None)}"

    def parse(self, files: Mapping[str, str], host: HostInfo) -> Trace | Started:
        return read_section(files[SECTION])

    def delta(self, before: Trace | Started, after: Trace | Started,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        """The tracer recorded over the window: the snapshot after holds it."""
        if not isinstance(after, Trace):
            raise ParseError(TOOL, "the snapshot after the workload holds no trace")
        cpus = options.get("cpus")
        return stage_values(after, set(cpus) if cpus is not None else None)
