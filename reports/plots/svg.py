"""matplotlib figures as inline SVG that is safe to paste into a report page.

What a figure may contain comes from hosts, tools and profiles (variant names, metric
labels, host names), so a figure is treated like any other untrusted text:
- mathtext is off (RC): matplotlib would parse `$...$` in a variant name as TeX, and an
  odd `$` raises at draw time; labels go through `label()`, as the legend hides
  entries that start with `_`;
- text is written as SVG <text> (svg.fonttype "none"), which matplotlib escapes
  (& < >), rather than as glyph paths with the raw text in <!-- comments -->;
- every element id is prefixed per figure: matplotlib numbers ids per figure
  (`axes_1`, `text_1`, clip paths by hash), so two inline figures would share ids and
  a `url(#...)` reference could resolve into the other figure;
- the result is parsed and checked before it is used (`check`): no element outside
  the SVG vocabulary matplotlib emits, no event-handler attribute, no reference that
  leaves the document. A figure that fails is not shown (fail closed).
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogFormatter

from napilab.reports.ab.model import format_number

COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
          "#8c8c8c", "#ccb974", "#64b5cd"]

# Text as <text> elements (escaped by matplotlib, selectable, smaller); one font name so
# each element does not carry matplotlib's ten-family fallback list. hashsalt makes the
# ids of clip paths and markers the same from run to run: reports are reproducible.
RC: dict[Any, Any] = {
    "svg.fonttype": "none", "svg.hashsalt": "napilab", "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"], "font.size": 8, "axes.titlesize": 8,
    "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7, "legend.fontsize": 7,
    "text.parse_math": False}

_SVG = "{http://www.w3.org/2000/svg}"
_XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
# What matplotlib's SVG backend writes, and nothing else.
ALLOWED = {"svg", "g", "path", "defs", "style", "clipPath", "rect", "use", "text", "tspan",
           "image", "linearGradient", "radialGradient", "stop", "pattern", "mask", "line",
           "polyline", "polygon", "circle", "ellipse"}
# matplotlib rasterizes a colorbar's gradient into an embedded PNG; nothing else may be
# an image, and the page's CSP (img-src data:) allows no other source either.
_PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=\s]+")
_STYLE_TEXT = "*{stroke-linejoin: round; stroke-linecap: butt}"


class SvgRejected(ValueError):
    """A rendered figure contains something an inline report figure must not."""


def color(index: int) -> str:
    return COLORS[index % len(COLORS)]


def label(text: object) -> str:
    """Untrusted text as a matplotlib label: the legend skips labels that start with "_"
    (a space keeps them shown); `$` needs nothing, RC turns mathtext off."""
    out = str(text)
    return " " + out if out.startswith("_") else out


def numbers(*axes: Axis) -> None:
    """Tick labels as the tables print numbers (1,648,084; 0.25), not 1.6e6 offsets."""
    for axis in axes:
        axis.set_major_formatter(FuncFormatter(lambda value, _: format_number(value)))


def plain_number(value: float) -> str:
    """A tick value as digits, never in scientific notation: 2,000; 1.5; 0.000001."""
    if abs(value) >= 1 or value == 0:
        return format_number(value)
    return str(np.format_float_positional(value, precision=3, unique=False, fractional=False,
                                          trim="-"))


class PlainLogFormatter(LogFormatter):
    """Log-axis tick labels as plain numbers. matplotlib's default for log axes writes
    mathtext (`$\\mathdefault{2\\times10^{2}}$`), which RC's parse_math=False then shows
    raw; this keeps LogFormatter's choice of WHICH ticks carry a label (decades, and minor
    ticks when the axis spans few decades) and only changes the text."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return plain_number(x) if super().__call__(x, pos) else ""


def log_numbers(*axes: Axis) -> None:
    """Plain tick labels on log-scaled axes; call after set_xscale/set_yscale("log"),
    which install matplotlib's mathtext formatters."""
    for axis in axes:
        axis.set_major_formatter(PlainLogFormatter())
        axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))


def figure_svg(fig: Figure, prefix: str) -> str:
    """The figure as an inline <svg> element (no prolog, no metadata), ids prefixed."""
    buffer = io.StringIO()
    try:
        with plt.rc_context(RC):
            # tight_layout already placed everything: bbox_inches="tight" would draw the
            # figure a second time to measure it (40% of the time of a report's plots)
            fig.savefig(buffer, format="svg")
    finally:
        plt.close(fig)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]  # drop the XML prolog and doctype for inlining
    # The RDF metadata block carries a creation date and namespace URLs: dropping it
    # keeps reports reproducible byte for byte from the same data.
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.DOTALL)
    text = _prefix_ids(text, prefix)
    check(text)
    return text


def _prefix_ids(text: str, prefix: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_-]", "-", prefix)
    ids = set(re.findall(r'\bid="([^"]+)"', text))

    def fix(match: re.Match[str]) -> str:
        name = match.group(2)
        return match.group(1) + (f"{safe}-{name}" if name in ids else name)

    text = re.sub(r'(\bid="|href="#|url\(#)([^")]+)', fix, text)
    # matplotlib names identical things alike (two colorbars' identical gradient images
    # share an id): later copies get a suffix; references resolve to the first, as a
    # browser resolves them anyway.
    seen: dict[str, int] = {}

    def unique(match: re.Match[str]) -> str:
        name = match.group(1)
        seen[name] = seen.get(name, 0) + 1
        return f'id="{name}"' if seen[name] == 1 else f'id="{name}-{seen[name]}"'

    return re.sub(r'\bid="([^"]+)"', unique, text)


def check(text: str) -> None:
    """Raise SvgRejected unless `text` is one <svg> of the vocabulary above, without
    scripts, event handlers, foreign content or references outside the document (an
    embedded PNG excepted)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SvgRejected(f"not well-formed: {exc}") from None
    for element in root.iter():
        tag = element.tag.removeprefix(_SVG)
        if tag not in ALLOWED or not element.tag.startswith(_SVG):
            raise SvgRejected(f"element <{tag}> is not allowed")
        for name, value in element.attrib.items():
            local = name.rsplit("}", 1)[-1]
            if local.lower().startswith("on"):
                raise SvgRejected(f"event attribute {local} on <{tag}>")
            if name == _XLINK_HREF or local == "href":
                if tag == "image" and _PNG.fullmatch(value):
                    continue
                if not value.startswith("#"):
                    raise SvgRejected(f"<{tag}> refers outside the document: {value[:40]}")
            if "url(" in value and not re.fullmatch(r"[^()]*(url\(#[^()]+\)[^()]*)*", value):
                raise SvgRejected(f"<{tag}> {local} refers outside the document")
        if tag == "style" and (element.text or "").strip() != _STYLE_TEXT:
            raise SvgRejected("unexpected <style> content")
