"""napilab's modules and their imports, read from the source (nothing is imported):
what the layering and import-cycle tests check."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "runners", "reports")
# Scripts copied to lab hosts and run there by their python3: not modules of napilab.
NOT_MODULES = ("harness/knobs/kinds/hostscripts",)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules(package: str | None = None) -> dict[str, Path]:
    """Every module of napilab (or of one package, `harness.profile`), walked
    recursively: name -> path."""
    found: dict[str, Path] = {}
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(NOT_MODULES):
                continue
            name = module_name(path)
            if package is None or name == package or name.startswith(package + "."):
                found[name] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path, *, runtime: bool = False) -> set[str]:
    """The modules `path` imports anywhere (module level, inside functions), as
    dotted names; `from pkg import mod` names the module `pkg.mod`. With runtime=True,
    imports under `if TYPE_CHECKING:` are left out."""
    known = modules()
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    if runtime:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _type_checking(node):
                skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    names: set[str] = set()
    # napilab's own modules are imported as napilab.harness..., napilab.reports...
    # (the wheel's one top-level name); they are named here by their folders
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(_short(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            module = _short(node.module)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names
                         if f"{module}.{alias.name}" in known)
    return names


def _short(name: str) -> str:
    return name.removeprefix("napilab.")


def within(name: str, *prefixes: str) -> bool:
    """Whether dotted `name` is one of `prefixes` or inside one of them."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def graph() -> dict[str, set[str]]:
    """module -> the napilab modules it imports."""
    known = modules()
    return {name: {n for n in imports(path) if n in known and n != name}
            for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each
    sorted: every import cycle lies within one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found
