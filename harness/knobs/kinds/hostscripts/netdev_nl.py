"""napilab's fallback netdev netlink client, run on a host that has python3 but no `ynl`.

It speaks the three operations napilab needs from the kernel's netdev generic-netlink
family (Documentation/netlink/specs/netdev.yaml) and prints what `ynl --output-json`
prints for them, so both are read by one parser:

    python3 - napi-get IFINDEX        # dump: [{"id": 291, "ifindex": 2, ...}, ...]
    python3 - napi-set '{"id": 291, "threaded": "enabled"}'
    python3 - queue-get IFINDEX       # dump: [{"id": 0, "type": "rx", "napi-id": 291}, ...]
    python3 - qstats-get              # dump, every device, scope queue:
                                      # [{"ifindex": 2, "queue-type": "rx", "queue-id": 0,
                                      #   "rx-packets": 12, ...}, ...]
    python3 - page-pool-stats-get     # dump: [{"info": {"id": 5, "ifindex": 2},
                                      #   "alloc-fast": 1024, ...}, ...]

Several operations in one call (`qstats-get page-pool-stats-get`) print one JSON line
each, in order; an operation that fails prints its `netlink: ...` line instead.

The script arrives on stdin and uses only the standard library (Python >= 3.6), so
nothing is installed on the host. Errors print `netlink: <reason> (errno N)` and exit 1.
It imports neither json nor socket.py (whose imports, re and enum, took 0.5 s of a
call's 1 s in a QEMU TCG guest): it writes and reads the little JSON it needs itself and
opens its socket with the _socket module socket.py wraps.
"""

import os
import struct
import sys

try:
    import _socket as socket
except ImportError:  # not CPython
    import socket


def dumps(value):
    """JSON of what decode() returns: dicts, lists, ints and plain names."""
    if isinstance(value, dict):
        return "{" + ", ".join("%s: %s" % (dumps(k), dumps(v)) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return '"%s"' % "".join(c if c >= " " else "\\u%04x" % ord(c) for c in text)


def loads_flat(text):
    """A flat JSON object of numbers and plain strings (napi-set's request)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise SystemExit("napi-set: not a JSON object: %r" % text)
    out = {}
    for part in filter(None, (p.strip() for p in body[1:-1].split(","))):
        key, _, value = part.partition(":")
        key, value = key.strip().strip('"'), value.strip()
        out[key] = value[1:-1] if value.startswith('"') else int(value)
    return out

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
NETDEV_CMD_DEV_GET = 1
NETDEV_CMD_PAGE_POOL_STATS_GET = 9
NETDEV_CMD_QUEUE_GET, NETDEV_CMD_NAPI_GET, NETDEV_CMD_QSTATS_GET = 10, 11, 12
NETDEV_CMD_NAPI_SET = 14
# netdev.yaml `napi` attribute-set: name -> (number, kind); uint attributes are 4 or 8 bytes.
NAPI_ATTRS = {
    "ifindex": (1, "u32"), "id": (2, "u32"), "irq": (3, "u32"), "pid": (4, "u32"),
    "defer-hard-irqs": (5, "u32"), "gro-flush-timeout": (6, "uint"),
    "irq-suspend-timeout": (7, "uint"), "threaded": (8, "threaded"),
}
THREADED = ["disabled", "enabled", "busy-poll"]  # enum napi-threaded
# netdev.yaml `queue` attribute-set (the nested dmabuf, io-uring and xsk are left out).
QUEUE_ATTRS = {"id": (1, "u32"), "ifindex": (2, "u32"), "type": (3, "queue-type"),
               "napi-id": (4, "u32")}
QUEUE_TYPE = ["rx", "tx"]  # enum queue-type
# netdev.yaml `dev` attribute-set and its `xdp-act` flags, by bit, as ynl names them
DEV_ATTRS = {"ifindex": (1, "u32"), "xdp-features": (3, "xdp-act"),
             "xdp-zc-max-segs": (4, "u32")}
XDP_ACT = ["basic", "redirect", "ndo-xmit", "xsk-zerocopy", "hw-offload", "rx-sg",
           "ndo-xmit-sg"]
# netdev.yaml `qstats` attribute-set (Linux 6.8+): the counters from 8 on are uint; an
# attribute a newer kernel adds is kept as "attr-N", never dropped
QSTATS_ATTRS = {"ifindex": (1, "u32"), "queue-type": (2, "queue-type"),
                "queue-id": (3, "u32"), "scope": (4, "uint")}
QSTATS_ATTRS.update((name, (8 + i, "uint")) for i, name in enumerate((
    "rx-packets", "rx-bytes", "tx-packets", "tx-bytes", "rx-alloc-fail", "rx-hw-drops",
    "rx-hw-drop-overruns", "rx-csum-complete", "rx-csum-unnecessary", "rx-csum-none",
    "rx-csum-bad", "rx-hw-gro-packets", "rx-hw-gro-bytes", "rx-hw-gro-wire-packets",
    "rx-hw-gro-wire-bytes", "rx-hw-drop-ratelimits", "tx-hw-drops", "tx-hw-drop-errors",
    "tx-csum-none", "tx-needs-csum", "tx-hw-gso-packets", "tx-hw-gso-bytes",
    "tx-hw-gso-wire-packets", "tx-hw-gso-wire-bytes", "tx-hw-drop-ratelimits", "tx-stop",
    "tx-wake")))
QSTATS_SCOPE_QUEUE = 1
# netdev.yaml `page-pool-stats` (CONFIG_PAGE_POOL_STATS): `info` (1) nests the pool's
# id and ifindex (the `page-pool` set's 1 and 2); the counters from 8 on are uint
PAGE_POOL_INFO = {"id": (1, "uint"), "ifindex": (2, "u32")}
PAGE_POOL_STATS = {"info": (1, "nest")}
PAGE_POOL_STATS.update((name, (8 + i, "uint")) for i, name in enumerate((
    "alloc-fast", "alloc-slow", "alloc-slow-high-order", "alloc-empty", "alloc-refill",
    "alloc-waive", "recycle-cached", "recycle-cache-full", "recycle-ring",
    "recycle-ring-full", "recycle-released-refcnt")))


def attr(number, data):
    length = 4 + len(data)
    return struct.pack("HH", length, number) + data + b"\0" * ((4 - length % 4) % 4)


def encode(name, value):
    number, kind = NAPI_ATTRS[name]
    if kind == "threaded":
        value = THREADED.index(value) if isinstance(value, str) else int(value)
    if kind == "uint" and int(value) > 0xFFFFFFFF:
        return attr(number, struct.pack("Q", int(value)))
    return attr(number, struct.pack("I", int(value)))


def decode(payload, attrs=NAPI_ATTRS, keep_unknown=False):
    out = {}
    names = {number: (name, kind) for name, (number, kind) in attrs.items()}
    offset = 0
    while offset + 4 <= len(payload):
        length, number = struct.unpack_from("HH", payload, offset)
        data = payload[offset + 4:offset + length]
        name, kind = names.get(number & 0x3FFF, (None, None))
        if name is None and keep_unknown:
            name, kind = "attr-%d" % (number & 0x3FFF), "uint"
        if kind == "nest":
            out[name] = decode(data, PAGE_POOL_INFO)
        elif name is not None:
            value = int.from_bytes(data, sys.byteorder)
            if kind == "threaded" and value < len(THREADED):
                value = THREADED[value]
            elif kind == "queue-type" and value < len(QUEUE_TYPE):
                value = QUEUE_TYPE[value]
            elif kind == "xdp-act":
                value = [n for bit, n in enumerate(XDP_ACT) if value >> bit & 1] + [
                    "bit-%d" % bit for bit in range(len(XDP_ACT), 64) if value >> bit & 1]
            out[name] = value
        offset += (length + 3) & ~3
    return out


class Netlink:
    def __init__(self):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self.sock.bind((0, 0))
        self.seq = 0

    def request(self, family, flags, cmd, attrs):
        self.seq += 1
        payload = struct.pack("BBH", cmd, 1, 0) + attrs
        header = struct.pack("IHHII", 16 + len(payload), family, flags | NLM_F_REQUEST,
                             self.seq, 0)
        self.sock.send(header + payload)
        replies = []
        while True:
            data = self.sock.recv(1 << 16)
            offset = 0
            while offset < len(data):
                length, kind, _, _, _ = struct.unpack_from("IHHII", data, offset)
                if kind == NLMSG_DONE:
                    return replies
                if kind == NLMSG_ERROR:
                    errno = -struct.unpack_from("i", data, offset + 16)[0]
                    if errno:
                        raise OSError(errno, os.strerror(errno))
                    return replies
                replies.append(data[offset + 20:offset + length])
                offset += (length + 3) & ~3

    def family(self, name):
        replies = self.request(GENL_ID_CTRL, NLM_F_ACK, CTRL_CMD_GETFAMILY,
                               attr(CTRL_ATTR_FAMILY_NAME, name.encode() + b"\0"))
        offset, payload = 0, replies[0]
        while offset + 4 <= len(payload):
            length, number = struct.unpack_from("HH", payload, offset)
            if number == CTRL_ATTR_FAMILY_ID:
                return struct.unpack_from("H", payload, offset + 4)[0]
            offset += (length + 3) & ~3
        raise OSError(2, "no netdev netlink family (kernel older than 6.3?)")


def dump_stats(nl, family, op):
    if op == "qstats-get":
        replies = nl.request(family, NLM_F_DUMP, NETDEV_CMD_QSTATS_GET,
                             attr(QSTATS_ATTRS["scope"][0],
                                  struct.pack("Q", QSTATS_SCOPE_QUEUE)))
        return [decode(r, QSTATS_ATTRS, keep_unknown=True) for r in replies]
    if op == "page-pool-stats-get":
        replies = nl.request(family, NLM_F_DUMP, NETDEV_CMD_PAGE_POOL_STATS_GET, b"")
        return [decode(r, PAGE_POOL_STATS, keep_unknown=True) for r in replies]
    raise SystemExit("unknown operation %r" % op)


def main(argv):
    nl = Netlink()
    family = nl.family("netdev")
    if argv[1] == "napi-get":
        replies = nl.request(family, NLM_F_DUMP, NETDEV_CMD_NAPI_GET,
                             encode("ifindex", int(argv[2])))
        print(dumps([decode(r) for r in replies]))
    elif argv[1] == "queue-get":
        replies = nl.request(family, NLM_F_DUMP, NETDEV_CMD_QUEUE_GET,
                             attr(QUEUE_ATTRS["ifindex"][0], struct.pack("I", int(argv[2]))))
        print(dumps([decode(r, QUEUE_ATTRS) for r in replies]))
    elif argv[1] == "dev-get":
        replies = nl.request(family, NLM_F_ACK, NETDEV_CMD_DEV_GET,
                             attr(DEV_ATTRS["ifindex"][0], struct.pack("I", int(argv[2]))))
        print(dumps(decode(replies[0], DEV_ATTRS) if replies else {}))
    elif argv[1] in ("qstats-get", "page-pool-stats-get"):
        for op in argv[1:]:
            try:
                print(dumps(dump_stats(nl, family, op)))
            except OSError as exc:
                print("netlink: %s: %s (errno %d)" % (op, exc.strerror, exc.errno or 0))
    elif argv[1] == "napi-set":
        request = loads_flat(argv[2])
        nl.request(family, NLM_F_ACK, NETDEV_CMD_NAPI_SET,
                   b"".join(encode(k, v) for k, v in request.items()))
        print("{}")
    else:
        raise SystemExit("usage: napi-get IFINDEX | napi-set JSON | queue-get IFINDEX | "
                         "dev-get IFINDEX | "
                         "qstats-get | page-pool-stats-get")


if __name__ == "__main__":
    try:
        main(sys.argv)
    except OSError as exc:
        sys.stderr.write("netlink: %s (errno %d)\n" % (exc.strerror, exc.errno or 0))
        sys.exit(1)
