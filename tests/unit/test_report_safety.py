"""Nothing from a host, a tool or a profile becomes markup or script in a report:
hostile strings in a profile description, variant names, a tool's stderr and a failed
trial's error stay text in the HTML (Jinja2 autoescape, matplotlib's SVG escaping
checked by reports.plots.svg), the Markdown and the JUnit XML; the page fetches nothing.
tests/browser/ checks the same page in a real browser."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from napilab.reports.ab.compare import load_run, table
from napilab.reports.formats.render import relurl, render
from napilab.reports.plots import svg
from tests.report_runs import neper_run

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
MATH = r"$\alpha$ _x $"  # mathtext, an odd dollar, a leading underscore
VARIANTS = ("base", f"v{SCRIPT}", f"w{IMG}", MATH)
HTML_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p",
             "span", "code", "nav", "ul", "li", "a", "main", "section", "strong", "div",
             "table", "thead", "tbody", "tr", "th", "td", "br", "figure", "figcaption", "pre",
             "details", "summary"}
SVG_TAGS = {t.lower() for t in svg.ALLOWED}


def hostile_run(tmp_path: Path) -> Path:
    return neper_run(tmp_path, variants=VARIANTS, reps=2, description=f"{IMG} {SCRIPT}",
                     failed={3: f"workload failed: {IMG}{SCRIPT}"}, stderr=f"{SCRIPT}\n{IMG}\n",
                     latency_samples=300)


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def test_hostile_strings_stay_text_in_html(tmp_path: Path) -> None:
    run = load_run(hostile_run(tmp_path))
    page = render(run, "html")
    parser = Elements()
    parser.feed(page)
    tags = {tag for tag, _ in parser.tags}
    assert tags <= HTML_TAGS | SVG_TAGS, tags - HTML_TAGS - SVG_TAGS
    for tag, attrs in parser.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
            if name in ("href", "xlink:href") and value:
                assert not value.startswith(("javascript:", "http:", "https:", "//")), value
                if tag == "a":
                    assert value.startswith(("#", "raw/")), value
            if name == "src":
                pytest.fail(f"<{tag} src=...>")
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page  # Jinja2's escaping
    assert 'w"&gt;&lt;img src=x onerror=alert(1)&gt;</text>' in page  # matplotlib's, in SVG
    assert "<script" not in page and "<img" not in page


def test_mathtext_and_underscores_are_drawn_literally() -> None:
    with plt.rc_context(svg.RC):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [1, 2], label=svg.label("_hidden"))
        ax.set_title(svg.label(MATH))
        ax.legend()
    out = svg.figure_svg(fig, "t")
    assert r"$\alpha$ _x $" in out and " _hidden" in out


def test_svg_check_refuses_what_matplotlib_never_writes() -> None:
    ok = '<svg xmlns="http://www.w3.org/2000/svg"><g id="a"><path d="M 0 0"/></g></svg>'
    svg.check(ok)
    bad = [
        '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><g onload="alert(1)"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><foreignObject/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
        '<use xlink:href="http://x/y.svg#a"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
        '<image xlink:href="data:image/svg+xml;base64,PHN2Zz4="/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><path style="fill: url(http://x/#a)"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg"><style>@import url(x.css)</style></svg>',
        "<svg",
    ]
    for text in bad:
        with pytest.raises(svg.SvgRejected):
            svg.check(text)


def test_relurl_keeps_raw_links_relative() -> None:
    assert relurl("raw/001/b/client.out") == "raw/001/b/client.out"
    assert relurl("raw/001/javascript:alert(1)/x?y#z") == \
        "raw/001/javascript%3Aalert%281%29/x%3Fy%23z"
    assert relurl("/etc/../passwd") == "etc/passwd"


def test_markdown_and_junit_keep_hostile_strings_as_text(tmp_path: Path) -> None:
    run = load_run(hostile_run(tmp_path))
    tab = table(run)
    md = render(run, "md", tab)
    assert "<" not in md.replace("\\<", "") and ">" not in md.replace("\\>", "").replace(
        "\n> ", "\n").removeprefix("> ")
    assert "v\\<script\\>alert(1)\\</script\\>" in md
    root = ET.fromstring(render(run, "junit", tab))  # parses: the XML stayed XML
    errors = root.findall(".//error")
    assert errors and SCRIPT in (errors[0].get("message") or "")
    assert SCRIPT in (errors[0].text or "")
