"""The files that ship with napilab: the profiles (with the JSON Schema files beside
them) and the documentation, which `napilab profiles` and `napilab docs` show.

They live in the repository's profiles/ and docs/; harness/profiles and harness/docs
are symlinks to them, which the wheel installs as package data (real directories
there), so the same paths work in a source tree and in an installed wheel. The README
is the wheel's own description (its METADATA), read from the source tree's README.md
when there is one.

Imported when the CLI starts: nothing here imports more than the standard library until
a function needs it (yaml, for a profile's description)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from napilab.harness.errors import InputError, NapilabError

PACKAGE = Path(__file__).resolve().parent.parent
PROFILES = PACKAGE / "profiles"
DOCS = PACKAGE / "docs"
MODELINE = "# yaml-language-server: $schema="
README = "README"
README_TITLE = "start here: what napilab does, installing, the commands, exit codes"


def profiles_dir() -> Path:
    return PROFILES


def profile(name: str) -> Path:
    """A shipped profile by file name (`demo.yaml`)."""
    return PROFILES / name


def schema_file(kind: str) -> Path:
    """The schema editors read (`profile` or `inventory`), shipped beside the profiles."""
    return PROFILES / "schema" / f"{kind}.schema.json"


def _schema_kind(first_line: str) -> str:
    """`profile` or `inventory`: the schema a file's first line names."""
    return "inventory" if first_line.endswith("inventory.schema.json") else "profile"


@dataclass(frozen=True)
class ShippedFile:
    """A shipped profile or example inventory: `napilab profiles` shows it by name (its
    file name without .yaml)."""

    name: str
    path: Path

    @property
    def kind(self) -> str:
        """`profile` or `inventory`: the schema its first line names."""
        return _schema_kind(self.path.read_text().partition("\n")[0])

    def description(self) -> str:
        """The profile's `description:` on one line; for a file without one (the
        example inventory), the first sentence of its header comment."""
        import yaml

        text = self.path.read_text()
        document = yaml.safe_load(text)
        described = document.get("description") if isinstance(document, dict) else None
        if isinstance(described, str) and described.strip():
            return " ".join(described.split())
        header = []
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            if not line.startswith(MODELINE):
                header.append(line.lstrip("#").strip())
        return re.split(r"(?<=\.)\s", " ".join(header), maxsplit=1)[0]


def _names(directory: Path, suffix: str) -> list[str]:
    return sorted(p.name.removesuffix(suffix) for p in directory.glob(f"*{suffix}")
                  if p.is_file())


def profile_names() -> list[str]:
    return _names(PROFILES, ".yaml")


def _unknown(what: str, name: str, known: list[str]) -> InputError:
    from napilab.harness.grammar.schema import suggest

    return InputError(f"{name!r} is not a shipped {what}: napilab has {', '.join(known)}"
                      + suggest(name, known))


def shipped_file(name: str) -> ShippedFile:
    """A shipped profile or inventory by name (`demo`, also `demo.yaml`)."""
    known = profile_names()
    stem = name.removesuffix(".yaml")
    if stem not in known:
        raise _unknown("profile", name, known)
    return ShippedFile(stem, PROFILES / f"{stem}.yaml")


def shipped_files() -> list[ShippedFile]:
    return [ShippedFile(n, PROFILES / f"{n}.yaml") for n in profile_names()]


def _extends(path: Path) -> list[str]:
    """The files a shipped profile names in `extends:` (relative to it)."""
    import yaml

    document = yaml.safe_load(path.read_text())
    parents = document.get("extends") if isinstance(document, dict) else None
    if parents is None:
        return []
    return [parents] if isinstance(parents, str) else [str(p) for p in parents]


@dataclass(frozen=True)
class Copy:
    """One file `napilab profiles copy` writes."""

    source: Path
    target: Path
    text: str
    why: str = ""  # why a file other than the one asked for is copied


def copies(name: str, dest: str) -> list[Copy]:
    """What `napilab profiles copy NAME DEST` writes: the file, and every file its
    `extends` chain names, each under the same relative name next to the file that
    extends it, so the copy loads as the shipped file does. DEST is a file, or a
    directory (one that exists, or written with a trailing /) to put NAME.yaml in. Each
    copy's first line names the installed schema (a shipped file names `schema/` beside
    it)."""
    entry = shipped_file(name)
    to_dir = Path(dest).is_dir() or dest.endswith("/")  # a Path drops the trailing /
    target = Path(dest) / entry.path.name if to_dir else Path(dest)
    out: list[Copy] = []
    todo = [(entry.path, target, "")]
    while todo:
        source, to, why = todo.pop(0)
        if any(c.source.resolve() == source.resolve() for c in out):
            continue
        text = source.read_text()
        first, newline, rest = text.partition("\n")
        if first.startswith(MODELINE):
            text = f"{MODELINE}{schema_file(_schema_kind(first))}{newline}{rest}"
        out.append(Copy(source, to, text, why))
        for parent in _extends(source):
            parent_path = source.parent / parent
            if (Path(parent).is_absolute() or not parent_path.is_file()
                    or not parent_path.resolve().is_relative_to(PROFILES.resolve())):
                raise NapilabError(f"shipped {source.name} extends {parent}, which is not a "
                                   "shipped file: napilab's packaging is broken")
            todo.append((parent_path, to.parent / parent, f"{to.name} extends it"))
    return out


@dataclass(frozen=True)
class Doc:
    """A shipped document: `napilab docs NAME`."""

    name: str
    title: str
    path: Path | None  # None: an installed README known only as its package's metadata
    body: str | None = None  # the text, when it is not the whole file at `path`

    def text(self) -> str:
        if self.body is not None:
            return self.body
        assert self.path is not None
        return self.path.read_text()


def _readme() -> Doc | None:
    """The README: the source tree's file, else the installed distribution's
    description (its METADATA: headers, a blank line, the README)."""
    tree = PACKAGE.parent  # site-packages in a wheel install: its files are others'
    project = tree / "pyproject.toml"
    if (project.is_file() and 'name = "napilab"' in project.read_text()
            and (tree / "README.md").is_file()):
        return Doc(README, README_TITLE, tree / "README.md")
    from importlib import metadata

    try:
        dist = metadata.distribution("napilab")
    except metadata.PackageNotFoundError:
        return None
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if not text:
        return None
    found = [f for f in dist.files or [] if f.name == "METADATA"]
    path = Path(str(found[0].locate())) if found else None
    return Doc(README, README_TITLE, path, text.partition("\n\n")[2])


def docs() -> list[Doc]:
    """The README (when found), then docs/*.md by name, each with its first heading."""
    readme = _readme()
    out = [readme] if readme is not None else []
    for name in _names(DOCS, ".md"):
        path = DOCS / f"{name}.md"
        out.append(Doc(name, path.read_text().partition("\n")[0].lstrip("#").strip(), path))
    return out


def doc(name: str) -> Doc:
    """A shipped document by name: `profiles`, also `profiles.md` or `docs/profiles.md`
    (as help texts and errors cite them), `README`."""
    found = docs()
    stem = name.removeprefix("docs/").removesuffix(".md")
    for entry in found:
        if entry.name.lower() == stem.lower():
            return entry
    raise _unknown("document", name, [d.name for d in found])
