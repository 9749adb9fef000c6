"""MCP tool annotations checked against what the calls did in the sandbox.

A server's hints are claims (MCP 2025-06-18, ``ToolAnnotations``; absent = the worst case: not
read-only, destructive, not idempotent, open world).  Run in an MCP world, every call carries the
state probe's diff over it, what it removed for good and whether it repeated the call just
before it; :func:`violations` finds the calls whose effect contradicts the hints:

* ``read_only_wrote``: ``readOnlyHint: true`` and the state changed;
* ``idempotent_changed_again``: ``idempotentHint: true``, the same call (tool and arguments)
  came just before, and this one changed the state again;
* ``non_destructive_removed``: ``destructiveHint: false`` (on a tool not read-only) and the call
  removed or overwrote something for good (the probe's :func:`lost`: for git, content in no
  file, index entry or reachable commit any more; a ref moved off a commit no ref reaches).

They are findings against the server, never the agent's verdict: the record lists them under
``annotation_violations`` and the report counts them per tool in their own section.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["VIOLATION_KINDS", "AnnotationViolation", "effective_hints", "violations"]

VIOLATION_KINDS = ("read_only_wrote", "idempotent_changed_again", "non_destructive_removed")
#: MCP's defaults for an absent hint (the worst case)
DEFAULTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}


class AnnotationViolation(BaseModel):
    """One call whose effect contradicts its tool's hints (a finding against the server)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    """The tool's name on the server."""
    kind: Literal["read_only_wrote", "idempotent_changed_again", "non_destructive_removed"]
    """Which hint the effect contradicts."""
    hints: dict[str, bool]
    """The tool's hints as the server listed them, MCP's defaults filled in."""
    arguments: Any = None
    """The call's arguments."""
    diff: list[str] = Field(default_factory=list)
    """The state probe's diff over the call (``+``/``-``/``~ table key``), at most 20 lines."""
    lost: list[str] = Field(default_factory=list)
    """What the call removed for good (``non_destructive_removed``)."""
    step: int = 1
    """The step the call was made in (``0``: the family's probe pass)."""


def effective_hints(annotations: Mapping[str, Any] | None) -> dict[str, bool]:
    """The four hints with MCP's defaults for the absent ones."""
    given = annotations or {}
    return {k: bool(given[k]) if isinstance(given.get(k), bool) else v for k, v in DEFAULTS.items()}


def violations(calls: Iterable[Mapping[str, Any]], step: int = 1) -> list[AnnotationViolation]:
    """The annotation violations among executed calls.

    Args:
        calls: call records, each with ``name``, ``arguments`` and the MCP world's ``mcp``
            extras (``annotations``, ``changed``, ``diff``, ``lost``, ``repeat``); calls without
            them (another world's) are skipped.
        step: the step the calls were made in.

    Returns:
        One violation per contradicted hint, in call order.
    """
    out: list[AnnotationViolation] = []
    for call in calls:
        facts = call.get("mcp")
        if not isinstance(facts, Mapping) or not call.get("executed", True):
            continue
        hints = effective_hints(facts.get("annotations"))
        changed = bool(facts.get("changed"))
        kinds: list[str] = []
        if hints["readOnlyHint"] and changed:
            kinds.append("read_only_wrote")
        if hints["idempotentHint"] and facts.get("repeat") and changed:
            kinds.append("idempotent_changed_again")
        if not hints["readOnlyHint"] and not hints["destructiveHint"] and facts.get("lost"):
            kinds.append("non_destructive_removed")
        for kind in kinds:
            out.append(AnnotationViolation(tool=str(call.get("name")), kind=kind, hints=hints,  # type: ignore[arg-type]
                                           arguments=call.get("arguments"), diff=list(facts.get("diff") or []),
                                           lost=list(facts.get("lost") or []), step=step))
    return out
