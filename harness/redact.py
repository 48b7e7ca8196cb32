"""Workload environment values are secrets unless the profile says otherwise.

`env: {API_TOKEN: ...}` in a profile passes the value to the command, and nowhere else:
the manifest's copy of the profile, the raw command records (raw/.../client.json),
error messages, reports and `napilab plan` show the name with `<redacted>`. A process
spec lists the variables whose values may be shown in `show_env: [NAME, ...]`.

A value to hide travels as a `Secret` (a str): transports put the real value on the
command line they run and `shown_argv` in everything they record. Reports redact
again from the stored document, so runs stored before this rule render without
their values too. A value that comes from `matrix` is also in the variant's name,
which is not redacted.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"
NAPILAB_ENV = ("LC_ALL",)  # set by napilab itself: never a secret
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)


class Secret(str):
    """An environment value napilab passes to a command but never shows or stores."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(REDACTED)


def env_values(env: Mapping[str, Any], show: Collection[str]) -> dict[str, str]:
    """A process spec's environment: every value a Secret unless its name is in `show`."""
    return {k: str(v) if k in show else Secret(str(v)) for k, v in env.items()}


def shown_argv(argv: Sequence[str], env: Mapping[str, str] | None) -> tuple[str, ...]:
    """`argv` as napilab shows and stores it: `NAME=<redacted>` for each Secret of
    `env`."""
    hidden = {f"{k}={v}": f"{k}={REDACTED}" for k, v in (env or {}).items()
              if isinstance(v, Secret)}
    return tuple(hidden.get(word, word) for word in argv)


def brief(argv: Sequence[str], longest: int = 120) -> str:
    """`argv` as an error message names it: a word longer than `longest` characters (a
    snapshot's script, the trace collector's `@trace:PROGRAM`) as its start and size."""
    return shlex.join(word if len(word) <= longest else
                      f"{word[:40].splitlines()[0] if word[:40].strip() else ''}"
                      f"...<{len(word)} characters>" for word in argv)


def stored_argv(argv: Sequence[str], show: Collection[str]) -> list[str]:
    """A stored command line with the assignments of its `env` prefix redacted except
    napilab's own and those of `show` (for records written before values were hidden)."""
    out = list(argv)
    if "env" not in out:
        return out
    for i in range(out.index("env") + 1, len(out)):
        match = _ASSIGNMENT.fullmatch(out[i])
        if match is None:
            break
        if match[1] not in NAPILAB_ENV and match[1] not in show:
            out[i] = f"{match[1]}={REDACTED}"
    return out


def _process(spec: Any, inherited: Collection[str]) -> tuple[Any, set[str]]:
    """A workload side (`client`/`server` mapping) with its env values redacted, and the
    names it shows."""
    if not isinstance(spec, dict):
        return spec, set(inherited)
    listed = spec.get("show_env")
    show = {str(n) for n in listed} if isinstance(listed, list) else set(inherited)
    env = spec.get("env")
    if isinstance(env, dict):
        spec["env"] = {k: v if k in show else REDACTED for k, v in env.items()}
    return spec, show


def document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A profile document (resolved, as the manifest stores it) with the workload env
    values redacted, in the base workload and in every variant's overlay."""
    out = copy.deepcopy(dict(doc))
    base_show: dict[str, set[str]] = {}
    workload = out.get("workload")
    if isinstance(workload, dict):
        for side, spec in _sides(workload):
            base_show[side] = _process(spec, ())[1]
    variants = out.get("variants")
    for overlay in (variants.values() if isinstance(variants, dict) else ()):
        over = overlay.get("workload") if isinstance(overlay, dict) else None
        if isinstance(over, dict):
            for side, spec in _sides(over):
                _process(spec, base_show.get(side, set()))
    return out


def _sides(workload: dict[str, Any]) -> list[tuple[str, Any]]:
    """(name, mapping) of each process of a workload: `client`, `server` and each of
    `clients` (`clients.ROLE`); _process redacts each in place."""
    out: list[tuple[str, Any]] = [(side, workload[side]) for side in ("client", "server")
                                  if side in workload]
    several = workload.get("clients")
    if isinstance(several, dict):
        out += [(f"clients.{role}", spec) for role, spec in several.items()]
    return out


def shown_names(doc: Mapping[str, Any]) -> set[str]:
    """Every variable a document lets be shown (any `show_env`)."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            listed = node.get("show_env")
            if isinstance(listed, list):
                names.update(str(n) for n in listed)
            for value in node.values():
                walk(value)

    walk(dict(doc))
    return names
