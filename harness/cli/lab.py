"""`napilab hosts check` and `napilab testbed up|down|status`: the lab itself, before
any profile."""

from __future__ import annotations

import json

import click

from harness.cli.options import inventory_option, json_option, transport_option
from harness.hosts.testbed import Testbed
from harness.inventory.inventory import load_inventory


@click.group()
def hosts() -> None:
    """Facts about the inventory's hosts.

    \b
    Example:
      napilab hosts check -i lab.yaml
    """


@hosts.command("check")
@inventory_option()
@transport_option
@json_option("one report per host")
def hosts_check(inventory: str, transport: str | None, as_json: bool) -> None:
    """Kernel, CPUs, irqbalance, which knobs exist and are writable, which tools exist.
    Reads only: nothing is changed on the hosts.

    \b
    Examples:
      napilab hosts check -i lab.yaml
      napilab hosts check -i /run/napilab-testbed/inventory.yaml --transport local --json
    """
    from harness.hosts import check
    from harness.hosts.session import close_sessions, open_sessions

    inv = load_inventory(inventory).with_transport(transport)
    sessions = open_sessions(inv.hosts.values())
    try:
        reports = [check.check_host(inv.hosts[name], s) for name, s in sessions.items()]
    finally:
        close_sessions(sessions.values())
    click.echo(check.as_json(reports) if as_json else check.render(reports), nl=False)


@click.group()
def testbed() -> None:
    """Local testbed (root): two network namespaces, a veth pair, optional sshd.

    \b
    Example:
      napilab testbed up --ssh && napilab testbed status && napilab testbed down
    """


@testbed.command("up")
@click.option("--ssh", is_flag=True, help="Run an sshd in each namespace.")
def testbed_up(ssh: bool) -> None:
    """Create the namespaces napilab-a and napilab-b, joined by a veth pair (GRO on),
    and write an inventory for them (printed).

    \b
    Example:
      napilab testbed up --ssh
    """
    path = Testbed().up(ssh=ssh)
    click.echo(f"testbed up; inventory: {path}")


@testbed.command("down")
def testbed_down() -> None:
    """Remove everything `testbed up` made (idempotent).

    \b
    Example:
      napilab testbed down
    """
    Testbed().down()
    click.echo("testbed down")


@testbed.command("status")
def testbed_status() -> None:
    """What of the testbed exists, as JSON.

    \b
    Example:
      napilab testbed status
    """
    click.echo(json.dumps(Testbed().status(), indent=1))
