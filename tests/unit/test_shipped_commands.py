"""What a pip user has without the source tree (issue 21, item 8): `napilab profiles
list|show|copy` (the shipped profiles, each with its description; a copy, with the files
it extends, validates where it lands and names the installed schema) and `napilab docs`
(the documentation, installed beside the profiles; the README from the wheel's
METADATA). Bad names are exit 2 with the known ones. The wheel itself is built and
installed by tests/integration/test_wheel.py; here, what pyproject.toml packages."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

from napilab.harness.authoring import shipped
from napilab.harness.inventory.inventory import load_inventory
from napilab.harness.profile.profile import load_profile
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "profiles").glob("*.yaml"), key=lambda p: p.stem)
DOCS = sorted((ROOT / "docs").glob("*.md"))


def test_profiles_list_names_each_shipped_file_with_its_description(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "profiles", "list")
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == [p.stem for p in SHIPPED]
    for path, line in zip(SHIPPED, lines, strict=False):
        described = yaml.safe_load(path.read_text()).get("description")
        if described:
            assert line.endswith(" " + " ".join(described.split())), line
        else:
            assert "(inventory) An example lab inventory for the seed profiles" in line
    assert lines[-1].startswith(f"(in {shipped.profiles_dir()}")
    assert run_cli(capsys, "profiles")[1] == out  # no subcommand: the list


def test_profiles_show_prints_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "profiles", "show", "seed-000-threaded-busypoll.yaml")
    assert code == 0
    assert out == (ROOT / "profiles" / "seed-000-threaded-busypoll.yaml").read_text()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_a_copy_validates_and_names_the_installed_schema(
        path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "profiles", "copy", path.stem, f"{tmp_path}/lab/")
    assert code == 0, err
    copy = tmp_path / "lab" / path.name
    assert out.splitlines()[0] == f"wrote {copy}"
    first, _, rest = copy.read_text().partition("\n")
    kind = "inventory" if "inventory" in path.name else "profile"
    assert first == f"# yaml-language-server: $schema={shipped.schema_file(kind)}"
    assert Path(first.split("=", 1)[1]).is_file()
    assert rest == path.read_text().partition("\n")[2]
    if kind == "inventory":
        assert load_inventory(copy).hosts
        assert out.splitlines()[1] == f"next: edit its hosts, then napilab hosts check -i {copy}"
    else:
        assert load_profile(copy).variants
        # a profile that extends another (demo-trace: demo) takes it along first
        assert all(" extends it)" in line for line in out.splitlines()[1:-1])
        assert out.splitlines()[-1] == f"next: napilab validate {copy}"


def test_a_copy_never_overwrites_without_force(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "mine.yaml"
    assert run_cli(capsys, "profiles", "copy", "demo", str(target))[0] == 0
    target.write_text("edited\n")
    code, _, err = run_cli(capsys, "profiles", "copy", "demo", str(target))
    assert (code, err) == (2, f"napilab: error: {target} exists; --force overwrites it\n")
    assert target.read_text() == "edited\n"
    assert run_cli(capsys, "profiles", "copy", "demo", str(target), "--force")[0] == 0
    assert load_profile(target).name == "demo"


@pytest.fixture
def own_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shipped directory of this test's own: a profile extending a file in a
    subdirectory, which extends another, and the demo."""
    directory = tmp_path / "shipped"
    (directory / "parts").mkdir(parents=True)
    (directory / "demo.yaml").write_text((ROOT / "profiles" / "demo.yaml").read_text())
    (directory / "parts" / "hosts.yaml").write_text(
        "hosts: {sender: {host: a}, receiver: {host: b}}\n")
    (directory / "parts" / "base.yaml").write_text(
        "# yaml-language-server: $schema=../schema/profile.schema.json\n"
        "extends: hosts.yaml\n"
        "workload: {tool: ping, client: {role: sender}, server: {role: receiver}}\n")
    (directory / "child.yaml").write_text(
        "# yaml-language-server: $schema=schema/profile.schema.json\n"
        "name: child\ndescription: a child\nextends: [parts/base.yaml]\n"
        "variants: {a: {}, b: {setup: {receiver: {sysctl: {net.core.busy_poll: 50}}}}}\n")
    monkeypatch.setattr(shipped, "PROFILES", directory)
    return directory


def test_a_copy_takes_the_files_it_extends_along(
        own_profiles: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "profiles", "copy", "child", str(tmp_path / "out" / "x.yaml"))
    assert code == 0, err
    out_dir = tmp_path / "out"
    assert out.splitlines() == [
        f"wrote {out_dir / 'x.yaml'}",
        f"wrote {out_dir / 'parts' / 'base.yaml'} (x.yaml extends it)",
        f"wrote {out_dir / 'parts' / 'hosts.yaml'} (base.yaml extends it)",
        f"next: napilab validate {out_dir / 'x.yaml'}"]
    assert (out_dir / "parts" / "base.yaml").read_text().splitlines()[0] == (
        f"# yaml-language-server: $schema={own_profiles / 'schema' / 'profile.schema.json'}")
    loaded = load_profile(out_dir / "x.yaml")
    assert [v.name for v in loaded.variants] == ["a", "b"]
    assert loaded.variants[0].workload.tool == "ping"
    # none of them is written while one of them exists
    (out_dir / "x.yaml").unlink()
    code, _, err = run_cli(capsys, "profiles", "copy", "child", str(out_dir / "x.yaml"))
    assert code == 2 and "parts/base.yaml, " in err and "--force overwrites it" in err
    assert not (out_dir / "x.yaml").exists()


def test_a_copy_never_writes_over_the_shipped_file(
        own_profiles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (own_profiles / "demo.yaml").read_text()
    code, _, err = run_cli(capsys, "profiles", "copy", "demo", str(own_profiles), "--force")
    assert code == 2
    assert err == (f"napilab: error: {own_profiles / 'demo.yaml'} is the shipped file "
                   "itself: copy it elsewhere\n")
    assert (own_profiles / "demo.yaml").read_text() == before


def test_a_shipped_file_extending_what_is_not_shipped_is_a_packaging_error(
        own_profiles: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "outside.yaml").write_text("repeat: 2\n")
    (own_profiles / "child.yaml").write_text("extends: ../outside.yaml\n")
    code, _, err = run_cli(capsys, "profiles", "copy", "child", str(tmp_path / "out/"))
    assert code == 1
    assert "shipped child.yaml extends ../outside.yaml, which is not a shipped file" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [("profiles", "show", "dmeo"), ("profiles", "copy", "dmeo"),
                                  ("docs", "statstics")])
def test_an_unknown_name_is_one_line_with_the_known_ones(
        argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1
    what = "document" if argv[0] == "docs" else "profile"
    known = (["README", *(p.stem for p in DOCS)] if what == "document"
             else [p.stem for p in SHIPPED])
    assert err == (f"napilab: error: {argv[-1]!r} is not a shipped {what}: napilab has "
                   f"{', '.join(known)}; did you mean "
                   f"{'statistics' if what == 'document' else 'demo'!r}?\n")


def test_docs_lists_the_readme_and_every_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "docs")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[0] == "README"
    for doc, line in zip(DOCS, lines[1:], strict=False):
        title = doc.read_text().splitlines()[0].removeprefix("# ")
        assert line.split() == [doc.stem, *title.split()]
    assert len(lines) == len(DOCS) + 2
    assert lines[-1] == f"(in {shipped.DOCS}; `napilab docs NAME` prints one)"


@pytest.mark.parametrize("name", ["profiles", "profiles.md", "docs/profiles.md", "README"])
def test_docs_prints_one_as_its_file_is(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = ROOT / ("README.md" if name == "README" else "docs/profiles.md")
    code, out, _ = run_cli(capsys, "docs", name)
    assert code == 0
    assert out == source.read_text()
    code, out, _ = run_cli(capsys, "docs", name, "--path")
    assert Path(out.strip()).read_text() == source.read_text()


def test_without_a_source_tree_the_readme_is_the_installed_metadata(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a wheel, harness/ sits in site-packages: the README is the distribution's
    description (napilab is installed in the venv the tests run in)."""
    (tmp_path / "README.md").write_text("someone else's\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    monkeypatch.setattr(shipped, "PACKAGE", tmp_path / "harness")
    readme = shipped.doc("readme")
    assert readme.path is None or readme.path.name == "METADATA"
    assert readme.text().startswith("# napilab\n\nLatency A/B benchmarks")


def test_the_wheel_packages_every_doc_and_profile_and_names_its_urls() -> None:
    """pyproject.toml's package data for `harness` takes docs/ and profiles/ through
    the symlinks harness/docs and harness/profiles."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["package-data"]["napilab.harness"]
    packaged = {p.relative_to(ROOT / "harness") for pattern in patterns
                for p in (ROOT / "harness").glob(pattern)}
    assert {Path("docs") / p.name for p in DOCS} <= packaged
    assert {Path("profiles") / p.name for p in SHIPPED} <= packaged
    assert (ROOT / "harness" / "docs").resolve() == (ROOT / "docs").resolve()
    assert set(project["project"]["urls"]) == {"Homepage", "Documentation", "Source", "Issues"}


def test_names_complete_in_the_shell() -> None:
    from tests.unit.test_cli_help import complete

    assert complete("napilab profiles copy seed-00") == [
        p.stem for p in SHIPPED if p.stem.startswith("seed-00")]
    assert complete("napilab docs st") == ["statistics", "stores"]
