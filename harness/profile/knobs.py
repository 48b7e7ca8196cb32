"""Knob kinds: which file a setting lives in, which values it takes, how values compare.

Each kind validates the profile's value before any host is touched (typed values:
integers, enums, CPU lists; names confined to /proc/sys, /sys/class/net) and says how
to compare what was requested with what the kernel reads back. Kinds that live in
files share one read/write path (`harness.hosts.settings`); the file list of a kind may
depend on the host (an interface's queues), so it is resolved at apply time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.errors import Written
from harness.profile import cpus

_IFACE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
_SYSCTL = re.compile(r"[a-z0-9_]+(\.[A-Za-z0-9_-]+)+")
_QUEUE = re.compile(r"(rx|tx)-\d{1,4}")
SYSCTL_WORD = re.compile(r"[A-Za-z0-9_.:,/+-]{1,256}")
U32_MAX = 2**32 - 1
S32_MAX = 2**31 - 1
U64_MAX = 2**64 - 1


class KnobValueError(ValueError):
    pass


@dataclass(frozen=True)
class Setting:
    """One requested change on one role's host, validated and in canonical form.

    `target` names what is changed in the kernel's words: an interface attribute
    (`data0/gro_flush_timeout`), a sysctl (`net.core.busy_poll`), an interface's
    queues (`data0/rx-*`). `value` is what will be written.
    """

    role: str
    kind: str
    target: str
    value: str
    at: Written | None = field(default=None, compare=False, repr=False)  # the value's key

    def describe(self) -> str:
        return f"{self.kind} {self.target} = {self.value}"


def check_iface(name: str) -> str:
    if not _IFACE.fullmatch(name) or name in (".", ".."):
        raise KnobValueError(f"{name!r} is not an interface name")
    return name


def check_sysctl(name: str) -> str:
    if not _SYSCTL.fullmatch(name) or ".." in name:
        raise KnobValueError(f"{name!r} is not a sysctl name like net.core.busy_poll")
    return name


def check_queue(name: str) -> str:
    if not _QUEUE.fullmatch(name):
        raise KnobValueError(f"{name!r} is not a queue name like rx-0")
    return name


@dataclass(frozen=True)
class IntegerRange:
    """A value converter for integers low..high (YAML integers or digit strings); its
    bounds also go into the JSON Schema (harness.profile.json_schema)."""

    low: int
    high: int

    def __call__(self, value: object) -> str:
        low, high = self.low, self.high
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise KnobValueError(f"expected an integer {low}..{high}, got {value!r}")
        try:
            number = int(value)
        except ValueError:
            raise KnobValueError(f"expected an integer {low}..{high}, got {value!r}") from None
        if not low <= number <= high:
            raise KnobValueError(f"{number} is out of range {low}..{high}")
        return str(number)


def integer(low: int, high: int) -> Callable[[object], str]:
    return IntegerRange(low, high)


# Spellings of the two `threaded` knobs, matched lower-cased (YAML true reads "true").
SYSFS_THREADED = {"0": "0", "1": "1", "disabled": "0", "enabled": "1", "false": "0",
                  "true": "1"}
NAPI_THREADED = {"0": "disabled", "1": "enabled", "2": "busy-poll", "disabled": "disabled",
                 "enabled": "enabled", "busy-poll": "busy-poll", "false": "disabled",
                 "true": "enabled"}


def _threaded_sysfs(value: object) -> str:
    """sysfs `threaded` takes only 0/1; busy-poll exists only through netlink napi-set."""
    key = str(value).lower()
    if key == "busy-poll":
        raise KnobValueError("threaded busy-poll is set per NAPI through netlink: use "
                             "`napi: {IFACE: {threaded: busy-poll}}`; sysfs takes only 0/1")
    if key not in SYSFS_THREADED:
        raise KnobValueError(f"expected one of 0, 1, disabled, enabled, got {value!r}")
    return SYSFS_THREADED[key]


def napi_threaded(value: object) -> str:
    """netlink napi-set `threaded`: the napi-threaded enum (busy-poll since after 6.18)."""
    key = str(value).lower()
    if key not in NAPI_THREADED:
        raise KnobValueError(f"expected one of disabled, enabled, busy-poll, got {value!r}")
    return NAPI_THREADED[key]


def cpu_list(value: object) -> str:
    """A CPU list (`0-3,8`; `""` or `none` for no CPU) in canonical form."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise KnobValueError(f"expected a CPU list like '0-3,8', got {value!r}")
    text = str(value).strip()
    if text.lower() == "none":
        text = ""
    try:
        return cpus.format_list(cpus.parse_list(text))
    except cpus.CpuListError as exc:
        raise KnobValueError(str(exc)) from None


def sysctl_value(value: object) -> str:
    """An integer, a word, or a list of them for multi-value sysctls (tcp_rmem:
    [4096, 131072, 6291456]), written tab-separated. Strings never hold spaces,
    quotes or shell characters: nothing a sysctl value needs."""
    if isinstance(value, list):
        return "\t".join(sysctl_value(v) for v in value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise KnobValueError(f"expected an integer, a word or a list, got {value!r}")
    text = str(value)
    if not SYSCTL_WORD.fullmatch(text):
        raise KnobValueError(f"{text!r}: a sysctl value is an integer or a word of letters, "
                             "digits and . : , / + - _ (use a list for several values)")
    return text


# netdev sysfs attributes napilab writes: name -> value converter.
NETDEV_ATTRS: dict[str, Callable[[object], str]] = {
    "threaded": _threaded_sysfs,
    "napi_defer_hard_irqs": integer(0, S32_MAX),  # writes > S32_MAX are rejected (5.7+)
    "gro_flush_timeout": integer(0, U64_MAX),  # ns
    "tx_queue_len": integer(0, U32_MAX),
    "mtu": integer(68, 65535),
}


@dataclass(frozen=True)
class FileWrite:
    """One file a setting writes, resolved on the host; `target` names it like a
    Setting does, with queue globs expanded (`data0/rx-0`)."""

    path: str
    value: str
    target: str


def files(setting: Setting, queues: list[str]) -> list[FileWrite]:
    """The files `setting` writes; `queues` are the interface's queue names."""
    kind, target, value = setting.kind, setting.target, setting.value
    if kind == "sysctl":
        return [FileWrite("/proc/sys/" + target.replace(".", "/"), value, target)]
    iface, _, rest = target.partition("/")
    base = f"/sys/class/net/{iface}"
    if kind == "netdev":
        return [FileWrite(f"{base}/{rest}", value, target)]
    if kind in ("rps", "rps_flow_cnt", "xps"):
        prefix = "tx-" if kind == "xps" else "rx-"
        selected = [q for q in queues if q.startswith(prefix)] if rest.endswith("*") else [rest]
        leaf = {"rps": "rps_cpus", "rps_flow_cnt": "rps_flow_cnt", "xps": "xps_cpus"}[kind]
        text = cpus.to_mask(cpus.parse_list(value)) if kind != "rps_flow_cnt" else value
        return [FileWrite(f"{base}/queues/{q}/{leaf}", text, f"{iface}/{q}") for q in selected]
    raise KnobValueError(f"unknown knob kind {kind!r}")


def needs_queues(setting: Setting) -> bool:
    return setting.kind in ("rps", "rps_flow_cnt", "xps") and setting.target.endswith("*")


def canonical(path: str, text: str) -> str:
    """A value as the kernel shows it and as napilab wrote it, in one comparable form."""
    text = text.strip()
    if path.endswith(("/rps_cpus", "/xps_cpus", "/smp_affinity")):
        try:
            return cpus.format_list(cpus.parse_mask(text))
        except cpus.CpuListError:
            return text
    if path.endswith("_list"):
        try:
            return cpus.format_list(cpus.parse_list(text))
        except cpus.CpuListError:
            return text
    return " ".join(text.split())
