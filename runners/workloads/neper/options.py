"""neper's options, binary by binary, and which side (client, server) reads each:
the table `runners.workloads.neper.neper` copies client flags to the server by, and refuses
an option given to a side that never reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Read at google/neper ea5890f (2025-11-04); `source` is where the side(s) use the value.
# neper's control connection carries no option to the server (control_plane.c:279 only
# logs the client's -T/-F/-l/-m): a server sizes and shapes its side of the exchange from
# its own flags, so napilab gives it those the client was given.
SAME = "same"  # both must hold one value: copied across, a different value is refused
SERVER_TOO = "server too"  # the server reads its own: copied unless server.args sets it
EACH = "each"  # each process applies its own to its own sockets/threads: never copied
CLIENT = "client"  # only the client reads it: refused in server.args
SERVER = "server"  # only the server reads it: refused in client.args
MIRROR = "mirror"  # tcp_stream: the client reading means the server writes


@dataclass(frozen=True)
class NeperOption:
    long: str  # neper's name with `-` for `_` (getopt_long)
    short: str
    kind: type | tuple[type, ...]
    sides: str
    source: str
    help: str


_O = NeperOption
_DURATION = (int, str)  # parse_duration: ns, or with a unit ("10us")
_COMMON = (  # add_flags_common, define_all_flags.c:24
    _O("magic", "", int, SAME, "control_plane.c:72", "control message magic"),
    _O("maxevents", "", int, EACH, "loop.c:74", "epoll events per epoll_wait()"),
    _O("num-flows", "F", int, SERVER_TOO, "thread.c:426,449", "total number of flows"),
    _O("num-threads", "T", int, EACH, "thread.c:413", "threads of this process"),
    _O("num-clients", "", int, SERVER, "control_plane.c:448", "clients the server waits for"),
    _O("listen-backlog", "", int, SERVER, "control_plane.c:227", "listen() backlog"),
    _O("suicide-length", "s", int, EACH, "tcp_rr_main.c:52", "exit after this many seconds"),
    _O("source-port", "", int, CLIENT, "socket.c:294", "first source port"),
    _O("stime-use-proc", "S", bool, EACH, "thread.c:578", "stime from /proc/stat"),
    _O("ipv4", "4", bool, SAME, "common.c:80", "AF_INET only"),
    _O("ipv6", "6", bool, SAME, "common.c:82", "AF_INET6 only"),
    _O("debug", "d", bool, EACH, "socket.c:46", "SO_DEBUG"),
    _O("pin-cpu", "U", bool, EACH, "thread.c:459", "pin threads to CPU cores"),
    _O("nonblocking", "", bool, EACH, "flow.c:258", "non-blocking syscalls"),
    _O("freebind", "", bool, EACH, "socket.c:52", "IP_FREEBIND"),
    _O("interval", "I", (int, float), EACH, "thread.c:435", "seconds per sample"),
    _O("max-pacing-rate", "m", (int, str), SERVER_TOO, "socket.c:78,122", "pacing rate"),
    _O("local-hosts", "L", str, CLIENT, "check_all_options.c:39", "local addresses to bind"),
    _O("control-port", "C", (int, str), SAME, "control_plane.c:353,361", "default 12866"),
    _O("port", "P", (int, str), SAME, "socket.c:246,322", "data port, default 12867"),
    _O("all-samples", "A", (bool, str), EACH, "rr.c:576", "CSV; true: under the workdir"),
    _O("time-wait", "", bool, CLIENT, "socket.c:56", "close gracefully (TIME_WAIT)"),
    _O("iostat-ms", "", int, CLIENT, "control_plane.c:436", "print `t=` io stats every N ms"),
    _O("wait-start", "", int, CLIENT, "check_all_options.c:57", "seconds before data flows"),
)
_TCP = (  # add_flags_tcp, define_all_flags.c:65
    _O("num-ports", "", int, SAME, "socket.c:263,320", "server data ports"),
    _O("tcp-fastopen", "X", bool, CLIENT, "socket.c:325", "TCP_FASTOPEN_CONNECT"),
    _O("pin-numa", "N", bool, EACH, "thread.c:473", "pin threads to NUMA nodes"),
    _O("tcp-tx-delay", "t", int, EACH, "socket.c:85", "TCP_TX_DELAY (us) on own sends"),
    _O("no-delay", "", bool, EACH, "socket.c:64", "TCP_NODELAY"),
    _O("congestion-control", "", str, EACH, "socket.c:83", "TCP_CONGESTION"),
)
_RR = (  # add_flags_rr, define_all_flags.c:89
    _O("request-size", "Q", int, SAME, "rr.c:168-173,182", "request bytes"),
    _O("response-size", "R", int, SAME, "rr.c:161-166", "response bytes"),
    _O("percentiles", "p", (str, int, float), CLIENT, "rr.c:439-442", "e.g. '50,99,99.9'"),
    _O("buffer-size", "B", int, SERVER_TOO, "rr.c:140-141,243-245,279", "bytes per send"),
    _O("log-rtt", "", (bool, str), CLIENT, "rr.c:209", "per-transaction RTT file"),
    _O("logrtt-entries-per-flow", "", int, CLIENT, "rr.c:210-211", "RTT entries per flow"),
    _O("mark", "M", int, EACH, "socket.c:48", "SO_MARK"),
)
_STREAM = (  # add_flags_stream, define_all_flags.c:109
    _O("edge-trigger", "E", bool, EACH, "stream.c:49", "edge-triggered epoll"),
    _O("reuseaddr", "R", bool, EACH, "socket.c:50", "SO_REUSEADDR"),
    _O("zerocopy", "Z", bool, EACH, "socket.c:54", "MSG_ZEROCOPY"),
    _O("throughput-opt", "", str, SERVER_TOO, "stream.c:185-195", "unit, e.g. Mb, Gb"),
)
_RR_DELAY = _O("delay", "D", _DURATION, CLIENT, "rr.c:380,398", "delay between requests")
_STREAM_DELAY = _O("delay", "D", _DURATION, SERVER_TOO, "stream.c:126",
                   "ns after each send, on the writing side")
_STREAM_BUFFER = _O("buffer-size", "B", int, SERVER_TOO, "stream.c:33,98,118",
                    "bytes per read()/write()")
_CONNECT = _O("async-connect", "", bool, CLIENT, "socket.c:349", "non-blocking connect")
_TCP_RR = (  # add_flags_tcp_rr, define_all_flags.c:124
    _RR_DELAY, _CONNECT,
    _O("reuseaddr", "", bool, EACH, "socket.c:50", "SO_REUSEADDR"),
    _O("noburst", "", _DURATION, CLIENT, "rr.c:380,398", "noburst interval"),
)
_TCP_STREAM = (  # add_flags_tcp_stream, define_all_flags.c:147
    _STREAM_DELAY, _STREAM_BUFFER, _CONNECT,
    _O("skip-rx-copy", "", bool, EACH, "tcp_stream_main.c:57", "MSG_TRUNC on receive"),
    _O("rx-zerocopy", "z", bool, EACH, "stream.c:94", "TCP RX zerocopy"),
    _O("enable-read", "r", bool, MIRROR, "tcp_stream_main.c:46-49", "read from flows"),
    _O("enable-write", "w", bool, EACH, "tcp_stream_main.c:46-49", "write to flows"),
    _O("split-bidir", "", bool, SAME, "tcp_stream_main.c:51-54", "separate tx/rx sockets"),
    _O("enable-tcp-maerts", "M", bool, SAME, "tcp_stream_main.c:42-44", "server writes"),
    _O("no-cork", "", bool, EACH, "tcp_stream_main.c:61", "no MSG_MORE on sends"),
    _O("mark", "", int, EACH, "socket.c:48", "SO_MARK"),
)
OPTIONS: dict[str, tuple[NeperOption, ...]] = {  # each binary's *_main.c add_flags_* calls
    "tcp_rr": _COMMON + _TCP + _RR + _TCP_RR,
    "udp_rr": _COMMON + _RR + (_RR_DELAY,),
    "tcp_crr": _COMMON + _TCP + _RR + (_CONNECT,),
    "tcp_stream": _COMMON + _TCP + _STREAM + _TCP_STREAM,
    "udp_stream": _COMMON + _STREAM + (_STREAM_DELAY, _STREAM_BUFFER,
                                       _O("mark", "M", int, EACH, "socket.c:48", "SO_MARK")),
}
BINARIES = tuple(OPTIONS)
# napilab's own: -c, -H and -l on both sides (the server's -l sets its sampling interval,
# tcp_rr_main.c:51 adjust_interval, so a short test still gives it 2 samples), --nolog
# (check_all_options.c:25 refuses --logtostderr with it), never --dry-run.
RESERVED = {"c", "client", "H", "host", "l", "test-length", "nolog", "logtostderr", "n",
            "dry-run"}
