"""`napilab hosts check` and `napilab testbed up|down|status`: the lab itself, before
any profile."""

from __future__ import annotations

import json

import click

from napilab.harness.cli.options import inventory_option, json_option, transport_option


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
    from napilab.harness.hosts import check
    from napilab.harness.hosts.session import close_sessions, open_sessions
    from napilab.harness.inventory.inventory import load_inventory

    inv = load_inventory(inventory).with_transport(transport)
    sessions = open_sessions(inv.hosts.values())
    try:
        reports = [check.check_host(inv.hosts[name], s) for name, s in sessions.items()]
    finally:
        close_sessions(sessions.values())
    click.echo(check.as_json(reports) if as_json else check.render(reports), nl=False)


@click.group()
def testbed() -> None:
    """Local testbeds (root): two network namespaces joined by a veth pair (optionally
    with an sshd each), or with --vm two QEMU guests on Debian kernels joined by a
    multi-queue virtio-net link.

    \b
    Examples:
      napilab testbed up --ssh && napilab testbed status && napilab testbed down
      napilab testbed kernels --fetch && napilab testbed up --vm --kernel b=6.1-rt
      napilab testbed tools --fetch
    """


def _kernel_choice(values: tuple[str, ...], flag: str = "--kernel") -> dict[str, str]:
    """`--kernel NAME` (both guests) or `--kernel GUEST=NAME`, repeatable (and so
    `--nic`)."""
    from napilab.harness.errors import InputError
    from napilab.harness.lab.vmbed import NAMES

    chosen: dict[str, str] = {}
    for value in values:
        guest, sep, name = value.partition("=")
        if not sep:
            chosen.update(dict.fromkeys(NAMES, value))
        elif guest in NAMES and name:
            chosen[guest] = name
        else:
            raise InputError(f"{flag} {value!r}: NAME or GUEST=NAME, GUEST one of "
                             f"{list(NAMES)}")
    return chosen


@testbed.command("up")
@click.option("--ssh", is_flag=True, help="Run an sshd in each namespace.")
@click.option("--vm", is_flag=True, help="Two QEMU guests instead of two namespaces.")
@click.option("--kernel", "kernel", multiple=True, metavar="[GUEST=]NAME",
              help="(--vm) Kernel of the cache (alias, release or image path); default "
              "the newest generic one.")
@click.option("--queues", type=click.IntRange(1, 16), default=2, show_default=True,
              help="(--vm) Queue pairs of each guest's data NIC.")
@click.option("--cpus", type=click.IntRange(1, 64), default=2, show_default=True,
              help="(--vm) vCPUs per guest.")
@click.option("--memory", default="1G", show_default=True, help="(--vm) Memory per guest.")
@click.option("--accel", type=click.Choice(["auto", "kvm", "tcg"]), default="auto",
              show_default=True, help="(--vm) auto: KVM where a KVM guest boots, else TCG.")
@click.option("--nic", "nic", multiple=True, metavar="[GUEST=]MODEL",
              help="(--vm) The data NIC's model: virtio (default), virtio-rss (QEMU's RSS, "
              "ethtool -x), vmxnet3 or e1000e (one queue).")
@click.option("--pairs", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Pairs of namespaces side by side, one inventory with each pair a "
                   "replica (pair1: a, b; pair2: a2, b2; ...).")
def testbed_up(ssh: bool, vm: bool, kernel: tuple[str, ...], queues: int, cpus: int,
               memory: str, accel: str, nic: tuple[str, ...], pairs: int) -> None:
    """Create the namespaces napilab-a and napilab-b, joined by a veth pair (GRO on),
    or with --vm the guests a and b, and write an inventory for them (printed).

    \b
    Examples:
      napilab testbed up --ssh
      napilab testbed up --vm --queues 4 --kernel 7.2 --kernel b=6.1-rt
      napilab testbed up --vm --queues 4 --nic virtio-rss --nic b=vmxnet3
      napilab testbed up --ssh --pairs 3      # three replicas of a and b
    """
    from napilab.harness.lab import netns

    if vm and pairs > 1:
        raise click.UsageError("--pairs is for the namespace testbed, not --vm")
    if vm:
        from napilab.harness.lab.vmbed import VmTestbed

        bed = VmTestbed()
        path = bed.up(_kernel_choice(kernel), queues=queues, cpus=cpus, memory=memory,
                      accel=accel, nic=_kernel_choice(nic, "--nic"))
        status = bed.status()
        for name, guest in status["guests"].items():
            click.echo(f"guest {name}: {guest['kernel']}, {guest['cpus']} vCPUs, "
                       f"{guest['nic']} with {guest['queues']} queues, ssh {guest['ssh']}, "
                       f"data {guest['data_address']}")
        click.echo(f"VM testbed up ({status['accel']}); inventory: {path}")
        return
    path = netns.up_pairs(netns.pair_testbeds(pairs), ssh=ssh)
    click.echo(f"testbed up{f' ({pairs} pairs)' if pairs > 1 else ''}; inventory: {path}")


@testbed.command("down")
def testbed_down() -> None:
    """Remove everything `testbed up` made, namespaces and guests (idempotent).

    \b
    Example:
      napilab testbed down
    """
    from napilab.harness.lab.netns import MAX_PAIRS, pair_testbeds
    from napilab.harness.lab.vmbed import VmTestbed

    VmTestbed().down()
    for bed in pair_testbeds(MAX_PAIRS):  # `up --pairs N`'s too
        if bed.exists():
            bed.down()
    click.echo("testbed down")


@testbed.command("status")
def testbed_status() -> None:
    """What of the testbeds exists, as JSON.

    \b
    Example:
      napilab testbed status
    """
    from napilab.harness.lab.netns import Testbed
    from napilab.harness.lab.vmbed import VmTestbed

    click.echo(json.dumps({**Testbed().status(), "vm": VmTestbed().status()}, indent=1))


@testbed.command("boot")
@click.argument("guest")
@click.option("--kernel", default=None, metavar="NAME",
              help="Alias, release or image path; default the guest's own (from `up`).")
@click.option("--append", "append", multiple=True, metavar="WORD",
              help="A word added to the kernel command line (repeatable).")
@click.option("--state", default=None, metavar="DIR", help="The VM testbed's state "
              "directory (default /run/napilab-vm).")
def testbed_boot(guest: str, kernel: str | None, append: tuple[str, ...],
                 state: str | None) -> None:
    """Restart a VM testbed guest on a kernel of the cache and wait for its sshd (what a
    run does for a profile's `kernel:`). Settings the guest had are gone with the boot.

    \b
    Examples:
      napilab testbed boot b --kernel 6.1-rt
      napilab testbed boot b --kernel 7.2-rt --append thread_backlog_napi
      napilab testbed boot b                 # back on its own kernel
    """
    from napilab.harness.lab.vmbed import VmTestbed

    bed = VmTestbed(state_dir=state)
    seconds = bed.boot(guest, kernel, append)
    info = bed.guest_kernel(guest)
    click.echo(f"guest {guest}: {info['release']} ({info['version']})"
               + (f" + {' '.join(append)}" if append else "") + f", up in {seconds:.0f}s")


@testbed.command("kernels")
@click.option("--fetch", is_flag=True, help="Download and unpack Debian's generic and RT "
              "kernels of the default suite and of sid (root).")
def testbed_kernels(fetch: bool) -> None:
    """The kernel cache the VM testbed boots ($NAPILAB_KERNELS, default
    /var/lib/napilab/kernels): each kernel's release, aliases and uname -v.

    \b
    Examples:
      napilab testbed kernels
      napilab testbed kernels --fetch
    """
    from napilab.harness.lab import kernels

    found = kernels.fetch(say=lambda line: click.echo(line, err=True)) if fetch \
        else kernels.installed()
    for kernel in found:
        click.echo(kernel.describe())
    if not found:
        click.echo(f"no kernels in {kernels.kernel_dir()}; `napilab testbed kernels --fetch`")


@testbed.command("tools")
@click.option("--fetch", is_flag=True, help="Download sid's netperf and libc6, run the "
              "programs on that libc (patchelf) and link them into /usr/local/bin (root).")
def testbed_tools(fetch: bool) -> None:
    """The tool cache ($NAPILAB_TOOLS, default /var/lib/napilab/tools): netperf and
    netserver, which Debian 12 lacks, from Debian's sid on sid's own libc, and their
    links in /usr/local/bin (not made where a working netperf is already on PATH).

    \b
    Examples:
      napilab testbed tools
      napilab testbed tools --fetch
    """
    from napilab.harness.lab import tools

    if fetch:
        install, links = tools.fetch(say=lambda line: click.echo(line, err=True))
    else:
        found = tools.installed()
        if found is None:
            click.echo(f"no netperf in {tools.tools_dir()}; `napilab testbed tools --fetch`")
            return
        install, links = found, tools.links(found)
    click.echo(install.describe())
    for link in links:
        click.echo(link.describe() if fetch or link.action != "link"
                   else f"{link.path}: not linked yet; `napilab testbed tools --fetch`")
