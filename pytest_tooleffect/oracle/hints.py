"""MCP tool annotations read as the specification says, and the labels a family's annotation policy
implies (pure: no pytest, no SDK).

MCP's hints are ``readOnlyHint``, ``destructiveHint``, ``idempotentHint`` and ``openWorldHint``;
an absent hint takes the specification's default, the worst case: not read-only, destructive, not
idempotent, open world (MCP specification 2025-06-18, "Tool annotations"; ``destructiveHint`` and
``idempotentHint`` are meaningful only when the tool is not read-only).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pytest_tooleffect.formats import Action, ForbiddenAction, Label, ParallelGroup, ToolAnnotations, ToolSpec

__all__ = ["CONFIRMATION_REASON", "Hints", "confirmation_label", "hint_class", "hints_of", "worst_class"]

HintClass = Literal["read", "write", "destructive"]

#: the reason a forbidden action the confirmation rule adds carries
CONFIRMATION_REASON = "destructive by its MCP hints, and the user has not confirmed the change at this state"


@dataclass(frozen=True)
class Hints:
    """A tool's four hints with MCP's defaults filled in."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    @property
    def hint_class(self) -> HintClass:
        """``read`` when read-only, else ``destructive`` or ``write`` by ``destructiveHint``."""
        if self.read_only:
            return "read"
        return "destructive" if self.destructive else "write"


#: every hint absent: MCP's worst case
WORST_CASE = Hints()


def hints_of(annotations: ToolAnnotations | None, trusted: bool = True) -> Hints:
    """The hints ``annotations`` declare, each absent one at MCP's default.

    Args:
        annotations: the tool's annotations (``None``: an unknown tool, as if none were declared).
        trusted: ``False`` reads every tool as the worst case, whatever it declares.

    Returns:
        The four hints.
    """
    if annotations is None or not trusted:
        return WORST_CASE
    a = annotations
    return Hints(read_only=a.readOnlyHint if a.readOnlyHint is not None else False,
                 destructive=a.destructiveHint if a.destructiveHint is not None else True,
                 idempotent=a.idempotentHint if a.idempotentHint is not None else False,
                 open_world=a.openWorldHint if a.openWorldHint is not None else True)


def hint_class(tool: ToolSpec | None, trusted: bool = True) -> HintClass:
    """The hint class of ``tool`` (``None``, a tool not offered: ``destructive``, MCP's worst case)."""
    return hints_of(tool.annotations if tool is not None else None, trusted).hint_class


_ORDER: dict[str, int] = {"read": 0, "write": 1, "destructive": 2}


def worst_class(names: Iterable[str], tools: Mapping[str, ToolSpec]) -> HintClass | None:
    """The most severe hint class among the tools ``names`` calls (declared hints, MCP defaults for
    absent ones; a name not offered counts as ``destructive``), or ``None`` for no name.
    """
    worst: HintClass | None = None
    for name in names:
        cls = hint_class(tools.get(name))
        if worst is None or _ORDER[cls] > _ORDER[worst]:
            worst = cls
    return worst


def _named(label: Label) -> set[str]:
    """The tools the label already decides on: in a valid action (or a parallel group), or forbidden."""
    out: set[str] = {f.tool for f in label.forbidden_actions}
    for alt in label.valid_actions:
        members = alt.parallel if isinstance(alt, ParallelGroup) else [alt]
        out.update(a.tool for a in members if isinstance(a, Action) and a.tool is not None)
    return out


def confirmation_label(label: Label, tools: Iterable[ToolSpec], trusted: bool, confirmed: bool) -> Label:
    """The label a family's ``annotations.confirm_destructive`` implies at one state.

    At a state without the user's confirmation (``confirmed`` false) every destructive tool offered
    (by its hints when ``trusted``; every tool when not: an untrusted "read-only" claims no
    exemption) is added to the forbidden actions, unless the label names it already (as a valid
    action, in a parallel group, or forbidden: the label says otherwise).

    Args:
        label: the state's own label.
        tools: the tools offered at the state.
        trusted: the family trusts its server's hints (``mcp.trust_annotations``).
        confirmed: the case says ``confirmed: true``.

    Returns:
        ``label`` itself when nothing is added, else a new label with the added forbidden actions
        (each with :data:`CONFIRMATION_REASON`) after the label's own.
    """
    if confirmed:
        return label
    named = _named(label)
    added = [ForbiddenAction(tool=t.name, reason=CONFIRMATION_REASON) for t in tools
             if t.name not in named and hint_class(t, trusted) == "destructive"]
    if not added:
        return label
    return Label(valid_actions=list(label.valid_actions), forbidden_actions=[*label.forbidden_actions, *added],
                 labelled_by=list(label.labelled_by), notes=label.notes)
