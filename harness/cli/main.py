"""`napilab`: the command line's entry point. With the rest of harness/cli/ it is the one
place that wires every layer together.

Errors of the NapilabError family are caught once, in main(), and printed as
`napilab: error: ...` with the exit code of their class (harness.errors.ExitCode).

The commands import the layers they wire together when they run: importing the CLI
(`napilab --help`, every shell-completion request) imports no profile, host, store,
parser or report module, nor numpy, pandas or scipy (benchmarks/startup.py;
tests/unit/test_startup_imports.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import click

from napilab.harness.authoring import shipped
from napilab.harness.cli import analysis as cli_analysis
from napilab.harness.cli import bisect as cli_bisect
from napilab.harness.cli import fleet as cli_fleet
from napilab.harness.cli import history as cli_reports
from napilab.harness.cli import lab as cli_lab
from napilab.harness.cli import setup as cli_setup
from napilab.harness.cli import tune as cli_tune
from napilab.harness.cli.execute import execute
from napilab.harness.cli.execute import load as _load
from napilab.harness.cli.options import (
    FormatList,
    LazyChoice,
    inventory_option,
    json_option,
    nipa_options,
    run_options,
    transport_option,
    wait_options,
)
from napilab.harness.engine.progress import reporter
from napilab.harness.errors import ExitCode, InputError, Interrupted, NapilabError

DEMO_PROFILE = shipped.profile("demo.yaml")
REPORT_FORMATS = ("html", "text", "md", "json", "junit", "ktap", "nipa", "csv")


def _parser_names() -> list[str]:
    from napilab.runners.registry import PARSERS

    return sorted(PARSERS)


PARSER_CHOICE = LazyChoice(_parser_names)


class _ParseCommand(click.Command):
    """`napilab parse`: its epilog names the parsers, read when the help is shown."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.epilog = "TOOL is one of: " + ", ".join(PARSER_CHOICE.choices) + "."
        super().format_epilog(ctx, formatter)


def _say(line: str) -> None:
    click.echo(line, err=True)


def _version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """click.version_option's --version, with the version looked up only when asked for."""
    if not value or ctx.resilient_parsing:
        return
    from napilab.harness import __version__

    click.echo(f"napilab, version {__version__}", color=ctx.color)
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and exit.")
@click.option("--traceback", "show_traceback", is_flag=True, help="Show Python tracebacks.")
@click.pass_context
def cli(ctx: click.Context, show_traceback: bool) -> None:
    """Latency A/B benchmarks for Linux NAPI, busy-poll and IRQ tuning.

    \b
    Examples:
      napilab demo                      # (root) testbed, seed 001's RPS A/B, report
      napilab init lab/                 # a starter profile and inventory
      napilab profiles copy demo lab/   # or start from a shipped profile
      napilab run lab/profile.yaml -i lab/inventory.yaml -o results

    `napilab COMMAND -h` shows each command's options and examples, `napilab docs` the
    documentation; shell completion: eval "$(_NAPILAB_COMPLETE=bash_source napilab)"
    (`napilab docs README`).
    """
    ctx.obj = {"traceback": show_traceback}


def _design(prof: Any, strict: bool) -> None:
    """Warn (stderr) when the profile's repeat and primary metrics cannot reach a verdict;
    with --strict that is bad input (exit 2)."""
    from napilab.harness.profile.design import design_warnings, traced_warnings

    for line in traced_warnings(prof):  # a choice the profile made: said, not --strict's
        _say(f"napilab: warning: {line}")
    found = design_warnings(prof)
    for line in found:
        _say(f"napilab: warning: {line}")
    if found and strict:
        raise InputError(f"{len(found)} design warning(s) (--strict)",
                         hint="raise repeat, name fewer primary metrics under metrics:, "
                              "or drop --strict")


STRICT = click.option("--strict", is_flag=True,
                      help="Exit 2 when the profile cannot reach a verdict (see warnings).")


@cli.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@inventory_option(required=False, help="Also check the profile against these hosts (roles, "
                  "interfaces, CPU counts).")
@STRICT
def validate(profile: str, inventory: str | None, strict: bool) -> None:
    """Check a profile (and its binding to an inventory); touches no host.

    \b
    Examples:
      napilab validate demo.yaml        # after `napilab profiles copy demo`
      napilab validate profile.yaml -i lab.yaml --strict
    """
    plan, prof = _load(profile, inventory)
    trials = len(prof.trials())
    click.echo(f"{profile}: ok: {len(prof.variants)} variant(s), {trials} trial(s)"
               + (f", bound to {inventory}" if plan else ""))
    from napilab.harness.profile.design import traced_lines

    for line in traced_lines(prof):  # what doubles the trials: said beside the warnings
        _say(f"napilab: note: {line}")
    _design(prof, strict)


@cli.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@inventory_option()
@transport_option
@json_option("the plan")
@STRICT
@click.option("--summary", is_flag=True,
              help="Only the summary: each host's resolved SSH endpoint and what each "
                   "variant changes, per host, against the variant it is compared with.")
@click.option("--replicas", default=None, metavar="NAMES",
              help="With an inventory's replicas: the plan of these (default all), each "
                   "apart.")
def plan(profile: str, inventory: str, transport: str | None, as_json: bool,
         strict: bool, summary: bool, replicas: str | None) -> None:
    """Print every command napilab would run, per host, trial by trial; touches nothing.
    It opens with a summary: where each host is (ssh_config resolved: HostName, port,
    user, ProxyJump) and what each variant changes. `napilab run --dry-run` does the same.

    \b
    Examples:
      napilab plan demo.yaml -i /run/napilab-testbed/inventory.yaml
      napilab plan profile.yaml -i lab.yaml --summary
      napilab plan profile.yaml -i lab.yaml --json | jq '.trials | length'
      napilab plan profile.yaml -i fleet.yaml --replicas pair1 --summary
    """
    _print_plan(profile, inventory, transport, as_json, strict, summary, replicas)


def _print_plan(profile: str, inventory: str, transport: str | None, as_json: bool,
                strict: bool = False, summary: bool = False, replicas: str | None = None,
                specs: tuple[str, ...] = (), aa: bool = False) -> None:
    """The plan; over replicas each replica's, under its name (JSON: by name)."""
    from napilab.harness.engine.plan_render import plan_json, plan_text

    prof, _, plans = _plans(profile, inventory, transport, replicas, None, specs, aa=aa,
                            tuned=True)
    _design(prof, strict)
    if set(plans) != {""}:
        if as_json:
            click.echo(json.dumps({name: plan_json(p, summary_only=summary)
                                   for name, p in plans.items()}, indent=1))
            return
        for name, bound in plans.items():
            click.echo(f"== replica {name}")
            click.echo(plan_text(bound, summary_only=summary), nl=False)
        return
    bound = plans[""]
    if prof.tune is not None and not as_json:  # a search: its space, budget, one candidate
        click.echo(cli_tune.summary(prof, bound), nl=False)
        return
    if as_json:
        click.echo(json.dumps(plan_json(bound, summary_only=summary), indent=1))
    else:
        click.echo(plan_text(bound, summary_only=summary), nl=False)


@cli.command()
@run_options
@click.option("--keep-going", is_flag=True, help="Record a failed trial and continue (exit 4).")
@click.option("--format", "formats", default="html", show_default=True,
              type=FormatList(REPORT_FORMATS, allow_empty=True),
              help="Reports to write after the run ('' for none).")
@click.option("--break-lock", is_flag=True,
              help="Take the hosts even if another run's lock is on them.")
@click.option("--resume", "resume", type=click.Path(file_okay=False, exists=True),
              help="Continue an interrupted run in RUN_DIR (same profile and inventory).")
@click.option("--allow-host-change", is_flag=True,
              help="With --resume: continue even if a host's kernel or tools changed, and "
                   "record it as a confounder.")
@click.option("--quiet", is_flag=True, help="Print only failures.")
@click.option("--json", "as_json", is_flag=True, help="Progress as JSON events on stdout.")
@click.option("--dry-run", is_flag=True,
              help="Print the plan (as `napilab plan`) and run nothing.")
@click.option("--replicas", default=None, metavar="NAMES",
              help="The inventory's replicas to run (comma-separated; default all of them): "
                   "each its own host set, all at once, verdicts pooled.")
@click.option("--aa", is_flag=True,
              help="An A/A night: the baseline variant against a copy of itself, in the "
                   "profile's own series (the site shows each series' A/A false alarms).")
@click.option("--replica", "replica_specs", multiple=True, metavar="NAME:ALIAS=HOST,...",
              help="A replica bound here: the profile's host names (a, b) to hosts of the "
                   "inventory, e.g. pair1:a=lab1-a,b=lab1-b; repeatable.")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None, hidden=True,
              help="(a replica's process) The run's directory itself.")
@click.option("--seed", type=int, default=None, hidden=True,
              help="(a replica's process) The randomized order's seed.")
@wait_options
@cli_reports.store_output
def run(profile: str, inventory: str, results: str, transport: str | None, keep_going: bool,
        formats: list[str], break_lock: bool, resume: str | None, allow_host_change: bool,
        quiet: bool, as_json: bool, dry_run: bool, aa: bool, replicas: str | None,
        replica_specs: tuple[str, ...], run_dir: str | None, seed: int | None,
        wait_lock: float | None, wait_quiet: tuple[float, float | None] | None,
        wait_quiet_max: float) -> None:
    """Run a profile: apply, measure, restore, store, report.

    \b
    Examples:
      napilab run profile.yaml -i lab.yaml -o results --format html,text
      napilab run profile.yaml -i lab.yaml --dry-run        # the plan, nothing run
      napilab run profile.yaml -i lab.yaml --resume results/p/20261129T204634Z-bbc627aa
      napilab run profile.yaml -i fleet.yaml --replicas pair1,pair2   # two host sets
      napilab run profile.yaml -i lab.yaml --wait-lock 30m --wait-quiet 1.0,5
    """
    if dry_run:
        _print_plan(profile, inventory, transport, as_json, replicas=replicas,
                    specs=replica_specs, aa=aa)
        return
    progress = reporter(quiet=quiet, as_json=as_json)
    prof, inv, plans = _plans(profile, inventory, transport, replicas, seed, replica_specs,
                              aa=aa)
    waits = _waits(wait_lock, wait_quiet, wait_quiet_max)
    if len(plans) > 1:
        if not resume and run_dir is None:
            # each replica's process waits for its own hosts, and knows the replicas bound
            # on this command line
            passed = [*(["--aa"] if aa else []),
                      *(a for spec in replica_specs for a in ("--replica", spec)),
                      *(["--wait-lock", f"{wait_lock:g}"] if wait_lock is not None else []),
                      *(["--wait-quiet", ",".join(f"{v:g}" for v in wait_quiet
                                                  if v is not None),
                         "--wait-quiet-max", f"{wait_quiet_max:g}"] if wait_quiet else [])]
            code = cli_fleet.run_replicas(profile, prof, inv, plans, results,
                                          transport=transport, keep_going=keep_going,
                                          break_lock=break_lock, formats=formats,
                                          progress=progress, quiet=quiet, passed=passed)
            sys.exit(int(code))
        raise InputError("--resume and --run-dir take one replica (--replicas NAME): "
                         "each replica's run is resumed on its own, in "
                         "RUN_DIR/replicas/NAME")
    bound = next(iter(plans.values()))
    code = execute(bound, results, keep_going=keep_going, formats=formats,
                   break_lock=break_lock, progress=progress,
                   resume=resume, allow_host_change=allow_host_change,
                   run_dir=Path(run_dir) if run_dir else None, waits=waits)
    sys.exit(int(code))


def _waits(lock_seconds: float | None, quiet: tuple[float, float | None] | None,
           quiet_max: float) -> Any:
    """`run --wait-lock/--wait-quiet` as harness.hosts.waits.Waits (None: no wait)."""
    if lock_seconds is None and quiet is None:
        return None
    from napilab.harness.hosts.waits import Quiet, Waits

    return Waits(lock_seconds, None if quiet is None else Quiet(*quiet, quiet_max))


def _plans(profile: str, inventory: str, transport: str | None, names: str | None,
           seed: int | None, specs: tuple[str, ...] = (), *, aa: bool = False,
           tuned: bool = False) -> tuple[Any, Any, dict[str, Any]]:
    """The profile, the inventory and the plans to run: with an inventory that has
    `replicas:` (or `--replicas`, `--replica`) each chosen replica's by name, else
    {"": the plan on the inventory's hosts}; with `aa`, their A/A plans."""
    from dataclasses import replace

    from napilab.harness.inventory.inventory import load_inventory
    from napilab.harness.profile.plan import bind

    _, prof = _load(profile, None, transport, tuned=tuned)
    inv = load_inventory(inventory).with_transport(transport)
    if specs:
        inv = cli_fleet.with_replicas(inv, specs)
        if names is None:  # the replicas bound here, not the inventory's others
            names = ",".join(s.partition(":")[0] for s in specs)
    if not inv.replicas and names is None:
        plans = {"": bind(prof, inv)}
    else:
        if seed is not None:
            prof = replace(prof, seed=seed)
        plans = cli_fleet.bind_all(prof, inv, cli_fleet.chosen(inv, names))
    if aa:
        plans = {name: cli_analysis.aa_plan(p, "") for name, p in plans.items()}
    return prof, inv, plans


@cli.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--format", "formats", default="html", show_default=True,
              type=FormatList(REPORT_FORMATS),
              help="text is printed; the others are written to "
                   "RUN_DIR/report.{html,md,json,junit.xml,ktap,nipa.json} (nipa: the "
                   "netdev CI's result JSON), csv (the tidy samples table) to "
                   "RUN_DIR/samples.csv.")
@nipa_options
def report(run_dir: str, formats: list[str], link: str | None, executor: str | None,
           branch: str | None) -> None:
    """Render reports from a stored run (no host is contacted).

    \b
    Examples:
      napilab report results/demo/20261129T204634Z-bbc627aa
      napilab report RUN_DIR --format text,md       # cover letter table, pull request
      napilab report RUN_DIR --format csv           # RUN_DIR/samples.csv
      napilab report RUN_DIR --format junit,ktap,nipa --link https://ci.example/RUN
    """
    from napilab.reports.ci.nipa import NipaTarget
    from napilab.reports.formats.render import report_files

    written, printed = report_files(run_dir, formats,
                                    nipa=NipaTarget(executor, branch, link))
    for path in written:
        click.echo(str(path))
    if printed is not None:
        click.echo(printed, nl=False)


@cli.command()
@inventory_option()
@click.option("--host", "only", multiple=True, help="Only this host (repeatable).")
@transport_option
@click.option("--break-lock", is_flag=True,
              help="Replay journals and remove locks of runs that may still be alive "
                   "(another controller's).")
def restore(inventory: str, only: tuple[str, ...], transport: str | None,
            break_lock: bool) -> None:
    """Replay on-host journals left by an interrupted run, and clear its stale locks.

    \b
    Examples:
      napilab restore -i lab.yaml
      napilab restore -i lab.yaml --host sut --break-lock
    """
    from napilab.harness.hosts.journal_replay import replay
    from napilab.harness.inventory.inventory import load_inventory

    inv = load_inventory(inventory).with_transport(transport)
    unknown = [h for h in only if h not in inv.hosts]
    if unknown:
        raise InputError(f"--host {', '.join(unknown)}: not in {inventory}")
    hosts = [h for n, h in inv.hosts.items() if not only or n in only]
    for line in replay(hosts, break_lock=break_lock):
        click.echo(line)


@cli.command(cls=_ParseCommand)
@click.argument("tool", type=PARSER_CHOICE, metavar="TOOL")
@click.argument("file", type=click.Path(dir_okay=False))
@json_option("the metrics and their units")
def parse(tool: str, file: str, as_json: bool) -> None:
    """Parse a saved tool output or kernel file and print its metrics; latencies in
    microseconds.

    \b
    Examples:
      napilab parse ping ping.out
      napilab parse softnet_stat /proc/net/softnet_stat --json
    """
    from napilab.runners.registry import PARSERS, metrics_json

    try:
        text = Path(file).read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"{file}: {exc.strerror}") from None
    doc = metrics_json(tool, PARSERS[tool](text))
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    else:
        for name, number in doc["metrics"].items():
            click.echo(f"{name:<32} {number:>16g} {doc['units'][name]}")


@cli.command()
@click.option("-o", "--results", default="results", show_default=True,
              type=click.Path(file_okay=False), help="Results directory.")
@click.option("--transport", type=click.Choice(["ssh", "local"]), default="ssh",
              show_default=True, help="Drive the testbed over SSH (its sshds) or locally.")
@click.option("--profile", "profile_path", default=str(DEMO_PROFILE), show_default=False,
              type=click.Path(dir_okay=False),
              help="Profile to run (default: the shipped demo; `napilab profiles copy demo` "
                   "to change it).")
def demo(results: str, transport: str, profile_path: str) -> None:
    """Testbed up, run the shipped demo profile (seed 001's RPS A/B; `napilab profiles
    show demo`), report, testbed down (root, 2 CPUs or more; about a minute).

    \b
    Examples:
      napilab demo
      napilab demo -o /tmp/results --transport local
    """
    from napilab.harness.inventory.inventory import load_inventory
    from napilab.harness.lab.netns import Testbed
    from napilab.harness.profile.plan import bind
    from napilab.harness.profile.profile import load_profile

    if (os.cpu_count() or 1) < 2:
        raise NapilabError("the demo steers RPS to a second CPU; this machine has one")
    prof = load_profile(profile_path)
    bed = Testbed()
    inventory = bed.up(ssh=transport == "ssh")
    try:
        bound = bind(prof, load_inventory(inventory).with_transport(transport))
        start = time.time()
        code = execute(bound, results, formats=["html", "text"], progress=reporter())
        _say(f"napilab: demo took {time.time() - start:.0f}s")
    finally:
        bed.down()
    runs = sorted(Path(results, prof.name).glob("*/report.html"))
    if runs:
        click.echo((runs[-1].parent / "report.txt").read_text(), nl=False)
        click.echo(f"report: {runs[-1]}")
    sys.exit(int(code))


cli.add_command(cli_analysis.compare)
cli.add_command(cli_analysis.check)
cli.add_command(cli_analysis.calibrate)
cli.add_command(cli_analysis.baseline)
cli.add_command(cli_reports.history)
cli.add_command(cli_reports.publish)
cli.add_command(cli_reports.push)
cli.add_command(cli_setup.init)
cli.add_command(cli_setup.profiles)
cli.add_command(cli_setup.docs)
cli.add_command(cli_lab.hosts)
cli.add_command(cli_lab.testbed)
cli.add_command(cli_setup.schema)
cli.add_command(cli_tune.tune)
cli.add_command(cli_bisect.bisect)


def main(argv: list[str] | None = None) -> None:
    show_traceback = "--traceback" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="napilab", standalone_mode=False)
        sys.exit(ExitCode.OK)
    except click.exceptions.Abort:
        click.echo("napilab: interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except click.UsageError as exc:
        exc.show()
        sys.exit(ExitCode.BAD_INPUT)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.ERROR)
    except Interrupted as exc:
        click.echo(f"napilab: {exc}", err=True)
        sys.exit(exc.exit_code)
    except NapilabError as exc:
        if show_traceback:
            traceback.print_exc()
        for i, line in enumerate(str(exc).splitlines()):
            click.echo(("napilab: error: " if i == 0 else "  ") + line, err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("napilab: interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)


if __name__ == "__main__":
    main()
