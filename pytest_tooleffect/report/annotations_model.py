"""Annotation violations in a report block: MCP tools whose sandboxed effect contradicts their hints.

:class:`AnnotationFindings` is an :class:`~.effects_model.Effects`' ``annotation_violations``:
per tool, how many calls contradicted which hint, with the first such call's case and diff.
They are findings against the MCP server (:mod:`pytest_tooleffect.sandbox.mcp_hints`), never
part of the agent's rates: a read-only tool that wrote does not fail the decision that called it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import Field

from pytest_tooleffect.report.parts import Closed, Count, Part

__all__ = ["AnnotationFindings", "ToolViolations", "ViolationKinds", "find_violations"]


class ViolationKinds(Closed):
    """Calls per contradicted hint."""

    read_only_wrote: Count = 0
    """``readOnlyHint: true``, and the state changed."""
    idempotent_changed_again: Count = 0
    """``idempotentHint: true``, and the same call just repeated changed the state again."""
    non_destructive_removed: Count = 0
    """``destructiveHint: false``, and the call removed or overwrote something for good."""


class ToolViolations(Part):
    """One tool's violations."""

    tool: str
    """The tool's name on its server."""
    hints: dict[str, bool]
    """Its hints as the server listed them (MCP's defaults for the absent ones)."""
    n: Count
    """Calls that contradicted a hint."""
    kinds: ViolationKinds
    """Those calls per contradicted hint."""
    first_case: str
    """The case of the first such call (``probe-pass``: the family's probe pass)."""
    diff: list[str] = Field(default_factory=list)
    """The state probe's diff over that call (``+``/``-``/``~ table key``)."""
    lost: list[str] = Field(default_factory=list)
    """What that call removed for good (a non-destructive tool's violation)."""


class AnnotationFindings(Part):
    """Annotation violations of the block's rows: findings against the server, not the agent."""

    n: Count
    """Violations in all (a call contradicting two hints counts twice)."""
    tools: list[ToolViolations]
    """Per tool, most violations first."""


def find_violations(items: Iterable[tuple[str, Iterable[Any]]]) -> AnnotationFindings | None:
    """The findings of ``(case id, violations)`` pairs (each violation an
    :class:`~pytest_tooleffect.sandbox.mcp_hints.AnnotationViolation`); ``None`` when there is none.
    """
    by_tool: dict[str, dict[str, Any]] = {}
    total = 0
    for case_id, found in items:
        for v in found:
            total += 1
            entry = by_tool.setdefault(v.tool, {"tool": v.tool, "hints": dict(v.hints), "n": 0, "kinds": {},
                                                "first_case": case_id, "diff": list(v.diff), "lost": list(v.lost)})
            entry["n"] += 1
            entry["kinds"][v.kind] = entry["kinds"].get(v.kind, 0) + 1
    if not total:
        return None
    tools = [ToolViolations(**{**e, "kinds": ViolationKinds(**e["kinds"])})
             for e in sorted(by_tool.values(), key=lambda e: (-e["n"], e["tool"]))]
    return AnnotationFindings(n=total, tools=tools)
