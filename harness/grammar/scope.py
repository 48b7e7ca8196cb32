"""Key paths of what a variant's overlay wrote. A variant is parsed from the base
document with its overlay merged in, under the paths `setup`, `workload`, `collect`, `kernel`;
what came from the overlay (told by where it was written) is under
`variants.NAME.setup...` instead, in errors and in the locations kept for later checks.
A problem of the base is then the same for every variant and is reported once."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar

from napilab.harness.errors import Location, Problem, Written
from napilab.harness.grammar.yamlsrc import Node, Seq

V = TypeVar("V")  # a harness.profile.profile.Variant (which imports this module)


def spots(value: Any) -> set[Location]:
    """Every location written inside an overlay: its mappings, keys, values, items."""
    found: set[Location] = set()
    if isinstance(value, Node):
        found |= {value.location} if value.location else set()
        found |= set(value.key_locations.values()) | set(value.value_locations.values())
        for item in value.values():
            found |= spots(item)
    elif isinstance(value, Seq):
        found |= {value.location} if value.location else set()
        found |= set(value.item_locations)
        for item in value:
            found |= spots(item)
    return found


class Scope:
    def __init__(self, prefix: str, overlay: Any) -> None:
        self.prefix = prefix
        self.spots = spots(overlay)

    def path(self, location: Location | None, key_path: str) -> str:
        if location in self.spots and not key_path.startswith(self.prefix):
            return f"{self.prefix}.{key_path}" if key_path else self.prefix
        return key_path

    def problems(self, problems: list[Problem]) -> list[Problem]:
        return [replace(p, key_path=self.path(p.location, p.key_path)) for p in problems]

    def written(self, at: Written | None) -> Written | None:
        return None if at is None else replace(at, key_path=self.path(at.location, at.key_path))

    def variant(self, variant: V) -> V:
        """The Variant with the locations it keeps (settings, cpus, args) under the
        overlay's paths where the overlay wrote them."""
        workload = variant.workload  # type: ignore[attr-defined]
        def scoped(process: Any) -> Any:
            return replace(process, written={k: self.written(at)
                                             for k, at in process.written.items()})

        sides = {side: scoped(getattr(workload, side)) for side in ("client", "server")}
        sides["others"] = tuple(scoped(p) for p in workload.others)
        return replace(
            variant,  # type: ignore[type-var]
            settings=tuple(replace(s, at=self.written(s.at))
                           for s in variant.settings),  # type: ignore[attr-defined]
            workload=replace(workload, **sides),
            collect=tuple(replace(c, cpus_at=self.written(c.cpus_at))
                          for c in variant.collect),  # type: ignore[attr-defined]
            kernels=tuple(replace(k, at=self.written(k.at))
                          for k in variant.kernels))  # type: ignore[attr-defined]
