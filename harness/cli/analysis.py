"""`napilab compare`, `napilab check`, `napilab calibrate`: the analysis commands.

Registered on the `napilab` group by harness/cli/main.py; like it, this module wires layers
together (reports for the tables, harness.store.confounders for what may be compared), so the
layering test treats both as the CLI. Errors go through harness.cli.main.main like any other.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from napilab.harness.cli.options import nipa_options, run_options
from napilab.harness.errors import ExitCode, InputError, NapilabError

if TYPE_CHECKING:
    from napilab.harness.profile.plan import Plan
    from napilab.harness.profile.profile import Profile
    from napilab.harness.store.confounders import Confounders

COPY_SUFFIX = "-again"  # the A/A copy of the baseline variant (reports.nightly.series's)
CALIBRATE_SUFFIX = "-calibrate"  # results go to RESULTS/<profile>-calibrate/: never a
# baseline candidate for `check` of the real profile


def _warn(line: str) -> None:
    click.echo(f"napilab: warning: {line}", err=True)


def _refuse(found: list[tuple[Any, Confounders]], base: str) -> InputError:
    listed = "\n".join(f"  {d.text(base, run.label)}" for run, f in found
                        for d in f.confounders)
    return InputError(
        f"the runs differ in more than the knobs under test:\n{listed}",
        hint="--intended KEY declares a difference intended (e.g. --intended kernel for a "
             "kernel A/B); --allow-mismatch compares anyway and lists them")


def _labelled(argument: str) -> tuple[str | None, str]:
    """`LABEL=RUN_DIR` or `RUN_DIR` (an existing directory wins over a label split); a
    run's URL in a store (STORE/PROFILE/RUN) is fetched into the store's mirror."""
    from napilab.harness.stores.url import is_url

    if Path(argument).is_dir():
        return None, argument
    label, sep, path = argument.partition("=") if not is_url(argument) else ("", "", argument)
    if is_url(path):
        from napilab.harness.stores.store import fetch_run

        return label or None, str(fetch_run(path))
    if not sep:
        raise InputError(f"{argument}: no such run directory")
    if not Path(path).is_dir():
        raise InputError(f"{argument}: no such run directory {path!r}",
                         hint="write LABEL=RUN_DIR, e.g. Baseline=results/seed-001/...")
    return label, path


@click.command()
@click.argument("runs", nargs=-1, required=True, metavar="[LABEL=]RUN_DIR...")
@click.option("--allow-mismatch", is_flag=True,
              help="Compare even if host facts or read-back knobs differ (listed).")
@click.option("--intended", multiple=True, metavar="KEY",
              help="A host fact or knob that is meant to differ, by key prefix "
                   "(kernel, cmdline, nics.eth0.firmware-version, ...); repeatable.")
@click.option("--variant", "variants", multiple=True, metavar="NAME",
              help="Compare only this variant (repeatable); default: every variant all "
                   "runs have.")
@click.option("--format", "fmt", type=click.Choice(["text", "md", "html", "json"]),
              default="text", show_default=True,
              help="The table as text, Markdown, a self-contained HTML page, or JSON with "
                   "the confounders.")
def compare(runs: tuple[str, ...], allow_mismatch: bool, intended: tuple[str, ...],
            variants: tuple[str, ...], fmt: str) -> None:
    """A/B across two or more runs, each under a label (Baseline=RUN_A Patched=RUN_B;
    unlabelled: A, B, ...); the first run is the baseline. Columns are label x variant,
    the label alone when one variant is compared.

    \b
    Examples:
      napilab compare results/demo/20261128T204634Z-aa results/demo/20261129T204634Z-bb
      napilab compare Baseline=RUN_A Patched=RUN_B --intended kernel --format md
    """
    from napilab.harness.records import codec
    from napilab.harness.store.confounders import diff_manifests
    from napilab.reports.ab.compare import load_run
    from napilab.reports.ab.cross_run import (
        CompareRecord,
        LabelledRun,
        check_labels,
        common_variants,
        compare_labelled,
    )
    from napilab.reports.ab.table_json import table_doc
    from napilab.reports.formats import compare_page
    from napilab.reports.formats.text_table import text_table

    if len(runs) < 2:
        raise InputError("compare needs two or more runs: [LABEL=]RUN_DIR [LABEL=]RUN_DIR ...")
    parsed = [_labelled(arg) for arg in runs]
    labels = check_labels([label for label, _ in parsed])
    loaded = [LabelledRun(label, load_run(path)) for label, (_, path) in zip(labels, parsed,
                                                                             strict=True)]
    chosen = common_variants(loaded, variants)
    seen: dict[Path, str] = {}
    for _, path in parsed:
        where = Path(path).resolve()
        if where in seen:
            raise InputError(f"{path} is given twice (as {seen[where]} and {path}): a run "
                             "compared with itself shows nothing",
                             hint="compare different runs, or rerun the profile for an A/A")
        seen[where] = str(path)
    base = loaded[0]
    found = [(other, diff_manifests(base.run.manifest, other.run.manifest, chosen)
              .waive(intended)) for other in loaded[1:]]
    if any(f.confounders for _, f in found) and not allow_mismatch:
        raise _refuse(found, base.label)
    noted = [compare_page.Noted(kind, d.text(base.label, other.label))
             for other, f in found for kind, diffs in (("intended", f.intended),
                                                       ("mismatch", f.confounders))
             for d in diffs]
    tab = compare_labelled(loaded, chosen)
    absent = compare_page.absent(loaded, chosen)
    if fmt == "json":
        doc = {
            "runs": [{"label": r.label, "dir": str(r.run.directory),
                      "run_id": r.run.manifest.run_id} for r in loaded],
            "baseline": base.label, "variants": chosen,
            "confounders": [{**d.as_dict(), "run": o.label} for o, f in found
                            for d in f.confounders],
            "intended": [{**d.as_dict(), "run": o.label} for o, f in found for d in f.intended],
            "allow_mismatch": allow_mismatch, "table": table_doc(tab)}
        record = codec.checked(doc, CompareRecord, "compare")
        click.echo(codec.encode(record, indent=1).decode())
    elif fmt == "md":
        click.echo(compare_page.markdown(loaded, tab, noted, absent), nl=False)
    elif fmt == "html":
        click.echo(compare_page.html(loaded, tab, noted, absent), nl=False)
    else:
        out = [compare_page.describe(r.label, r.run) for r in loaded]
        out += [f"{'intended' if n.kind == 'intended' else 'MISMATCH (allowed)'}: {n.text}"
                for n in noted]
        click.echo("\n".join(out) + "\n")
        click.echo(text_table(tab, absent=absent), nl=False)


# A series gates from its first earlier night: the simulations (docs/statistics.md,
# "nightly pool") put A/A nights red at <= 2% from the first nights on, a short series
# being inconclusive rather than red; --min-nights is for a fleet that adds hardware
# and wants its first nights seen before they gate (the netdev CI waits for 15 passes).
MIN_NIGHTS = 1


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--baseline", required=True, metavar="RUN_OR_RESULTS|URL",
              help="A run directory, or a results directory (or a store's URL, or a run's "
                   "there: docs/stores.md): the series of earlier runs "
                   "of the profile (each metric against the anchor level of its first "
                   "nights), or its pinned run.")
@click.option("--max-regression", "limits", multiple=True, metavar="METRIC=PCT",
              help="Tolerated regression of METRIC (name or source.metric) in percent, "
                   "or absolute as +VALUE[UNIT] (+500ms, +0.1cores); repeatable; gates "
                   "METRIC too. Default: the profile's max_regression, else 5.")
@click.option("--intended", multiple=True, metavar="KEY",
              help="A difference that is meant to be there: `profile` accepts a baseline "
                   "that ran a different profile digest; repeatable.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False),
              help="Write JUnit XML here (one testcase per metric x variant).")
@click.option("--ktap", "ktap_path", type=click.Path(dir_okay=False),
              help="Write KTAP here (the kernel's test output: a subtest per variant).")
@click.option("--nipa", "nipa_path", type=click.Path(dir_okay=False),
              help="Write the netdev CI's (NIPA's) result JSON here.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Write the JSON summary here.")
@click.option("--min-nights", type=click.IntRange(1, 1000), default=MIN_NIGHTS,
              show_default=True,
              help="A series of fewer earlier nights is judged and reported but does not "
                   "fail the gate (exit 0): its reference level is not settled yet.")
@nipa_options
def check(run_dir: str, baseline: str, limits: tuple[str, ...], intended: tuple[str, ...],
          junit_path: str | None, ktap_path: str | None, nipa_path: str | None,
          json_path: str | None, min_nights: int, link: str | None, executor: str | None,
          branch: str | None) -> None:
    """Nightly gate: exit 3 if RUN_DIR regressed beyond a threshold, 5 if nothing could be
    judged. A run over replicas is checked replica by replica, each against the nights
    of its own series (the output files get the replica's name: junit.pair1.xml); the
    exit code is the worst of them.

    \b
    Examples:
      napilab check RUN_DIR --baseline results --junit junit.xml
      napilab check RUN_DIR --baseline OLD_RUN --max-regression latency_p99=10
      napilab check RUN_DIR --baseline results --ktap check.ktap --nipa check.nipa.json
    """
    from napilab.harness.store.store import REPLICAS_DIR
    from napilab.reports.nightly.series import nights

    replicas = (Path(run_dir) / REPLICAS_DIR).is_dir()
    codes = []
    for night in nights(Path(run_dir)) if replicas else [Path(run_dir)]:
        if replicas:
            click.echo(f"== replica {night.name}")
        outputs = [_named(p, night.name if replicas else None)
                   for p in (junit_path, ktap_path, nipa_path, json_path)]
        codes.append(_check_one(night, baseline, limits, intended, outputs, min_nights,
                                (executor, branch, link)))
    if not codes:
        raise InputError(f"{run_dir}: a run over replicas with no replica's run in it")
    worst = max(codes, key=[ExitCode.OK, ExitCode.INCONCLUSIVE, ExitCode.REGRESSION].index)
    sys.exit(int(worst))


def _named(path: str | None, replica: str | None) -> str | None:
    """An output file of `check` for one replica: junit.xml -> junit.pair1.xml."""
    if path is None or replica is None:
        return path
    target = Path(path)
    return str(target.with_name(f"{target.stem}.{replica}{target.suffix}"))


def _check_one(run_dir: Path, baseline: str, limits: tuple[str, ...],
               intended: tuple[str, ...], outputs: list[str | None], min_nights: int,
               nipa: tuple[str | None, str | None, str | None]) -> ExitCode:
    from napilab.harness.store.store import atomic_write
    from napilab.reports.ab.compare import load_run
    from napilab.reports.nightly.baselines import find_reference
    from napilab.reports.nightly.check import (
        CHECK_FILE,
        gate,
        gate_json,
        gate_text,
        parse_thresholds,
    )
    from napilab.reports.nightly.junit import junit_xml

    junit_path, ktap_path, nipa_path, json_path = outputs
    thresholds = parse_thresholds(limits)
    candidate = load_run(run_dir)
    reference = find_reference(_baseline(baseline, candidate), candidate,
                               intended="profile" in intended)
    report = gate(reference, candidate, thresholds)
    if junit_path:
        atomic_write(Path(junit_path), junit_xml(report))
    _ci_files(report, ktap_path, nipa_path, nipa)
    summary = gate_json(report)
    if json_path:
        atomic_write(Path(json_path), summary)
    # Kept with the run too: `napilab publish` builds its feed of regressions from these.
    atomic_write(candidate.directory / CHECK_FILE, summary)
    click.echo(gate_text(report), nl=False)
    for label, run in (("candidate", candidate), *(("baseline", r) for r in reference.runs)):
        if run.manifest.status != "complete":
            _warn(f"{label} {run.directory} is {run.manifest.status}: judged on its "
                  "completed trials only")
    for _, why in reference.damaged:
        _warn(f"left out of the reference, damaged: {why}")
    for difference in report.confounders.confounders:
        _warn(f"runs differ: {difference}")
    if reference.kind == "series" and len(reference.runs) < min_nights:
        _warn(f"series {reference.name} has {len(reference.runs)} earlier night(s), fewer "
              f"than --min-nights {min_nights}: {report.status}, reported, not gated "
              "(exit 0)")
        return ExitCode.OK
    if report.status == "inconclusive":
        _warn("not every gated metric was judged within: exit 5 (inconclusive), not a pass")
        return ExitCode.INCONCLUSIVE
    return ExitCode.REGRESSION if report.regressions else ExitCode.OK


def _ci_files(report: Any, ktap_path: str | None, nipa_path: str | None,
              nipa: tuple[str | None, str | None, str | None]) -> None:
    """`check --ktap FILE --nipa FILE`: the gate's cases as KTAP and NIPA's JSON."""
    from napilab.harness.store.store import atomic_write
    from napilab.reports.ci.ktap import ktap
    from napilab.reports.ci.nipa import NipaTarget, nipa_json
    from napilab.reports.nightly.junit import gate_suite

    suite = gate_suite(report)
    if ktap_path:
        atomic_write(Path(ktap_path), ktap(suite))
    if nipa_path:
        atomic_write(Path(nipa_path), nipa_json(suite, NipaTarget(*nipa)))


def _baseline(baseline: str, candidate: Any) -> Path:
    """--baseline as a path: itself, or a store's run or series fetched into its mirror
    (the series chosen by the runs' summaries: harness.stores.store.series)."""
    from napilab.harness.stores.url import is_url

    if not is_url(baseline):
        if not Path(baseline).is_dir():
            raise InputError(f"--baseline {baseline}: no such run or results directory")
        return Path(baseline)
    from napilab.harness.stores.store import fetch_run, is_run_url, series
    from napilab.reports.nightly.baselines import SERIES_MAX
    from napilab.reports.nightly.check_record import PIN_FILE

    if is_run_url(baseline):
        return fetch_run(baseline)
    manifest = candidate.manifest
    started = manifest.started if isinstance(manifest.started, int | float) else None
    return series(baseline, manifest.profile.name, started, manifest.profile.digest or "",
                  SERIES_MAX, PIN_FILE)


@click.group()
def baseline() -> None:
    """Pin or unpin the reference run `check --baseline RESULTS` uses for a profile.

    \b
    Example:
      napilab baseline pin results/nightly/20261129T204634Z-bbc627aa
    """


@baseline.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
def pin(run_dir: str) -> None:
    """Make RUN_DIR the reference of its profile (stored beside the results).

    \b
    Example:
      napilab baseline pin results/nightly/20261129T204634Z-bbc627aa
    """
    from napilab.harness.records import codec
    from napilab.harness.store.store import atomic_write
    from napilab.reports.ab.compare import load_run
    from napilab.reports.nightly.check_record import PIN_FILE, PinRecord

    run = load_run(run_dir)
    if run.manifest.status != "complete":
        raise InputError(f"{run_dir} is {run.manifest.status}: pin a complete run")
    where = run.directory.resolve().parent / PIN_FILE
    atomic_write(where, codec.encode(PinRecord(run=run.directory.name,
                                               run_id=run.manifest.run_id)) + b"\n")
    click.echo(f"pinned {run.directory.name} as the baseline of "
               f"{run.manifest.profile.name} ({where})")


@baseline.command()
@click.argument("path", type=click.Path(file_okay=False, exists=True))
def unpin(path: str) -> None:
    """Remove the pin of PATH's profile (PATH: RESULTS/<profile> or one of its runs).

    \b
    Example:
      napilab baseline unpin results/nightly
    """
    from napilab.reports.nightly.check_record import PIN_FILE

    where = Path(path) / PIN_FILE
    if not where.exists() and (Path(path) / "manifest.json").exists():
        where = Path(path).resolve().parent / PIN_FILE
    if not where.exists():
        raise InputError(f"{path}: no pinned baseline there")
    where.unlink()
    click.echo(f"unpinned ({where}); check --baseline RESULTS uses the pool again")


def aa_plan(bound: Plan, suffix: str = CALIBRATE_SUFFIX) -> Plan:
    """The plan of an A/A run: the baseline variant and a copy of it, in the profile's
    order (blocked becomes interleaved: drift would otherwise look like a difference).
    Its profile is named PROFILE-calibrate (`calibrate`), or with suffix "" the profile
    itself: an A/A night in the profile's own series (`run --aa`)."""
    profile: Profile = bound.profile
    base = profile.variants[0]
    copy = replace(base, name=base.name + COPY_SUFFIX,
                   description=f"A/A copy of {base.name}")
    document = dict(profile.document)
    overlay = (document.get("variants") or {}).get(base.name, {})
    document.update(name=profile.name + suffix, baseline=base.name,
                    variants={base.name: overlay, copy.name: overlay})
    derived = replace(profile, name=profile.name + suffix, variants=(base, copy),
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
    from napilab.harness.cli.execute import execute, load
    from napilab.harness.store.store import atomic_write
    from napilab.reports.ab.calibration import calibrate_run, calibration_json, calibration_text
    from napilab.reports.ab.compare import load_run

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
