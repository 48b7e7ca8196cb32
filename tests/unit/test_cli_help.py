"""`napilab ... --help` teaches: every command shows an example that parses against the
command it documents (so examples cannot rot), every option says what it does,
formats and parser names are choices, `run --dry-run` is `plan`, and shell completion
(click's, documented in README.md) answers."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from napilab.harness.cli import main as cli
from tests.cli import run_cli, run_napilab

ROOT = Path(__file__).resolve().parents[2]


def commands(group: click.Group = cli.cli, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, group
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


ALL = list(commands())


def examples(command: click.Command) -> list[list[str]]:
    """The `napilab ...` lines of a command's help, as argv (comments dropped)."""
    out = []
    for line in (command.help or "").splitlines():
        text = line.strip()
        if text.startswith("napilab "):
            for part in text.split("&&"):
                out.append(shlex.split(part.split(" #")[0].split(" |")[0])[1:])
    return out


def resolve(argv: list[str]) -> tuple[click.Command, list[str]]:
    command: click.Command = cli.cli
    while isinstance(command, click.Group) and argv and argv[0] in command.commands:
        command, argv = command.commands[argv[0]], argv[1:]
    return command, argv


@pytest.mark.parametrize("path,command", ALL, ids=[" ".join(p) or "napilab" for p, _ in ALL])
def test_every_command_has_an_example_that_parses(path: tuple[str, ...],
                                                  command: click.Command) -> None:
    found = examples(command)
    assert found, f"napilab {' '.join(path)}: no example in its help"
    for argv in found:
        target, rest = resolve(argv)
        assert argv[:len(path)] == list(path), argv
        if not isinstance(command, click.Group):
            assert target is command, argv
        options = {name: p for p in target.params if isinstance(p, click.Option)
                   for name in (*p.opts, *p.secondary_opts)}
        for i, token in enumerate(rest):
            if not token.startswith("-") or token == "-":
                continue
            name = token.split("=")[0]
            assert name in options, f"{argv}: {target.name} has no option {name}"
            option = options[name]
            if not option.is_flag and isinstance(option.type, click.Choice):
                assert rest[i + 1] in option.type.choices, argv


@pytest.mark.parametrize("path,command", ALL, ids=[" ".join(p) or "napilab" for p, _ in ALL])
def test_every_option_has_help(path: tuple[str, ...], command: click.Command) -> None:
    silent = [p.opts for p in command.params if isinstance(p, click.Option)
              and not p.help and "--help" not in p.opts and "--version" not in p.opts]
    assert silent == []


def test_formats_and_tools_are_choices(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, expected in (
            (["report", str(ROOT), "--format", "htm"],
             "htm: expected one or more of html, text, md, json, junit, ktap, nipa, csv, "
             "comma-separated; did you mean 'html'?"),
            (["parse", "pingg", "x"], "did you mean 'ping'?"),
            (["compare", str(ROOT), str(ROOT), "--format", "xml"], "'xml' is not one of")):
        done = run_cli(capsys, *argv)
        assert done.code == 2
        assert expected in done.err


def test_run_dry_run_is_plan(capsys: pytest.CaptureFixture[str]) -> None:
    profile, inventory = ROOT / "profiles" / "seed-000-threaded-busypoll.yaml", \
        ROOT / "profiles" / "inventory.example.yaml"
    outputs = []
    for argv in (["plan", str(profile), "-i", str(inventory)],
                 ["run", str(profile), "-i", str(inventory), "--dry-run"]):
        done = run_cli(capsys, *argv)
        assert done.code == 0
        outputs.append(done.out)
    assert outputs[0] == outputs[1] and outputs[0].startswith("profile seed-000")


def complete(words: str) -> list[str]:
    env = {**os.environ, "_NAPILAB_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - 1)}
    out = run_napilab(env=env, cwd=ROOT, check=True).stdout
    return [line.split(",", 1)[1] for line in out.splitlines()]


def test_shell_completion_answers() -> None:
    assert complete("napilab re") == ["report", "restore"]
    assert complete("napilab report x --format html,t") == ["html,text"]
    assert complete("napilab parse softn") == ["softnet_stat"]
    readme = (ROOT / "README.md").read_text()
    assert 'eval "$(_NAPILAB_COMPLETE=bash_source napilab)"' in readme


def test_run_takes_no_formats_report_needs_one() -> None:
    """`run --format ''` writes no report (the fault tests use it); `report` needs one."""
    from napilab.harness.cli.options import FormatList

    assert FormatList(("html", "text"), allow_empty=True).convert("", None, None) == []
    with pytest.raises(click.exceptions.BadParameter):
        FormatList(("html", "text")).convert("", None, None)
