"""Whole-conversation success of a self-steered rollout, judged turn by turn against a reference.

Pure: takes, per user turn, what the agent did and how the world then compared with the world
the reference trajectory (the ground truth) produced.  The checks follow BFCL's multi-turn
checker (``bfcl_eval/eval_checker/multi_turn_eval/multi_turn_checker.py``, bfcl-eval
2026.3.23), in its order, turn by turn, the first failure deciding:

0. the agent was still calling tools when the turn's step limit ran out: ``step_limit`` (BFCL:
   ``multi_turn:force_terminated``; the conversation ends there);
1. a turn whose reference makes calls, where the agent made none: ``no_call_when_needed``
   (BFCL: ``multi_turn:empty_turn_model_response``);
2. a turn whose reference makes no call (the agent should ask, or say it cannot): BFCL skips
   its checks; here a call there fails the conversation as ``call_at_no_tool_turn`` unless
   ``no_tool_turns="bfcl"`` (the deliberate difference in the README's "How we differ from
   BFCL": a no-tool decision is a decision);
3. the world after the turn must equal the reference's world: ``state_mismatch``
   (``multi_turn:instance_state_mismatch``);
4. every result the reference's calls of the turn returned must be among the results of the
   agent's calls so far in the conversation, as a multiset, in any order:
   ``response_mismatch`` (``multi_turn:execution_response_mismatch``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CONVERSATION_KINDS", "ConversationVerdict", "TurnCheck", "judge_conversation", "missing_results"]

ConversationKind = Literal["ok", "step_limit", "no_call_when_needed", "call_at_no_tool_turn", "state_mismatch",
                           "response_mismatch"]
#: conversation verdict kinds
CONVERSATION_KINDS: tuple[str, ...] = ("ok", "step_limit", "no_call_when_needed", "call_at_no_tool_turn",
                                       "state_mismatch", "response_mismatch")


@dataclass(frozen=True)
class TurnCheck:
    """One user turn of a rollout, beside the reference.

    Attributes:
        turn: 0-based turn index.
        reference_results: the results (text) of the reference's calls of this turn; empty when
            the reference makes no call.
        results: the results of the agent's calls in this turn, in order.
        state_diff: ``diff_worlds(reference_world, agent_world)`` after the turn (empty: equal).
        step_limit: the agent was still calling tools when the turn's step limit ran out.
    """

    turn: int
    reference_results: tuple[str, ...]
    results: tuple[str, ...]
    state_diff: Mapping[str, Any] = field(default_factory=dict)
    step_limit: bool = False


@dataclass(frozen=True)
class ConversationVerdict:
    """Whether the whole conversation succeeded, and the first failure.

    Attributes:
        kind: ``ok`` or the first failure's kind (:data:`CONVERSATION_KINDS`).
        turn: the turn that failed (``None`` when ``ok``).
        message: one line saying what failed.
        turns_ok: turns passed before the first failure (all turns when ``ok``).
    """

    kind: ConversationKind
    turn: int | None = None
    message: str = ""
    turns_ok: int = 0

    @property
    def passed(self) -> bool:
        """``kind == "ok"``."""
        return self.kind == "ok"

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for records."""
        return {"passed": self.passed, "kind": self.kind, "turn": self.turn, "message": self.message,
                "turns_ok": self.turns_ok}


def missing_results(reference: Sequence[str], results: Sequence[str]) -> list[str]:
    """The reference results not found among ``results``, one occurrence consumed per match
    (BFCL's ``_is_subsequence_unordered``).
    """
    pool = list(results)
    missing = []
    for item in reference:
        try:
            pool.remove(item)
        except ValueError:
            missing.append(item)
    return missing


def judge_conversation(turns: Sequence[TurnCheck],
                       no_tool_turns: Literal["decision", "bfcl"] = "decision") -> ConversationVerdict:
    """Judge a rollout's turns in order (see the module docstring).

    Args:
        turns: one :class:`TurnCheck` per user turn, in order.
        no_tool_turns: ``decision`` (a call at a turn whose reference makes none fails) or
            ``bfcl`` (such turns are not checked, as BFCL does).

    Returns:
        The :class:`ConversationVerdict`.
    """
    so_far: list[str] = []
    for done, check in enumerate(turns):
        so_far += check.results
        if check.step_limit:
            return ConversationVerdict("step_limit", check.turn,
                                       f"turn {check.turn}: still calling tools at the step limit "
                                       f"({len(check.results)} call(s))", done)
        if check.reference_results and not check.results:
            return ConversationVerdict("no_call_when_needed", check.turn,
                                       f"turn {check.turn}: no call where the reference makes "
                                       f"{len(check.reference_results)}", done)
        if not check.reference_results:
            if check.results and no_tool_turns == "decision":
                return ConversationVerdict("call_at_no_tool_turn", check.turn,
                                           f"turn {check.turn}: {len(check.results)} call(s) where the reference "
                                           "makes none (ask, or say it cannot be done)", done)
            continue
        if check.state_diff:
            where = "; ".join(f"{t}: {_keys(d)}" for t, d in check.state_diff.items())
            return ConversationVerdict("state_mismatch", check.turn,
                                       f"turn {check.turn}: the world differs from the reference's ({where})", done)
        missing = missing_results(check.reference_results, so_far)
        if missing:
            return ConversationVerdict("response_mismatch", check.turn,
                                       f"turn {check.turn}: {len(missing)} reference result(s) never returned to "
                                       f"the agent (first: {missing[0][:120]!r})", done)
    return ConversationVerdict("ok", None, "", len(turns))


def _keys(entry: Mapping[str, Any]) -> str:
    rows = [*(u.get("after", {}) for u in entry.get("updated", [])), *entry.get("inserted", []),
            *entry.get("deleted", [])]
    names = [str(next(iter(r.values()), "?")) for r in rows]
    return ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")
