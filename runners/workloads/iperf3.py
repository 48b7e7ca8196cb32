"""iperf3 `-J` JSON: TCP and UDP, -P, -R, client and server (docs/formats.md section 2, read
at esnet/iperf 3.1 ... 3.21; captures from 3.12).

Quirks handled here:
- 3.10 to 3.13 exit 0 on a client failure and put `"error"` in the JSON; 3.14+ exit 1
  with the same JSON; 3.9 and older print JSON without `"error"` and exit 1. So a run
  failed if the exit code is not 0, or there is an `"error"`, or `end` has no sum.
- with -P > 1, 3.12 prints `sock_bufsize`/`sndbuf_actual`/`rcvbuf_actual` twice in
  `start` (fixed in 3.14, #1492): duplicate keys are accepted, the last one wins.
- `end.sum_received` is the receiving side's goodput whichever side this was; on the
  server only the side it played is filled in (the other sums are 0), and its
  `cpu_utilization_percent.remote_*` are 0 because it never hears the client's.
- UDP: 3.11+ has `sum_sent`/`sum_received`; 3.10 and older only `sum`, whose `bytes` and
  `bits_per_second` are the sender's (every version: iperf_api.c's UDP `sum` prints
  total_sent over sender_time) and its jitter and loss the receiver's as reported back.
  There `sender_throughput` is `sum.bits_per_second` and `throughput` is derived: the
  datagrams received (packets - lost_packets) x blksize x 8 / seconds.
- a server without -1 prints one object per test, and 3.17+ `--json-stream` prints
  `{"event": ..., "data": ...}` lines; both are read (the last test wins).
- `--get-server-output` adds `server_output_json`/`server_output_text`: kept as text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from napilab.harness.errors import InputError
from napilab.runners.base import COUNT, PERCENT, US, ParseError, ToolFailed, Value
from napilab.runners.workloads.workload import (
    ArgSpec,
    ArgValue,
    Context,
    LoadAxis,
    Parser,
    ProcessOutput,
    Readiness,
    ServerCommand,
    SeveralClients,
    ToolCommands,
    ToolOutput,
    ToolResult,
    flags,
)

TOOL = "iperf3"
PORT = 5201
_SUM_FIELDS = ("bits_per_second", "bytes", "seconds", "retransmits", "jitter_ms",
               "lost_packets", "packets", "lost_percent")
_CPU = ("host_total", "host_user", "host_system", "remote_total", "remote_user",
        "remote_system")


@dataclass(frozen=True)
class Summary:
    """One of `end.sum_sent` / `sum_received` / `sum`: the fields that were present."""

    fields: Mapping[str, float]

    def get(self, name: str) -> float | None:
        return self.fields.get(name)


@dataclass(frozen=True)
class Iperf3Result:
    version: str | None
    role: str  # "client" or "server"
    protocol: str  # "TCP", "UDP", "SCTP"
    reverse: bool
    streams: int
    sent: Summary | None
    received: Summary | None
    udp_sum: Summary | None  # `end.sum`: UDP only (all versions)
    blksize: int | None  # `start.test_start.blksize`: every UDP datagram's size (bytes)
    cpu: Mapping[str, float]
    rtt_us: tuple[float, float, float] | None  # min, mean, max over sending streams
    server_output: str | None


def parse(text: str) -> Iperf3Result:
    obj = _last_test(_objects(text))
    if "error" in obj:
        raise ParseError(TOOL, f"iperf3 reported an error: {obj['error']}", str(obj["error"]))
    start, end = obj.get("start"), obj.get("end")
    if not isinstance(start, dict) or not isinstance(end, dict):
        raise ParseError(TOOL, "no start/end objects", text[:200])
    sent, received, udp_sum = (_summary(end.get(key), key)
                               for key in ("sum_sent", "sum_received", "sum"))
    if sent is None and received is None and udp_sum is None:
        raise ParseError(TOOL, "end has no sum_sent/sum_received/sum: the test did not run",
                         json.dumps(end)[:200])
    test = start.get("test_start")
    test = test if isinstance(test, dict) else {}
    protocol = str(test.get("protocol", "UDP" if udp_sum is not None else "TCP"))
    stream_list = end.get("streams")
    stream_list = stream_list if isinstance(stream_list, list) else []
    cpu_node = end.get("cpu_utilization_percent")
    cpu = {k: _number(cpu_node[k], k) for k in _CPU
           if isinstance(cpu_node, dict) and k in cpu_node}
    server_output = obj.get("server_output_json", obj.get("server_output_text"))
    return Iperf3Result(
        version=start.get("version") if isinstance(start.get("version"), str) else None,
        role="server" if "accepted_connection" in start else "client",
        protocol=protocol,
        reverse=bool(test.get("reverse", 0)),
        streams=len(stream_list) or int(_number(test.get("num_streams", 1), "num_streams")),
        sent=sent,
        received=received,
        udp_sum=udp_sum,
        blksize=int(_number(test["blksize"], "blksize")) if "blksize" in test else None,
        cpu=cpu,
        rtt_us=_rtt(stream_list),
        server_output=None if server_output is None else (
            server_output if isinstance(server_output, str) else json.dumps(server_output)),
    )


def _objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in `text` (iperf3 -s -J without -1 prints several)."""
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    index, stripped = 0, text.strip()
    if not stripped.startswith("{"):
        raise ParseError(TOOL, "not JSON: napilab runs iperf3 with -J", stripped[:200])
    while index < len(stripped):
        try:
            obj, index = decoder.raw_decode(stripped, index)
        except (json.JSONDecodeError, RecursionError) as error:
            raise ParseError(TOOL, f"bad JSON: {error}", stripped[index:index + 200]) from None
        if not isinstance(obj, dict):
            raise ParseError(TOOL, "top-level JSON value is not an object", str(obj)[:200])
        objects.append(obj)
        while index < len(stripped) and stripped[index].isspace():
            index += 1
    return objects


def _last_test(objects: list[dict[str, Any]]) -> dict[str, Any]:
    if "event" not in objects[0]:
        return objects[-1]
    # --json-stream (3.17+): start, interval..., end | error events make one test.
    test: dict[str, Any] = {}
    for event in objects:
        kind, data = event.get("event"), event.get("data")
        if kind in ("start", "end"):
            test[str(kind)] = data
        elif kind == "error":
            test["error"] = data
    return test


def _summary(node: object, name: str) -> Summary | None:
    if not isinstance(node, dict):
        return None
    if "bits_per_second" not in node or "bytes" not in node:
        raise ParseError(TOOL, f"{name} has no bytes/bits_per_second", json.dumps(node)[:200])
    return Summary({key: _number(node[key], f"{name}.{key}") for key in _SUM_FIELDS
                    if key in node})


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(TOOL, f"{name} is not a number", repr(value)[:100])
    number = float(value)
    if not math.isfinite(number):
        raise ParseError(TOOL, f"{name} is not finite", repr(value))
    return number


def _rtt(streams: list[Any]) -> tuple[float, float, float] | None:
    """TCP rtt statistics (us) of the sending streams; 0 means "not measured" (this
    side was the receiver) and is left out."""
    senders = [s["sender"] for s in streams if isinstance(s, dict)
               and isinstance(s.get("sender"), dict)
               and all(isinstance(s["sender"].get(k), int | float) for k in
                       ("min_rtt", "mean_rtt", "max_rtt"))
               and s["sender"]["mean_rtt"] > 0]
    if not senders:
        return None
    return (min(_number(s["min_rtt"], "min_rtt") for s in senders),
            sum(_number(s["mean_rtt"], "mean_rtt") for s in senders) / len(senders),
            max(_number(s["max_rtt"], "max_rtt") for s in senders))


def values(result: Iperf3Result) -> list[Value]:
    """Summed values in bits/s: `throughput` is the goodput measured by the receiving
    side (absent on a side that received nothing; at `-b`, the load achieved),
    `sender_throughput` the send rate (what the sender put on the wire of `-b`). UDP
    adds the receiver's `jitter` (RFC 1889 smoothed interarrival jitter, us: not a
    latency), `lost_packets`, `packets` and `lost_percent` (docs/formats.md 2.4)."""
    rows = [Value("streams", result.streams, COUNT)]
    sent, received = result.sent, result.received
    throughput: float | None = None
    if result.protocol == "UDP" and received is None and result.udp_sum is not None:
        # 3.10 and older: `sum` only. Its bytes and bits/s are the sender's; its packets
        # and loss the receiver's (0 packets: this side heard of no receiver).
        sent = result.udp_sum
        received = result.udp_sum if result.udp_sum.get("packets") else None
        throughput = _udp_goodput(result.udp_sum, result.blksize) if received else None
    else:
        # A side that did not receive has a sum_received of zeros (server of a normal
        # test sends nothing back, server of -R receives nothing): not a measurement.
        received = received if received is not None and received.get("bytes") else None
        throughput = received.fields["bits_per_second"] if received is not None else None
    sending = sent if sent is not None and sent.get("bytes") else None
    if throughput is not None:
        rows.append(Value("throughput", throughput, "bits/s"))
    if sending is not None:
        rows.append(Value("sender_throughput", sending.fields["bits_per_second"], "bits/s"))
        if sending.get("retransmits") is not None:
            rows.append(Value("retransmits", sending.fields["retransmits"], COUNT))
    if result.protocol == "UDP" and received is not None:
        for key, name, unit, scale in (("jitter_ms", "jitter", US, 1000.0),
                                       ("lost_packets", "lost_packets", COUNT, 1.0),
                                       ("packets", "packets", COUNT, 1.0),
                                       ("lost_percent", "lost_percent", PERCENT, 1.0)):
            number = received.get(key)
            if number is not None:
                rows.append(Value(name, number * scale, unit))
    remote_known = any(result.cpu.get(k) for k in _CPU if k.startswith("remote"))
    rows += [Value(f"cpu_{key}", number, PERCENT) for key, number in result.cpu.items()
             if remote_known or not key.startswith("remote")]
    if result.rtt_us is not None:
        rows += [Value(name, number, US) for name, number in
                 zip(("rtt_min", "rtt_mean", "rtt_max"), result.rtt_us, strict=True)]
    return rows


def _udp_goodput(summary: Summary, blksize: int | None) -> float | None:
    """bits/s received, from 3.10's `sum`: the datagrams that arrived (packets -
    lost_packets; iperf3 writes every one blksize long) over `seconds`, the receiver's
    time. On a client `packets` is the count sent, so the tail (datagrams sent after the
    last one the receiver saw, neither lost nor received) counts as received: on the 3.12
    captures this is sum_received.bits_per_second to 5e-4 (62 of 126k at 45% loss)."""
    packets, lost, seconds = (summary.get(k) for k in ("packets", "lost_packets", "seconds"))
    if not blksize or not seconds or packets is None:
        return None
    return (packets - (lost or 0.0)) * blksize * 8 / seconds


class Iperf3Tool:
    """Server `iperf3 -s -1 -J -B BIND -p PORT` (one test, then exits); client
    `iperf3 -c TARGET -p PORT -t SECS -J [flags]`. Readiness: the TCP control port,
    for UDP tests too."""

    name = "iperf3"
    headline: tuple[str, ...] = ("throughput",)
    metrics: tuple[str, ...] = ("streams", "throughput", "sender_throughput", "retransmits",
                                "jitter", "lost_packets", "packets", "lost_percent",
                                *(f"cpu_{key}" for key in _CPU), "rtt_min", "rtt_mean",
                                "rtt_max")
    # At a target bitrate (`-b`; 0 unlimited) the achieved load is what the receiver
    # got: a UDP datagram the receiver dropped was offered but never carried, and the
    # jitter and loss are of the datagrams that arrived. So a rung is saturated when the
    # sender falls short of -b or the receiver cannot take what it sent (3.12 captures:
    # 19.99 Gbit/s sent at 20G, 11.0 received). `sender_throughput` is read only where no
    # receiver's value is (docs/load.md, docs/formats.md 2.6).
    load: LoadAxis | None = LoadAxis("b", "bits/s", 0, ("throughput", "sender_throughput"),
                                     "jitter")
    clients: SeveralClients = SeveralClients(
        "", "an iperf3 server runs one test at a time (a second client is refused: "
            "'the server is busy running a test'); -P runs parallel streams from one client")
    operations: Mapping[str, tuple[str, ...]] = {"MB": ("throughput",)}
    parsers: Mapping[str, Parser] = {"iperf3": lambda text: values(parse(text))}
    versions: Mapping[str, tuple[str, ...] | None] = {"iperf3": ("iperf3", "--version")}
    client_args: Mapping[str, ArgSpec] = {
        "p": ArgSpec(int, f"server port, default {PORT} (both sides)"),
        "u": ArgSpec(bool, "UDP"),
        "b": ArgSpec((int, str), "target bitrate, e.g. 200M (0: unlimited)"),
        "P": ArgSpec(int, "parallel streams"),
        "R": ArgSpec(bool, "reverse: the server sends"),
        "bidir": ArgSpec(bool, "both directions (3.7+)"),
        "l": ArgSpec((int, str), "read/write length"),
        "w": ArgSpec((int, str), "socket buffer size"),
        "M": ArgSpec(int, "TCP MSS"),
        "N": ArgSpec(bool, "TCP_NODELAY"),
        "C": ArgSpec(str, "congestion control algorithm"),
        "Z": ArgSpec(bool, "zero copy"),
        "A": ArgSpec(str, "CPU affinity n[,m]"),
        "O": ArgSpec(int, "omit the first N seconds"),
        "S": ArgSpec((int, str), "IP TOS"),
        "B": ArgSpec(str, "client bind address"),
        "get-server-output": ArgSpec(bool, "include the server's output"),
        "fq-rate": ArgSpec((int, str), "fair-queue pacing rate"),
        "pacing-timer": ArgSpec((int, str), "pacing timer (us)"),
        "udp-counters-64bit": ArgSpec(bool, "64-bit UDP counters"),
    }
    server_args: Mapping[str, ArgSpec] = {
        "p": ArgSpec(int, f"server port, default {PORT} (both sides)"),
        "A": ArgSpec(str, "CPU affinity"),
    }
    _reserved = frozenset({"c", "s", "t", "J", "1", "json", "one-off", "n", "k", "time"})

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        for side, args in (("client", client_args), ("server", server_args)):
            bad = sorted(set(args) & self._reserved)
            if bad:
                raise InputError(f"iperf3: {side} arguments {bad} are set by napilab")
        port = str(server_args.get("p", client_args.get("p", PORT)))
        client = {k: v for k, v in client_args.items() if k != "p"}
        server = {k: v for k, v in server_args.items() if k != "p"}
        return ToolCommands(
            client=["iperf3", "-c", ctx.target, "-p", port, "-t",
                    str(max(1, math.ceil(ctx.duration))), "-J", *flags(client)],
            server=ServerCommand(["iperf3", "-s", "-1", "-J", "-B", ctx.bind, "-p", port,
                                  *flags(server)],
                                 Readiness(port=int(port), protocol="tcp"),
                                 exits_by_itself=True),
        )

    def parse(self, output: ToolOutput) -> ToolResult:
        client = values(_side(output.client, "client"))
        if not any(v.metric == "throughput" for v in client):
            raise ToolFailed(TOOL, "no receiver-side result in the client's JSON",
                             output.client.stderr)
        server = _side(output.server, "server") if output.server is not None else None
        return ToolResult(client=client, server=values(server) if server else [])

    def programs(self, side: str) -> tuple[str, ...]:
        return ("iperf3",)


def _side(process: ProcessOutput, side: str) -> Iperf3Result:
    if process.exit_code == 127:
        raise ToolFailed(TOOL, "iperf3 is not installed on the host", process.stderr)
    try:
        result = parse(process.stdout)
    except ParseError as error:
        raise ToolFailed(TOOL, f"{side}: {error.reason}", process.stderr) from None
    if process.exit_code != 0:
        raise ToolFailed(TOOL, f"{side} exited {process.exit_code}", process.stderr)
    return result
