"""No import cycles among napilab's modules: every import counts, at module level, inside
functions and under TYPE_CHECKING alike (a cycle hidden in a function is still a cycle
in the design)."""

from __future__ import annotations

from tests.import_graph import cycles, graph


def test_no_import_cycles() -> None:
    edges = graph()
    assert len(edges) >= 100, f"found only {len(edges)} modules: is the walk broken?"
    assert cycles(edges) == []


def test_the_cycle_finder_finds_cycles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]
