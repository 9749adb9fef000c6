"""The effect level of a report block: the rows run in a sandbox, as typed data.

:class:`Effects` is a :class:`~.model.Block`'s ``effects``: per-class effect rates, effect kinds,
recovery from injected faults, self-steered rollouts, conversations played through and the
isolation in force.
"""

from __future__ import annotations

from pytest_tooleffect.report.annotations_model import AnnotationFindings
from pytest_tooleffect.report.parts import Count, Part, Pct, PerClass

__all__ = [
    "ConversationSummary",
    "EffectKindCounts",
    "EffectRate",
    "Effects",
    "Recovery",
    "RecoveryKinds",
    "RolloutSummary",
    "SandboxSummary",
]


class EffectRate(Part):
    """One class's rate at the effect level."""

    n: Count
    """Rows of the class run in a sandbox."""
    correct: Count
    """Rows whose end state meets the effects."""
    rate_pct: Pct | None
    """``correct / n`` as a percentage; ``null`` for no rows."""
    rate_display: str
    """``rate_pct`` for display."""
    wilson95_pct: tuple[float, float] | None
    """Wilson 95 % interval, percentages; ``null`` for no rows."""


class EffectKindCounts(Part):
    """Rows per effect kind."""

    ok: Count
    """The end state meets the effects."""
    forbidden_effect: Count
    """A forbidden change happened."""
    unexpected_change: Count
    """A change no effect allows."""
    effect_missing: Count
    """An expected change did not happen."""


class RecoveryKinds(Part):
    """How the agent answered the first injected failure."""

    retried: Count
    """Called the failed tool again."""
    other_path: Count
    """Called other tools."""
    told_user: Count
    """Answered without a tool call."""
    none: Count
    """The rollout ended at its step limit right after the failure."""
    not_observed: Count
    """No step after the failure (a single decision, or a replay)."""


class Recovery(Part):
    """Recovery from injected faults."""

    observed: Count
    """Rows where a failure fired and a next step was seen."""
    recovered: Count
    """Of those, rows that retried, took another path or told the user."""
    rate_pct: Pct | None
    """``recovered / observed``; ``null`` when nothing was observed."""
    rate_display: str
    """``rate_pct`` for display."""
    by_kind: RecoveryKinds
    """Rows per recovery kind."""


class RolloutSummary(Part):
    """Self-steered rollouts (live policies only) against the single-step rate on the same cases."""

    n: Count
    """Cases rolled out."""
    limit: int
    """The step limit."""
    single_step_pct: Pct
    """First decision correct at name + arguments (teacher-forced, an upper bound)."""
    single_step_display: str
    """``single_step_pct`` for display."""
    self_steered_pct: Pct
    """End state meets the effects."""
    self_steered_display: str
    """``self_steered_pct`` for display."""
    mean_steps: float
    """Mean steps taken, 2 digits."""
    stopped: dict[str, int]
    """Rollouts per reason they stopped."""


class ConversationSummary(Part):
    """Whole conversations played through by a live policy (self-steered) beside the teacher-forced
    decisions of the same conversations.
    """

    n: Count
    """Conversations played through."""
    limit: int
    """The step limit per user turn."""
    passed: Count
    """Conversations that passed every turn."""
    self_steered_pct: Pct
    """``passed / n``: whole-conversation success."""
    self_steered_display: str
    """``self_steered_pct`` for display."""
    decisions: Count
    """Decision points (scored rows) of the same conversations, teacher-forced."""
    decisions_pct: Pct | None
    """Decision points right at name + arguments and in effect (teacher-forced)."""
    decisions_display: str
    """``decisions_pct`` for display."""
    turns: Count
    """User turns of the same conversations with a scored decision point."""
    turns_pct: Pct | None
    """Turns whose every decision point is right (teacher-forced, per turn)."""
    turns_display: str
    """``turns_pct`` for display."""
    kinds: dict[str, int]
    """Conversations per verdict kind (``ok`` or the first failure's)."""


class SandboxSummary(Part):
    """The sandboxes the rows ran in."""

    providers: list[str]
    """Providers, sorted."""
    restrictions: list[str]
    """Isolation measures in force in any sandbox, sorted."""
    restrictions_missing: list[str]
    """Isolation measures missing in any sandbox, sorted."""


class Effects(Part):
    """Effect-level results of the rows run in a sandbox."""

    n: Count
    """Rows run in a sandbox."""
    classes: PerClass[EffectRate]
    """Rates per class."""
    micro_pct: Pct | None
    """Micro-average."""
    micro_display: str
    """``micro_pct`` for display."""
    macro_pct: Pct | None
    """Macro-average over the classes with rows."""
    macro_display: str
    """``macro_pct`` for display."""
    kinds: EffectKindCounts
    """Rows per effect kind."""
    recovery: Recovery
    """Recovery from injected faults."""
    rollout: RolloutSummary | None
    """Self-steered rollouts; ``null`` when none ran."""
    conversations: ConversationSummary | None = None
    """Conversations played through; ``null`` when none was."""
    sandbox: SandboxSummary
    """The isolation in force."""
    annotation_violations: AnnotationFindings | None = None
    """MCP tools whose effect contradicted their hints (findings against the server, not counted in
    any rate); ``null`` when none did."""
