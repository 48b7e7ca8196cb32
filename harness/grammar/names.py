"""The one rule by which a name written in a profile becomes a path component (the run
directory RESULTS/PROFILE/..., per-variant files): letters, digits and `_ . = + -`,
starting with a letter or digit, at most NAME_MAX characters. `../escaped`, `/etc`, an
empty name or one of 300 characters is refused at validate, before any host is
touched; the store asks the same rule again before it creates a directory."""

from __future__ import annotations

import re

NAME_MAX = 64
SAFE_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.=+-]{{0,{NAME_MAX - 1}}}")
ALLOWED = f"letters, digits and . _ = + -, starting with a letter or digit, at most " \
          f"{NAME_MAX} characters"


def unsafe(name: str) -> str | None:
    """Why NAME cannot be a path component, or None when it can."""
    if SAFE_NAME.fullmatch(name):
        return None
    shown = name if len(name) <= 80 else f"{name[:40]}... ({len(name)} characters)"
    return f"{shown!r} cannot name a directory: use {ALLOWED}"
