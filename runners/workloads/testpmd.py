"""dpdk-testpmd: the port statistics it prints, per port and summed over ports.

Two blocks carry numbers (testpmd's nic_stats_display and fwd_stats_display):
- NIC statistics, every `--stats-period` (after a `Port statistics ====` line and a
  clear-screen escape) and on `show port stats`: one block per port,
      ######################## NIC statistics for port 0  ########################
      RX-packets: 256        RX-missed: 0          RX-bytes:  16384
      RX-errors: 0
      RX-nombuf:  0
      TX-packets: 0          TX-errors: 0          TX-bytes:  0
      Throughput (since last show)
      Rx-pps:            0          Rx-bps:            0
      Tx-pps:            0          Tx-bps:            0
      ############################################################################
  The packet counters are the port's since it started; Rx-/Tx-pps are "since last
  show", so the first block of a run reads 0.
- Forward statistics, printed by `stop` (and on exit): one block per port, then
  `Accumulated forward statistics for all ports`, RX-packets / RX-dropped / RX-total,
  TX-packets / TX-dropped / TX-total (RX-dropped is the port's imissed, RX-total the sum).

Metrics: from the NIC blocks, each counter of the last round (`rx_packets`,
`tx_packets`, `tx_errors`, ...) and each rate (`rx_pps`, `rx_bps`, ...) per port
(`rx_pps_port1`) and summed over the ports of the round (`rx_pps`), plus the max and
mean over rounds of the summed `rx_pps` and `tx_pps`; from the forward statistics the
same with a `fwd_` prefix (`fwd_rx_packets`, `fwd_rx_packets_port0`). A round is the
blocks from one `Port statistics` line (or one port's repeat) to the next: every round
must hold the same ports, every block must end with its closing line, and the
accumulated block must equal the sum of the ports; anything else is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from napilab.runners.base import ParseError, Value, parse_int

TOOL = "testpmd"
_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ROUND = re.compile(r"^\s*Port statistics =+\s*$")
_NIC = re.compile(r"^\s*#+ NIC statistics for port (\d+)\s*#+\s*$")
_FWD = re.compile(r"^\s*-+ Forward statistics for port (\d+)\s*-+\s*$")
_ACCUMULATED = re.compile(r"^\s*\++ Accumulated forward statistics for all ports\s*\++\s*$")
_CLOSE = {"nic": re.compile(r"^\s*#+\s*$"), "fwd": re.compile(r"^\s*-+\s*$"),
          "all": re.compile(r"^\s*\++\s*$")}
_PAIR = re.compile(r"([A-Za-z][A-Za-z-]*):\s*(\S*)")
_RATES = {"rx_pps": "packets/s", "tx_pps": "packets/s", "rx_bps": "bits/s",
          "tx_bps": "bits/s"}
_SUMMARISED = ("rx_pps", "tx_pps")


@dataclass(frozen=True)
class PortBlock:
    kind: str  # nic | fwd | all
    port: int | None  # None for the accumulated block
    counters: dict[str, int]


@dataclass(frozen=True)
class Testpmd:
    rounds: tuple[tuple[PortBlock, ...], ...]  # NIC statistics, one block per port
    forward: tuple[PortBlock, ...]  # forward statistics per port (the `stop` summary)


def parse(text: str) -> Testpmd:
    blocks: list[PortBlock | str] = []  # "round" marks a `Port statistics` line
    current: tuple[str, int | None, dict[str, int], str] | None = None
    for raw in text.splitlines():
        line = _ESCAPE.sub("", raw)
        opened = _opening(line)
        if current is not None:
            kind, port, counters, first = current
            if _CLOSE[kind].match(line):
                blocks.append(PortBlock(kind, port, counters))
                current = None
            elif opened is not None or _ROUND.match(line):
                raise ParseError(TOOL, f"{_name(kind, port)} has no closing line: cut", first)
            else:
                _pairs(line, counters, _name(kind, port))
            continue
        if opened is not None:
            current = (*opened, {}, line)
        elif _ROUND.match(line):
            blocks.append("round")
    if current is not None:
        raise ParseError(TOOL, f"{_name(current[0], current[1])} has no closing line: cut",
                         current[3])
    result = Testpmd(_rounds(blocks), _forward(blocks))
    if not result.rounds and not result.forward:
        raise ParseError(TOOL, "no NIC or forward statistics block", text[-300:])
    return result


def _opening(line: str) -> tuple[str, int | None] | None:
    for kind, pattern in (("nic", _NIC), ("fwd", _FWD)):
        match = pattern.match(line)
        if match:
            return kind, parse_int(TOOL, match[1])
    return ("all", None) if _ACCUMULATED.match(line) else None


def _name(kind: str, port: int | None) -> str:
    what = {"nic": "NIC statistics", "fwd": "forward statistics", "all": "accumulated "
            "forward statistics"}[kind]
    return what if port is None else f"{what} for port {port}"


def _pairs(line: str, counters: dict[str, int], where: str) -> None:
    for key, number in _PAIR.findall(line):
        name = key.lower().replace("-", "_")
        if not (number.isascii() and number.isdigit()):
            raise ParseError(TOOL, f"{where}: {key} is {number!r}, not a count", line)
        if name in counters:
            raise ParseError(TOOL, f"{where}: {key} twice", line)
        counters[name] = int(number)


def _rounds(blocks: list[PortBlock | str]) -> tuple[tuple[PortBlock, ...], ...]:
    rounds: list[list[PortBlock]] = []
    fresh = True
    for block in blocks:
        if block == "round":
            fresh = True
            continue
        if not isinstance(block, PortBlock) or block.kind != "nic":
            continue
        if fresh or any(b.port == block.port for b in rounds[-1]):
            rounds.append([])
            fresh = False
        for needed in ("rx_packets", "tx_packets"):
            if needed not in block.counters:
                raise ParseError(TOOL, f"NIC statistics for port {block.port} have no "
                                 f"{needed.replace('_', '-').upper()}: cut", "")
        rounds[-1].append(block)
    ports = [sorted(b.port or 0 for b in r) for r in rounds]
    for index, found in enumerate(ports):
        if found != ports[0]:
            raise ParseError(TOOL, f"statistics round {index + 1} has ports {found}, the "
                             f"first {ports[0]}: cut or interleaved output", "")
    return tuple(tuple(r) for r in rounds)


def _forward(blocks: list[PortBlock | str]) -> tuple[PortBlock, ...]:
    ports = [b for b in blocks if isinstance(b, PortBlock) and b.kind == "fwd"]
    totals = [b for b in blocks if isinstance(b, PortBlock) and b.kind == "all"]
    if not ports and not totals:
        return ()
    if len(totals) != 1 or not ports or len({b.port for b in ports}) != len(ports):
        raise ParseError(TOOL, f"{len(ports)} forward statistics blocks and {len(totals)} "
                         "accumulated ones: expected one per port and one in all", "")
    for key, total in totals[0].counters.items():
        summed = sum(b.counters.get(key, 0) for b in ports)
        if summed != total:
            raise ParseError(TOOL, f"accumulated {key} is {total}, the ports sum to {summed}",
                             "")
    return tuple(ports)


def values(result: Testpmd) -> list[Value]:
    out: list[Value] = []
    if result.rounds:
        out += _summed(result.rounds[-1], "")
        for name in _SUMMARISED:
            sums = [sum(b.counters.get(name, 0) for b in r) for r in result.rounds
                    if any(name in b.counters for b in r)]
            if sums:
                out.append(Value(f"{name}_max", max(sums), _RATES[name]))
                out.append(Value(f"{name}_mean", sum(sums) / len(sums), _RATES[name]))
    if result.forward:
        out += _summed(result.forward, "fwd_")
    return out


def _summed(blocks: tuple[PortBlock, ...], prefix: str) -> list[Value]:
    names = list(dict.fromkeys(key for block in blocks for key in block.counters))
    out = []
    for name in names:
        unit = _RATES.get(name, "packets" if "bytes" not in name else "bytes")
        if any(name not in block.counters for block in blocks):
            raise ParseError(TOOL, f"{name} is printed for some ports only", "")
        out.append(Value(prefix + name, sum(b.counters[name] for b in blocks), unit))
        out += [Value(f"{prefix}{name}_port{b.port}", b.counters[name], unit) for b in blocks]
    return out
