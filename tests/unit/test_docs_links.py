"""README.md and docs/*.md stand alone: every relative link resolves to a file of the
repository (README once pointed to ../shared/DESIGN.md, which users do not have), and
no page sends the reader outside it to ../shared."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_resolve_inside_the_repository(page: Path) -> None:
    text = page.read_text()
    assert "../shared" not in text
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{page.name}: {target}"


def test_statistics_does_not_promise_the_old_demo_output() -> None:
    """The demo gives verdicts now (README's session); it no longer prints `need n=5`."""
    assert "need n=5" not in (ROOT / "docs" / "statistics.md").read_text()
