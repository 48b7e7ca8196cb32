"""/proc/net/netstat and /proc/net/snmp: the kernel's SNMP counters, per protocol.

Both files are pairs of lines, the field names then their values, each line opening with
the protocol and a colon (net/ipv4/proc.c netstat_seq_show and snmp_seq_show; MPTcpExt
from net/mptcp/mib.c), docs/formats.md section 10:

    TcpExt: SyncookiesSent SyncookiesRecv ... BusyPollRxPackets ...
    TcpExt: 0 0 ... 4 ...

/proc/net/netstat holds TcpExt, IpExt and, on kernels with MPTCP, MPTcpExt;
/proc/net/snmp holds Ip, Icmp, IcmpMsg, Tcp, Udp and UdpLite. Each kernel prints its own
set of fields (82 TcpExt fields in an older public capture, 135 on 6.18), so fields are
read by the names in the header, never by position. A metric is named as the kernel
names it, `Protocol.Field`: `TcpExt.BusyPollRxPackets`, `Tcp.RetransSegs`,
`IcmpMsg.OutType0`.

Kernel quirks, each read exactly:
- IcmpMsg lists only the ICMP types whose count is not 0 (icmpmsg_put), 16 to a pair of
  lines: the protocol may have several pairs, or none at all, and a type missing from a
  snapshot counted 0 there.
- Not every field counts: Ip.Forwarding and Ip.DefaultTTL are settings, Tcp.RtoAlgorithm,
  RtoMin, RtoMax (both ms) and MaxConn (printed signed, -1) constants, Tcp.CurrEstab and
  MPTcpExt.MPCurrEstab current numbers of connections. These GAUGES are reported as their
  value after the trial, never as a difference; only they may be negative.
- The counters are `unsigned long` (Ip and IpExt `u64`): 32 bits on a 32-bit kernel. A
  counter lower after the trial than before (wrapped, or reset with its namespace) is
  left out of the deltas, never reported as a guess.

Refused: a header without its value line, a value line of another protocol, more or
fewer values than the header has names, a value that is not an integer (or a negative
counter), a protocol (other than IcmpMsg) or a field given twice, and a file whose last
line has no newline (cut inside its last number).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from napilab.runners.base import COUNT, MS, ParseError, Value
from napilab.runners.collectors.collector import HostInfo

TOOL = "netstat"
# The protocols of both files, in file order; a profile's `names` may name only these.
PROTOCOLS = ("TcpExt", "IpExt", "MPTcpExt", "Ip", "Icmp", "IcmpMsg", "Tcp", "Udp", "UdpLite")
# A profile's name of a field: `Protocol` (all its fields) or `Protocol.Field`.
NAME = re.compile(r"(?:" + "|".join(PROTOCOLS) + r")(?:\.[A-Za-z][A-Za-z0-9_]*)?")
GAUGES = frozenset({"Ip.Forwarding", "Ip.DefaultTTL", "Tcp.RtoAlgorithm", "Tcp.RtoMin",
                    "Tcp.RtoMax", "Tcp.MaxConn", "Tcp.CurrEstab", "MPTcpExt.MPCurrEstab"})
UNITS = {"Tcp.RtoMin": MS, "Tcp.RtoMax": MS}  # every other field is a count
# Protocols the kernel prints only their non-zero fields of, in as many pairs as it needs.
ZEROS_OMITTED = frozenset({"IcmpMsg"})
_PROTOCOL = re.compile(r"([A-Za-z][A-Za-z0-9]*):\Z")
_FIELD = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_UNSIGNED = re.compile(r"[0-9]+\Z")
_SIGNED = re.compile(r"-?[0-9]+\Z")


@dataclass(frozen=True)
class Netstat:
    """One snapshot: `Protocol.Field` -> value, in file order, and the protocols seen."""

    values: Mapping[str, int]
    protocols: tuple[str, ...]


def parse(text: str) -> Netstat:
    """One file (/proc/net/netstat or /proc/net/snmp; both concatenated read the same)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ParseError(TOOL, "empty file", text)
    if not text.endswith("\n"):  # the kernel ends both files with one: cut inside a number?
        raise ParseError(TOOL, "the last line has no newline: the file was cut", lines[-1])
    values: dict[str, int] = {}
    protocols: list[str] = []
    for index in range(0, len(lines), 2):
        header = lines[index]
        protocol, names = _header(header)
        if index + 1 == len(lines):
            raise ParseError(TOOL, f"the {protocol} header has no value line (cut?)", header)
        line = lines[index + 1]
        tokens = line.split()
        if tokens[0] != f"{protocol}:":
            raise ParseError(TOOL, f"the line after the {protocol} header is not its values",
                             line)
        numbers = tokens[1:]
        if len(numbers) != len(names):
            raise ParseError(TOOL, f"{protocol}: {len(numbers)} values for {len(names)} "
                             "fields: a cut or widened line", line)
        if protocol in protocols and protocol not in ZEROS_OMITTED:
            raise ParseError(TOOL, f"{protocol} appears twice", header)
        if protocol not in protocols:
            protocols.append(protocol)
        for name, token in zip(names, numbers, strict=True):
            metric = f"{protocol}.{name}"
            if metric in values:
                raise ParseError(TOOL, f"{metric} appears twice", header)
            values[metric] = _number(metric, token, line)
    return Netstat(values, tuple(protocols))


def _header(line: str) -> tuple[str, list[str]]:
    tokens = line.split()
    match = _PROTOCOL.fullmatch(tokens[0])
    if match is None:
        raise ParseError(TOOL, "a line does not start with `Protocol:`", line)
    names = tokens[1:]
    if not names or not all(_FIELD.match(name) for name in names):
        raise ParseError(TOOL, f"expected a {match[1]} header of field names (lines out of "
                         "pairs?)", line)
    return match[1], names


def _number(metric: str, token: str, line: str) -> int:
    pattern = _SIGNED if metric in GAUGES else _UNSIGNED
    if not pattern.match(token):
        what = "an integer" if metric in GAUGES else "an unsigned integer (a counter)"
        raise ParseError(TOOL, f"{metric} is {token!r}, not {what}", line)
    return int(token)


def merge(*snapshots: Netstat) -> Netstat:
    """Both files as one snapshot; a protocol in two of them is refused."""
    values: dict[str, int] = {}
    protocols: list[str] = []
    for snapshot in snapshots:
        twice = set(protocols) & set(snapshot.protocols)
        if twice:
            raise ParseError(TOOL, f"{sorted(twice)} in two files")
        protocols += snapshot.protocols
        values.update(snapshot.values)
    return Netstat(values, tuple(protocols))


def unit(metric: str) -> str:
    return UNITS.get(metric, COUNT)


def values(snapshot: Netstat) -> list[Value]:
    """Every field of one snapshot, as the kernel printed it."""
    return [Value(metric, number, unit(metric)) for metric, number in snapshot.values.items()]


def delta(before: Netstat, after: Netstat, *, names: Collection[str] | None = None
          ) -> list[Value]:
    """Each counter's increase and each gauge's value after, of the fields `names` selects
    (`Protocol` for all its fields, or `Protocol.Field`; all when None). A counter that
    only `after` has is left out, except a type of a ZEROS_OMITTED protocol, which was 0;
    so is one that went down."""
    wanted = set(names) if names is not None else None
    out: list[Value] = []
    for metric, number in after.values.items():
        protocol = metric.partition(".")[0]
        if wanted is not None and metric not in wanted and protocol not in wanted:
            continue
        if metric in GAUGES:
            out.append(Value(metric, number, unit(metric)))
            continue
        old = before.values.get(metric, 0 if protocol in ZEROS_OMITTED else None)
        if old is not None and number >= old:
            out.append(Value(metric, number - old, unit(metric)))
    return out


class NetstatCollector:
    """Both files of the kernel's SNMP counters as one snapshot, `Protocol.Field` each.
    Options: `names: [TcpExt.BusyPollRxPackets, Tcp]` keeps those fields, or every field
    of a protocol (default: all)."""

    name = "netstat"
    paths: tuple[str, ...] = ("/proc/net/netstat", "/proc/net/snmp")
    options: Mapping[str, str] = {"names": "fields"}
    # did busy polling run; did TCP lose segments or time out
    headline: tuple[str, ...] = ("TcpExt.BusyPollRxPackets", "Tcp.RetransSegs",
                                 "TcpExt.TCPTimeouts")
    metrics: tuple[str, ...] = ("*.*",)  # Protocol.Field, as the kernel names them
    sections: Mapping[str, str] = {}
    parsers: Mapping[str, Callable[[str], list[Value]]] = {
        "netstat": lambda text: values(parse(text))}

    def parse(self, files: Mapping[str, str], host: HostInfo) -> Netstat:
        return merge(*(parse(files[path]) for path in self.paths))

    def delta(self, before: Netstat, after: Netstat,
              options: Mapping[str, Any], host: HostInfo) -> list[Value]:
        names = options.get("names")
        return delta(before, after, names=list(names) if names is not None else None)
