"""Inputs that used to hang, eat memory or end in a traceback get one clear error, exit 2,
before any host is touched (issue 21, items 3 and 10): a YAML file over the size limit,
an alias bomb, nesting 10,000 deep, `extends:` of a device or a FIFO, a matrix of
100,000 variants, a profile name that would leave RESULTS or cannot name a directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from napilab.harness.errors import InputError, StorageError
from napilab.harness.grammar import yamlsrc
from napilab.harness.profile import profile as profile_mod
from napilab.harness.profile.profile import load_profile
from napilab.harness.store.store import RunStore
from tests.cli import run_cli

BODY = """\
hosts: {sender: {host: a}, receiver: {host: b}}
workload: {tool: ping, duration: 1, client: {role: sender}, server: {role: receiver}}
"""
BOMB = "".join(
    [f"{BODY}x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"]
    + [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9)}]\n" for i in range(1, 9)])


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, _, err = run_cli(capsys, "validate", *args)
    assert code == 2, err
    assert "Traceback" not in err
    return err


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_an_alias_bomb_is_refused_from_its_graph_in_well_under_a_second(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 9^9 = 387 million strings once expanded; 10^6 expansions took 12.7 s before
    path = write(tmp_path, BOMB)
    err = refused(capsys, str(path))
    assert f"{path}:" in err and "more than 1,000,000 values once its aliases are " \
        "expanded (docs/profiles.md, Limits)" in err


def test_aliases_within_the_limit_still_load(tmp_path: Path) -> None:
    small = "".join(BOMB.splitlines(keepends=True)[:5])  # 9^3 values
    data = yamlsrc.load_text(small, "small.yaml")
    assert len(data["x2"]) == 9 and data["x2"][0][0] == ["lol"] * 9


@pytest.mark.parametrize("depth", [65, 10_000])
def test_deep_nesting_is_an_error_not_a_recursion_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int) -> None:
    path = write(tmp_path, f"{BODY}x: {'[' * depth}{']' * depth}\n")
    err = refused(capsys, str(path))
    assert f"{path}:3:" in err
    assert "nested more than 64 levels deep" in err or "maximum nesting depth" in err


def test_nesting_at_the_limit_loads() -> None:
    data = yamlsrc.load_text("x: " + "[" * 63 + "]" * 63, "ok.yaml")
    for _ in range(62):
        data = data["x"] if isinstance(data, dict) else data[0]
    assert data in ([[]], [])


def test_a_file_over_the_size_limit_is_refused_without_reading_it_all(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BODY + "# " + "x" * yamlsrc.MAX_BYTES + "\n")
    err = refused(capsys, str(path))
    assert f"{path}: over 4,194,304 bytes, napilab's limit for a YAML file" in err
    with pytest.raises(InputError, match="characters: a YAML file holds at most"):
        yamlsrc.load_text("x" * (yamlsrc.MAX_BYTES + 1), "big.yaml")


def test_extends_of_a_device_or_a_fifo_is_refused_at_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, f"extends: /dev/zero\n{BODY}")
    err = refused(capsys, str(path))
    assert f"{path}:1:10: extends: /dev/zero: not a regular file" in err
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it would block until a writer came
    path = write(tmp_path, f"extends: fifo\n{BODY}", "f.yaml")
    assert "fifo: not a regular file" in refused(capsys, str(path))
    assert "not a regular file" in refused(capsys, str(fifo))


def test_a_matrix_of_100000_variants_is_refused_before_it_is_expanded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BODY + "variants: {v: {setup: {receiver: {sysctl: "
                 "{net.core.busy_read: '${x}', net.core.busy_poll: '${y}'}}}}}\n"
                 f"matrix: {{x: {list(range(10))}, y: {list(range(10_000))}}}\n")
    err = refused(capsys, str(path))
    assert "matrix: 100,000 variants: a profile has at most 20,000" in err


def test_too_many_explicit_variants(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(profile_mod, "MAX_VARIANTS", 3)
    variants = "".join(f"  v{i}: {{}}\n" for i in range(4))
    path = write(tmp_path, f"name: many\n{BODY}variants:\n{variants}")
    with pytest.raises(InputError, match="variants: 4 variants: a profile has at most 3"):
        load_profile(path)


@pytest.mark.parametrize("name", ["../escaped", "/etc/x", "a/b", ".hidden", "x" * 300,
                                  "two words", ""])
def test_a_profile_name_that_cannot_be_a_directory_is_refused_at_validate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = write(tmp_path, f"name: {name!r}\n{BODY}")
    err = refused(capsys, str(path))
    assert f"{path}:1:7: name: profile name" in err and "cannot name a directory" in err
    assert len(err) < 400  # a 300-character name is shortened


def test_a_file_name_that_cannot_be_a_directory_needs_a_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BODY, "my profile (copy).yaml")
    assert "no `name:`, and the file's name" in refused(capsys, str(path))
    write(tmp_path, f"name: ok\n{BODY}", "my profile (copy).yaml")
    assert load_profile(path).name == "ok"


def test_the_store_never_creates_a_directory_outside_results(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="cannot name a directory"):
        RunStore.create(tmp_path / "results", "../escaped", None)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
