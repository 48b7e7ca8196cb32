"""`napilab history` and `napilab publish`: reports across runs.

Registered on the `napilab` group by harness/cli/main.py; like harness/cli/analysis.py this
module wires the reports layer in (the layering test counts it as CLI). Errors go
through harness.cli.main.main like any other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from napilab.harness.errors import InputError

STORE_FORMS = "a directory, sftp://[user@]host[:port]/path or s3://bucket[/prefix]"


@click.command()
@click.argument("results", metavar="RESULTS|URL")
@click.option("--profile", required=True, help="Profile name (runs are RESULTS/<profile>/).")
@click.option("--metric", "metrics", multiple=True, metavar="M",
              help="metric or source.metric; repeatable. Default: the newest run's "
                   "primary metrics, then its report.table metrics (4 in all), else the "
                   "workload's latency and throughput.")
@click.option("--host", help="Only values measured on this host.")
@click.option("--series", default=None, metavar="NAME",
              help="Only the nights of this series: `replica NAME` (a run over replicas) "
                   "or `hosts a+b` (default: every series, each apart).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True, help="Tables, JSON, or CSV: a row per run, metric and "
                                      "variant.")
def history(results: str, profile: str, metrics: tuple[str, ...], host: str | None,
            series: str | None, fmt: str) -> None:
    """Trend across the runs of a profile: per run, the median of each metric per variant.
    RESULTS is a results directory or a store (sftp://..., s3://...: docs/stores.md).

    \b
    Examples:
      napilab history results --profile nightly-example
      napilab history s3://lab-results/napilab --profile nightly-example
      napilab history results --profile demo --metric rtt_avg --host a
      napilab history results --profile demo --format csv > demo.csv
    """
    from napilab.harness.stores.store import results_dir
    from napilab.reports.nightly.history import history as build
    from napilab.reports.nightly.history import history_json, history_text
    from napilab.reports.nightly.history_csv import history_csv

    where, mirror = results_dir(results, profile=profile)
    found = build(where, profile, metrics, host, mirror.materialize if mirror else None,
                  series)
    render = {"json": history_json, "csv": history_csv, "text": history_text}[fmt]
    click.echo(render(found), nl=False)
    if fmt != "text":  # the text says them itself
        for _, why in found.damaged:
            click.echo(f"napilab: warning: left out, damaged: {why}", err=True)


@click.command()
@click.argument("results", metavar="RESULTS|URL")
@click.argument("site_dir", type=click.Path(file_okay=False))
@click.option("--raw", type=click.Choice(["link", "copy", "none"]), default="link",
              show_default=True,
              help="Raw outputs next to each published report: a symlink to the run's raw/ "
                   "(for serving from this machine), a copy (for uploading), or none.")
@click.option("--base-url", metavar="URL",
              help="Where the site is served; makes the feed's links absolute.")
def publish(results: str, site_dir: str, raw: str, base_url: str | None) -> None:
    """Static site of every run under RESULTS (a results directory or a store: sftp://,
    s3://): index, trends, reports, Atom feed.

    \b
    Examples:
      napilab publish results /srv/www/napilab --raw copy
      napilab publish results site --base-url https://lab.example/napilab/
      napilab publish s3://lab-results/napilab site
    """
    from napilab.harness.stores.store import results_dir
    from napilab.reports.nightly.site import publish as build

    where, mirror = results_dir(results)
    fetch = None
    if mirror is not None:  # each run's report and check verdict: one get each
        mirror.materialize([d for d in where.glob("*/*") if d.is_dir()],
                           ["report.html", "check.json"])
        fetch = mirror.materialize
    site = build(where, site_dir, raw=raw, base_url=base_url, fetch=fetch,
                 title=str(mirror.store.url) if mirror else None)
    for _, why in site.damaged:
        click.echo(f"napilab: warning: left out, damaged: {why}", err=True)
    rendered = (f"; {site.rendered} run(s) had no report.html: rendered into the site"
                if site.rendered else "")
    click.echo(f"published {site.runs} run(s) of {len(site.profiles)} profile(s){rendered}")
    click.echo(f"index: {Path(site_dir) / 'index.html'}")
    click.echo(f"feed: {Path(site_dir) / 'feed.xml'} ({site.regressions} regression(s))")


@click.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN_DIR... URL")
def push(runs: tuple[str, ...]) -> None:
    """Publish runs to a results store (a directory, sftp://[user@]host[:port]/path or
    s3://bucket[/prefix]: docs/stores.md): each run's files, then its summary.json, the
    marker that makes it a run there (written first for an older run that has none).
    RUN_DIR may be a results directory: every run under it. Pushing a run again uploads
    only what it lacks there; a stored run is never replaced.

    \b
    Examples:
      napilab push results/demo/20261129T204634Z-bbc627aa s3://lab-results/napilab
      napilab push results sftp://results.lab/srv/napilab
    """
    from napilab.harness.stores.store import open_store
    from napilab.harness.stores.store import push as push_run

    if len(runs) < 2:
        raise InputError("push needs RUN_DIR... and a store URL", hint=STORE_FORMS)
    *sources, target = runs
    dirs = [d for source in sources for d in _run_dirs(Path(source))]
    with open_store(target) as store:
        for run_dir in dirs:
            done = push_run(store, run_dir)
            where = store.url.join(done.prefix)
            made = " (summary.json written first)" if done.summary_written else ""
            if done.uploaded:
                click.echo(f"pushed {run_dir} -> {where}: {done.uploaded} file(s), "
                           f"{done.bytes:,} bytes{made}")
            else:
                click.echo(f"{where}: already there ({done.present} file(s)){made}")


def _run_dirs(path: Path) -> list[Path]:
    """A run directory, or the runs under a results directory (RESULTS or RESULTS/P)."""
    if (path / "manifest.json").exists():
        return [path]
    if not path.is_dir():
        raise InputError(f"{path}: no such run or results directory")
    found = sorted({m.parent for pattern in ("*/manifest.json", "*/*/manifest.json")
                    for m in path.glob(pattern) if not m.parent.name.startswith(".")})
    if not found:
        raise InputError(f"{path}: no run under it (RUN_DIR/manifest.json)")
    return found


def store_output(command: Callable[..., None]) -> Callable[..., None]:
    """`napilab run -o URL`: the run is made in a local directory (--local, else
    ~/.cache/napilab/runs) and pushed to the store when it ends, however it ends."""

    @functools.wraps(command)
    def wrapper(*args: Any, local: str | None = None, **kwargs: Any) -> None:
        from napilab.harness.stores.url import is_url, parse

        target = kwargs.get("results", "")
        if not is_url(target):
            if local is not None:
                raise InputError("--local is for -o URL (a store): the run is made there, "
                                 "then pushed")
            command(*args, **kwargs)
            return
        from napilab.harness.stores.store import cache_root, open_store

        parse(target)  # a bad URL: exit 2 before any host is touched
        with open_store(target) as store:
            store.backend.list_dirs("")  # unreachable, no credentials: said now
        kwargs["results"] = local or str(cache_root() / "runs")
        before = set(_ended(Path(kwargs["results"])))
        try:
            command(*args, **kwargs)
        finally:
            _publish(sorted(set(_ended(Path(kwargs["results"]))) - before), target)

    return click.option("--local", metavar="DIR", type=click.Path(file_okay=False),
                        help="With -o URL: where the run is made before it is pushed "
                             "(default ~/.cache/napilab/runs).")(wrapper)


def _ended(results: Path) -> list[Path]:
    """The run directories under RESULTS (a run that is made appears with its
    manifest: harness.store.store.RunStore.create)."""
    return [m.parent for m in results.glob("*/*/manifest.json")]


def _publish(dirs: list[Path], target: str) -> None:
    from napilab.harness.errors import NapilabError
    from napilab.harness.store.store import load_manifest
    from napilab.harness.stores.store import open_store
    from napilab.harness.stores.store import push as push_run

    dirs = [d for d in dirs if load_manifest(d).status not in (None, "running")]
    if not dirs:
        return
    try:
        with open_store(target) as store:
            for run_dir in dirs:
                done = push_run(store, run_dir)
                click.echo(f"napilab: published {run_dir} -> {store.url.join(done.prefix)}",
                           err=True)
    except NapilabError as exc:
        raise NapilabError(f"the run is stored in {dirs[-1]}, but publishing it failed: "
                           f"{exc.message}", hint=f"`napilab push {dirs[-1]} {target}` "
                                                  "publishes it later") from None
