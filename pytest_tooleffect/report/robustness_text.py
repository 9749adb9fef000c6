"""The robustness section as text: terminal lines and Markdown (``docs/robustness.md``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_tooleffect.report.robustness import Robustness, RobustnessRow

__all__ = ["robustness_lines", "robustness_markdown"]

#: flipped decisions a terminal or Markdown row names (the JSON report lists more)
_FLIPS_SHOWN = 3


def _p(p: float) -> str:
    return f"{p:.3g}"


def _drop(row: RobustnessRow) -> str:
    return "–" if row.drop_pct is None else f"{0.0 - row.drop_pct:+.1f} pts".replace("-0.0", "+0.0")


def _flips(row: RobustnessRow) -> str:
    broke = [f.id for f in row.flips if f.direction == "broke"]
    if not broke:
        return ""
    more = f" and {row.broke - _FLIPS_SHOWN} more" if row.broke > _FLIPS_SHOWN else ""
    return "; broke: " + ", ".join(broke[:_FLIPS_SHOWN]) + more


def robustness_lines(rob: Robustness | None) -> list[str]:
    """The terminal's lines: per family × policy × variant, the rate on the original catalog beside
    the perturbed one on the same cases, the drop, McNemar's p and whether it is flagged; per class
    in brackets; then each scale curve.

    Returns:
        The lines (none when the run had no variant).
    """
    if rob is None:
        return []
    out = [f"robustness (name+args, paired with the original catalog; flagged: more broke than fixed and exact "
           f"McNemar p < {rob.alpha:g}):"]
    classes: dict[tuple[str, str, str], list[RobustnessRow]] = {}
    for row in rob.rows:
        classes.setdefault((row.family, row.policy, row.variant), []).append(row)
    for (family, policy, variant), rows in classes.items():
        whole = next(r for r in rows if r.label_class == "all")
        per = ", ".join(f"{r.label_class} {r.original.display}→{r.perturbed.display}" for r in rows
                        if r.label_class != "all")
        flag = " FLAGGED" if whole.flagged else ""
        out.append(f"  {family} · {policy} · {variant}: {whole.original.display} % → {whole.perturbed.display} % "
                   f"({_drop(whole)}, n={whole.original.n}, {whole.broke} broke, {whole.fixed} fixed, "
                   f"McNemar p={_p(whole.p_value)}) [{per}]{flag}{_flips(whole)}")
    for curve in rob.curves:
        pts = [p for p in curve.points if p.label_class == "all"]
        shown = ", ".join(f"{'original' if p.size == 0 else p.size}: "
                          f"{'–' if p.rate_pct is None else f'{p.rate_pct:.1f} %'}" for p in pts)
        out.append(f"  {curve.family} · {curve.policy} · rate by catalog size: {shown}")
    return out


def robustness_markdown(rob: Robustness | None, cell: Callable[[Any], str] = str) -> list[str]:
    """The Markdown summary's robustness table (empty when the run had no variant).

    Args:
        rob: the report's robustness section.
        cell: how a name is written in a table cell (the summary's escaping).
    """
    if rob is None:
        return []
    out = ["### Robustness to the tool catalog", "",
           f"Each variant beside the original catalog on the same cases (name + arguments); flagged when more "
           f"decisions broke than were fixed and the exact McNemar p < {rob.alpha:g}.", "",
           "| family | policy | variant | class | original | perturbed | drop | broke / fixed | McNemar p | flagged |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rob.rows:
        out.append(f"| {cell(r.family)} | {cell(r.policy)} | {cell(r.variant)} | {r.label_class} | "
                   f"{r.original.display} % | {r.perturbed.display} % | {_drop(r)} | {r.broke} / {r.fixed} | "
                   f"{_p(r.p_value)} | {'**yes**' if r.flagged else 'no'} |")
    return [*out, ""]
