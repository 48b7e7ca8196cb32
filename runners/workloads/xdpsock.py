"""xdpsock (samples/bpf, 2019 on; xdp-tools' copy prints the same): per-socket rates.

Every interval (`-n`, default 1 s) and once more on exit, dump_stats() prints one block
per socket, sock0 first:

     sock0@enp134s0f0:20 rxdrop xdp-drv
                    pps         pkts        1.00
    rx              20,797,350  230,942,399
    tx              0           0

(`%'` numbers: thousands separators in a locale that has them; columns `%-15s` before
2020, `%-18s`/`%-14s` after; `-x` adds rows such as `rx dropped`, which are not read).
With several sockets (`-M`, or several queues) the rate of the run is the SUM of the
sockets' rows of one interval, never their mean. An interval is the blocks from one
sock0 to the next; every interval must hold the same sockets, each with one `rx` and
one `tx` row, or the output is refused (a cut or interleaved print is not guessed at).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from napilab.runners.base import COUNT, ParseError, Value, parse_int, ungroup

TOOL = "xdpsock"
PPS, PACKETS = "packets/s", "packets"
_SOCKET = re.compile(r"^\s*sock(\d+)@")
_ROW = re.compile(r"^\s*(rx|tx)(\s.*)?$")


@dataclass(frozen=True)
class SocketRow:
    socket: int
    rx_pps: int
    rx_packets: int
    tx_pps: int
    tx_packets: int


@dataclass(frozen=True)
class Xdpsock:
    intervals: tuple[tuple[SocketRow, ...], ...]  # each: one row per socket, sock0 first


def parse(text: str) -> Xdpsock:
    intervals: list[list[SocketRow]] = []
    block: dict[str, tuple[int, int]] | None = None
    socket = -1
    for line in text.splitlines():
        header = _SOCKET.match(line)
        if header:
            if block is not None:
                _close(intervals, socket, block, line)
            socket, block = int(header[1]), {}
            continue
        row = _ROW.match(line)
        numbers = (row[2] or "").split() if row else []
        if row is None or not numbers or not numbers[0][0].isdigit():
            continue  # banner, header, `rx dropped` and other -x rows; a bare `rx` is cut
        if block is None:
            raise ParseError(TOOL, f"{row[1]} row before any sockN@ header", line)
        if row[1] in block:
            raise ParseError(TOOL, f"two {row[1]} rows for sock{socket}", line)
        plain = [ungroup(n, integer=True) for n in numbers]
        if len(plain) != 2 or None in plain:
            raise ParseError(TOOL, f"sock{socket} {row[1]} row is not `{row[1]} PPS PKTS`",
                             line)
        pps, packets = (parse_int(TOOL, str(n)) for n in plain)
        block[row[1]] = (pps, packets)
    if block is not None:
        _close(intervals, socket, block, text[-200:])
    if not intervals:
        raise ParseError(TOOL, "no sockN@ block with rx and tx rows", text[-300:])
    sockets = len(intervals[0])
    for index, interval in enumerate(intervals):
        if len(interval) != sockets:
            raise ParseError(TOOL, f"interval {index + 1} has {len(interval)} sockets, the "
                             f"first {sockets}: cut or interleaved output", text[-300:])
    return Xdpsock(tuple(tuple(interval) for interval in intervals))


def _close(intervals: list[list[SocketRow]], socket: int, block: dict[str, tuple[int, int]],
           line: str) -> None:
    if set(block) != {"rx", "tx"}:
        missing = " and ".join(sorted({"rx", "tx"} - set(block)))
        raise ParseError(TOOL, f"sock{socket} has no {missing} row: cut output", line)
    if socket == 0:
        intervals.append([])
    elif not intervals or len(intervals[-1]) != socket:
        raise ParseError(TOOL, f"sock{socket} does not follow sock{socket - 1}", line)
    intervals[-1].append(SocketRow(socket, *block["rx"], *block["tx"]))


def values(result: Xdpsock) -> list[Value]:
    """Rates summed over the sockets of each interval: mean and max over intervals;
    packet counts (cumulative per socket) summed over the sockets of the last one."""
    rx = [sum(row.rx_pps for row in interval) for interval in result.intervals]
    tx = [sum(row.tx_pps for row in interval) for interval in result.intervals]
    last = result.intervals[-1]
    return [
        Value("rx_pps", sum(rx) / len(rx), PPS),
        Value("rx_pps_max", max(rx), PPS),
        Value("rx_packets", sum(row.rx_packets for row in last), PACKETS),
        Value("tx_pps", sum(tx) / len(tx), PPS),
        Value("tx_packets", sum(row.tx_packets for row in last), PACKETS),
        Value("sockets", len(last), COUNT),
    ]
