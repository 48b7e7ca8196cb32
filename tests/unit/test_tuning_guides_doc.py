"""docs/tuning-guides.md stays true: every setting its tables give, and its whole
profile, validate as written (each table row in a profile of its own)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from napilab.harness.profile.profile import load_profile

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tuning-guides.md"
ROWS = re.findall(r"^\| [^|]+ \| `([a-z_]+: .*?)`", PAGE.read_text(), re.M)
PROFILE = """\
name: row
hosts: {sut: {host: sut}, peer: {host: peer}}
setup:
  sut:
    SETTING
workload: {tool: ping, duration: 1, client: {role: peer}, server: {role: sut}}
"""


def test_the_page_has_its_tables() -> None:
    assert len(ROWS) >= 30


@pytest.mark.parametrize("setting", ROWS)
def test_each_row_validates(setting: str, tmp_path: Path) -> None:
    path = tmp_path / "row.yaml"
    path.write_text(PROFILE.replace("SETTING", setting))
    assert load_profile(path).variants


def test_the_whole_guide_validates(tmp_path: Path) -> None:
    block = re.search(r"```yaml\n(.*?)```", PAGE.read_text(), re.S)
    assert block is not None
    path = tmp_path / "guide.yaml"
    path.write_text(block[1])
    profile = load_profile(path)
    tuned = next(v for v in profile.variants if v.name == "tuned")
    assert {s.kind for s in tuned.settings} >= {"napi", "cpu_dma_latency", "smt",
                                                "transparent_hugepage", "irq_affinity"}
