"""What a knob kind is: one class that holds everything napilab knows about one kind of
host setting (docs/design.md, "How to add ... a knob kind").

- its profile grammar and validation (`key`, `parse`): `setup.<role>.<key>` into
  Settings, with errors at file:line before any host is touched;
- its resolution to host items (`resolve`): a setting names what the profile means
  (`eth0/rx-*`), an item what the kernel has (`/sys/class/net/eth0/queues/rx-0/...`);
  what only the host knows (queues, NAPI ids, IRQs, thread PIDs) comes through a
  `Lookup`, which `napilab plan` answers with placeholders the kind declares;
- its place in the apply order (the registry's order) and when its items exist
  (`late`, `follows_queues`, `changes_queues`);
- how its items are read and written (`backend`, a class of harness.knobs.backend) and
  how a value read back compares with the value written (`canonical`, `verdict`);
- the CPUs it names (checked against the inventory) and the files `hosts check` probes.

A kind imports no transport and no host code at run time: the profile reads the
registry to parse `setup:` without a host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import msgspec

from napilab.harness.errors import Written
from napilab.harness.knobs.backend import Backend, FileBackend
from napilab.harness.knobs.values import spaces

if TYPE_CHECKING:
    from napilab.harness.grammar.schema import Checker
    from napilab.harness.grammar.yamlsrc import Node
    from napilab.harness.transport.transport import Transport

T = TypeVar("T")
B = TypeVar("B", bound=Backend)
ORIGINAL = "<original>"  # a value only the host knows, as `napilab plan` shows it


@dataclass(frozen=True)
class Setting:
    """One requested change on one role's host, validated and in canonical form.

    `target` names what is changed in the kernel's words: an interface attribute
    (`data0/gro_flush_timeout`), a sysctl (`net.core.busy_poll`), an interface's
    queues (`data0/rx-*`). `value` is what will be written; `at` where the profile
    wrote it, for the checks that run once the profile meets an inventory (a CPU the
    host lacks is reported at the value, not at its role).
    """

    role: str
    kind: str
    target: str
    value: str
    at: Written | None = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        return f"{self.kind} {self.target} = {self.value}"


@dataclass(frozen=True)
class Item:
    """One value on a host that a setting changes, resolved to its backend address."""

    backend: str
    key: str
    target: str
    value: str


class Verdict(msgspec.Struct, frozen=True):
    """Did the kernel take the value? Decided once, when the value is read back after
    the write, and stored with the change: `taken`, `mismatch`, or `absent` (a kind
    whose refusal is a result, such as a kprobe on a function this kernel lacks).
    `requested` and `effective` are both values in the kind's canonical form. A
    value (hashable), not a Record: no `extra`."""

    state: str
    requested: str
    effective: str


class Session(Protocol):
    """One connected host, as a kind's host lookups see it."""

    @property
    def name(self) -> str: ...

    @property
    def transport(self) -> Transport: ...

    def backend(self, cls: type[B]) -> B: ...


class Lookup(Protocol):
    """What a kind's `resolve` may ask of a host. `find(fn, *args, plan=...)` is
    `fn(session, *args)` on a host (each answer kept for one apply) and `plan` in
    `napilab plan`, where nothing is run."""

    @property
    def name(self) -> str: ...

    def find(self, fn: Callable[..., T], *args: str, plan: T) -> T: ...


class Kind:
    """A knob kind; subclasses set the class attributes and override what differs."""

    name: ClassVar[str]
    # The key under `setup.<role>` this kind parses; None for kinds that other kinds
    # or collectors produce (rps_flow_cnt from `rps:`, kprobe from `collect:`).
    key: ClassVar[str | None] = None
    backend: ClassVar[type[Backend]] = FileBackend
    # Items exist only once earlier kinds were written (NAPI threads need `threaded`):
    # resolved and journalled in the kind's turn, never up front.
    late: ClassVar[bool] = False
    # Items depend on the interface's queues or IRQs: resolved in the kind's turn when
    # a kind that changes_queues (ethtool channels) is applied in the same trial.
    follows_queues: ClassVar[bool] = False
    changes_queues: ClassVar[bool] = False
    # A value the kernel does not take is a result to report (absent), not a fault.
    refusal_is_result: ClassVar[bool] = False

    def parse(self, check: Checker, node: Node, path: str, role: str) -> list[Setting]:
        """`node[self.key]` (under key path `path`) into validated settings for `role`."""
        raise NotImplementedError

    def resolve(self, setting: Setting, host: Lookup) -> list[Item]:
        raise NotImplementedError

    def item(self, key: str, target: str, value: str) -> Item:
        return Item(self.backend.name, key, target, value)

    def canonical(self, key: str, value: str) -> str:
        """A value as the kernel shows it and as napilab wrote it, in one comparable
        form (for an item at backend address `key`)."""
        return spaces(value)

    def same(self, key: str, a: str, b: str) -> bool:
        return self.canonical(key, a) == self.canonical(key, b)

    def verdict(self, key: str, requested: str, effective: str) -> Verdict:
        want, got = self.canonical(key, requested), self.canonical(key, effective)
        state = "taken" if want == got else "absent" if self.refusal_is_result else "mismatch"
        return Verdict(state, want, got)

    def refuses(self, item: Item, original: str) -> str | None:
        """Why `item.value` cannot be written where the host reads `original` (checked
        once the originals are read, before anything is journalled or written); None
        when it can."""
        return None

    def for_collector(self, collector: str, options: Mapping[str, Any],
                      role: str) -> list[Setting]:
        """Settings a collector of the profile needs on `role`'s host for each trial."""
        return []

    def attribute_names(self) -> frozenset[str]:
        """The keys this kind takes under an interface (or under its own key), so a key
        written under another kind can be pointed here (`netdev: {eth0:
        {irq_suspend_timeout: ...}}` is napi's)."""
        return frozenset()

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of `setup.<role>.<key>` for editors and `napilab schema`
        (built with harness.knobs.json_parts); `{}` accepts any value and leaves the
        checks to `napilab validate`."""
        return {}

    def cpu_lists(self, setting: Setting) -> list[str]:
        """The CPU lists a setting names (checked against the host's CPU count)."""
        return []

    def check_paths(self, iface: str | None) -> list[str]:
        """Files `napilab hosts check` shows as writable, read-only or absent."""
        return []

    def plan_original(self, item: Item) -> str:
        """The value restore writes back, as `napilab plan` shows it."""
        return ORIGINAL

    def shown(self, value: str) -> str:
        """A value as messages and reports show it."""
        return value


def two_state_original(item: Item, states: tuple[str, str]) -> str:
    """For a knob with two states: restore writes only when the host had the other one
    (an item already as requested is never written), so the plan can name it."""
    return states[1] if item.value == states[0] else states[0]


class PlanLookup:
    """`napilab plan`'s answers to a kind's host lookups: the placeholders the kind
    declares (`<napi-id>`, `rx-*`); nothing is run."""

    def __init__(self, host: str) -> None:
        self.name = host

    def find(self, fn: Callable[..., T], *args: str, plan: T) -> T:
        return plan
