"""The profiles that ship with napilab, and the JSON Schema files beside them.

They live in the repository's profiles/; harness/profiles is a symlink to it, which
the wheel installs as package data (a real directory there)."""

from __future__ import annotations

from pathlib import Path

PROFILES = Path(__file__).resolve().parent.parent / "profiles"


def profiles_dir() -> Path:
    return PROFILES


def profile(name: str) -> Path:
    """A shipped profile by file name (`demo.yaml`)."""
    return PROFILES / name


def schema_file(kind: str) -> Path:
    """The schema editors read (`profile` or `inventory`), shipped beside the profiles."""
    return PROFILES / "schema" / f"{kind}.schema.json"
