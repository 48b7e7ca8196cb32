"""One knob item changed for a trial on one host: what it was, what was asked, what the
kernel shows, and the verdict its kind's comparator gave when the value was read back.
The one record of a change: settings apply returns it, the on-host journal keeps it
(without the verdict), the manifest stores it (harness.store.manifest)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from napilab.harness.errors import HostError
from napilab.harness.knobs import registry
from napilab.harness.knobs.kind import Verdict
from napilab.harness.knobs.values import spaces


@dataclass(frozen=True)
class Change:
    """`path` is the item's address in its backend (a file path for files)."""

    host: str
    role: str
    kind: str
    target: str
    path: str
    original: str
    requested: str
    effective: str | None = None
    backend: str = "file"
    verdict: Verdict | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a newer napilab

    @property
    def state(self) -> str:
        """taken | mismatch | absent | unread (never read back)."""
        return self.verdict.state if self.verdict is not None else "unread"

    @property
    def matches(self) -> bool:
        return self.state == "taken"

    def differs(self, value: str, reference: str) -> bool:
        return not registry.kind(self.kind).same(self.path, value, reference)

    def read_back(self, effective: str) -> Change:
        """The change with the value read back and the kind's verdict on it."""
        try:
            verdict = registry.kind(self.kind).verdict(self.path, self.requested, effective)
        except HostError:  # a kind this napilab no longer knows (an old run): as text
            want, got = spaces(self.requested), spaces(effective)
            verdict = Verdict("taken" if want == got else "mismatch", want, got)
        return replace(self, effective=effective, verdict=verdict)

    def journalled(self) -> dict[str, Any]:
        """The change as the on-host journal keeps it: what restore needs."""
        return {name: getattr(self, name) for name in _TEXTS}

    def to_json(self) -> dict[str, Any]:
        # by hand, not dataclasses.asdict: the manifest is rewritten after every trial
        # with every change of the run in it (benchmarks/store.py)
        verdict = self.verdict
        return {**{name: getattr(self, name) for name in _TEXTS},
                "verdict": None if verdict is None else {
                    "state": verdict.state, "requested": verdict.requested,
                    "effective": verdict.effective},
                **self.extra}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Change:
        """A stored change; one without a verdict (napilab 0.1) gets it now, once."""
        names = _NAMES
        known = {k: v for k, v in doc.items() if k in names}
        raw = known.pop("verdict", None)
        texts: dict[str, Any] = {k: v if v is None else str(v) for k, v in known.items()}
        change = cls(**texts, verdict=Verdict(**raw) if isinstance(raw, Mapping) else None,
                     extra={k: v for k, v in doc.items() if k not in names})
        if change.verdict is None and change.effective is not None:
            return change.read_back(change.effective)
        return change


_NAMES = frozenset(f.name for f in fields(Change)) - {"extra"}
_TEXTS = tuple(f.name for f in fields(Change) if f.name not in ("verdict", "extra"))
