"""The tool cache (harness.lab.tools): sid's netperf on sid's libc. Its path layout, the
patchelf call, when a fetch is needed at all, which links it makes, and the own-directory
apt options it shares with the kernel cache (harness.lab.debian). No network: apt is
replaced where a test reaches it, and "programs" are shell scripts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from napilab.harness.errors import NapilabError
from napilab.harness.lab import debian, kernels, tools
from tests.cli import run_cli

VERSION = "2.7.0+git20210121.3bc455b+ds-5"
OK = "#!/bin/sh\necho 'Netperf version 2.7.1'\n"
BROKEN = "#!/bin/sh\necho 'version GLIBC_2.38 not found' >&2\nexit 1\n"


def fake_install(root: Path, version: str = VERSION, script: str = OK,
                 meta: bool = True, loader: bool = True, current: bool = True) -> tools.Tree:
    """A tree as `fetch` leaves it, its programs scripts that answer -V."""
    tree = tools.Tree(tools.version_dir(root, version))
    tree.libdir.mkdir(parents=True)
    if loader:
        tree.loader.write_bytes(b"\x7fELF")
    for name in tools.PROGRAMS:
        program = tree.program(name)
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text(script)
        program.chmod(0o755)
    if meta:
        tree.meta.write_text(json.dumps({"version": version, "runtime": {"libc6": "2.43-7"}}))
    if current:
        (root / tools.PACKAGE / tools.CURRENT).symlink_to(tree.path.name)
    return tree


# -- the layout ------------------------------------------------------------------------


def test_a_version_has_its_own_tree_with_sids_loader_and_lib_dir(tmp_path: Path) -> None:
    tree = tools.Tree(tools.version_dir(tmp_path, VERSION))
    base = tmp_path / "netperf" / VERSION
    assert tree.path == base
    assert tree.libdir == base / "usr/lib/x86_64-linux-gnu"
    assert tree.loader == base / "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
    assert tree.program("netserver") == base / "usr/bin/netserver"
    assert tree.meta == base / "napilab.json"


def test_an_epoch_becomes_a_file_name_and_a_path_is_refused(tmp_path: Path) -> None:
    assert tools.version_dir(tmp_path, "1:2.7-1") == tmp_path / "netperf" / "1_2.7-1"
    for bad in ("", "../2.7", "a/b", ".hidden", " 2.7"):
        with pytest.raises(NapilabError, match="not a directory name"):
            tools.version_dir(tmp_path, bad)


def test_tools_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAPILAB_TOOLS", raising=False)
    assert tools.tools_dir() == Path("/var/lib/napilab/tools")
    monkeypatch.setenv("NAPILAB_TOOLS", "/srv/t")
    assert tools.tools_dir() == Path("/srv/t")


def test_patchelf_sets_the_unpacked_interpreter_and_runpath(tmp_path: Path) -> None:
    tree = tools.Tree(tools.version_dir(tmp_path, VERSION))
    lib = f"{tmp_path}/netperf/{VERSION}/usr/lib/x86_64-linux-gnu"
    assert tools.patchelf_argv(tree.program("netperf"), tree) == [
        "patchelf", "--set-interpreter", f"{lib}/ld-linux-x86-64.so.2",
        "--set-rpath", lib, f"{tmp_path}/netperf/{VERSION}/usr/bin/netperf"]


def test_control_fields_of_dpkg_deb() -> None:
    out = "Package: netperf\nVersion: 2.7.0+git20210121.3bc455b+ds-5\n"
    assert tools.control_fields(out) == {"Package": "netperf", "Version": VERSION}
    assert tools.control_fields("Description: x\n more: text\n") == {"Description": "x"}


# -- what is installed -----------------------------------------------------------------


def test_nothing_fetched_is_not_installed(tmp_path: Path) -> None:
    assert tools.installed(tmp_path) is None
    assert not tools.up_to_date(None)


@pytest.mark.parametrize("missing", ["meta", "loader", "current"])
def test_an_unfinished_tree_is_not_installed(tmp_path: Path, missing: str) -> None:
    fake_install(tmp_path, **{missing: False})
    assert tools.installed(tmp_path) is None


def test_a_tree_without_a_program_is_not_installed(tmp_path: Path) -> None:
    tree = fake_install(tmp_path)
    tree.program("netserver").unlink()
    assert tools.installed(tmp_path) is None


def test_a_complete_tree_is_installed_and_up_to_date_when_its_programs_run(
        tmp_path: Path) -> None:
    tree = fake_install(tmp_path)
    found = tools.installed(tmp_path)
    assert found == tools.Install(VERSION, tree, {"libc6": "2.43-7"})
    assert tools.up_to_date(found)
    assert not tools.up_to_date(found, check=lambda p: p.name != "netserver")
    assert found.describe() == (f"netperf {VERSION} (sid, on libc6 2.43-7): "
                                f"{tree.program('netperf')}, {tree.program('netserver')}")


def test_works_is_the_exit_status_of_dash_v(tmp_path: Path) -> None:
    tree = fake_install(tmp_path, script=BROKEN)
    assert not tools.works(tree.program("netperf"))
    assert not tools.works(tmp_path / "no-such-program")
    tree.program("netperf").write_text(OK)
    assert tools.works(tree.program("netperf"))


# -- the links -------------------------------------------------------------------------


def test_links_are_kept_made_or_skipped(tmp_path: Path) -> None:
    root, bindir = tmp_path / "tools", tmp_path / "bin"
    bindir.mkdir()
    target = fake_install(root).program("netperf")
    other = tmp_path / "usr-bin-netperf"

    def never(path: Path) -> bool:
        pytest.fail(f"{path} needs no check")

    plan = tools.link_plan("netperf", target, root, bindir, None, check=never)
    assert (plan.action, plan.path) == ("link", bindir / "netperf")
    # another netperf first on PATH: linked over only when it does not work
    plan = tools.link_plan("netperf", target, root, bindir, str(other), check=lambda p: True)
    assert plan.action == "skip" and f"{other} works" in plan.describe()
    plan = tools.link_plan("netperf", target, root, bindir, str(other), check=lambda p: False)
    assert plan.action == "link"

    (bindir / "netperf").symlink_to(target)
    plan = tools.link_plan("netperf", target, root, bindir, str(bindir / "netperf"),
                           check=never)
    assert plan.action == "keep" and plan.describe() == f"{bindir}/netperf -> {target}"


def test_napilabs_older_link_is_replaced_and_a_foreign_file_left_alone(
        tmp_path: Path) -> None:
    root, bindir = tmp_path / "tools", tmp_path / "bin"
    bindir.mkdir()
    target = fake_install(root).program("netperf")
    old = root / "netperf" / "2.6.0-1" / "usr/bin/netperf"
    (bindir / "netperf").symlink_to(old)  # dangling: that version is gone
    # our own link first on PATH does not count as "another netperf that works"
    plan = tools.link_plan("netperf", target, root, bindir, str(bindir / "netperf"),
                           check=lambda p: True)
    assert plan.action == "link"
    (bindir / "netperf").unlink()
    (bindir / "netperf").write_text(BROKEN)
    plan = tools.link_plan("netperf", target, root, bindir, None, check=lambda p: False)
    assert plan.action == "skip" and "not napilab's" in plan.reason
    (bindir / "netperf").unlink()
    (bindir / "netperf").symlink_to(tmp_path / "elsewhere")
    plan = tools.link_plan("netperf", target, root, bindir, None, check=lambda p: False)
    assert plan.action == "skip"


# -- the fetch -------------------------------------------------------------------------


def no_apt(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"apt reached: {args}")


def test_fetch_of_a_working_install_needs_no_apt_and_makes_the_links_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, bindir = tmp_path / "tools", tmp_path / "bin"
    tree = fake_install(root)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(debian, "apt_options", no_apt)
    monkeypatch.setattr(debian, "run", no_apt)
    monkeypatch.setenv("PATH", str(bindir))
    install, links = tools.fetch(root, bindir, say=no_apt)
    assert install.tree == tree
    assert [(link.action, link.path) for link in links] == [
        ("link", bindir / "netperf"), ("link", bindir / "netserver")]
    for name in tools.PROGRAMS:
        assert os.readlink(bindir / name) == str(tree.program(name))
    _, again = tools.fetch(root, bindir, say=no_apt)
    assert [link.action for link in again] == ["keep", "keep"]


def test_fetch_refetches_a_tree_whose_programs_fail(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "tools"
    fake_install(root, script=BROKEN)  # e.g. sid's netperf before patchelf: GLIBC_2.38
    fetched = []

    def refetch(where: Path, say: object) -> tools.Install:
        fetched.append(where)
        raise NapilabError("stop here")

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(tools, "_fetch", refetch)
    with pytest.raises(NapilabError, match="stop here"):
        tools.fetch(root, tmp_path / "bin")
    assert fetched == [root]


def test_fetch_needs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(NapilabError, match="needs root"):
        tools.fetch(tmp_path, tmp_path / "bin")


def test_cli_says_how_to_fetch_when_nothing_is_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NAPILAB_TOOLS", str(tmp_path))
    code, out, err = run_cli(capsys, "testbed", "tools")
    assert code == 0, out + err
    assert out + err == f"no netperf in {tmp_path}; `napilab testbed tools --fetch`\n"


# -- the shared apt options ------------------------------------------------------------


def test_sid_lists_live_in_the_caches_own_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(debian, "run", lambda argv, cwd=None: calls.append(argv))
    assert debian.apt_options(tmp_path, "default") == [] and calls == []
    options = debian.apt_options(tmp_path, "sid")
    apt = tmp_path / ".apt"
    assert f"-oDir::Etc::sourcelist={apt}/sources.list" in options
    assert f"-oDir::State::Lists={apt}/lists" in options
    assert "-oDir::Etc::sourceparts=-" in options
    assert (apt / "sources.list").read_text() == debian.SID_SOURCE
    assert calls == [["apt-get", "-q", *options, "update"]]
    with pytest.raises(NapilabError, match="suite 'bookworm'"):
        debian.apt_options(tmp_path, "bookworm")
    assert kernels.SUITES == debian.SUITES == ("default", "sid")
