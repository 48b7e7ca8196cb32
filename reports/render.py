"""Renderers of a stored run: self-contained HTML and cover-letter text.

Everything comes from RUN_DIR (manifest.json, samples.parquet); nothing is re-measured.
HTML is rendered with Jinja2 autoescaping on, plots are inline SVG, no external fetch.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jinja2

from harness.store import atomic_write
from reports import verdicts
from reports.ab_model import format_ci, format_p, format_pct
from reports.compare import RunData, Table, format_number, load_run, table
from reports.plots import render_all
from reports.text_stats import stats_block

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("reports", "templates"),
    autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["num"] = format_number
_ENV.filters["pct"] = format_pct
_ENV.filters["ci"] = format_ci
_ENV.filters["pval"] = format_p
# "~" is no CSS class name a stylesheet can select; the other verdicts are
_ENV.filters["vclass"] = lambda verdict: "same" if verdict == "~" else verdict
_ENV.filters["when"] = lambda t: (dt.datetime.fromtimestamp(t, dt.UTC).strftime(
    "%Y-%m-%d %H:%M:%S UTC") if isinstance(t, int | float) else "-")


def html(run: RunData) -> str:
    tab = table(run)
    manifest = run.manifest
    trials = manifest.get("trials", [])
    return _ENV.get_template("report.html.j2").render(
        run=run, manifest=manifest, table=tab, plots=render_all(run, tab),
        summary=verdicts.summary(tab),
        trials=trials, settings=_settings(trials), commands=_commands(run),
        facts=manifest.get("host_facts", {}),
        profile_yaml=json.dumps(manifest.get("profile", {}).get("document", {}), indent=1),
        failed=[t for t in trials if t.get("status") == "failed"],
    )


def _settings(trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requested vs read back, once per (variant, host, target)."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for trial in trials:
        for change in trial.get("settings", []):
            key = (trial["variant"], change["host"], change["path"])
            if key not in seen:
                seen[key] = {"variant": trial["variant"], **change,
                             "ok": change.get("effective") is not None}
    return list(seen.values())


def _commands(run: RunData) -> list[dict[str, Any]]:
    """The workload commands of the first trial of each variant, from raw/."""
    out = []
    first: dict[str, str] = {}
    for trial in run.manifest.get("trials", []):
        first.setdefault(trial["variant"], trial["id"])
    for variant, trial_id in first.items():
        for path in sorted((run.directory / "raw" / trial_id).glob("*/*.json")):
            if path.name in ("client.json", "server.json"):
                doc = json.loads(path.read_text())
                out.append({"variant": variant, "host": path.parent.name,
                            "side": path.stem, "argv": doc.get("argv", []),
                            "exit_code": doc.get("exit_code"),
                            "raw": str(path.relative_to(run.directory).with_suffix(".out"))})
    return out


def text(run: RunData, width: int = 80) -> str:
    """A fixed-width table in the style of a patch cover letter (seed 001)."""
    tab = table(run)
    return text_table(tab, width)


def text_table(tab: Table, width: int = 80) -> str:
    label_width = max([len(ln.label) for ln in tab.lines] + [10])
    cells = [[format_number(ln.cells[v].value) for v in tab.variants] for ln in tab.lines]
    col = max([len(v) for v in tab.variants] + [len(c) for row in cells for c in row] + [8])
    label_width = min(label_width, max(10, width - 2 - (col + 2) * len(tab.variants)))
    header = "  " + " " * label_width + "".join(f"  {v:>{col}}" for v in tab.variants)
    lines = [header.rstrip()]
    for line, row in zip(tab.lines, cells, strict=True):
        lines.append("  " + f"{line.label[:label_width]:<{label_width}}"
                     + "".join(f"  {c:>{col}}" for c in row))
    values = "\n".join(lines) + "\n"
    stats = stats_block(tab, width)
    # The cover letter's table first, unchanged in shape; the evidence under it.
    return values + ("\n" + stats if stats else "")


def write_reports(directory: str | Path, formats: list[str]) -> list[Path]:
    run = load_run(directory)
    written = []
    for fmt in formats:
        if fmt == "html":
            path = run.directory / "report.html"
            atomic_write(path, html(run))
        elif fmt == "text":
            path = run.directory / "report.txt"
            atomic_write(path, text(run))
        else:
            raise ValueError(fmt)
        written.append(path)
    return written
