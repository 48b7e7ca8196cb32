"""The `kernel:` section: per role, the kernel a variant's trials run on, and `boot:`,
how often a host is booted into it.

    kernel:                                   # every variant (a variant may override)
      receiver: 7.2-rt                        # an image: alias, release or path
    variants:
      Baseline: {kernel: {receiver: {image: 6.1-rt}}}
      Patched:
        kernel: {receiver: {image: 7.2-rt, append: [thread_backlog_napi]}}
    boot: per-trial                           # per-kernel (default) | per-trial

The image is found by the host's boot method (inventory `boot:`, harness.hosts.boot):
in the VM testbed's kernel cache, or on a lab host as /boot/vmlinuz-RELEASE or a path.
`append` adds words to the kernel command line; without `image` they are added to the
image the host runs (`{append: [idle=poll]}`: a reboot into the same kernel with those
words, kexec or vm only). A role without a kernel runs on its
host's own kernel (the one it had when the run started). With `per-kernel` the trials
are grouped by kernel so that each host boots once per kernel (variants sharing a kernel
stay interleaved); `per-trial` boots a fresh kernel before every trial, as seed 001's
letter does. No host is touched here: this is grammar only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from napilab.harness.errors import Written
from napilab.harness.grammar.schema import Checker, join
from napilab.harness.grammar.yamlsrc import Node, Seq
from napilab.harness.profile.setup import known_roles

KERNEL_KEYS = ("image", "append")
BOOT_MODES = ("per-kernel", "per-trial")
_WORD = re.compile(r"[^\s'\"\\$`;&|<>]+")  # a command-line word, nothing a shell reads
_IMAGE = re.compile(r"[A-Za-z0-9_.+/:=-]+")
OWN_IMAGE = "its own image"


@dataclass(frozen=True)
class KernelSpec:
    role: str
    # alias (7.2-rt), release (6.1.0-57-rt-amd64) or path; None: the image the host
    # runs (booted again with `append`)
    image: str | None
    append: tuple[str, ...] = ()  # command-line additions
    at: Written | None = field(default=None, compare=False)

    def describe(self) -> str:
        return (self.image or OWN_IMAGE) + (f" + {' '.join(self.append)}" if self.append
                                            else "")


def parse_kernel(check: Checker, node: Node, path: str, roles: Mapping[str, Any]
                 ) -> list[KernelSpec]:
    out = []
    for role, raw, role_path in known_roles(check, node, path, roles):
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            check.error(node.where(role), role_path, f"{raw!r} is a number to YAML (6.10 "
                        f"reads as 6.1): quote the kernel's name, e.g. \"{raw}\"")
            continue
        if isinstance(raw, str):
            spec = Node({"image": raw})
            spec.location = node.where(role)
            if spec.location is not None:
                spec.value_locations["image"] = spec.location
        else:
            found = check.mapping(raw, node.where(role), role_path)
            if found is None:
                continue
            spec = found
        check.keys(spec, role_path, KERNEL_KEYS)
        if "image" not in spec and not spec.get("append"):
            check.error(spec.location, role_path, "expected an image, or `append` (words "
                        "added to the command line of the image the host runs)")
            continue
        if isinstance(spec.get("image"), int | float) and not isinstance(spec["image"], bool):
            check.error(spec.where("image"), join(role_path, "image"), f"{spec['image']!r} "
                        "is a number to YAML (6.10 reads as 6.1): quote the kernel's name")
            continue
        image = check.get(spec, "image", role_path, str)
        good = image is not None or "image" not in spec  # else check.get said why
        if image is not None and not _IMAGE.fullmatch(image):
            check.error(spec.where("image"), join(role_path, "image"),
                        f"{image!r}: an image is an alias (7.2-rt), a release "
                        "(6.1.0-57-rt-amd64) or a path, without spaces or shell characters")
            good = False
        append = _append(check, spec, role_path)
        if good and append is not None:
            key = "image" if "image" in spec else "append"
            out.append(KernelSpec(role, image, append,
                                  Written(spec.where(key), join(role_path, key))))
    return out


def _append(check: Checker, spec: Node, path: str) -> tuple[str, ...] | None:
    if "append" not in spec:
        return ()
    raw = spec["append"]
    words: list[str] = []
    if isinstance(raw, str):
        words = raw.split()
    elif isinstance(raw, Seq | list) and all(isinstance(w, str) for w in raw):
        words = list(raw)
    else:
        check.error(spec.where("append"), join(path, "append"),
                    "expected a list of kernel command-line words (or one string)")
        return None
    bad = [w for w in words if not _WORD.fullmatch(w)]
    if bad:
        check.error(spec.where("append"), join(path, "append"),
                    f"{bad[0]!r}: a command-line word has no spaces, quotes or shell "
                    "characters")
        return None
    return tuple(words)
