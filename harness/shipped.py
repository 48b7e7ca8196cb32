"""The profiles that ship with napilab (profiles/ in the repository; package data
harness/profiles/ in a wheel) and the JSON Schema files beside them."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def profiles_dir() -> Path:
    """harness/profiles/ of an installed wheel, else profiles/ of the source tree (an
    editable install maps the package there without copying)."""
    installed = _HERE / "profiles"
    return installed if installed.is_dir() else _HERE.parent / "profiles"


def profile(name: str) -> Path:
    """A shipped profile by file name (`demo.yaml`)."""
    return profiles_dir() / name


def schema_file(kind: str) -> Path:
    """The schema editors read (`profile` or `inventory`), shipped beside the profiles."""
    return profiles_dir() / "schema" / f"{kind}.schema.json"
