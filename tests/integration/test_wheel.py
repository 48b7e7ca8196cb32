"""napilab as a user gets it: the wheel built from this tree, installed with pip into a
fresh venv, run from a directory that is not the source tree. `napilab init` writes
files that validate, the shipped profiles and the documentation are there (`napilab
profiles`, `napilab docs`; the wheel names its project URLs), a copied profile
validates, and (root) `napilab demo` runs the installed demo profile (with 1 s trials,
2 repetitions) on the testbed and writes its report.

The wheel is built with `build` and setuptools from the test extras (`make test`
installs them); pip installs napilab's dependencies into the fresh venv with its usual
configuration (the same indexes `make test` installs from)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli import run_napilab
from tests.conftest import ROOT, need_root

SKIP = {".venv", ".git", "build", "results", "test-artifacts", ".mypy_cache", ".ruff_cache",
        ".pytest_cache", ".hypothesis", "__pycache__"}


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path
    home: Path  # an empty working directory outside the source tree

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`napilab ARGS` of the fresh venv, in home, with nothing of the suite's venv in
        its environment."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '')}"
        return run_napilab(*args, timeout=timeout, env=env, cwd=self.home,
                           executable=self.venv / "bin" / "napilab")


def _run(*argv: str | Path, cwd: Path | None = None) -> None:
    result = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, f"{argv}: {result.stdout[-2000:]}\n{result.stderr[-2000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel")
    # A copy of the tree: building in place would leave build/ and *.egg-info here.
    source = base / "src"
    shutil.copytree(ROOT, source, ignore=lambda _, names: [n for n in names if n in SKIP
                                                          or n.endswith(".egg-info")])
    # `build` and setuptools come with the test extras (pyproject.toml): no isolated
    # build environment to download
    _run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", base / "dist",
         source)
    wheel = next((base / "dist").glob("napilab-*.whl"))
    venv = base / "venv"
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "pip", "install", "-q", "--no-compile", "--disable-pip-version-check",
         wheel)
    home = base / "home"
    home.mkdir()
    yield Installed(venv, wheel, home)


def test_the_wheel_is_self_contained(installed: Installed) -> None:
    found = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c",
         "import napilab, napilab.harness.authoring.shipped as s; print(napilab.__file__); "
         "print('\\n'.join(sorted(p.name for p in s.profiles_dir().glob('*.yaml'))))"],
        cwd=installed.home, capture_output=True, text=True, check=True).stdout.splitlines()
    assert found[0].startswith(str(installed.venv)), found[0]  # not the source tree
    assert found[1:] == sorted(p.name for p in (ROOT / "profiles").glob("*.yaml"))
    # one top-level name in site-packages: no `harness`, `reports` or `runners` of napilab's
    with zipfile.ZipFile(installed.wheel) as wheel:
        tops = {n.split("/")[0] for n in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"napilab"}, tops


def test_the_wheel_holds_the_docs_and_names_its_urls(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        headers = wheel.read(metadata).decode().partition("\n\n")[0].splitlines()
        for doc in (ROOT / "docs").glob("*.md"):
            assert wheel.read(f"napilab/harness/docs/{doc.name}") == doc.read_bytes(), doc.name
    assert sorted(n for n in names if n.startswith("napilab/harness/docs/")) == sorted(
        f"napilab/harness/docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
    urls = [h.removeprefix("Project-URL: ") for h in headers if h.startswith("Project-URL:")]
    assert [u.split(",")[0] for u in urls] == ["Homepage", "Documentation", "Source", "Issues"]


def test_profiles_and_docs_work_from_the_wheel(installed: Installed) -> None:
    listed = installed.run("profiles", "list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()[:-1]]
    assert names == sorted(p.stem for p in (ROOT / "profiles").glob("*.yaml"))
    assert "Seed 001 on a veth pair" in listed.stdout
    shown = installed.run("profiles", "show", "demo")
    assert shown.stdout == (ROOT / "profiles" / "demo.yaml").read_text()
    copied = installed.run("profiles", "copy", "demo", "copied/")
    assert copied.returncode == 0, copied.stderr
    first = (installed.home / "copied" / "demo.yaml").read_text().splitlines()[0]
    schema = Path(first.removeprefix("# yaml-language-server: $schema="))
    assert schema.is_file() and str(schema).startswith(str(installed.venv)), first
    check = installed.run("validate", "copied/demo.yaml")
    assert check.returncode == 0, check.stderr
    again = installed.run("profiles", "copy", "demo", "copied/")
    assert again.returncode == 2 and "exists; --force overwrites it" in again.stderr

    docs = installed.run("docs")
    assert docs.returncode == 0, docs.stderr
    assert [line.split()[0] for line in docs.stdout.splitlines()[:-1]] == [
        "README", *sorted(p.stem for p in (ROOT / "docs").glob("*.md"))]
    for name, source in (("profiles", ROOT / "docs" / "profiles.md"),
                         ("docs/statistics.md", ROOT / "docs" / "statistics.md"),
                         ("README", ROOT / "README.md")):
        printed = installed.run("docs", name)
        assert printed.returncode == 0 and printed.stdout == source.read_text(), name
    where = installed.run("docs", "profiles", "--path").stdout.strip()
    assert where.startswith(str(installed.venv)) and Path(where).is_file(), where


def test_init_writes_files_that_validate(installed: Installed) -> None:
    result = installed.run("init", "lab")
    assert result.returncode == 0, result.stderr
    lab = installed.home / "lab"
    assert sorted(p.name for p in lab.iterdir()) == ["inventory.yaml", "profile.yaml"]
    for name in ("profile", "inventory"):  # editors find the installed schema
        first = (lab / f"{name}.yaml").read_text().splitlines()[0]
        schema = Path(first.removeprefix("# yaml-language-server: $schema="))
        assert schema.is_file() and str(schema).startswith(str(installed.venv)), first
        assert schema.read_text() == installed.run("schema", name).stdout
    check = installed.run("validate", "lab/profile.yaml", "-i", "lab/inventory.yaml")
    assert check.returncode == 0, check.stderr
    assert "3 variant(s), 15 trial(s)" in check.stdout
    again = installed.run("init", "lab")
    assert again.returncode == 2 and "exists; --force overwrites it" in again.stderr


def test_demo_runs_from_the_wheel(installed: Installed) -> None:
    reason = need_root()
    if reason:
        pytest.skip(reason)
    # the installed demo.yaml, with short trials: what is tested is the wheel's demo path
    # (testbed, run, report from the installed package), not the ping flood's length
    shipped = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c",
         "import napilab.harness.authoring.shipped as s; print(s.profile('demo.yaml'))"],
        cwd=installed.home, capture_output=True, text=True, check=True).stdout.strip()
    assert shipped.startswith(str(installed.venv)), shipped
    short = installed.home / "demo-short.yaml"
    short.write_text(f"extends: {shipped}\nworkload: {{duration: 1}}\nrepeat: 2\n")
    result = installed.run("demo", "-o", "results", "--profile", short.name, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reports = list((installed.home / "results" / "demo").glob("*/report.html"))
    assert len(reports) == 1
    assert f"report: results/demo/{reports[0].parent.name}/report.html" in result.stdout
    assert "rps-remote vs rps-off (baseline)" in result.stdout
