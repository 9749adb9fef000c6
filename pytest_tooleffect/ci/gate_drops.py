"""The ``max_drop`` gate: how many points a perturbed-catalog variant may cost a family × policy,
judged on the report's robustness section (``docs/robustness.md``)::

    [tool.tooleffect.gates."*"]
    max_drop = {shuffle = 2, scale = 10}   # percentage points, paired, per variant or kind

A key is a variant's name (``scale-32``) or a kind (``scale``: every variant of it, the largest
drop judged).  The drop is the robustness section's ``all`` row: the original's rate minus the
variant's on the same cases and trials (name + arguments), so it is paired by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_tooleffect.report.robustness import Robustness, RobustnessRow
from pytest_tooleffect.scoring.record import Record

__all__ = ["DROP_UNIT", "drop_gate", "judge_drop"]

#: the unit of a drop gate's threshold and value: percentage points
DROP_UNIT = "pts"


def drop_gate(key: str) -> str:
    """The gate's name in results and lines: ``drop shuffle``."""
    return f"drop {key}"


def judge_drop(family: str, policy: str, gate: str, threshold: float, robustness: Robustness | None,
               records: Sequence[Record], result: Callable[..., Any]) -> Any:
    """Judge one ``max_drop`` gate on one block.

    Args:
        family: the block's family.
        policy: the block's policy.
        gate: ``drop KEY`` (:func:`drop_gate`).
        threshold: the most points the variant may cost.
        robustness: the report's robustness section (``None``: no variant ran).
        records: the block's records (a variant's block is not judged: its drop is its original's).
        result: the gate's result maker (``result(status, detail, value=None, n=None)``).

    Returns:
        The gate's result: ``failed`` when the largest drop of the matching variants exceeds the
        threshold, ``not_applicable`` on a variant's own block, ``not_judged`` when no such
        variant has a paired decision.
    """
    key = gate.removeprefix("drop ")
    if any(r.perturbation is not None for r in records):
        return result("not_applicable", "a variant's block: its drop is judged on its original's block")
    rows: list[RobustnessRow] = [r for r in (robustness.rows if robustness is not None else [])
                                 if r.family == family and r.policy == policy and r.label_class == "all"
                                 and key in (r.variant, r.kind) and r.drop_pct is not None]
    if not rows:
        return result("not_judged", f"no paired decisions of a variant {key} of this family x policy")
    worst = max(rows, key=lambda r: (r.drop_pct or 0.0))
    drop = worst.drop_pct or 0.0
    ok = drop <= threshold
    which = f"{worst.variant}: " if worst.variant != key or len(rows) > 1 else ""
    detail = (f"{which}{drop:.1f} pts, {worst.original.display} % -> {worst.perturbed.display} % on "
              f"n={worst.original.n} pairs, {worst.broke} broke, {worst.fixed} fixed, McNemar p={worst.p_value:.3g}")
    return result("passed" if ok else "failed", detail, drop, worst.original.n)
