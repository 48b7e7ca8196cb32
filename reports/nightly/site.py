"""`napilab publish RESULTS SITE_DIR`: a static site of every run under RESULTS.

    SITE_DIR/index.html                       runs per profile, newest first, with their
                                              status, check result and kernel; trend
                                              figures per profile and host (inline SVG)
    SITE_DIR/runs/<profile>/<run>/report.html each run's report, copied (rendered into
                                              the site when the run has none)
    SITE_DIR/runs/<profile>/<run>/raw         the run's raw outputs, so the report's
                                              relative links work: a symlink (default),
                                              a copy (--raw copy, for uploading), or none
    SITE_DIR/feed.xml                         Atom feed of the regressions `napilab check`
                                              found (RUN_DIR/check.json)

Publishing again updates the site: reports whose source did not change are not copied
again. The index page has the report's safety properties: autoescaped text, checked
SVG, a CSP without scripts or fetches, relative links only.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from napilab.harness import redact
from napilab.harness.errors import NapilabError
from napilab.harness.records import codec
from napilab.harness.stats.stats import Verdict
from napilab.harness.store.command_record import read_command
from napilab.harness.store.store import atomic_write, load_manifest
from napilab.reports.ab.compare import load_run, table
from napilab.reports.formats.render import environment, html, relurl
from napilab.reports.nightly import feed
from napilab.reports.nightly.check_record import CHECK_FILE
from napilab.reports.nightly.history import Damaged, Fetch, RunInfo, scan_runs
from napilab.reports.nightly.stability import SeriesStability, stability
from napilab.reports.nightly.trends import hosts_of, trend
from napilab.reports.plots.plots import Omitted, Plot

RAW_MODES = ("link", "copy", "none")


@dataclass(frozen=True)
class Published:
    run: RunInfo
    href: str  # the report, relative to SITE_DIR
    rendered: bool  # the run had no report.html: rendered into the site


@dataclass(frozen=True)
class ProfilePage:
    name: str
    description: str
    runs: list[Published]  # newest first
    trends: list[Plot | Omitted]
    stability: list[SeriesStability] = field(default_factory=list)


@dataclass(frozen=True)
class Site:
    directory: Path
    profiles: list[ProfilePage]
    regressions: int  # feed entries
    damaged: Damaged = ()  # runs whose manifest cannot be read: left out, and said

    @property
    def runs(self) -> int:
        return sum(len(p.runs) for p in self.profiles)

    @property
    def rendered(self) -> int:
        return sum(1 for p in self.profiles for r in p.runs if r.rendered)


def _copy_report(run: RunInfo, target: Path, fetch: Fetch | None = None) -> bool:
    """report.html into the site; True when it had to be rendered (the run has none)."""
    source = run.directory / "report.html"
    if not source.exists() and fetch is not None:
        fetch([run.directory], None)
    if source.exists():
        stat = source.stat()
        current = target.stat() if target.exists() else None
        if current is None or (current.st_size, int(current.st_mtime)) != \
                (stat.st_size, int(stat.st_mtime)):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        return False
    if not target.exists() or target.stat().st_mtime < (run.directory /
                                                        "manifest.json").stat().st_mtime:
        atomic_write(target, html(load_run(run.directory)))
    return True


def _raw(run: RunInfo, target: Path, mode: str) -> None:
    source = run.directory / "raw"
    if mode == "none" or not source.is_dir():
        return
    if mode == "link":
        if not target.exists() and not target.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(source.resolve(), target, target_is_directory=True)
        return
    if target.is_symlink():  # published with --raw link before
        target.unlink()
    if not target.exists():
        shutil.copytree(source, target, symlinks=True,  # a link stays a link: no content
                        # from elsewhere on this machine is copied into a site for uploading
                        copy_function=_redacting_copy(run.directory))


def _redacting_copy(run_dir: Path) -> Callable[[str, str], object]:
    """copy2, except that a workload command record (raw/.../client.json) of a run
    stored before env values were redacted is copied with them redacted."""
    try:
        shown = redact.shown_names(load_manifest(run_dir).profile.document)
    except (NapilabError, OSError):
        shown = set()

    def copy(source: str, target: str) -> object:
        if Path(source).name in ("client.json", "server.json"):
            try:
                record = read_command(Path(source))
                shown_argv = redact.stored_argv(record.argv, shown)
                Path(target).write_bytes(codec.encode(msgspec.structs.replace(
                    record, argv=shown_argv), indent=1) + b"\n")
                return target
            except (OSError, NapilabError):
                pass
        return shutil.copy2(source, target)

    return copy


def publish(results: str | Path, site: str | Path, *, raw: str = "link",
            base_url: str | None = None, fetch: Fetch | None = None,
            title: str | None = None) -> Site:
    """The site of every run under RESULTS (a results directory, or a store's mirror
    whose run files `fetch` brings when a report must be rendered)."""
    if raw not in RAW_MODES:
        raise ValueError(f"raw must be one of {RAW_MODES}, got {raw!r}")
    results, site = Path(results), Path(site)
    runs, damaged = scan_runs(results)
    by_profile: dict[str, list[RunInfo]] = {}
    for run in runs:
        by_profile.setdefault(run.profile, []).append(run)
    pages = []
    entries = []
    for name in sorted(by_profile):
        published = []
        for run in reversed(by_profile[name]):  # newest first
            # Paths from the run's directory names, not from the manifest: a profile name
            # is data, and "../x" must not place files outside the site.
            folder, leaf = run.profile_dir_name, run.key.replace("/", "-")
            href = f"runs/{relurl(folder)}/{relurl(leaf)}/report.html"
            target = site / "runs" / folder / leaf
            rendered = _copy_report(run, target / "report.html", fetch)
            _raw(run, target / "raw", raw)
            published.append(Published(run, href, rendered))
            if run.check is not None:
                checked = dt.datetime.fromtimestamp(
                    (run.directory / CHECK_FILE).stat().st_mtime, dt.UTC)
                entry = feed.regression_entry(run.run_id, name, run.check, href, checked)
                if entry is not None:
                    entries.append(entry)
        description = next((r.description for r in reversed(by_profile[name])
                            if r.description), "")
        trends = [trend(name, host, by_profile[name], fetch=fetch)
                  for host in hosts_of(by_profile[name])]
        pages.append(ProfilePage(name, description, published, trends,
                                 stability(by_profile[name], _aa_false_alarm(fetch))))
    now = dt.datetime.now(dt.UTC)
    feed_id = (base_url.rstrip("/") + "/feed.xml" if base_url else "urn:napilab:site:" +
               hashlib.sha256(str(results.resolve()).encode()).hexdigest()[:16])
    atomic_write(site / "feed.xml", feed.atom(entries, title=f"napilab regressions: "
                                              f"{title or results.resolve().name}",
                                              feed_id=feed_id,
                                              updated=now, base_url=base_url))
    out = Site(site, pages, len(entries), damaged)
    atomic_write(site / "index.html", index_html(out, now, title or results.resolve().name))
    return out


def _aa_false_alarm(fetch: Fetch | None) -> Callable[[RunInfo], bool]:
    """An A/A night's A/B table judged a primary metric better or worse."""
    def judged(run: RunInfo) -> bool:
        if fetch is not None:
            fetch([run.directory], None)
        tab = table(load_run(run.directory))
        return any(c.verdict in (Verdict.BETTER, Verdict.WORSE)
                   for line in tab.lines if line.primary for c in line.comparisons.values())

    return judged


def index_html(site: Site, now: dt.datetime, title: str) -> str:
    return environment().get_template("site_index.html.j2").render(
        site=site, profiles=site.profiles, generated=now.strftime("%Y-%m-%d %H:%M UTC"),
        title=title)

