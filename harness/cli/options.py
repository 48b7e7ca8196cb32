"""Command-line options and parameter types the commands share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click
from click.shell_completion import CompletionItem

F = TypeVar("F", bound=Callable[..., Any])
TRANSPORTS = ("ssh", "local")


def _suggest(word: str, choices: Iterable[str]) -> str:
    # harness.grammar.schema imports the YAML loader: only a wrong value needs it
    from napilab.harness.grammar.schema import suggest

    return suggest(word, choices)


class SuggestingChoice(click.Choice[str]):
    """click.Choice that also says which choice was probably meant."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            hint = _suggest(str(value), [str(c) for c in self.choices])
            raise click.BadParameter(f"{exc.message.rstrip('.')}{hint}", ctx, param) from None


class LazyChoice(SuggestingChoice):
    """A SuggestingChoice whose choices are read from `names()` each time they are needed
    (a value converted or completed, the command's help shown), not when the CLI is
    imported: `napilab parse`'s come from runners.registry, which imports every parser,
    and `napilab --help` and completion of the command names need none of them. Read
    each time, not once: the registry is the truth (a test adds a tool to it)."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self._names = names
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._names())

    @choices.setter
    def choices(self, value: Iterable[str]) -> None:
        pass  # click.Choice's __init__ sets them; names() is what they are


class FormatList(click.ParamType[list[str]]):
    """A comma-separated list of formats (`html,text`), each one of `choices`;
    `allow_empty`: `''` is none at all."""

    name = "formats"

    def __init__(self, choices: Sequence[str], *, allow_empty: bool = False) -> None:
        self.choices = tuple(choices)
        self.allow_empty = allow_empty

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "[" + "|".join(self.choices) + "][,...]"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> list[str]:
        if isinstance(value, list):
            return value
        chosen = [f.strip() for f in str(value).split(",") if f.strip()]
        bad = [f for f in chosen if f not in self.choices]
        if bad or not (chosen or self.allow_empty):
            hint = _suggest(bad[0], self.choices) if bad else ""
            self.fail(f"{','.join(bad) or repr(value)}: expected one or more of "
                      f"{', '.join(self.choices)}, comma-separated{hint}", param, ctx)
        return chosen

    def shell_complete(self, ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[CompletionItem]:
        done, _, last = incomplete.rpartition(",")
        prefix = done + "," if done else ""
        taken = set(done.split(","))
        return [CompletionItem(prefix + c) for c in self.choices
                if c.startswith(last) and c not in taken]


def inventory_option(*, required: bool = True, help: str | None = None) -> Callable[[F], F]:
    return click.option("-i", "--inventory", required=required,
                        type=click.Path(dir_okay=False, allow_dash=True),
                        help=help or "Inventory of the hosts: napilab's YAML, or Ansible's "
                                     "(YAML, INI, `ansible-inventory --list` JSON; - reads "
                                     "standard input).")


def transport_option(command: F) -> F:
    return click.option("--transport", type=click.Choice(TRANSPORTS),
                        help="Override the inventory's transport (ssh, or local: "
                             "subprocess, in the host's netns if it has one).")(command)


def json_option(what: str) -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON.")


def run_options(command: F) -> F:
    """PROFILE, -i/--inventory, -o/--results and --transport."""
    for option in reversed((
        click.argument("profile", type=click.Path(dir_okay=False)),
        inventory_option(),
        click.option("-o", "--results", default="results", show_default=True,
                     type=click.Path(file_okay=False),
                     help="Results directory; runs go to RESULTS/<profile>/<time>-<id>/."),
        transport_option,
    )):
        command = option(command)
    return command


def nipa_options(command: F) -> F:
    """--link, --nipa-executor, --nipa-branch: what the netdev CI's result JSON needs
    that a run does not say (reports.ci.nipa)."""
    for option in reversed((
        click.option("--link", metavar="URL",
                     help="The URL the run directory is served at: the NIPA JSON's links "
                          "point into it (default: the run directory as a file:// URL)."),
        click.option("--nipa-executor", "executor", metavar="NAME",
                     help="The NIPA JSON's executor (default: napilab-PROFILE)."),
        click.option("--nipa-branch", "branch", metavar="NAME",
                     help="The NIPA JSON's branch, the tree tested (default: "
                          "PROFILE-YYYY-MM-DD--HH-MM of the run's start; NIPA reads a "
                          "branch's last 17 characters as its date)."),
    )):
        command = option(command)
    return command


class Duration(click.ParamType[float]):
    """A time like 600, 90s, 30m or 2h, in seconds (more than 0)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        import re

        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|h)?", str(value).strip())
        if not match or float(match[1]) <= 0:
            self.fail(f"{value!r}: expected a time like 600, 90s, 30m or 2h", param, ctx)
        return float(match[1]) * {"s": 1.0, "m": 60.0, "h": 3600.0}[match[2] or "s"]


class QuietLimits(click.ParamType[tuple[float, float | None]]):
    """LOAD[,STEAL]: a 1-minute load average and, optionally, a CPU steal in percent."""

    name = "load[,steal]"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[float, float | None]:
        if isinstance(value, tuple):
            return value
        parts = [p.strip().removesuffix("%") for p in str(value).split(",")]
        try:
            numbers = [float(p) for p in parts]
        except ValueError:
            numbers = []
        if not 1 <= len(numbers) <= 2 or any(n < 0 for n in numbers) or (
                len(numbers) == 2 and numbers[1] > 100):
            self.fail(f"{value!r}: expected LOAD[,STEAL]: a 1-minute load average and "
                      "optionally a CPU steal in percent (0-100), e.g. 1.5 or 1.5,5",
                      param, ctx)
        return numbers[0], numbers[1] if len(numbers) == 2 else None


def wait_options(command: F) -> F:
    """--wait-lock, --wait-quiet, --wait-quiet-max (harness.hosts.waits)."""
    for option in reversed((
        click.option("--wait-lock", type=Duration(), metavar="DURATION",
                     help="Hosts locked by another live run: wait for them up to DURATION "
                          "(600, 90s, 30m, 2h) instead of failing at once."),
        click.option("--wait-quiet", type=QuietLimits(), metavar="LOAD[,STEAL]",
                     help="Before the first trial, wait until every host's 1-minute load "
                          "average is at most LOAD (and its CPU steal at most STEAL "
                          "percent); recorded in the manifest."),
        click.option("--wait-quiet-max", type=Duration(), default="10m", show_default=True,
                     metavar="DURATION",
                     help="The longest --wait-quiet waits; then the run fails, no trial "
                          "run."),
    )):
        command = option(command)
    return command
