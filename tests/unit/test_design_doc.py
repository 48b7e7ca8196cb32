"""docs/design.md is the map: every module of harness/, runners/ and reports/ is named in
its package's entry, each package's module count is right, every `NAME.py` it names
exists, and its command table names every command of the CLI (and `report`'s formats)
and nothing the CLI does not have."""

from __future__ import annotations

import re
from pathlib import Path

import click

from napilab.harness.cli.main import cli
from tests.conftest import ROOT

DESIGN = (ROOT / "docs" / "design.md").read_text()
CODE = ("harness", "runners", "reports")
_PACKAGE = re.compile(r"^(\s*)(\w+)/\s*(?:\((\d+)\))?")


def map_block() -> list[str]:
    part = DESIGN[DESIGN.index("## The map"):DESIGN.index("## The data flow")]
    return part[part.index("```") + 3:part.rindex("```")].splitlines()


def packages() -> dict[str, tuple[int | None, str]]:
    """Each package entry of the map: path -> (its module count, its text, nested
    entries' included)."""
    lines = map_block()
    found = [(i, len(m[1]), m[2], m[3]) for i, line in enumerate(lines)
             if (m := _PACKAGE.match(line))]
    out: dict[str, tuple[int | None, str]] = {}
    stack: list[tuple[int, str]] = []
    for k, (i, indent, name, count) in enumerate(found):
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, name))
        end = next((j for j, other, _, _ in found[k + 1:] if other <= indent), len(lines))
        path = "/".join(n for _, n in stack)
        if path.split("/")[0] in CODE:
            out[path] = (int(count) if count else None, "\n".join(lines[i:end]))
    return out


def modules(directory: Path) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.py") if p.stem != "__init__")


def test_every_module_is_on_the_map_with_its_package_count() -> None:
    entries = packages()
    problems = []
    for top in CODE:
        for directory in sorted({p.parent for p in (ROOT / top).rglob("*.py")}):
            path = str(directory.relative_to(ROOT))
            if path not in entries:
                problems.append(f"{path}/: not on the map")
                continue
            count, text = entries[path]
            names = modules(directory)
            problems += [f"{path}/{m}.py: not named in its entry" for m in names
                         if not re.search(rf"(?<![\w.]){re.escape(m)}(?!\w)", text)]
            if count is not None and count != len(names):
                problems.append(f"{path}/: the map says {count} modules, it has {len(names)}")
    assert problems == []


def test_every_module_the_map_names_exists() -> None:
    named = set(re.findall(r"(\w+\.py)\b", "\n".join(map_block())))
    present = {p.name for top in (*CODE, "tests", "benchmarks") for p in (ROOT / top).rglob("*.py")}
    assert sorted(named - present) == []
    assert sorted(p for p in packages() if not (ROOT / p).is_dir()) == []


def commands(group: click.Group, prefix: str = "napilab") -> list[str]:
    out = []
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        out.append(f"{prefix} {name}")
        if isinstance(command, click.Group):
            out += commands(command, f"{prefix} {name}")
    return out


def test_the_command_table_names_every_command_and_only_those() -> None:
    part = DESIGN[DESIGN.index("### Command line"):DESIGN.index("### Results directory")]
    cells = [re.split(r"(?<!\\)\|", line)[1].replace("\\|", "|")
             for line in part.splitlines() if line.startswith("| `napilab")]
    by_command: dict[str, str] = {}
    for cell in cells:
        first = re.match(r"\s*`napilab ([a-z]+)", cell)
        assert first, cell
        by_command[first[1]] = by_command.get(first[1], "") + " " + cell
    real = commands(cli)
    missing = []
    for command in real:
        words = command.split()[1:]
        if any(other.startswith(command + " ") for other in real):
            continue  # a group: its subcommands are what the table names
        text = by_command.get(words[0], "")
        if not text or (len(words) > 1 and not re.search(rf"\b{words[1]}\b", text)):
            missing.append(command)
    assert missing == []
    said = {f"napilab {c}" for c in by_command}
    assert sorted(said - set(real)) == []
    report = by_command["report"]
    assert [f for f in ("html", "text", "md", "json", "junit", "csv") if f not in report] == []
