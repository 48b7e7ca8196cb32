"""`napilab tune`: search a profile's `tune:` space for the settings that meet its goal,
confirm the best with napilab's statistics, write them out as a profile.

Before any host is touched, every corner of the space (each choice, each range's two
ends) is loaded into the template variant and validated as a run's variant would be,
and the profile is bound to the inventory.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from napilab.harness.cli.options import inventory_option, transport_option
from napilab.harness.errors import InputError


@click.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@inventory_option()
@click.option("-o", "--results", default="results", show_default=True,
              type=click.Path(file_okay=False),
              help="Results directory; the study goes to RESULTS/<profile>/tune-<time>-<id>/.")
@transport_option
@click.option("--resume", type=click.Path(file_okay=False, exists=True),
              help="Continue the study in STUDY_DIR (same profile and inventory).")
@click.option("--dry-run", is_flag=True,
              help="Print the search space, the goal, the budget and the plan; run nothing.")
@click.option("--quiet", is_flag=True, help="Print only the candidates' lines.")
def tune(profile: str, inventory: str, results: str, transport: str | None,
         resume: str | None, dry_run: bool, quiet: bool) -> None:
    """Search the settings of a profile's `tune:` section for its goal (e.g. the least
    busy cores at p99 <= 100 us), each candidate applied and restored like a run's
    variant; re-measure the best with the baseline and recommend only those confirmed
    better, written as RESULTS/.../recommended.yaml for `napilab run`.

    \b
    Examples:
      napilab tune profiles/tune-veth.yaml -i /run/napilab-testbed/inventory.yaml --dry-run
      napilab tune tune.yaml -i lab.yaml -o results
      napilab tune tune.yaml -i lab.yaml --resume results/tune-veth/tune-20261202T160000Z-1a2b3c4d
    """
    from napilab.harness.cli.tune_search import Search
    from napilab.harness.inventory.inventory import load_inventory
    from napilab.harness.profile.plan import bind
    from napilab.harness.profile.profile import load_profile
    from napilab.harness.tune.study import Study

    prof = load_profile(profile)
    if prof.tune is None:
        raise InputError(f"{profile}: no `tune:` section: nothing to search",
                         hint="docs/tune.md: `tune: {parameters, goal, budget}`")
    check_corners(profile, prof)
    inv = load_inventory(inventory).with_transport(transport)
    bound = bind(prof, inv)
    if dry_run:
        click.echo(summary(prof, bound), nl=False)
        return
    if resume:
        study = Study.open(resume)
        if study.state.digest != prof.digest:
            raise InputError(f"{profile} changed since the study in {resume} began",
                             hint="a changed profile is a new study: run without --resume")
    else:
        study = Study.create(results, prof, inventory)
        _say(f"napilab: study {study.dir}")
    code = Search(study, prof, inv, _say, quiet=quiet).run()
    sys.exit(int(code))


def _say(line: str) -> None:
    click.echo(line, err=True)


def check_corners(path: str, prof: Any) -> None:
    """Load the template with each parameter's every choice or range end (the others at
    their first): a value the knob refuses is bad input now, at its line."""
    from napilab.harness.profile.profile import load_profile
    from napilab.harness.profile.tune import Tuning

    tune = prof.tune
    base = tune.corner()
    candidates = []
    for param in tune.parameters:
        for i, value in enumerate(param.corners()):
            candidates.append((f"{param.name}-{i}", {**base, param.name: value}))
    load_profile(path, Tuning(tuple(candidates)))


def summary(prof: Any, bound: Any) -> str:
    """What `tune --dry-run` prints: the space, the goal, the budget, the time it takes,
    then the plan's summary of one candidate (the space's corner)."""
    from napilab.harness.engine.plan_render import estimate, plan_text
    from napilab.harness.profile.plan import bind
    from napilab.harness.profile.profile import load_profile
    from napilab.harness.profile.tune import Tuning
    from napilab.harness.tune import space

    tune = prof.tune
    width = max(len(p.name) for p in tune.parameters)
    lines = [f"tune: {prof.name}: variant {tune.variant} searched against "
             f"{prof.baseline}, {len(tune.parameters)} parameter(s):"]
    lines += [f"  {p.name:<{width}}  {p.describe()}" for p in tune.parameters]
    size = space.grid_size(tune)
    lines.append(f"space: {size:,} points" if size else "space: continuous")
    goal = " and ".join(f"{o.direction} {o.label}" for o in tune.objectives)
    if tune.front:
        goal = f"the front of {' and '.join(o.label for o in tune.objectives)}"
    bounds = "; ".join(b.describe() for b in tune.constraints)
    lines.append(f"goal: {goal}" + (f", subject to {bounds}" if bounds else ""))
    guard = ", ".join(g.describe() for g in tune.guard) or "none beyond the tool's " \
        "operation count > 0"
    lines.append(f"guard: a failed trial stops the search; {guard}")
    budget = " or ".join(([f"{tune.trials} candidates"] if tune.trials else [])
                         + ([f"{tune.seconds / 60:g} min"] if tune.seconds else []))
    lines.append(f"sampler: optuna {tune.sampler}" + (f", seed {tune.seed}" if tune.seed
                                                       is not None else "")
                 + f"; budget: {budget}" + (", whichever comes first" if tune.trials
                                            and tune.seconds else ""))
    one = bind(load_profile(prof.path, Tuning(((tune.variant, tune.corner()),),
                                              baseline=False, repeat=1,
                                              duration=tune.duration)), bound.inventory)
    per = estimate(one)
    repeat = tune.repeat or prof.repeat
    confirm = bind(load_profile(prof.path, Tuning(tuple(
        (f"c{i}", tune.corner()) for i in range(tune.top)), repeat=repeat)), bound.inventory)
    trials = tune.trials or 0
    search = per * (trials + 1) if trials else tune.seconds or 0
    if tune.seconds and trials:
        search = min(search, tune.seconds)
    lines.append(f"each candidate: 1 trial of {one.profile.variants[0].workload.duration:g} s, "
                 f"about {per:.0f} s; the baseline first, once")
    lines.append(f"confirmation: the best {tune.top} with the baseline, {repeat} repetitions "
                 f"each, {prof.order}: {len(confirm.profile.trials())} trials, about "
                 f"{estimate(confirm) / 60:.1f} min")
    lines.append(f"estimated: {(search + estimate(confirm)) / 60:.1f} min in all")
    lines.append("")
    return "\n".join(lines) + "\n" + plan_text(one, summary_only=True)
