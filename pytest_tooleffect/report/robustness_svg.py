"""The geometry of the catalog-size curve the HTML page draws as an inline SVG (``docs/robustness.md``).

The x axis is the catalog size on a log-2 scale (1, 8, 32, 128 tools apart evenly by factor), the
y axis the rate at name + arguments from 0 to 100 %; one line per class and one for all classes,
and a dashed mark at the original catalogs' mean size with their rates as hollow dots.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_tooleffect.report.arithmetic import CLASSES

__all__ = ["HEIGHT", "WIDTH", "curve_geometry"]

WIDTH, HEIGHT = 480, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 16, 16, 40


def curve_geometry(curve: Mapping[str, Any]) -> dict[str, Any]:
    """Where everything of one curve goes, in SVG user units.

    Args:
        curve: a :class:`~pytest_tooleffect.report.robustness.ScaleCurve` as JSON.

    Returns:
        ``{width, height, lines: [{label_class, points: "x,y …", dots: [{x, y, title}]}], original:
        {x, label, dots} | None, xticks: [{x, label}], yticks: [{y, label}], axis: {x0, x1, y0, y1}}``.
    """
    points = [p for p in curve["points"] if p["rate_pct"] is not None]
    sizes = sorted({p["size"] for p in points if p["size"] > 0})
    original = curve.get("original_size")
    span = [*sizes, *([original] if original else [])] or [1]
    lo, hi = math.log2(min(span)), math.log2(max(span))
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    x0, x1, y0, y1 = _LEFT, WIDTH - _RIGHT, HEIGHT - _BOTTOM, _TOP

    def x(size: float) -> float:
        return round(x0 + (math.log2(size) - lo) / (hi - lo) * (x1 - x0), 1)

    def y(rate: float) -> float:
        return round(y0 - rate / 100 * (y0 - y1), 1)

    lines = []
    for cls in (*CLASSES, "all"):
        mine = sorted((p for p in points if p["label_class"] == cls and p["size"] > 0), key=lambda p: p["size"])
        if not mine:
            continue
        dots = [{"x": x(p["size"]), "y": y(p["rate_pct"]),
                 "title": f"{cls}: {p['rate_pct']:.1f} % at {p['size']} tools (n={p['n']})"} for p in mine]
        lines.append({"label_class": cls, "points": " ".join(f"{d['x']},{d['y']}" for d in dots), "dots": dots})
    mark = None
    if original:
        base = [p for p in points if p["size"] == 0]
        mark = {"x": x(original), "label": f"original ≈{original:.0f}",
                "dots": [{"y": y(p["rate_pct"]), "label_class": p["label_class"],
                          "title": f"{p['label_class']}: {p['rate_pct']:.1f} % on the original catalogs (n={p['n']})"}
                         for p in base]}
    return {"width": WIDTH, "height": HEIGHT, "lines": lines, "original": mark,
            "xticks": [{"x": x(s), "label": str(s)} for s in sizes],
            "yticks": [{"y": y(v), "label": f"{v} %"} for v in (0, 50, 100)],
            "axis": {"x0": x0, "x1": x1, "y0": y0, "y1": y1}}
