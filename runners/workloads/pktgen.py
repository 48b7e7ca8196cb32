"""`pktgen`: the kernel's packet generator (net/core/pktgen.c, /proc/net/pktgen) as an
open-loop packet source on the client role, sending UDP frames to the server role's data
address for `duration` seconds; the server role runs the receiver being measured (an
AF_XDP rx-drop program: dpdk-testpmd on net_af_xdp, xdpsock, or any command), read by a
`command` metrics preset or by the profile's own regexes.

What runs on the sender (CLIENT_SCRIPT, one `sh -c`): pktgen is loaded if it is not (and
unloaded after, if the script loaded it), `threads` kpktgend threads get one device each
(`IFACE@T`, queue T), every write is checked against the `Result: OK` line pktgen
answers with, `start` runs in the background for the duration, `stop` ends it, and each
device's report is printed; an interrupted script removes its devices.

The receiver (RECEIVER_SCRIPT): the server command runs as the child of a small shell
that, when napilab stops it (stop_signal, INT by default), first reads the kernel's view
of the host's AF_XDP sockets (`ss -a --xdp -e -m`: each socket's queue, its UMEM's `zc`
flag, its ring statistics), then signals the receiver, and prints that view on stderr
once the receiver has ended (`napilab-xsk:` ... `napilab-xsk-end`). What the receiver
left on an interface that was not so before is undone (promiscuous mode, which testpmd's
AF_XDP PMD 22.11 leaves on; an XDP program, which a receiver killed with SIGKILL leaves
attached), each said on stderr, and xsk_diag is unloaded again if `ss` loaded it. So the
AF_XDP mode is the kernel's (copy or zero-copy, `xsk_zerocopy`), not a program's claim
(neither testpmd 22.11 nor xdpsock prints it).

Values: client `tx_packets`, `tx_pps`, `tx_bps`, `tx_errors`, `tx_seconds` (pktgen's own
elapsed time); server: the receiver's values, and `delivered_pps` (the packets it counted,
testpmd's forward statistics or xdpsock's rx count, over the sender's elapsed time) and
`delivered_ratio` (over the packets sent); `xsk_sockets`, `xsk_zerocopy` (sockets in
zero-copy mode), `xsk_rx_dropped`, `xsk_rx_invalid`, `xsk_rx_queue_full`,
`xsk_rx_fill_ring_empty`, `xsk_tx_invalid`, `xsk_tx_ring_empty` (summed over sockets).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from napilab.harness.errors import InputError
from napilab.runners.base import COUNT, ParseError, ToolFailed, Value, parse_int
from napilab.runners.workloads import command
from napilab.runners.workloads.workload import (
    ArgSpec,
    ArgValue,
    Context,
    LoadAxis,
    Parser,
    Readiness,
    ServerCommand,
    SeveralClients,
    ToolCommands,
    ToolOutput,
    ToolResult,
)

TOOL = "pktgen"
PPS = "pps"
BPS = "bits/s"
RATIO = "ratio"
XSK_MARK = "napilab-xsk:"
XSK_END = "napilab-xsk-end"
# seconds a receiver may take to end once stopped: testpmd with busy_budget 256 on a
# TCG guest took more than 4 s to close its port
STOP_GRACE = 30
SIGNALS = ("INT", "TERM", "HUP", "QUIT", "USR1", "USR2")
_MAC = re.compile(r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}")
_IFACE = re.compile(r"[A-Za-z0-9_.:-]{1,15}")

# $1 duration, $2 dst, $3 dst_mac, $4 size, $5 ratep (0: as fast as it can), $6 burst,
# $7 clone_skb, $8 threads, $9 dev (empty: the route to dst), $10 udp_dst
CLIENT_SCRIPT = r"""set -u
D=$1 DST=$2 MAC=$3 SIZE=$4 RATEP=$5 BURST=$6 CLONE=$7 THREADS=$8 DEV=$9 PORT=${10}
P=/proc/net/pktgen
[ -n "$DEV" ] || DEV=$(ip -o route get "$DST" | sed -n 's/.* dev \([^ ]*\).*/\1/p')
[ -n "$DEV" ] || { echo "pktgen: no route to $DST" >&2; exit 2; }
LOADED=
if [ ! -d $P ]; then
  modprobe pktgen || { echo "pktgen: modprobe pktgen failed" >&2; exit 2; }
  LOADED=1
fi
devs() {
  t=0
  while [ $t -lt "$THREADS" ]; do
    if [ "$THREADS" = 1 ]; then echo "$DEV"; else echo "$DEV@$t"; fi
    t=$((t+1))
  done
}
clean() {
  t=0
  while [ $t -lt "$THREADS" ]; do
    [ -e $P/kpktgend_$t ] && echo rem_device_all > $P/kpktgend_$t
    t=$((t+1))
  done
  [ -n "$LOADED" ] && rmmod pktgen
}
trap 'echo stop > $P/pgctrl 2>/dev/null; clean; exit 130' INT TERM
pg() {
  echo "$2" > "$P/$1" 2>/dev/null
  r=$(sed -n 's/^Result: //p' "$P/$1")
  case "$r" in
    OK*) ;;
    *) echo "pktgen: $1: '$2': ${r:-write refused}" >&2; clean; exit 2;;
  esac
}
t=0
for d in $(devs); do
  [ -e $P/kpktgend_$t ] || {
    echo "pktgen: no thread kpktgend_$t (threads $THREADS > CPUs?)" >&2; clean; exit 2; }
  pg kpktgend_$t rem_device_all; pg kpktgend_$t "add_device $d"
  pg "$d" "count 0"; pg "$d" "pkt_size $SIZE"; pg "$d" "clone_skb $CLONE"
  pg "$d" "burst $BURST"; pg "$d" "dst $DST"; pg "$d" "dst_mac $MAC"
  pg "$d" "udp_dst_min $PORT"; pg "$d" "udp_dst_max $PORT"
  pg "$d" "queue_map_min $t"; pg "$d" "queue_map_max $t"
  if [ "$RATEP" != 0 ]; then pg "$d" "ratep $((RATEP / THREADS))"; else pg "$d" "delay 0"; fi
  t=$((t+1))
done
echo "pktgen: $(devs | tr '\n' ' ')-> $DST $MAC, $SIZE bytes, ratep $RATEP," \
  "burst $BURST, clone_skb $CLONE, ${D}s"
echo start > $P/pgctrl &
S=$!
sleep "$D"
echo stop > $P/pgctrl
wait $S
for d in $(devs); do echo "device $d"; cat "$P/$d"; done
trap - INT TERM
clean
exit 0
"""

# $1 the stop signal, $2 the seconds the receiver may take to end, then its argv
RECEIVER_SCRIPT = r"""SIG=$1 GRACE=$2; shift 2
DIAG=; [ -d /sys/module/xsk_diag ] && DIAG=1
# what an AF_XDP receiver may leave behind: promiscuous mode, an XDP program
state() {
  for d in /sys/class/net/*; do
    n=${d##*/}
    x=0; ip -d -o link show dev "$n" 2>/dev/null | grep -q 'prog/xdp' && x=1
    echo "$n $(( $(cat "$d/flags") & 256 )) $x"
  done
}
BEFORE=$(state)
# its own session: `timeout` signals its whole process group, and the sockets must be
# listed before the receiver hears of the stop; with SIGINT not ignored, as `&` leaves it
# (coreutils >= 9.0; testpmd and xdpsock set their own handlers anyway)
D=; env --default-signal=INT,QUIT true 2>/dev/null && D="env --default-signal=INT,QUIT"
setsid $D "$@" &
P=$!
STOPPED=
XSK=
K=
stop() {
  # timeout signals the wrapper twice (it and its group): the second must not kill it
  trap '' INT TERM HUP; STOPPED=1
  XSK=$(ss -a --xdp -e -m 2>&1) || XSK="ss: cannot list AF_XDP sockets: $XSK"
  kill -s "$SIG" "$P" 2>/dev/null
  # before timeout's own KILL (GRACE s after its signal) could orphan it
  (sleep $((GRACE - 1)); kill -s KILL "$P") >/dev/null 2>&1 &
  K=$!
}
trap stop INT TERM HUP
wait "$P"; RC=$?
if [ -n "$STOPPED" ]; then
  wait "$P"; RC=$?; kill "$K" 2>/dev/null
  printf 'napilab-xsk:\n%s\nnapilab-xsk-end\n' "$XSK" >&2
fi
state | while read -r n promisc xdp; do
  was=$(echo "$BEFORE" | awk -v n="$n" '$1 == n {print $2, $3}')
  [ -n "$was" ] || continue
  if [ "$promisc" != 0 ] && [ "${was% *}" = 0 ]; then
    ip link set dev "$n" promisc off && echo "napilab-receiver: $n: promisc off again" >&2
  fi
  if [ "$xdp" = 1 ] && [ "${was#* }" = 0 ]; then
    ip link set dev "$n" xdp off && echo "napilab-receiver: $n: XDP program removed" >&2
  fi
done
[ -z "$DIAG" ] && [ -d /sys/module/xsk_diag ] && rmmod xsk_diag 2>/dev/null
exit $RC
"""


@dataclass(frozen=True)
class Device:
    name: str
    packets: int
    usec: int
    pps: int
    bps: int
    errors: int


_RESULT = re.compile(r"^Result: OK: (?P<usec>\d+)\(c\d+\+d\d+\) usec, (?P<pkts>\d+) "
                     r"\((?P<size>\d+)byte,\d+frags\)$")
_RATE = re.compile(r"^\s*(?P<pps>\d+)pps (?P<mbps>\d+)Mb/sec \((?P<bps>\d+)bps\) "
                   r"errors: (?P<errors>\d+)$")


def parse(text: str) -> list[Device]:
    """The `device NAME` blocks the client script prints (pktgen's device files)."""
    devices: list[Device] = []
    name: str | None = None
    result: re.Match[str] | None = None
    for line in text.splitlines():
        if line.startswith("device "):
            if name is not None:
                raise ParseError(TOOL, f"device {name}: no `Result: OK` line with its rate")
            name, result = line.split(" ", 1)[1].strip(), None
            continue
        if name is None:
            continue
        if line.startswith("Result:"):
            result = _RESULT.match(line)
            if result is None:
                raise ParseError(TOOL, f"device {name}: {line.strip()!r} (not a finished run)")
            continue
        rate = _RATE.match(line)
        if rate is not None and result is not None:
            devices.append(Device(name, parse_int(TOOL, result["pkts"]),
                                  parse_int(TOOL, result["usec"]), parse_int(TOOL, rate["pps"]),
                                  parse_int(TOOL, rate["bps"]), parse_int(TOOL, rate["errors"])))
            name, result = None, None
    if name is not None:
        raise ParseError(TOOL, f"device {name}: no `Result: OK` line with its rate")
    if not devices:
        raise ParseError(TOOL, "no device report (`device NAME` then pktgen's Result lines)")
    return devices


def values(devices: list[Device]) -> list[Value]:
    return [Value("tx_packets", sum(d.packets for d in devices), COUNT),
            Value("tx_pps", sum(d.pps for d in devices), PPS),
            Value("tx_bps", sum(d.bps for d in devices), BPS),
            Value("tx_errors", sum(d.errors for d in devices), COUNT),
            Value("tx_seconds", max(d.usec for d in devices) / 1e6, "s")]


@dataclass(frozen=True)
class Xsk:
    iface: str
    queue: int
    zerocopy: bool
    stats: Mapping[str, int]


XSK_STATS = ("rx dropped", "rx invalid", "rx queue full", "rx fill ring empty",
             "tx invalid", "tx ring empty")
_SOCKET = re.compile(r"^\S+\s+\d+\s+\d+\s+(?P<iface>\S+):q(?P<queue>\d+)\s")
_ZC = re.compile(r"\bzc:(?P<zc>[01])\b")
_STATS = re.compile(r"^\s*stats\((?P<body>[^)]*)\)")


def _xsk_block(text: str) -> list[str] | None:
    lines = text.splitlines()
    try:
        start = lines.index(XSK_MARK)
        return lines[start + 1:lines.index(XSK_END, start)]
    except ValueError:
        return None


def parse_xsk(text: str) -> list[Xsk] | None:
    """The AF_XDP sockets of the receiver's `napilab-xsk:` block (ss -a --xdp -e -m);
    None when the block is absent (the receiver ended before it was stopped)."""
    block = _xsk_block(text)
    if block is None:
        return None
    if block and block[0].startswith("ss: "):
        raise ParseError(TOOL, f"receiver host: {block[0]}")
    if not block or not block[0].startswith("State"):
        raise ParseError(TOOL, f"`ss --xdp` printed {block[:1]!r}, not its header")
    found: list[dict[str, object]] = []
    for line in block[1:]:
        head = _SOCKET.match(line)
        if head is not None:
            found.append({"iface": head["iface"], "queue": int(head["queue"])})
        elif not found:
            raise ParseError(TOOL, f"`ss --xdp`: {line.strip()!r} before any socket line")
        else:
            _socket_line(found[-1], line)
    return [_xsk(entry) for entry in found]


def _socket_line(entry: dict[str, object], line: str) -> None:
    if line.lstrip().startswith("umem("):
        zc = _ZC.search(line)
        if zc is None:
            raise ParseError(TOOL, f"`ss --xdp`: umem line without zc: {line.strip()!r}")
        entry["zc"] = zc["zc"] == "1"
    stats = _STATS.match(line)
    if stats is not None:
        pairs = dict(part.rsplit(":", 1) for part in stats["body"].split(","))
        if set(pairs) != set(XSK_STATS):
            raise ParseError(TOOL, f"`ss --xdp` stats {sorted(pairs)}, expected "
                                   f"{list(XSK_STATS)}")
        entry["stats"] = {k: parse_int(TOOL, v) for k, v in pairs.items()}


def _xsk(entry: dict[str, object]) -> Xsk:
    where = f"AF_XDP socket {entry['iface']}:q{entry['queue']}"
    zc, stats = entry.get("zc"), entry.get("stats")
    if not isinstance(zc, bool) or not isinstance(stats, dict):
        raise ParseError(TOOL, f"{where}: no umem(...zc:N...) or stats(...) line (ss -e -m?)")
    return Xsk(str(entry["iface"]), int(str(entry["queue"])), zc, stats)


def _required(text: str) -> list[Xsk]:
    sockets = parse_xsk(text)
    if sockets is None:
        raise ParseError(TOOL, f"no `{XSK_MARK}` ... `{XSK_END}` block (the receiver's stderr)")
    return sockets


def xsk_values(sockets: list[Xsk]) -> list[Value]:
    out = [Value("xsk_sockets", len(sockets), COUNT),
           Value("xsk_zerocopy", sum(s.zerocopy for s in sockets), COUNT)]
    out += [Value("xsk_" + stat.replace(" ", "_"), sum(s.stats[stat] for s in sockets), COUNT)
            for stat in XSK_STATS]
    return out


# what the receiver's parsers call the packets it took in, first found counts
RECEIVED = ("fwd_rx_packets", "rx_packets")


def delivered(receiver: list[Value], sent: list[Value]) -> list[Value]:
    """The receiver's packets over the sender's elapsed time, and over the packets sent."""
    got = {v.metric: v.value for v in receiver if v.cpu is None}
    tx = {v.metric: v.value for v in sent}
    count = next((got[name] for name in RECEIVED if name in got), None)
    if count is None:
        return []
    out = [Value("delivered_pps", count / tx["tx_seconds"] if tx["tx_seconds"] else 0.0, PPS)]
    if tx["tx_packets"]:
        out.append(Value("delivered_ratio", count / tx["tx_packets"], RATIO))
    return out


def _dst_mac(raw: object) -> str:
    text = str(raw)
    if not _MAC.fullmatch(text):
        raise InputError(f"pktgen: dst_mac {text!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    return text.lower()


def _int(args: Mapping[str, ArgValue], key: str, default: int, low: int, high: int) -> int:
    raw = args.get(key, default)
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        raise InputError(f"pktgen: {key} {raw!r}: an integer from {low} to {high}")
    return raw


class PktgenTool:
    name = TOOL
    headline: tuple[str, ...] = ("delivered_pps",)
    metrics: tuple[str, ...] = ("*",)  # its receiver's are its args' (a preset's parser)
    # `rate` packets/s (ratep; 0 as fast as it can): pktgen's own send rate is achieved
    load: LoadAxis | None = LoadAxis("rate", "pkt/s", 0, ("tx_pps",))
    clients: SeveralClients = SeveralClients(
        "", "its receiver counts the packets of one source against what that source sent")
    operations: Mapping[str, tuple[str, ...]] = {
        "packet": ("fwd_rx_packets", "rx_packets", "tx_packets")}
    parsers: Mapping[str, Parser] = {"pktgen": lambda text: values(parse(text)),
                                     "pktgen-xsk": lambda text: xsk_values(_required(text))}
    # the kernel's pktgen (its MODULE_VERSION) stands for the client's program
    versions: Mapping[str, tuple[str, ...] | None] = {
        "modprobe": ("sh", "-c", 'echo "pktgen $(modinfo -F version pktgen)"'),
        "ss": ("ss", "-V")}
    # shown by name in `napilab plan` (the text once, at the end)
    scripts: Mapping[str, str] = {"pktgen": CLIENT_SCRIPT, "receiver": RECEIVER_SCRIPT}
    client_args: Mapping[str, ArgSpec] = {
        "size": ArgSpec(int, "frame size in bytes, 60 to 9000 (64)"),
        "rate": ArgSpec(int, "packets per second offered, over all threads (0: as fast as "
                             "pktgen can, the default)"),
        "burst": ArgSpec(int, "frames per xmit batch, 1 to 1024 (1)"),
        "clone_skb": ArgSpec(int, "sends of one skb before a new one (0; devices such as "
                                  "veth refuse any other value)"),
        "threads": ArgSpec(int, "kpktgend threads, one device queue each (1)"),
        "dst_mac": ArgSpec(str, "destination MAC (ff:ff:ff:ff:ff:ff: every receiver takes "
                                "it; give the receiver's for a switched lab)"),
        "dev": ArgSpec(str, "sending interface (default: the route to the target)"),
        "udp_dst": ArgSpec(int, "UDP destination port (9, discard)"),
    }
    server_args: Mapping[str, ArgSpec] = {
        "server_argv": ArgSpec((list, str), "the receiver, started before the packets"),
        "metrics": ArgSpec((dict, str), "the receiver's metrics: a preset (testpmd, xdpsock)"
                                        " or name -> {regex|json_path, unit, ...}"),
        "ready_pattern": ArgSpec(str, "the receiver is ready when its output matches this"),
        "ready_timeout": ArgSpec((int, float), "seconds to wait for readiness (120)"),
        "stop_signal": ArgSpec(str, "signal that stops the receiver (INT)"),
    }

    def programs(self, side: str) -> tuple[str, ...]:
        return ("modprobe",) if side == "client" else ("ss", "setsid")

    def commands(self, client_args: Mapping[str, ArgValue], server_args: Mapping[str, ArgValue],
                 ctx: Context) -> ToolCommands:
        size = _int(client_args, "size", 64, 60, 9000)
        rate = _int(client_args, "rate", 0, 0, 100_000_000)
        burst = _int(client_args, "burst", 1, 1, 1024)
        clone = _int(client_args, "clone_skb", 0, 0, 1 << 30)
        threads = _int(client_args, "threads", 1, 1, 64)
        port = _int(client_args, "udp_dst", 9, 1, 65535)
        mac = _dst_mac(client_args.get("dst_mac", "ff:ff:ff:ff:ff:ff"))
        dev = str(client_args.get("dev", ""))
        if dev and not _IFACE.fullmatch(dev):
            raise InputError(f"pktgen: dev {dev!r} is not an interface name")
        duration = int(ctx.duration) if float(ctx.duration).is_integer() else ctx.duration
        client = ["sh", "-c", CLIENT_SCRIPT, "napilab-pktgen", str(duration), ctx.target, mac,
                  str(size), str(rate), str(burst), str(clone), str(threads), dev, str(port)]
        context: dict[str, object] = {"specs": (), "preset": None}
        server = None
        if "server_argv" in server_args:
            raw = server_args["server_argv"]
            argv = command.split_argv(raw, "server_argv", ctx)
            metrics = server_args.get("metrics")
            if metrics is None:
                raise InputError("pktgen: the receiver needs `metrics` (a preset: "
                                 f"{sorted(command.PRESETS)}, or regexes)")
            specs = command.metric_specs(metrics)
            context = {"specs": specs, "preset": metrics if isinstance(metrics, str) else None}
            pattern = server_args.get("ready_pattern")
            if pattern is None:
                raise InputError("pktgen: the receiver needs `ready_pattern` (a line it prints "
                                 "once it receives, e.g. testpmd's 'start packet forwarding')")
            signal = str(server_args.get("stop_signal", "INT")).upper().removeprefix("SIG")
            if signal not in SIGNALS:
                raise InputError(f"pktgen: stop_signal {signal!r}: one of {list(SIGNALS)}")
            ready = Readiness(log_pattern=str(pattern),
                              timeout=float(str(server_args.get("ready_timeout", 120.0))))
            server = ServerCommand(["sh", "-c", RECEIVER_SCRIPT, "napilab-receiver", signal,
                                    str(STOP_GRACE), *argv], ready, stop_signal=signal,
                                   stop_grace=STOP_GRACE)
        elif server_args:
            raise InputError("pktgen: server args without `server_argv`: "
                             f"{sorted(server_args)}")
        return ToolCommands(client=client, server=server, context=context)

    def parse(self, output: ToolOutput) -> ToolResult:
        client = output.client
        if client.exit_code != 0:
            raise ToolFailed(TOOL, f"the packet source exited {client.exit_code}",
                             client.stderr or client.stdout)
        try:
            sent = values(parse(client.stdout))
        except ParseError as error:
            raise ToolFailed(TOOL, error.reason, client.stderr) from None
        received: list[Value] = []
        server = output.server
        if server is not None and server.exit_code != 0:
            raise ToolFailed(TOOL, f"the receiver exited {server.exit_code}",
                             server.stderr or server.stdout)
        if server is not None:
            context = output.commands.context if output.commands is not None else {}
            try:
                sockets = parse_xsk(server.stderr)
                received = command.measure(server.stdout, server.stderr,
                                           context.get("preset"), context.get("specs", ()))
            except ParseError as error:
                raise ToolFailed(TOOL, f"receiver: {error.reason}", server.stderr) from None
            received += delivered(received, sent)
            if sockets is not None:
                received += xsk_values(sockets)
        return ToolResult(client=sent, server=received)
