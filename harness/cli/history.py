"""`napilab history` and `napilab publish`: reports across runs.

Registered on the `napilab` group by harness/cli/main.py; like harness/cli/analysis.py this
module wires the reports layer in (the layering test counts it as CLI). Errors go
through harness.cli.main.main like any other.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("results", type=click.Path(file_okay=False, exists=True))
@click.option("--profile", required=True, help="Profile name (runs are RESULTS/<profile>/).")
@click.option("--metric", "metrics", multiple=True, metavar="M",
              help="metric or source.metric; repeatable. Default: the newest run's "
                   "primary metrics, then its report.table metrics (4 in all), else the "
                   "workload's latency and throughput.")
@click.option("--host", help="Only values measured on this host.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True, help="Tables, JSON, or CSV: a row per run, metric and "
                                      "variant.")
def history(results: str, profile: str, metrics: tuple[str, ...], host: str | None,
            fmt: str) -> None:
    """Trend across the runs of a profile: per run, the median of each metric per variant.

    \b
    Examples:
      napilab history results --profile nightly-example
      napilab history results --profile demo --metric rtt_avg --host a
      napilab history results --profile demo --format csv > demo.csv
    """
    from napilab.reports.nightly.history import history as build
    from napilab.reports.nightly.history import history_json, history_text
    from napilab.reports.nightly.history_csv import history_csv

    found = build(results, profile, metrics, host)
    render = {"json": history_json, "csv": history_csv, "text": history_text}[fmt]
    click.echo(render(found), nl=False)
    if fmt != "text":  # the text says them itself
        for _, why in found.damaged:
            click.echo(f"napilab: warning: left out, damaged: {why}", err=True)


@click.command()
@click.argument("results", type=click.Path(file_okay=False, exists=True))
@click.argument("site_dir", type=click.Path(file_okay=False))
@click.option("--raw", type=click.Choice(["link", "copy", "none"]), default="link",
              show_default=True,
              help="Raw outputs next to each published report: a symlink to the run's raw/ "
                   "(for serving from this machine), a copy (for uploading), or none.")
@click.option("--base-url", metavar="URL",
              help="Where the site is served; makes the feed's links absolute.")
def publish(results: str, site_dir: str, raw: str, base_url: str | None) -> None:
    """Static site of every run under RESULTS: index, trends, reports, Atom feed.

    \b
    Examples:
      napilab publish results /srv/www/napilab --raw copy
      napilab publish results site --base-url https://lab.example/napilab/
    """
    from napilab.reports.nightly.site import publish as build

    site = build(results, site_dir, raw=raw, base_url=base_url)
    for _, why in site.damaged:
        click.echo(f"napilab: warning: left out, damaged: {why}", err=True)
    rendered = (f"; {site.rendered} run(s) had no report.html: rendered into the site"
                if site.rendered else "")
    click.echo(f"published {site.runs} run(s) of {len(site.profiles)} profile(s){rendered}")
    click.echo(f"index: {Path(site_dir) / 'index.html'}")
    click.echo(f"feed: {Path(site_dir) / 'feed.xml'} ({site.regressions} regression(s))")
