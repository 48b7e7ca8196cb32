"""git bisect does the walking: napilab marks each commit it measured (`git bisect
good|bad|skip SHA`) and reads what git checks out next, or its answer. napilab's own
record (bisect.json) is the truth: a resumed bisection resets git's and replays every
verdict recorded (`git bisect start BAD GOOD`, then one mark per step), so a kill
between recording a verdict and telling git loses nothing.

An ordered list of kernel images is walked the same way: a tree of its own in the
bisect's directory, one commit per image (the file `image` names it), so that skipped
images are handled by git's own rules too, and napilab has no second bisection
algorithm.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from napilab.harness.errors import InputError, NapilabError

IMAGE_FILE = "image"  # an image list's tree: the file each commit names its image in
_SHA = re.compile(r"\b([0-9a-f]{40})\b")
_ENV = {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_AUTHOR_NAME": "napilab",
        "GIT_AUTHOR_EMAIL": "napilab@localhost", "GIT_COMMITTER_NAME": "napilab",
        "GIT_COMMITTER_EMAIL": "napilab@localhost"}


@dataclass(frozen=True)
class Next:
    """What git bisect said after a mark: a commit to test (checked out), or the answer."""

    commit: str | None = None  # to test next
    first_bad: str | None = None  # the answer
    candidates: tuple[str, ...] = ()  # skips left these: the first bad is one of them
    text: str = ""

    @property
    def done(self) -> bool:
        return self.commit is None


class Tree:
    """A git work tree that git bisect walks."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True,
                                  text=True, env={**os.environ, **_ENV}, check=False)
        except FileNotFoundError:
            raise NapilabError("git not found", hint="apt-get install git") from None
        if check and done.returncode != 0:
            raise NapilabError(f"git {' '.join(args)} in {self.path} exited "
                               f"{done.returncode}: {(done.stderr or done.stdout).strip()}")
        return done

    def rev(self, name: str, option: str) -> str:
        """The full sha of `name`; InputError naming the option when git has none."""
        done = self.git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False)
        if done.returncode != 0:
            raise InputError(f"{option} {name}: no such commit in {self.path}",
                             hint="a sha, tag or branch of the tree (`git log --oneline`)")
        return done.stdout.strip()

    def subject(self, sha: str) -> str:
        return self.git("log", "-1", "--format=%s", sha).stdout.strip()

    def check(self, good: str, bad: str) -> None:
        """The tree is a git work tree, good is an ancestor of bad, and its tracked files
        are unchanged (git bisect checks commits out)."""
        if self.git("rev-parse", "--is-inside-work-tree", check=False).returncode != 0:
            raise InputError(f"--tree {self.path}: not a git work tree")
        if self.git("merge-base", "--is-ancestor", good, bad, check=False).returncode != 0:
            raise InputError(f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}",
                             hint="git bisect walks from an older good commit to a newer "
                                  "bad one")
        changed = self.git("status", "--porcelain", "--untracked-files=no").stdout.strip()
        if changed:
            raise InputError(f"--tree {self.path} has changes to tracked files: "
                             f"{changed.splitlines()[0].strip()}",
                             hint="commit or stash them: git bisect checks commits out")

    def count(self, good: str, bad: str) -> int:
        """Commits that may be the first bad one: good..bad, bad included."""
        return int(self.git("rev-list", "--count", bad, f"^{good}").stdout.strip())

    # -- git bisect ---------------------------------------------------------------------

    def start(self, good: str, bad: str, marks: Sequence[tuple[str, str]] = ()) -> Next:
        """A fresh `git bisect start BAD GOOD` (any bisection of the tree reset first),
        then every recorded (verdict, sha); what git said after the last."""
        self.git("bisect", "reset", check=False)
        done = self.git("bisect", "start", bad, good)
        out = done.stdout
        for verdict, sha in marks:
            out = self._mark(verdict, sha)
        return self.parse(out)

    def mark(self, verdict: str, sha: str) -> Next:
        """`git bisect good|bad|skip SHA`, and what git said."""
        return self.parse(self._mark(verdict, sha))

    def _mark(self, verdict: str, sha: str) -> str:
        done = self.git("bisect", verdict, sha, check=False)
        if done.returncode != 0 and "could be any of" not in done.stdout:
            # git says "We cannot bisect more!" (exit 2) when only skipped commits are left
            raise NapilabError(f"git bisect {verdict} {sha} in {self.path} exited "
                               f"{done.returncode}: {(done.stderr or done.stdout).strip()}")
        return done.stdout

    def parse(self, out: str) -> Next:
        """git bisect's answer, or the commit it checked out (HEAD)."""
        lines = out.strip().splitlines()
        for i, line in enumerate(lines):
            if line.endswith(" is the first bad commit"):
                return Next(first_bad=line.split()[0], text="\n".join(lines[i:]))
            if line.startswith("The first bad commit could be any of"):
                shas = tuple(m.group(1) for ln in lines[i + 1:] if (m := _SHA.match(ln)))
                return Next(candidates=shas, text="\n".join(lines))
        head = self.git("rev-parse", "HEAD").stdout.strip()
        return Next(commit=head, text="\n".join(lines))

    def reset(self) -> None:
        """The tree back on the commit it was on before the bisection."""
        self.git("bisect", "reset", check=False)


def max_steps(count: int) -> int:
    """Steps git bisect takes at most to name one of `count` commits that may be the
    first bad one, when no commit is skipped (each skip can add one)."""
    return math.ceil(math.log2(count)) if count > 1 else 0


def image_tree(path: Path, images: Sequence[str]) -> tuple[Tree, list[str]]:
    """The image list as a tree of its own: one commit per image, oldest first; the
    commits' shas in the list's order. Made once; found again on resume."""
    tree = Tree(path)
    if (path / ".git").is_dir():
        shas = tree.git("rev-list", "--reverse", "HEAD").stdout.split()
        if len(shas) != len(images):
            raise InputError(f"{path}: its image list has {len(shas)} images, not "
                             f"{len(images)}")
        return tree, shas
    path.mkdir(parents=True)
    tree.git("init", "-q")
    shas = []
    for image in images:
        (path / IMAGE_FILE).write_text(image + "\n")
        tree.git("add", IMAGE_FILE)
        tree.git("commit", "-q", "-m", image)
        shas.append(tree.git("rev-parse", "HEAD").stdout.strip())
    return tree, shas


def checked_out_image(tree: Tree) -> str:
    return (tree.path / IMAGE_FILE).read_text().strip()
