"""`napilab bisect`: which commit of a kernel tree (or which image of an ordered list)
changed a metric, each step an A/B run against the good endpoint (docs/bisect.md).

Before anything runs: the profile is loaded and bound, the endpoints and the tree
checked, and with `--dry-run` the plan printed: how many steps, boots and trials the
bisection takes at most, and one step's plan.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from napilab.harness.cli.options import inventory_option, transport_option
from napilab.harness.errors import InputError

DEFAULT_IMAGE = "arch/x86/boot/bzImage"


@click.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@inventory_option()
@click.option("--good", help="The good endpoint: a commit of --tree, or an entry of --image.")
@click.option("--bad", help="The bad endpoint (newer than --good).")
@click.option("--tree", type=click.Path(file_okay=False),
              help="The kernel's git tree (default: the profile's bisect.tree, else the "
                   "current directory).")
@click.option("--build", "build_command",
              help="The build command, run in the tree with each commit checked out "
                   "(e.g. 'make -j$(nproc) bzImage'; default: the profile's bisect.build).")
@click.option("--build-image",
              help=f"The image the build leaves, relative to the tree (default: the "
                   f"profile's bisect.image, else {DEFAULT_IMAGE}).")
@click.option("--image", "images", multiple=True,
              help="An ordered image list instead of a tree: each a file or a kernel "
                   "cache name, oldest first (repeat the option).")
@click.option("--variant", help="The profile's variant each step is made of (default: the "
                                "baseline).")
@click.option("--role", help="The role whose host boots the candidates (default: the one "
                             "the variant gives a kernel).")
@click.option("--metric", "metrics", multiple=True,
              help="Gate this metric (METRIC or SOURCE.METRIC; repeatable); default: the "
                   "profile's primary metrics.")
@click.option("--max-regression", "thresholds", multiple=True, metavar="METRIC=PCT",
              help="The gate's threshold, as `napilab check` takes it.")
@click.option("--repeat", type=click.IntRange(min=2),
              help="Repetitions per variant of a step (default: the profile's).")
@click.option("--max-repeat", type=click.IntRange(min=2),
              help="An inconclusive step is measured again at twice the repetitions, up to "
                   "this many, then skipped (default: 4 x --repeat).")
@click.option("--against", type=click.Choice(["good", "both"]), default="good",
              show_default=True, help="Measure each candidate against the good endpoint, "
                                      "or against both endpoints.")
@click.option("--on-crash", type=click.Choice(["skip", "bad"]), default="skip",
              show_default=True, help="What a kernel that does not boot, panics or hangs "
                                      "is marked.")
@click.option("--console-command",
              help="A lab host's console: a command run here after each step (env "
                   "NAPILAB_HOST, NAPILAB_STEP) whose output is kept. VM guests' serial "
                   "consoles are kept without it.")
@click.option("-o", "--results", default="results", show_default=True,
              type=click.Path(file_okay=False),
              help="Results directory; the bisection goes to "
                   "RESULTS/<profile>/bisect-<time>-<id>/.")
@transport_option
@click.option("--resume", type=click.Path(file_okay=False, exists=True),
              help="Continue the bisection in BISECT_DIR.")
@click.option("--dry-run", is_flag=True,
              help="Print the plan: steps, boots and trials at most; run nothing.")
def bisect(profile: str, inventory: str, good: str | None, bad: str | None,
           tree: str | None, build_command: str | None, build_image: str | None,
           images: tuple[str, ...], variant: str | None, role: str | None,
           metrics: tuple[str, ...], thresholds: tuple[str, ...], repeat: int | None,
           max_repeat: int | None, against: str, on_crash: str,
           console_command: str | None, results: str, transport: str | None,
           resume: str | None, dry_run: bool) -> None:
    """Find the commit between a good and a bad kernel that changed the profile's primary
    metric: git bisect walks the range, napilab builds each commit it checks out, boots
    it on the role's host and measures it against the good endpoint (interleaved, the
    nightly gate's threshold); good, bad, or inconclusive (more repetitions, then
    skipped). Or the same over an ordered list of images.

    \b
    Examples:
      napilab bisect p.yaml -i lab.yaml --tree linux --good v6.9 --bad v6.10 --build make --dry-run
      napilab bisect p.yaml -i inv.yaml --image 6.1-rt --image 7.2-rt --good 6.1-rt --bad 7.2-rt
      napilab bisect p.yaml -i lab.yaml --resume results/p/bisect-20261206T011500Z-1a2b3c4d
    """
    from napilab.harness.bisect import git
    from napilab.harness.bisect.record import BisectLog
    from napilab.harness.bisect.study import Bisection, kernel_role
    from napilab.harness.cli.bisect_walk import Walk, check_resumable
    from napilab.harness.inventory.inventory import load_inventory
    from napilab.harness.profile.plan import bind
    from napilab.harness.profile.profile import load_profile
    from napilab.reports.nightly.thresholds import parse_thresholds

    prof = load_profile(profile)
    inv = load_inventory(inventory).with_transport(transport)
    bound = bind(prof, inv)
    if resume:
        bis = Bisection.open(resume)
        check_resumable(bis, prof)
        log = bis.log
        walked = git.Tree(log.tree)
    else:
        parse_thresholds(thresholds)  # bad input said now
        name = variant or prof.baseline
        if name not in {v.name for v in prof.variants}:
            raise InputError(f"--variant {name}: no such variant in {profile} (variants: "
                             f"{', '.join(v.name for v in prof.variants)})")
        the_role = kernel_role(prof, name, role)
        if bound.role_hosts[the_role].boot is None:
            raise InputError(f"--role {the_role}: its host {bound.role_hosts[the_role].name} has "
                             f"no `boot:` in {inventory}: napilab cannot boot it into a "
                             "candidate")
        base_repeat = repeat or max(2, prof.repeat)
        log = BisectLog(id="", profile_name=prof.name, profile=str(Path(profile).resolve()),
                        digest=prof.digest, inventory=str(Path(inventory).resolve()),
                        role=the_role, variant=name, metrics=list(metrics),
                        thresholds=list(thresholds), repeat=base_repeat,
                        max_repeat=max_repeat or 4 * base_repeat, against=against,
                        on_crash=on_crash, started=time.time())
        if max_repeat is not None and max_repeat < base_repeat:
            raise InputError(f"--max-repeat {max_repeat} is below --repeat {base_repeat}")
        if not images:  # the profile's `bisect:` fills in what the command line left out
            given = prof.bisect
            if tree is None and "tree" in given:
                tree = str(Path(profile).resolve().parent / given["tree"])
            build_command = build_command or given.get("build")
            build_image = build_image or given.get("image")
        walked, count = _source(log, good, bad, tree, build_command,
                                build_image or DEFAULT_IMAGE, images)
        if dry_run:
            click.echo(plan_text(prof, bound, log, count), nl=False)
            return
        bis = Bisection.create(results, log)
        if log.source == "images":
            walked, shas = git.image_tree(bis.dir / "list", log.images)
            log.tree = str(walked.path)
            log.good, log.bad = shas[0], shas[-1]  # the list is cut to good..bad
            bis.save()
        _say(f"napilab: bisect {bis.dir}")
    code = Walk(bis, prof, inv, walked, _say, console_command).run()
    from napilab.reports.bisect import report

    for path in report.write(bis.dir, bis.log):
        _say(f"wrote {path}")
    click.echo(report.text(bis.log), nl=False)
    sys.exit(int(code))


def _source(log: Any, good: str | None, bad: str | None, tree: str | None,
            build_command: str | None, build_image: str, images: tuple[str, ...]
            ) -> tuple[Any, int]:
    """The walked tree (or the image list) checked, the endpoints resolved; how many
    commits may be the first bad one."""
    from napilab.harness.bisect import git

    if images:
        if tree or build_command:
            raise InputError("--image is an image list: --tree and --build are for a git "
                             "range, not both")
        if len(images) < 2 or len(set(images)) != len(images):
            raise InputError("--image: at least two images, each once, oldest first")
        for option, value in (("--good", good), ("--bad", bad)):
            if value is not None and value not in images:
                raise InputError(f"{option} {value}: not an --image of the list (images: "
                                 f"{', '.join(images)})")
        first, last = images.index(good or images[0]), images.index(bad or images[-1])
        if first >= last:
            raise InputError(f"--good {images[first]} is not before --bad {images[last]} "
                             "in the --image list")
        log.source, log.images = "images", list(images[first:last + 1])
        return None, last - first
    if not good or not bad:
        raise InputError("--good and --bad: the endpoints (commits of --tree, or entries of "
                         "--image)")
    if not build_command:
        raise InputError("--build: the command that builds a commit's image (e.g. "
                         "'make -j$(nproc) bzImage'), or --image for an image list")
    walked = git.Tree(Path(tree or ".").resolve())
    if not walked.path.is_dir():
        raise InputError(f"--tree {tree}: no such directory")
    log.good, log.bad = walked.rev(good, "--good"), walked.rev(bad, "--bad")
    walked.check(log.good, log.bad)
    log.source, log.tree, log.build, log.image_path = "git", str(walked.path), \
        build_command, build_image
    return walked, walked.count(log.good, log.bad)


def _say(line: str) -> None:
    click.echo(line, err=True)


def plan_text(prof: Any, bound: Any, log: Any, count: int) -> str:
    """What `bisect --dry-run` prints: the most steps, rounds, boots and trials, the
    time they take, then one step's plan summary."""
    from napilab.harness.bisect.git import max_steps
    from napilab.harness.bisect.study import step_profile, write_profile
    from napilab.harness.engine.boots import schedule
    from napilab.harness.engine.plan_render import estimate, plan_text
    from napilab.harness.profile.plan import bind
    from napilab.harness.profile.profile import load_profile

    steps = max_steps(count)
    repeats = [log.repeat]
    while repeats[-1] * 2 <= log.max_repeat:
        repeats.append(repeats[-1] * 2)
    what = "images" if log.source == "images" else "commits"
    good, bad = ((log.images[0], log.images[-1]) if log.source == "images"
                 else (log.good[:12], log.bad[:12]))
    # a git range's images are built later: named by where they will be staged
    arms = {"good": log.images[0], "candidate": log.images[-1]} if log.source == "images" \
        else {"good": "BISECT_DIR/images/good/vmlinuz",
              "candidate": "BISECT_DIR/images/STEP/vmlinuz"}
    if log.against == "both":
        arms["bad"] = arms["candidate"]
    lines = [f"bisect: {prof.name}: {count} {what} may be the first bad one (good {good}, "
             f"bad {bad}): at most {steps} step(s) when none is skipped (each skipped one "
             "adds at most one), after the endpoints' step",
             f"each step: variant {log.variant} as {', '.join(arms)}, the candidate's "
             f"kernel booted on role {log.role} ({bound.role_hosts[log.role].name}); "
             f"gated: {', '.join(log.metrics) or 'the primary metrics'}"
             + (f", {', '.join(log.thresholds)}" if log.thresholds else ""),
             f"an inconclusive step is measured again: repeat {', '.join(map(str, repeats))}"
             f" ({len(repeats)} round(s) at most), then skipped"]
    total_trials = total_boots = 0
    seconds = 0.0
    with tempfile.TemporaryDirectory(prefix="napilab-bisect-plan-") as tmp:
        one = None
        for repeat in repeats:
            path = Path(tmp) / f"step-r{repeat}.yaml"
            write_profile(path, step_profile(prof, log.variant, log.role, arms, repeat), "")
            plan = bind(load_profile(path), bound.inventory)
            one = one or plan
            trials = plan.profile.trials()
            boots, back = schedule(plan, trials)
            n_boots = sum(len(b) for b in boots.values()) + len(back)
            total_trials += len(trials)
            total_boots += n_boots
            seconds += estimate(plan)
            lines.append(f"  round at repeat {repeat}: {len(trials)} trials, at most "
                         f"{n_boots} boots, about {estimate(plan) / 60:.1f} min")
        assert one is not None
        every = steps + 1
        lines.append(f"at most: {every} steps x {len(repeats)} round(s): "
                     f"{every * total_trials} trials, {every * total_boots} boots, about "
                     f"{every * seconds / 60:.0f} min"
                     + (" plus a build per commit" if log.source == "git" else ""))
        lines.append(f"when every step decides at repeat {log.repeat}: "
                     f"{every * len(one.profile.trials())} trials, "
                     f"about {every * estimate(one) / 60:.0f} min")
        lines.append("")
        return "\n".join(lines) + "\n" + plan_text(one, summary_only=True)
