"""Value checks shared by knob kinds: names confined to what the kernel spells (an
interface, a sysctl, a queue) and values typed before any host is touched (integers in
range, CPU lists, sysctl words). Each returns the value in the canonical form napilab
writes, or raises KnobValueError saying what was expected."""

from __future__ import annotations

import re
from dataclasses import dataclass

from napilab.harness.grammar import cpus

IFACE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
SYSCTL = re.compile(r"[a-z0-9_]+(\.[A-Za-z0-9_-]+)+")
_QUEUE = re.compile(r"(rx|tx)-\d{1,4}")
WORD = re.compile(r"[A-Za-z0-9_.:,/+-]{1,256}")  # a sysctl or sysfs value
U32_MAX = 2**32 - 1
S32_MAX = 2**31 - 1
U64_MAX = 2**64 - 1


class KnobValueError(ValueError):
    pass


def check_iface(name: str) -> str:
    if not IFACE.fullmatch(name) or name in (".", ".."):
        raise KnobValueError(f"{name!r} is not an interface name")
    return name


def check_sysctl(name: str) -> str:
    if not SYSCTL.fullmatch(name) or ".." in name:
        raise KnobValueError(f"{name!r} is not a sysctl name like net.core.busy_poll")
    return name


def check_queue(name: str) -> str:
    if not _QUEUE.fullmatch(name):
        raise KnobValueError(f"{name!r} is not a queue name like rx-0")
    return name


@dataclass(frozen=True)
class IntegerRange:
    """A value converter for integers low..high (YAML integers or digit strings); its
    bounds also go into the JSON Schema (harness.authoring.json_schema)."""

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


def integer(low: int, high: int) -> IntegerRange:
    return IntegerRange(low, high)


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


def word(value: object, what: str = "a value", lists: bool = False) -> str:
    """An integer or a word of letters, digits and . : , / + - _: what a sysctl or a
    sysfs attribute takes. Never spaces, quotes or shell characters."""
    expected = "an integer, a word or a list" if lists else "an integer or a word"
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise KnobValueError(f"expected {expected}, got {value!r}")
    text = str(value)
    if not WORD.fullmatch(text):
        raise KnobValueError(f"{text!r}: {what} is an integer or a word of letters, "
                             "digits and . : , / + - _"
                             + (" (use a list for several values)" if lists else ""))
    return text


def sysctl_value(value: object) -> str:
    """An integer, a word, or a list of them for multi-value sysctls (tcp_rmem:
    [4096, 131072, 6291456]), written tab-separated."""
    if isinstance(value, list):
        return "\t".join(sysctl_value(v) for v in value)
    return word(value, "a sysctl value", lists=True)


def spaces(text: str) -> str:
    """Whitespace collapsed: how a file's value and the value written compare."""
    return " ".join(text.split())


def cpu_list_text(text: str) -> str:
    """A CPU list as the kernel prints it, canonical (the text itself if it is none)."""
    try:
        return cpus.format_list(cpus.parse_list(text.strip()))
    except cpus.CpuListError:
        return text.strip()


def cpu_mask_text(text: str) -> str:
    """A CPU mask (rps_cpus, xps_cpus) as a canonical CPU list (the text if not a mask)."""
    try:
        return cpus.format_list(cpus.parse_mask(text.strip()))
    except cpus.CpuListError:
        return text.strip()
