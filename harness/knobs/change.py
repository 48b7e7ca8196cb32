"""One knob item changed for a trial on one host: what it was, what was asked, what the
kernel shows, and the verdict its kind's comparator gave when the value was read back.
The one record of a change: settings apply returns it, the on-host journal keeps it
(without the verdict), the manifest stores it (harness.store.manifest)."""

from __future__ import annotations

from typing import Any

import msgspec

from napilab.harness.errors import HostError
from napilab.harness.knobs import registry
from napilab.harness.knobs.kind import Verdict
from napilab.harness.knobs.values import spaces
from napilab.harness.records import codec
from napilab.harness.records.codec import FrozenRecord


class Change(FrozenRecord, frozen=True):
    """`path` is the item's address in its backend (a file path for files)."""

    WHAT = "a change"

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
        return msgspec.structs.replace(self, effective=effective, verdict=verdict)

    @classmethod
    def from_json(cls, doc: Any, where: str = "") -> Change:
        """A stored change; one without a verdict (napilab 0.1) gets it now, once."""
        change = codec.convert(doc, cls, where or cls.WHAT)
        if change.verdict is None and change.effective is not None:
            return change.read_back(change.effective)
        return change

    def journalled(self) -> dict[str, Any]:
        """The change as the on-host journal keeps it: what restore needs."""
        return {name: getattr(self, name) for name in _TEXTS}


_TEXTS = tuple(f for f in Change.__struct_fields__ if f not in ("verdict", "extra"))
