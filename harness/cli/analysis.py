"""`napilab compare`, `napilab check`, `napilab calibrate`: the analysis commands.

Registered on the `napilab` group by harness/cli/main.py; like it, this module wires layers
together (reports for the tables, harness.store.confounders for what may be compared), so the
layering test treats both as the CLI. Errors go through harness.cli.main.main like any other.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from harness.cli.options import run_options
from harness.errors import ExitCode, InputError, NapilabError
from harness.profile.plan import Plan
from harness.profile.profile import Profile
from harness.store.confounders import Confounders, diff_manifests
from harness.store.store import atomic_write

COPY_SUFFIX = "-again"  # the A/A copy of the baseline variant
CALIBRATE_SUFFIX = "-calibrate"  # results go to RESULTS/<profile>-calibrate/: never a
# baseline candidate for `check` of the real profile


def _warn(line: str) -> None:
    click.echo(f"napilab: warning: {line}", err=True)


def _describe(label: str, run: Any) -> str:
    manifest = run.manifest
    status = manifest.get("status", "?")
    return f"{label}: {run.directory} (run {manifest.get('run_id')}, {status})"


def _refuse(found: Confounders) -> InputError:
    listed = "\n".join(f"  {d}" for d in found.confounders)
    return InputError(
        f"the runs differ in more than the knobs under test:\n{listed}",
        hint="--intended KEY declares a difference intended (e.g. --intended kernel for a "
             "kernel A/B); --allow-mismatch compares anyway and lists them")


@click.command()
@click.argument("run_a", type=click.Path(file_okay=False, exists=True))
@click.argument("run_b", type=click.Path(file_okay=False, exists=True))
@click.option("--allow-mismatch", is_flag=True,
              help="Compare even if host facts or read-back knobs differ (listed).")
@click.option("--intended", multiple=True, metavar="KEY",
              help="A host fact or knob that is meant to differ, by key prefix "
                   "(kernel, cmdline, nics.eth0.firmware-version, ...); repeatable.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="The table as text, or as JSON with the confounders.")
def compare(run_a: str, run_b: str, allow_mismatch: bool, intended: tuple[str, ...],
            fmt: str) -> None:
    """A/B across two runs, variants matched by name; RUN_A is the baseline.

    \b
    Examples:
      napilab compare results/demo/20261128T* results/demo/20261129T*
      napilab compare RUN_A RUN_B --intended kernel --format json
    """
    from reports.ab.compare import load_run
    from reports.ab.cross_run import compare_runs, matched_variants
    from reports.ab.table_json import table_doc
    from reports.formats.render import text_table

    a, b = load_run(run_a), load_run(run_b)
    found = diff_manifests(a.manifest, b.manifest, matched_variants(a, b)).waive(intended)
    if found.confounders and not allow_mismatch:
        raise _refuse(found)
    tab = compare_runs(a, b)
    if fmt == "json":
        click.echo(json.dumps({
            "run_a": {"dir": str(a.directory), "run_id": a.manifest.get("run_id")},
            "run_b": {"dir": str(b.directory), "run_id": b.manifest.get("run_id")},
            "confounders": [d.as_dict() for d in found.confounders],
            "intended": [d.as_dict() for d in found.intended],
            "allow_mismatch": allow_mismatch, "table": table_doc(tab)}, indent=1, default=str))
        return
    out = [_describe("A", a), _describe("B", b)]
    out += [f"intended: {d}" for d in found.intended]
    out += [f"MISMATCH (allowed): {d}" for d in found.confounders]
    click.echo("\n".join(out) + "\n")
    click.echo(text_table(tab), nl=False)


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--baseline", required=True, type=click.Path(file_okay=False, exists=True),
              help="A run directory, or a results directory: its newest complete run of "
                   "the same profile.")
@click.option("--max-regression", "limits", multiple=True, metavar="METRIC=PCT",
              help="Tolerated regression of METRIC (name or source.metric) in percent; "
                   "repeatable. Default: the profile's max_regression, else 5.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False),
              help="Write JUnit XML here (one testcase per metric x variant).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Write the JSON summary here.")
def check(run_dir: str, baseline: str, limits: tuple[str, ...], junit_path: str | None,
          json_path: str | None) -> None:
    """Nightly gate: exit 3 if RUN_DIR regressed significantly beyond a threshold.

    \b
    Examples:
      napilab check RUN_DIR --baseline results --junit junit.xml
      napilab check RUN_DIR --baseline OLD_RUN --max-regression latency_p99=10
    """
    from reports.ab.compare import load_run
    from reports.nightly.check import (
        CHECK_FILE,
        find_baseline,
        gate,
        gate_json,
        gate_text,
        parse_thresholds,
    )
    from reports.nightly.junit import junit_xml

    thresholds = parse_thresholds(limits)
    candidate = load_run(run_dir)
    report = gate(load_run(find_baseline(Path(baseline), candidate)), candidate, thresholds)
    if junit_path:
        atomic_write(Path(junit_path), junit_xml(report))
    summary = gate_json(report)
    if json_path:
        atomic_write(Path(json_path), summary)
    # Kept with the run too: `napilab publish` builds its feed of regressions from these.
    atomic_write(candidate.directory / CHECK_FILE, summary)
    click.echo(gate_text(report), nl=False)
    for label, run in (("candidate", candidate), ("baseline", report.baseline)):
        if run.manifest.get("status") != "complete":
            _warn(f"{label} {run.directory} is {run.manifest.get('status')}: judged on its "
                  "completed trials only")
    for difference in report.confounders.confounders:
        _warn(f"runs differ: {difference}")
    if report.cases and all(c.status in ("not-enough-data", "skipped") for c in report.cases):
        _warn("no metric could be judged; a pass here means nothing (see `need n=`)")
    sys.exit(int(ExitCode.REGRESSION if report.regressions else ExitCode.OK))


def aa_plan(bound: Plan) -> Plan:
    """The plan of an A/A run: the baseline variant and a copy of it, in the profile's
    order (blocked becomes interleaved: drift would otherwise look like a difference)."""
    profile: Profile = bound.profile
    base = profile.variants[0]
    copy = replace(base, name=base.name + COPY_SUFFIX,
                   description=f"A/A copy of {base.name}")
    document = dict(profile.document)
    overlay = (document.get("variants") or {}).get(base.name, {})
    document.update(name=profile.name + CALIBRATE_SUFFIX, baseline=base.name,
                    variants={base.name: overlay, copy.name: overlay})
    derived = replace(profile, name=profile.name + CALIBRATE_SUFFIX, variants=(base, copy),
                      order="randomized" if profile.order == "randomized" else "interleaved",
                      document=document)
    return replace(bound, profile=derived)


@click.command()
@run_options
def calibrate(profile: str, inventory: str, results: str, transport: str | None) -> None:
    """A/A run of the baseline variant: noise per metric and the smallest change the
    profile's repeat count can detect.

    \b
    Example:
      napilab calibrate profile.yaml -i lab.yaml -o results"""
    from harness.cli.execute import execute, load
    from reports.ab.calibration import calibrate_run, calibration_json, calibration_text
    from reports.ab.compare import load_run

    bound, _ = load(profile, inventory, transport)
    assert bound is not None
    plan = aa_plan(bound)
    where = Path(results) / plan.profile.name
    before = set(where.iterdir()) if where.exists() else set()
    code = execute(plan, results, formats=["html"])
    created = sorted(set(where.iterdir()) - before) if where.exists() else []
    if not created:
        raise NapilabError(f"calibration run wrote nothing under {where}")
    run = load_run(created[-1])
    meta: dict[str, Any] = {"profile": bound.profile.name, "baseline": bound.profile.baseline,
                            "n_per_arm": bound.profile.repeat}
    lines = calibrate_run(run, bound.profile.repeat)
    atomic_write(run.directory / "calibration.json", calibration_json(lines, **meta))
    click.echo(calibration_text(lines, **meta), nl=False)
    click.echo(f"calibration: {run.directory / 'calibration.json'}")
    sys.exit(int(code))
