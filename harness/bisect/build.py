"""A candidate's image: the user's build command run in the tree git bisect checked the
commit out in (on this machine, through `sh -c`, its output in the step's build.log),
then the image it leaves staged in the bisect's directory (harness.lab.kernels.stage:
the VM testbed boots it with the cache's modules of its release). An image list's entry
is a file or a name of the kernel cache, staged the same way. A build that fails, or an
image that is not a bzImage, is a reason to skip the commit, not an error of the
bisection."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from napilab.harness.errors import NapilabError
from napilab.harness.lab import kernels


@dataclass(frozen=True)
class Built:
    image: str | None  # the staged image; None: not bootable
    reason: str = ""  # why not


def build(tree: Path, command: str, image_path: str, log: Path, stage_into: Path) -> Built:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        try:
            done = subprocess.run(["sh", "-c", command], cwd=tree, stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  check=False)
        except OSError as exc:
            raise NapilabError(f"cannot run the build command: {exc.strerror}") from None
    if done.returncode != 0:
        last = (log.read_text(errors="replace").strip().splitlines() or ["(no output)"])[-1]
        return Built(None, f"the build exited {done.returncode}: {last.strip()[:200]}")
    image = tree / image_path
    if not image.is_file():
        return Built(None, f"the build left no image at {image_path}")
    return _staged(image, stage_into)


def image_of(entry: str, stage_into: Path) -> Built:
    """An image list's entry: a path, or a name of the kernel cache (6.1-rt)."""
    try:
        found = kernels.find(entry)
    except NapilabError as exc:
        return Built(None, exc.message)
    return _staged(found.image, stage_into)


def _staged(image: Path, into: Path) -> Built:
    try:
        return Built(str(kernels.stage(image, into)))
    except NapilabError as exc:
        return Built(None, f"not bootable: {exc.message}")
