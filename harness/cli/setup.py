"""`napilab init`, `napilab profiles`, `napilab docs` and `napilab schema`: getting
started (a starter profile, the shipped ones, the documentation), and editor support.

Registered on the `napilab` group by harness/cli/main.py. Errors go through
harness.cli.main like any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.shell_completion import CompletionItem

from napilab.harness.authoring import shipped
from napilab.harness.errors import InputError, NapilabError

if TYPE_CHECKING:
    from napilab.harness.authoring.starter import StarterHost
    from napilab.harness.inventory.inventory import Host


def _write(path: Path, text: str, force: bool) -> None:
    if path.exists() and not force:
        raise InputError(f"{path} exists; --force overwrites it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _checked(hosts: list[Host]) -> dict[str, StarterHost]:
    """hosts check of each host, and the interface each reaches the other through."""
    from napilab.harness.authoring.starter import StarterHost
    from napilab.harness.hosts import check as hosts_check
    from napilab.harness.hosts.session import close_sessions, open_sessions

    sessions = open_sessions(hosts)
    try:
        found = {}
        for host in hosts:
            session = sessions[host.name]
            report = hosts_check.check_host(host, session)
            peer = next((h for h in hosts if h.name != host.name), host)
            iface = host.iface or hosts_check.route_iface(session.transport,
                                                          peer.target_address)
            found[host.name] = StarterHost.from_check(report, iface, host.iface is not None)
        return found
    finally:
        close_sessions(sessions.values())


@click.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("-i", "--inventory", type=click.Path(dir_okay=False, exists=True,
                                                  allow_dash=True),
              help="Fit the profile to these hosts: runs `hosts check` on them (connects, "
                   "changes nothing) and writes only profile.yaml.")
@click.option("--server", metavar="HOST", help="Inventory host of the server role "
              "(default: the inventory's first host).")
@click.option("--client", metavar="HOST", help="Inventory host of the client role "
              "(default: the inventory's second host).")
@click.option("--transport", type=click.Choice(["ssh", "local"]),
              help="Override the inventory's transport.")
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
def init(directory: str, inventory: str | None, server: str | None, client: str | None,
         transport: str | None, force: bool) -> None:
    """Write a starter profile.yaml (and, without -i, inventory.yaml) into DIRECTORY.

    \b
    Examples:
      napilab init lab/                  # placeholder hosts to edit
      napilab init -i lab.yaml lab/      # fitted to the hosts of lab.yaml
    """
    from napilab.harness.authoring.starter import inventory_text, placeholder_hosts, profile_text
    from napilab.harness.inventory.inventory import load_inventory
    from napilab.harness.profile.plan import bind
    from napilab.harness.profile.profile import load_profile

    target = Path(directory)
    profile_path = target / "profile.yaml"
    if inventory is None:
        inventory_path = target / "inventory.yaml"
        _write(inventory_path, inventory_text(), force)
        client_host, server_host = placeholder_hosts()
        shown, source = "inventory.yaml", "for placeholder hosts"
    else:
        inv = load_inventory(inventory).with_transport(transport)
        names = list(inv.hosts)
        server = server or names[0]
        client = client or (names[1] if len(names) > 1 else names[0])
        for option, name in (("--server", server), ("--client", client)):
            if name not in inv.hosts:
                raise InputError(f"{option} {name}: not in {inventory}; hosts are {names}")
        if profile_path.exists() and not force:
            raise InputError(f"{profile_path} exists; --force overwrites it")
        checked = _checked([inv.hosts[server]] + ([inv.hosts[client]] if client != server
                                                  else []))
        server_host, client_host = checked[server], checked[client]
        inventory_path = Path(inventory)
        shown, source = str(Path(inventory).resolve()), f"from `hosts check` of {inventory}"
    _write(profile_path, profile_text(client_host, server_host, inventory=shown,
                                      source=source), force)
    try:
        bound = bind(load_profile(profile_path), load_inventory(inventory_path))
    except NapilabError as exc:  # a starter that does not validate is napilab's bug
        raise NapilabError(f"the starter profile does not validate: {exc}") from None
    for path in ([] if inventory else [inventory_path]) + [profile_path]:
        click.echo(f"wrote {path}")
    variants = ", ".join(v.name for v in bound.profile.variants)
    click.echo(f"profile: {bound.profile.variants[0].workload.tool}, variants {variants}")
    click.echo(f"next: napilab plan {profile_path} -i {inventory_path}")


# the documents napilab writes, as typed records (harness.records): kind -> module:class;
# docs/records/KIND.schema.json is each one's published schema (tests/unit/test_records.py)
RECORDS = {"manifest": "napilab.harness.store.manifest:Manifest",
           "command": "napilab.harness.store.command_record:CommandRecord",
           "check": "napilab.reports.nightly.check_record:CheckRecord",
           "pin": "napilab.reports.nightly.check_record:PinRecord",
           "tune": "napilab.harness.tune.record:TuneStudy",
           "bisect": "napilab.harness.bisect.record:BisectLog",
           "report": "napilab.reports.formats.report_json:ReportRecord",
           "calibration": "napilab.reports.ab.calibration:CalibrationRecord",
           "compare": "napilab.reports.ab.cross_run:CompareRecord",
           "tune-report": "napilab.reports.tune.report:TuneReportRecord",
           "history": "napilab.reports.nightly.check_record:HistoryRecord",
           "history-csv": "napilab.reports.nightly.check_record:HistoryCsvRow",
           "samples": "napilab.harness.store.columns:SampleRow",
           "latency": "napilab.harness.store.columns:LatencyRow",
           "summary": "napilab.harness.store.summary:RunSummary",
           "nipa": "napilab.reports.ci.nipa:NipaRun",
           "fleet-report": "napilab.reports.fleet.record:FleetReportRecord"}


def record_schema_text(kind: str) -> str:
    """The JSON Schema of one of napilab's records (RECORDS), as published."""
    import importlib
    import json

    from napilab.harness.records import codec

    module, name = RECORDS[kind].split(":")
    cls = getattr(importlib.import_module(module), name)
    return json.dumps(codec.schema(cls), indent=1) + "\n"


@click.command()
@click.argument("kind", type=click.Choice(["profile", "inventory", *RECORDS]))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the schema to this file instead of stdout.")
def schema(kind: str, output: str | None) -> None:
    """Print the JSON Schema of a profile or an inventory, built from the definitions
    the validator uses, or of a document napilab writes (a run's manifest.json, the
    check.json `napilab check` leaves in it). Editors with the YAML language server
    read a profile's from a first line `# yaml-language-server: $schema=PATH` (the
    shipped profiles carry one).

    \b
    Examples:
      napilab schema profile > ~/.config/napilab/profile.schema.json
      napilab schema inventory -o inventory.schema.json
      napilab schema manifest -o manifest.schema.json
    """
    from napilab.harness.authoring.json_schema import schema_text

    text = record_schema_text(kind) if kind in RECORDS else schema_text(kind)
    if output is None:
        click.echo(text, nl=False)
    else:
        Path(output).write_text(text)
        click.echo(f"wrote {output}")


def _complete_profile(ctx: click.Context, param: click.Parameter,
                      incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(n) for n in shipped.profile_names() if n.startswith(incomplete)]


def _complete_doc(ctx: click.Context, param: click.Parameter,
                  incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(d.name) for d in shipped.docs() if d.name.startswith(incomplete)]


@click.group(invoke_without_command=True)
@click.pass_context
def profiles(ctx: click.Context) -> None:
    """List, print or copy the shipped profiles: the demo, the seed experiments, the
    nightly example, and the example inventory the seed profiles plan against. Without a
    subcommand: `list`.

    \b
    Examples:
      napilab profiles list
      napilab profiles show demo
      napilab profiles copy demo lab/           # lab/demo.yaml, then edit it
      napilab profiles copy inventory.example lab/inventory.yaml
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(profiles_list)


@profiles.command("list")
def profiles_list() -> None:
    """Each shipped profile and inventory with its description.

    \b
    Examples:
      napilab profiles list
    """
    found = shipped.shipped_files()
    width = max(len(f.name) for f in found)
    for entry in found:
        label = "" if entry.kind == "profile" else "(inventory) "
        click.echo(f"{entry.name:<{width}}  {label}{entry.description()}")
    click.echo(f"(in {shipped.profiles_dir()}; `napilab profiles copy NAME` to start from "
               "one)")


@profiles.command("show")
@click.argument("name", shell_complete=_complete_profile)
def profiles_show(name: str) -> None:
    """Print a shipped profile (or inventory) as it is.

    \b
    Examples:
      napilab profiles show seed-000-threaded-busypoll
    """
    click.echo(shipped.shipped_file(name).path.read_text(), nl=False)


@profiles.command("copy")
@click.argument("name", shell_complete=_complete_profile)
@click.argument("dest", default=".", type=click.Path())
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
def profiles_copy(name: str, dest: str, force: bool) -> None:
    """Copy a shipped profile to DEST (a file, or a directory: DEST/NAME.yaml; default
    the current directory), with any file it `extends` beside it. Its first line names
    the installed JSON Schema, so editors check the copy as you edit it.

    \b
    Examples:
      napilab profiles copy demo                # ./demo.yaml
      napilab profiles copy seed-001-backlog-napi lab/seed-001.yaml
    """
    planned = shipped.copies(name, dest)
    for copy in planned:
        if copy.target.exists() and copy.target.samefile(copy.source):
            raise InputError(f"{copy.target} is the shipped file itself: copy it elsewhere")
    existing = [str(c.target) for c in planned if c.target.exists()]
    if existing and not force:
        raise InputError(f"{', '.join(existing)} exists; --force overwrites it")
    for copy in planned:
        try:
            copy.target.parent.mkdir(parents=True, exist_ok=True)
            copy.target.write_text(copy.text)
        except OSError as exc:
            raise InputError(f"{exc.filename or copy.target}: {exc.strerror}") from None
        click.echo(f"wrote {copy.target}" + (f" ({copy.why})" if copy.why else ""))
    first = planned[0].target
    if shipped.shipped_file(name).kind == "inventory":
        click.echo(f"next: edit its hosts, then napilab hosts check -i {first}")
    else:
        click.echo(f"next: napilab validate {first}")


@click.command()
@click.argument("name", required=False, shell_complete=_complete_doc)
@click.option("--path", "show_path", is_flag=True,
              help="Print where the document is installed instead of its text.")
def docs(name: str | None, show_path: bool) -> None:
    """Print a shipped document (README, docs/*.md), or list them. NAME is `profiles`,
    also `docs/profiles.md` as help texts and errors cite it; the Markdown goes through
    a pager on a terminal.

    \b
    Examples:
      napilab docs                      # README, design, profiles, statistics, ...
      napilab docs profiles             # every profile key with an example
      napilab docs statistics --path    # the file, to open in a browser or editor
    """
    if name is None:
        if show_path:
            click.echo(str(shipped.DOCS))
            return
        found = shipped.docs()
        width = max(len(d.name) for d in found)
        for entry in found:
            click.echo(f"{entry.name:<{width}}  {entry.title}")
        click.echo(f"(in {shipped.DOCS}; `napilab docs NAME` prints one)")
        return
    entry = shipped.doc(name)
    if show_path:
        if entry.path is None:
            raise InputError(f"{entry.name} has no file of its own here (it is napilab's "
                             f"package metadata): `napilab docs {entry.name}` prints it")
        click.echo(str(entry.path))
    else:
        click.echo_via_pager(entry.text().removesuffix("\n"))  # the pager adds one
