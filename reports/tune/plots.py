"""A tune study drawn (reports.tune.report): the first objective of every
candidate in the order measured, with the best so far (among the candidates inside the
goal's bounds) as a step line and the baseline as a dashed line; and, when the goal
names two metrics or more, the first two against each other, each candidate a point
(hollow: outside a bound), the baseline a star, the confirmed recommendation ringed."""

from __future__ import annotations

import math
from typing import Any

import matplotlib.pyplot as plt

from napilab.reports.plots.svg import RC, SvgRejected, color, figure_svg, label, numbers


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def figures(doc: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [r for r in doc["candidates"] if r["state"] == "ok"]
    labels = list(dict.fromkeys([*doc["labels"], *doc["bounds"]]))
    if not rows or not labels:
        return []
    out: list[tuple[str, str]] = []
    with plt.rc_context(RC):
        for title, draw in (("the search: the first objective, candidate by candidate",
                             _progress), ("the goal's first two metrics", _scatter)):
            fig = draw(doc, rows, labels)
            if fig is None:
                continue
            try:
                out.append((title, figure_svg(fig, f"tune-{len(out)}")))
            except SvgRejected as exc:
                out.append((f"{title}: figure withheld: {exc}", ""))
    return out


def _inside(doc: dict[str, Any], row: dict[str, Any]) -> bool:
    """ROW keeps every bound of the goal (tune.json's `bounds`: label, min, max)."""
    for name, low, high in doc["tune"]["bounds"]:
        value = row["numbers"].get(name)
        if not _finite(value) or (low is not None and value < low) or (
                high is not None and value > high):
            return False
    return True


def _progress(doc: dict[str, Any], rows: list[dict[str, Any]], labels: list[str]) -> Any:
    first, direction = doc["tune"]["objectives"][0]
    points = [(i, r) for i, r in enumerate(rows, start=1) if _finite(r["numbers"].get(first))]
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    best: float | None = None
    steps = []
    for i, r in points:
        value = r["numbers"][first]
        inside = _inside(doc, r)
        ax.scatter([i], [value], s=26, color=color(0) if inside else "white",
                   edgecolors=color(0), zorder=3)
        if inside and (best is None or (value < best if direction == "minimise"
                                        else value > best)):
            best = value
        steps.append(best)
    xs = [i for (i, _), b in zip(points, steps, strict=True) if b is not None]
    ys = [b for b in steps if b is not None]
    if xs:
        ax.step(xs, ys, where="post", color=color(1), linewidth=1.2, label="best so far")
    base = ((doc.get("baseline") or {}).get("numbers") or {}).get(first)
    if base is not None and _finite(base):
        ax.axhline(float(base), color="#555555", linestyle="--", linewidth=0.9, label="baseline")
    ax.set_xlabel("candidate (in the order measured)")
    ax.set_ylabel(label(first))
    numbers(ax.yaxis)
    ax.legend(loc="best")
    fig.tight_layout()
    return fig


def _scatter(doc: dict[str, Any], rows: list[dict[str, Any]], labels: list[str]) -> Any:
    if len(labels) < 2:
        return None
    x_name, y_name = labels[1], labels[0]
    points = [r for r in rows if _finite(r["numbers"].get(x_name))
              and _finite(r["numbers"].get(y_name))]
    if not points:
        return None
    chosen = set((doc.get("confirmation") or {}).get("recommended") or [])
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for r in points:
        x, y = r["numbers"][x_name], r["numbers"][y_name]
        inside = _inside(doc, r)
        ax.scatter([x], [y], s=26, color=color(0) if inside else "white",
                   edgecolors=color(0), zorder=3)
        if r["name"] in chosen:
            ax.scatter([x], [y], s=110, facecolors="none", edgecolors=color(2),
                       linewidths=1.6, zorder=4)
            ax.annotate(label(r["name"]), (x, y), textcoords="offset points",
                        xytext=(5, 5), fontsize=6)
    base = (doc.get("baseline") or {}).get("numbers") or {}
    if _finite(base.get(x_name)) and _finite(base.get(y_name)):
        ax.scatter([base[x_name]], [base[y_name]], marker="*", s=90, color=color(3),
                   zorder=4, label="baseline")
        ax.legend(loc="best")
    ax.set_xlabel(label(x_name))
    ax.set_ylabel(label(y_name))
    numbers(ax.xaxis, ax.yaxis)
    fig.tight_layout()
    return fig
