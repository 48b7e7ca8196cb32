"""Debian's apt for the lab's caches (kernels.py, tools.py): a suite's package lists in a
directory of the cache's own, so the machine's apt state is not touched.

The machine's default suite is its own apt configuration (no options). Debian's unstable
suite (`sid`) has its sources.list, lists and package cache under ROOT/.apt, passed as
`-o Dir::Etc::sourcelist=... -o Dir::State::Lists=...` to every apt-get and apt-cache.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from napilab.harness.errors import NapilabError

SUITES = ("default", "sid")
SID_SOURCE = ("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
              "http://deb.debian.org/debian sid main\n")


def apt_options(root: Path, suite: str) -> list[str]:
    """The apt options that make apt-get and apt-cache read `suite`'s lists; for sid the
    lists are kept under ROOT/.apt and updated now (`apt-get update`)."""
    if suite == "default":
        return []
    if suite != "sid":
        raise NapilabError(f"suite {suite!r}: expected one of {list(SUITES)}")
    apt = root / ".apt"
    lists = apt / "lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "cache").mkdir(exist_ok=True)
    (apt / "sources.list").write_text(SID_SOURCE)
    options = [f"-oDir::Etc::sourcelist={apt / 'sources.list'}", "-oDir::Etc::sourceparts=-",
               f"-oDir::State::Lists={lists}", f"-oDir::Cache={apt / 'cache'}",
               "-oDir::Cache::pkgcache=", "-oDir::Cache::srcpkgcache=",
               "-oAPT::Sandbox::User=root"]
    run(["apt-get", "-q", *options, "update"])
    return options


def run(argv: list[str], cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run an apt or dpkg command non-interactively; a failure is a NapilabError with the
    last lines of its output."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env,
                          check=False, timeout=900)
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        raise NapilabError(f"`{' '.join(argv[:2])} ... {argv[-1]}` exited {proc.returncode}: "
                           + " / ".join(tail))
    return proc
