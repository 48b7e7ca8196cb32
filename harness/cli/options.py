"""Command-line options shared by the commands that run a profile (run, calibrate)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def run_options(command: F) -> F:
    """PROFILE, -i/--inventory, -o/--results and --transport."""
    for option in reversed((
        click.argument("profile", type=click.Path(dir_okay=False)),
        click.option("-i", "--inventory", required=True, type=click.Path(dir_okay=False)),
        click.option("-o", "--results", default="results", show_default=True,
                     type=click.Path(file_okay=False), help="Results directory."),
        click.option("--transport", type=click.Choice(["ssh", "local"]),
                     help="Override the inventory's transport."),
    )):
        command = option(command)
    return command
