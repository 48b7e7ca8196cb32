"""Debian's kernel packages, unpacked where VM guests boot them: the kernel cache.

    /var/lib/napilab/kernels/                 ($NAPILAB_KERNELS overrides)
      lib/modules/RELEASE/vmlinuz             the image (what `vng --run` boots)
      lib/modules/RELEASE/{kernel,modules.*}  its modules, `depmod -b` run on them
      lib/modules/RELEASE/config              its .config (CONFIG_PREEMPT_RT, ...)
      lib/modules/RELEASE/napilab.json        package, version, suite, image sha256
      ALIAS -> lib/modules/RELEASE            e.g. 7.2-rt -> 7.2.13+deb14-rt-amd64

`fetch` takes the newest generic and PREEMPT_RT kernels of the machine's default Debian
suite and of Debian's unstable suite (`sid`): `apt-get download` of the packages the
`linux-image-amd64` and `linux-image-rt-amd64` meta packages name, `dpkg-deb -x`,
`depmod`. Nothing is installed into the machine's boot path, and sid's package lists
live in this directory (harness.lab.debian: `-o Dir::Etc::sourcelist=... -o
Dir::State::Lists=...`), so the machine's own apt state is not touched. A guest sees the
machine's root file system, so the modules directory is also what the guest loads
modules from.

The path is under /var/lib, not /var/cache: virtme-ng mounts a tmpfs over /var/cache
in its guests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from napilab.harness.errors import NapilabError
from napilab.harness.lab import debian
from napilab.harness.lab.debian import SUITES

DEFAULT_DIR = "/var/lib/napilab/kernels"
META = {"generic": "linux-image-amd64", "rt": "linux-image-rt-amd64"}
_ALIAS = re.compile(r"^(\d+\.\d+)")
# The packages that carry a kernel: linux-image-RELEASE (6.1: image and modules in one),
# or from 6.17 on linux-binary-RELEASE (the image) and linux-modules-RELEASE.
_CARRIERS = ("linux-image-", "linux-binary-", "linux-modules-")


def kernel_dir() -> Path:
    return Path(os.environ.get("NAPILAB_KERNELS", DEFAULT_DIR))


@dataclass(frozen=True)
class Kernel:
    release: str  # uname -r
    image: Path
    version: str  # uname -v as the image's header says it
    aliases: tuple[str, ...] = ()

    @property
    def rt(self) -> bool:
        return "PREEMPT_RT" in self.version

    def describe(self) -> str:
        names = f" ({', '.join(self.aliases)})" if self.aliases else ""
        return f"{self.release}{names}: {self.version}"


# -- the image header ------------------------------------------------------------------


def image_banner(data: bytes) -> str | None:
    """The version string a bzImage carries in its setup header (Documentation/arch/
    x86/boot.rst: `kernel_version` at 0x20E points 0x200 bytes before the string), e.g.
    `7.2.13+deb14-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian
    7.2.13-1 (2026-10-28)`; None when `data` is not a bzImage."""
    if len(data) < 0x210 or data[0x202:0x206] != b"HdrS":
        return None
    start = int.from_bytes(data[0x20E:0x210], "little") + 0x200
    end = data.find(b"\0", start)
    if start >= len(data) or end < 0:
        return None
    return data[start:end].decode(errors="replace")


def split_banner(banner: str) -> tuple[str, str]:
    """(uname -r, uname -v) of an image's banner: the release is its first word, the
    version what follows the builder in parentheses."""
    release = banner.split()[0]
    match = re.search(r"\)\s+(#.*)$", banner)
    return release, match.group(1).strip() if match else ""


def read_image(path: Path) -> tuple[str, str]:
    try:
        with open(path, "rb") as handle:
            banner = image_banner(handle.read(0x10000))
    except OSError as exc:
        raise NapilabError(f"cannot read kernel image {path}: {exc.strerror}") from None
    if banner is None:
        raise NapilabError(f"{path} is not a bzImage (no setup header)")
    return split_banner(banner)


# -- the cache -------------------------------------------------------------------------


def installed(root: Path | None = None) -> list[Kernel]:
    root = root or kernel_dir()
    modules = root / "lib" / "modules"
    aliases: dict[str, list[str]] = {}
    if root.is_dir():
        for link in sorted(root.iterdir()):
            if link.is_symlink():
                aliases.setdefault(Path(os.readlink(link)).name, []).append(link.name)
    out = []
    for release_dir in sorted(modules.iterdir()) if modules.is_dir() else []:
        image = release_dir / "vmlinuz"
        if image.is_file():
            release, version = read_image(image)
            out.append(Kernel(release, image, version, tuple(aliases.get(release_dir.name, ()))))
    return out


def find(name: str, root: Path | None = None) -> Kernel:
    """A kernel by alias (`7.2-rt`), release (`6.1.0-57-rt-amd64`) or image path."""
    path = Path(name)
    if path.is_absolute() or "/" in name:
        if not path.is_file():
            raise NapilabError(f"kernel image {name} not found")
        release, version = read_image(path)
        return Kernel(release, path, version)
    kernels = installed(root)
    for kernel in kernels:
        if name == kernel.release or name in kernel.aliases:
            return kernel
    have = ", ".join(a for k in kernels for a in (*k.aliases, k.release)) or "none"
    raise NapilabError(f"no kernel {name!r} in {root or kernel_dir()} (have: {have})",
                       hint="`napilab testbed kernels --fetch` unpacks Debian's kernels "
                       "there (root, network to deb.debian.org)")


def fetch(suites: tuple[str, ...] = SUITES, root: Path | None = None,
          say: Callable[[str], object] = print) -> list[Kernel]:
    """Download and unpack the generic and RT kernels of each suite; kernels already
    unpacked are kept. Returns every kernel in the cache."""
    root = root or kernel_dir()
    if os.geteuid() != 0:
        raise NapilabError("fetching kernels needs root (apt-get download, depmod)")
    for tool in ("apt-get", "apt-cache", "dpkg-deb", "depmod"):
        if shutil.which(tool) is None:
            raise NapilabError(f"{tool} not found", hint="Debian's apt, dpkg and kmod")
    (root / "lib" / "modules").mkdir(parents=True, exist_ok=True)
    for suite in suites:
        options = debian.apt_options(root, suite)
        for flavour, meta in META.items():
            packages = _carriers(options, meta)
            release = _release_of(packages)
            target = root / "lib" / "modules" / release
            if not (target / "vmlinuz").is_file():
                say(f"napilab: fetching {' '.join(packages)} ({suite})")
                _unpack(options, packages, release, root, suite)
            _alias(root, release, flavour)
    return installed(root)


def _carriers(options: list[str], meta: str) -> list[str]:
    """The packages that carry the kernel a meta package depends on."""
    image = _depends(options, meta, "linux-image-")
    if image is None:
        raise NapilabError(f"{meta} names no linux-image package")
    carried = [p for p in (_depends(options, image, "linux-binary-"),
                           _depends(options, image, "linux-modules-")) if p]
    return carried or [image]


def _depends(options: list[str], package: str, prefix: str) -> str | None:
    out = debian.run(["apt-cache", *options, "depends", package]).stdout
    for line in out.splitlines():
        kind, _, name = line.strip().lstrip("|").partition(": ")
        if kind == "Depends" and name.startswith(prefix) and not name.startswith("<"):
            return name.strip()
    return None


def _release_of(packages: list[str]) -> str:
    for package in packages:
        for prefix in _CARRIERS:
            if package.startswith(prefix):
                return package[len(prefix):]
    raise NapilabError(f"cannot tell the kernel release of {packages}")


def _unpack(options: list[str], packages: list[str], release: str, root: Path,
            suite: str) -> None:
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        debian.run(["apt-get", "-q", *options, "download", *packages], cwd=tmp)
        debs = sorted(Path(tmp).glob("*.deb"))
        tree = Path(tmp) / "tree"
        for deb in debs:
            debian.run(["dpkg-deb", "-x", str(deb), str(tree)])
        modules = next((d for d in (tree / "lib/modules" / release,
                                    tree / "usr/lib/modules" / release) if d.is_dir()), None)
        image = next((p for p in (tree / "boot" / f"vmlinuz-{release}",
                                  tree / "usr/lib/modules" / release / "vmlinuz")
                      if p.is_file()), None)
        if modules is None or image is None:
            raise NapilabError(f"{' '.join(packages)}: no image or modules for {release}")
        staged = Path(tmp) / release
        shutil.move(str(modules), staged)
        if image.parent != modules:
            shutil.move(str(image), staged / "vmlinuz")
        config = tree / "boot" / f"config-{release}"
        if config.is_file():
            shutil.move(str(config), staged / "config")
        digest = hashlib.sha256((staged / "vmlinuz").read_bytes()).hexdigest()
        (staged / "napilab.json").write_text(json.dumps({
            "packages": [d.name for d in debs], "suite": suite, "sha256": digest}, indent=1))
        target = root / "lib" / "modules" / release
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(staged), target)
    debian.run(["depmod", "-b", str(root), release])


def _alias(root: Path, release: str, flavour: str) -> None:
    match = _ALIAS.match(release)
    if not match:
        return
    name = match.group(1) + ("-rt" if flavour == "rt" else "")
    link = root / name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path("lib") / "modules" / release)


def stage(image: Path, into: Path, root: Path | None = None) -> Path:
    """A kernel image from anywhere (a build's bzImage) laid out as virtme-ng finds a
    kernel's modules: INTO/lib/modules/RELEASE/vmlinuz, a copy, with the cache's modules
    of the same release (when the cache has it) linked beside it. The staged image's
    path; NapilabError when the file is not a bzImage."""
    release, _ = read_image(image)
    target = into / "lib" / "modules" / release
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(image, target / ".vmlinuz.tmp")
    os.replace(target / ".vmlinuz.tmp", target / "vmlinuz")
    cached = (root or kernel_dir()) / "lib" / "modules" / release
    if cached.is_dir():
        for entry in cached.iterdir():
            link = target / entry.name
            if entry.name != "vmlinuz" and not link.is_symlink() and not link.exists():
                link.symlink_to(entry)
    return target / "vmlinuz"
