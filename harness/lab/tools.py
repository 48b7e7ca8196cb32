"""Workload tools Debian 12 lacks, taken from Debian's unstable suite (sid) and run on
sid's own C library: the tool cache. netperf (netperf and netserver) is its one tool.

    /var/lib/napilab/tools/                     ($NAPILAB_TOOLS overrides)
      .apt/                                     sid's package lists (harness.lab.debian)
      netperf/VERSION/                          sid's netperf and libc6, `dpkg-deb -x`
        usr/bin/netperf, usr/bin/netserver      interpreter and RUNPATH set by patchelf
        usr/lib/x86_64-linux-gnu/               sid's ld-linux-x86-64.so.2, libc.so.6, ...
        napilab.json                            package, version, suite, the debs
      netperf/current -> VERSION                made last: that tree is complete
    /usr/local/bin/netperf   -> /var/lib/napilab/tools/netperf/VERSION/usr/bin/netperf
    /usr/local/bin/netserver -> /var/lib/napilab/tools/netperf/VERSION/usr/bin/netserver

sid's netperf needs a newer glibc (2.38) than Debian 12 has (2.36). `patchelf
--set-interpreter` makes each program start with the unpacked sid loader and
`--set-rpath` (DT_RUNPATH) makes that loader take libc.so.6 and libm.so.6 from the
unpacked lib dir, so the programs run natively on sid's libc; the machine's own libc and
apt state are not touched. The links are not made where a working netperf (`netperf -V`
exits 0) is already on PATH, nor over a file napilab did not make. When `current` names
a tree whose programs work, `fetch` changes nothing but the links: no apt, no network.
VM guests see the machine's root file system, these paths included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from napilab.harness.errors import InputError, NapilabError
from napilab.harness.lab import debian
from napilab.harness.records import codec
from napilab.harness.records.codec import Document

DEFAULT_DIR = "/var/lib/napilab/tools"
BIN_DIR = Path("/usr/local/bin")
PACKAGE = "netperf"
RUNTIME = ("libc6",)  # the packages the programs run on, unpacked with them
PROGRAMS = ("netperf", "netserver")
SUITE = "sid"
LIBDIR = "usr/lib/x86_64-linux-gnu"
LOADER = "ld-linux-x86-64.so.2"
CURRENT = "current"


def tools_dir() -> Path:
    return Path(os.environ.get("NAPILAB_TOOLS", DEFAULT_DIR))


# -- the layout ------------------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    """One unpacked version: ROOT/netperf/VERSION."""

    path: Path

    @property
    def libdir(self) -> Path:
        return self.path / LIBDIR

    @property
    def loader(self) -> Path:
        return self.libdir / LOADER

    @property
    def meta(self) -> Path:
        return self.path / "napilab.json"

    def program(self, name: str) -> Path:
        return self.path / "usr" / "bin" / name


def version_dir(root: Path, version: str) -> Path:
    """The tree of a netperf version: a Debian version is a file name but for its epoch's
    colon (`1:2.7-1` -> `1_2.7-1`)."""
    if not version or "/" in version or version.startswith(".") or version != version.strip():
        raise NapilabError(f"{PACKAGE} version {version!r} is not a directory name")
    return root / PACKAGE / version.replace(":", "_")


def patchelf_argv(program: Path, tree: Tree) -> list[str]:
    """The patchelf call that makes `program` start with the tree's loader and load its
    libraries from the tree's lib dir (DT_RUNPATH, patchelf's default for --set-rpath)."""
    return ["patchelf", "--set-interpreter", str(tree.loader), "--set-rpath",
            str(tree.libdir), str(program)]


def control_fields(text: str) -> dict[str, str]:
    """`dpkg-deb -f DEB Package Version`'s output as a dict."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key and not key[0].isspace():
            fields[key.strip()] = value.strip()
    return fields


# -- what is installed -----------------------------------------------------------------


class ToolMeta(Document):
    """TREE/napilab.json: what a fetched tool tree holds (written last: a tree without
    it did not finish)."""

    WHAT = "a fetched tool's napilab.json"
    VERSION = 1

    version: str
    package: str = ""
    suite: str = ""
    runtime: dict[str, str] = msgspec.field(default_factory=dict)  # package -> version
    debs: list[str] = msgspec.field(default_factory=list)
    interpreter: str = ""
    runpath: str = ""


@dataclass(frozen=True)
class Install:
    version: str
    tree: Tree
    runtime: dict[str, str]  # package -> version, e.g. libc6 -> 2.43-7

    def describe(self) -> str:
        libs = ", ".join(f"{p} {v}" for p, v in self.runtime.items())
        return (f"{PACKAGE} {self.version} ({SUITE}, on {libs}): "
                + ", ".join(str(self.tree.program(p)) for p in PROGRAMS))


def installed(root: Path | None = None) -> Install | None:
    """The tree `current` names, when it is complete: its napilab.json, both programs and
    the loader they start with. None otherwise (nothing fetched, or a fetch that did not
    finish)."""
    root = root or tools_dir()
    current = root / PACKAGE / CURRENT
    if not current.is_symlink():
        return None
    tree = Tree(root / PACKAGE / os.readlink(current))
    try:
        meta = codec.read(tree.meta, ToolMeta)
    except (OSError, InputError):
        return None
    if not tree.loader.is_file() or not all(tree.program(p).is_file() for p in PROGRAMS):
        return None
    return Install(meta.version, tree, dict(meta.runtime))


def works(program: Path | str) -> bool:
    """`PROGRAM -V` exits 0 (netperf and netserver print their version so)."""
    try:
        proc = subprocess.run([str(program), "-V"], capture_output=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def up_to_date(install: Install | None, check: Callable[[Path], bool] = works) -> bool:
    """The "already done" decision: a complete tree whose programs run. Then `fetch`
    needs no apt and no network."""
    return install is not None and all(check(install.tree.program(p)) for p in PROGRAMS)


# -- the links -------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    path: Path  # BIN_DIR/NAME
    target: Path
    action: str  # "keep" (already so), "link" (to make or replace), "skip"
    reason: str = ""

    def describe(self) -> str:
        if self.action == "skip":
            return f"{self.path}: not linked: {self.reason}"
        return f"{self.path} -> {self.target}"


def _into(path: Path, root: Path) -> bool:
    """`path` is, or is a symlink into, the tool cache."""
    real = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    return real == base or base in real.parents


def link_plan(name: str, target: Path, root: Path, bindir: Path, on_path: str | None,
              check: Callable[[Path], bool] = works) -> Link:
    """What to do with BINDIR/NAME: keep it when it already points at `target`; skip it
    when the NAME first on PATH is another one that works, or when BINDIR/NAME is a file
    or link napilab did not make; else make (or replace napilab's older) link."""
    link = bindir / name
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return Link(link, target, "keep")
    if on_path is not None and not _into(Path(on_path), root) and check(Path(on_path)):
        return Link(link, target, "skip", f"{on_path} works (`{name} -V` exits 0)")
    if (link.is_symlink() or link.exists()) and not (link.is_symlink() and _into(link, root)):
        return Link(link, target, "skip", f"{link} is not napilab's: left alone")
    return Link(link, target, "link")


def links(install: Install, root: Path | None = None, bindir: Path = BIN_DIR,
          check: Callable[[Path], bool] = works) -> list[Link]:
    root = root or tools_dir()
    return [link_plan(p, install.tree.program(p), root, bindir, shutil.which(p), check)
            for p in PROGRAMS]


def _make_link(link: Link) -> None:
    staged = link.path.with_name(f".{link.path.name}.napilab")
    try:
        link.path.parent.mkdir(parents=True, exist_ok=True)
        if staged.is_symlink() or staged.exists():
            staged.unlink()
        staged.symlink_to(link.target)
        os.replace(staged, link.path)
    except OSError as exc:
        raise NapilabError(f"cannot link {link.path}: {exc.strerror}") from None


# -- the fetch -------------------------------------------------------------------------


def fetch(root: Path | None = None, bindir: Path = BIN_DIR,
          say: Callable[[str], object] = print) -> tuple[Install, list[Link]]:
    """Download sid's netperf and libc6, unpack them, point the programs at the unpacked
    libc (patchelf) and link them into BINDIR; a working install is kept as it is."""
    root = root or tools_dir()
    if os.geteuid() != 0:
        raise NapilabError("fetching netperf needs root (apt-get download, /usr/local/bin)")
    install = installed(root)
    if not up_to_date(install):
        install = _fetch(root, say)
    assert install is not None
    planned = links(install, root, bindir)
    for link in planned:
        if link.action == "link":
            _make_link(link)
    return install, planned


def _fetch(root: Path, say: Callable[[str], object]) -> Install:
    for tool in ("apt-get", "dpkg-deb", "patchelf"):
        if shutil.which(tool) is None:
            raise NapilabError(f"{tool} not found", hint="Debian's apt, dpkg and patchelf")
    try:
        (root / PACKAGE).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NapilabError(f"cannot make {root / PACKAGE}: {exc.strerror}") from None
    options = debian.apt_options(root, SUITE)
    packages = [PACKAGE, *RUNTIME]
    say(f"napilab: fetching {' '.join(packages)} ({SUITE})")
    with tempfile.TemporaryDirectory(dir=root / PACKAGE, prefix=".fetch-") as tmp:
        debian.run(["apt-get", "-q", *options, "download", *packages], cwd=tmp)
        versions: dict[str, str] = {}
        debs = sorted(Path(tmp).glob("*.deb"))
        for deb in debs:
            fields = control_fields(debian.run(["dpkg-deb", "-f", str(deb), "Package",
                                                "Version"]).stdout)
            versions[fields.get("Package", deb.name)] = fields.get("Version", "")
        if set(versions) != set(packages):
            raise NapilabError(f"apt-get download {' '.join(packages)} gave "
                               f"{', '.join(d.name for d in debs) or 'nothing'}")
        tree = Tree(version_dir(root, versions[PACKAGE]))
        staged = Path(tmp) / "tree"
        for deb in debs:
            debian.run(["dpkg-deb", "-x", str(deb), str(staged)])
        shutil.rmtree(tree.path, ignore_errors=True)
        shutil.move(str(staged), tree.path)
    if not tree.loader.is_file() or tree.loader.is_symlink():
        raise NapilabError(f"{' '.join(RUNTIME)}: no {LOADER} in {tree.libdir}")
    for name in PROGRAMS:
        program = tree.program(name)
        if not program.is_file():
            raise NapilabError(f"{PACKAGE} {versions[PACKAGE]}: no {program}")
        debian.run(patchelf_argv(program, tree))
        if not works(program):
            raise NapilabError(f"{program} -V fails after patchelf (interpreter "
                               f"{tree.loader}, RUNPATH {tree.libdir})")
    runtime = {p: versions[p] for p in RUNTIME}
    tree.meta.write_bytes(codec.encode(ToolMeta(
        package=PACKAGE, version=versions[PACKAGE], suite=SUITE, runtime=runtime,
        debs=[d.name for d in debs], interpreter=str(tree.loader),
        runpath=str(tree.libdir)), indent=1) + b"\n")
    current = root / PACKAGE / CURRENT
    staged_link = current.with_name(f".{CURRENT}.napilab")
    if staged_link.is_symlink():
        staged_link.unlink()
    staged_link.symlink_to(tree.path.name)
    os.replace(staged_link, current)
    return Install(versions[PACKAGE], tree, runtime)
