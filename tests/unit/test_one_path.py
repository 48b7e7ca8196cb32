"""One path per module: in a source tree napilab.harness, napilab.runners and
napilab.reports load from the top-level folders git and the docs name (a traceback says
harness/engine/engine.py, not napilab/harness/...), and a bare `import harness` (which
worked from the repository root and made a second copy of every module) is refused.
The links kept in git are the five below, for the wheel and for mypy (napilab/__init__.py
says why); no other link may point into the code."""

from __future__ import annotations

import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from napilab.harness.engine import engine
from napilab.harness.errors import InputError
from napilab.harness.store.store import load_manifest
from napilab.reports.formats import render
from napilab.runners import registry
from tests.conftest import ROOT

LINKS = {"napilab/harness", "napilab/reports", "napilab/runners", "harness/docs",
         "harness/profiles"}


def test_modules_load_from_the_folders_git_names() -> None:
    real = ROOT.resolve()
    for module, path in ((engine, "harness/engine/engine.py"),
                         (render, "reports/formats/render.py"),
                         (registry, "runners/registry.py")):
        assert module.__file__ == str(real / path)
    try:
        load_manifest(Path("/nonexistent-napilab-run"))
    except InputError:
        shown = traceback.format_exc()
    assert f'"{real / "harness/store/store.py"}"' in shown and "napilab/harness" not in shown


@pytest.mark.parametrize("bare", ["harness", "runners", "reports"])
def test_a_bare_import_of_a_top_level_folder_is_refused(bare: str) -> None:
    done = subprocess.run([sys.executable, "-c", f"import {bare}.errors"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert f"ImportError: import napilab.{bare}, not {bare}" in done.stderr


def test_the_links_in_git_are_the_five_kept() -> None:
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    links = {line.split("\t", 1)[1] for line in listed.splitlines()
             if line.startswith("120000 ")}
    assert links == LINKS
