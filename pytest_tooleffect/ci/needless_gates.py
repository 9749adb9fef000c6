"""The gates on a hinted family's needless calls (the report's ``needless_calls``):
``max_destructive_unneeded`` and ``min_pct_weighted_no_tool`` (:class:`~.gate_rules.GateSet`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pytest_tooleffect.ci.gate_rules import GateSet
from pytest_tooleffect.report.model import Block

__all__ = ["NEEDLESS_GATES", "judge_needless", "needless_gates"]

#: the gates' names as result lines print them
DESTRUCTIVE = "destructive unneeded"
WEIGHTED = "weighted no_tool"
NEEDLESS_GATES = (DESTRUCTIVE, WEIGHTED)


def needless_gates(gates: GateSet) -> Iterable[tuple[str, str, float, str, str | None]]:
    """The set's needless-call gates as (gate, op, threshold, unit, bound), in the order lines print."""
    if gates.max_destructive_unneeded is not None and gates.max_destructive_unneeded != "off":
        yield (DESTRUCTIVE, "<=", float(gates.max_destructive_unneeded), "", None)
    if gates.min_pct_weighted_no_tool is not None and gates.min_pct_weighted_no_tool != "off":
        yield (WEIGHTED, ">=", float(gates.min_pct_weighted_no_tool), "%", None)


def judge_needless(block: Block, gate: str, threshold: float, min_n: int, result: Callable[..., Any]) -> Any:
    """Judge one needless-call gate on a block; NOT JUDGED when the block has no graded no-tool rows
    (a family without MCP hints, or no no-tool rows) or fewer than ``min_n``.

    Args:
        block: the report's block.
        gate: one of :data:`NEEDLESS_GATES`.
        threshold: the ceiling (count) or floor (percent).
        min_n: the gate set's ``min_n``.
        result: the gate keeper's maker of the result.

    Returns:
        The gate's result.
    """
    section = block.needless_calls
    if section is None or section.n == 0:
        return result("not_judged", "no no-tool rows graded by MCP hints (the family has no mcp: or annotations:)")
    if section.n < min_n:
        return result("not_judged", f"n={section.n} < min_n {min_n}", n=section.n)
    if gate == DESTRUCTIVE:
        count = section.destructive
        return result("passed" if count <= threshold else "failed",
                      f"{count} of {section.n} no-tool decisions called a destructive tool", float(count), section.n)
    ok = section.weighted_pct >= threshold
    return result("passed" if ok else "failed", f"{section.weighted_display} %, severity-weighted, point estimate, "
                  f"n={section.n}", section.weighted_pct, section.n)
