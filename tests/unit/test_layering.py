"""The layering of shared/DESIGN.md, read from the imports of every module:
reports never imports runners or paramiko; runners never imports reports; parsers and
harness.stats do no I/O; the CLI (harness/cli.py and the commands it registers from
harness/cli_analysis.py and harness/cli_reports.py) is the one place that wires reports in."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IO_MODULES = {"subprocess", "socket", "paramiko", "os", "shutil", "pathlib", "urllib",
              "requests", "http"}
IO_CALLS = {"open", "print", "input"}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).glob("*.py"))


def test_reports_never_import_runners_or_paramiko() -> None:
    for path in modules("reports"):
        bad = {n for n in imports(path) if n.split(".")[0] in ("runners", "paramiko")}
        assert not bad, f"{path.name} imports {bad}"


def test_runners_never_import_reports() -> None:
    for path in modules("runners"):
        bad = {n for n in imports(path) if n.split(".")[0] == "reports"}
        assert not bad, f"{path.name} imports {bad}"


def test_only_cli_wires_in_reports() -> None:
    for path in modules("harness"):
        if path.name in ("cli.py", "cli_analysis.py", "cli_reports.py"):
            continue
        bad = {n for n in imports(path) if n.split(".")[0] == "reports"}
        assert not bad, f"harness/{path.name} imports {bad}"


def test_parsers_and_stats_do_no_io() -> None:
    pure = [p for p in modules("runners") if p.name not in ("__init__.py",)]
    pure += [p for p in modules("harness") if p.name.startswith("stats")]
    for path in pure:
        bad = {n for n in imports(path) if n.split(".")[0] in IO_MODULES}
        assert not bad, f"{path} imports {bad}"
        tree = ast.parse(path.read_text())
        calls = {n.func.id for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & IO_CALLS, f"{path} calls {calls & IO_CALLS}"
