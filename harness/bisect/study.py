"""A bisection on disk: its directory, its record, the profile of each step.

    RESULTS/PROFILE/bisect-<UTC time>-<id>/
      bisect.json        the record (harness.bisect.record), written and fsynced before
                         each step's boot and after each round
      list/              an image list's own git tree (harness.bisect.git)
      images/STEP/       each candidate's image, staged (lib/modules/RELEASE/vmlinuz)
      steps/NN-SHORT/    profile.yaml (the step as a profile `napilab run` takes),
                         build.log, console-HOST.log (each boot's console, kept)
      runs/              every step's napilab runs (`napilab report` any of them)
      bisect.txt, bisect.md, bisect.html, bisect-report.json   the reports

A step is an ordinary napilab run of the profile's variant (`--variant`, the baseline
by default) twice over: `good`, booted into the good endpoint's image, and `candidate`,
into the step's (and `bad` with `--against both`), on the role's host, with the
profile's workload, collectors and `boot:` (per-kernel: one boot per kernel and step).
"""

from __future__ import annotations

import copy
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from napilab.harness.bisect.record import BisectLog, Step
from napilab.harness.errors import InputError
from napilab.harness.records import codec
from napilab.harness.store.store import atomic_write

STATE = "bisect.json"
GOOD, CANDIDATE, BAD = "good", "candidate", "bad"  # the variants of a step's profile


class Bisection:
    def __init__(self, directory: Path, log: BisectLog) -> None:
        self.dir = directory
        self.log = log

    @classmethod
    def create(cls, results: str | Path, log: BisectLog) -> Bisection:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        # absolute: staged images are booted by their path (vng runs in /)
        directory = Path(results).resolve() / log.profile_name / \
            f"bisect-{stamp}-{secrets.token_hex(4)}"
        directory.mkdir(parents=True)
        log.id = directory.name
        found = cls(directory, log)
        found.save()
        return found

    @classmethod
    def open(cls, directory: str | Path) -> Bisection:
        log = codec.read_state(directory, STATE, BisectLog, "a bisection",
                               "`napilab bisect PROFILE -i INV --good G --bad B` starts one")
        return cls(Path(directory).resolve(), log)

    def save(self) -> None:
        """bisect.json on disk, fsynced, and the rename too (the directory fsynced): a
        power cut or a kernel that takes the host down right after finds it."""
        atomic_write(self.dir / STATE, codec.encode(self.log, indent=1) + b"\n")
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @property
    def runs(self) -> Path:
        return self.dir / "runs"

    def step_dir(self, step: Step) -> Path:
        return self.dir / "steps" / f"{step.number:02d}-{step.commit[:12]}"

    def image_dir(self, step: Step) -> Path:
        return self.dir / "images" / f"{step.number:02d}-{step.commit[:12]}"

    def images_of(self, commit: str) -> str | None:
        """The image a commit's step staged (an endpoint's, for the steps after it)."""
        return next((s.image for s in self.log.steps if s.commit == commit and s.image),
                    None)


def kernel_role(prof: Any, variant: str, role: str | None) -> str:
    """The role whose host boots the candidates: `--role`, else the one role the
    variant (or the profile) gives a kernel."""
    roles = sorted({k.role for k in prof.variant(variant).kernels})
    if role is not None:
        if role not in prof.roles:
            raise InputError(f"--role {role}: no such role in {prof.path} (roles: "
                             f"{', '.join(sorted(prof.roles))})")
        return str(role)
    if len(roles) == 1:
        return str(roles[0])
    raise InputError(f"--role: variant {variant} of {prof.path} gives "
                     + (f"roles {', '.join(roles)} a kernel" if roles else "no role a kernel")
                     + ": say which role's host boots the candidates",
                     hint=f"--role ROLE, one of {', '.join(sorted(prof.roles))}")


def step_profile(prof: Any, variant: str, role: str, images: Mapping[str, str],
                 repeat: int) -> dict[str, Any]:
    """The profile of one step: the variant's overlay once per image (IMAGES: variant
    name -> image), each booting ROLE's host into its image; nothing else compared."""
    doc: dict[str, Any] = _plain(prof.document)
    overlay = doc.get("variants", {}).get(variant, {}) or {}
    variants = {}
    for name, image in images.items():
        mine = copy.deepcopy(overlay)
        mine.pop("group", None)
        kernel = dict(mine.get("kernel") or {})
        spec = kernel.get(role)
        spec = dict(spec) if isinstance(spec, Mapping) else {}
        spec["image"] = image
        kernel[role] = spec
        mine["kernel"] = kernel
        mine["description"] = f"napilab bisect: {variant} on {image}"
        variants[name] = mine
    for key in ("matrix", "tune", "baseline", "extends"):
        doc.pop(key, None)
    if isinstance(doc.get("report"), dict):
        doc["report"].pop("columns", None)
    doc.update(variants=variants, repeat=repeat)
    return doc


def write_profile(path: Path, doc: dict[str, Any], head: str) -> None:
    atomic_write(path, head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


def _plain(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_plain(v) for v in node]
    return node


def boots_of(run_dir: Path) -> int:
    """The boots a step's run made, from its manifest: each time the kernel a trial ran
    on (release and version, as read back) differs from the one before it, starting from
    the host's own, and once more to boot back when the last differs from its own. A
    boot into the kernel the host already runs is not made (the kernel knob compares
    release and version), so it is not counted."""
    from napilab.harness.knobs.kinds.kernel import loads as kernel_value
    from napilab.harness.store.store import load_manifest

    manifest = load_manifest(run_dir)
    running: tuple[str, str] | None = None
    own: tuple[str, str] | None = None
    boots = 0
    for trial in manifest.trials:
        change = next((c for c in trial.settings or () if c.kind == "kernel"), None)
        if change is None or not change.effective:
            continue
        original, now = kernel_value(change.original or "{}"), kernel_value(change.effective)
        if own is None:
            own = running = (original.get("release", ""), original.get("version", ""))
        seen = (now.get("release", ""), now.get("version", ""))
        if seen != running or manifest.profile.document.get("boot") == "per-trial":
            boots += 1
        running = seen
    return boots + (1 if running is not None and running != own else 0)
