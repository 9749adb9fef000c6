"""The no-tool class's failures sorted into one bucket each, and the reply kind a no-tool label asks for.

Both are fields of a record (:func:`pytest_tooleffect.scoring.build.build_record` sets them); the
report counts the buckets per family × policy and groups the no-tool rows by the reply kind due.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_tooleffect.formats import Action, Case, ToolSpec
from pytest_tooleffect.oracle import Verdict

__all__ = ["NO_TOOL_BUCKETS", "no_tool_failure", "reply_due"]

NO_TOOL_BUCKETS = ("redundant_read", "unwanted_write", "forbidden", "should_have_asked", "tool_not_offered",
                   "wrong_reply", "phantom_action", "other")


def no_tool_failure(case: Case, verdict: Verdict, tools: Mapping[str, ToolSpec],
                    effect_failed: bool = False) -> str | None:
    """Sort a failed decision of the no-tool class into exactly one bucket (DESIGN.md scoring rule 7).

    A decision of the no-tool class fails when its kind is not ``ok``/``ok_no_tool`` (the name or
    the name + args level) or, for a world case, its effect failed.  The buckets, first match wins:

    1. ``forbidden``: the kind is ``forbidden``;
    2. ``tool_not_offered``: some call names a tool not offered at the state (a hallucinated tool);
    3. ``should_have_asked``: the kind is ``wrong_reply`` and the null action asked for
       ``reply: ask`` or ``refuse``, which the reply did not do;
    4. ``wrong_reply``: any other ``wrong_reply`` (a wrong reply kind for ``answer``, or a
       ``must``/``must_not`` criterion failed);
    5. ``phantom_action``: the kind is ``phantom_action`` (the reply claims what the conversation
       does not hold);
    6. ``redundant_read``: a tool was called (whatever the kind) and every called tool declares
       ``readOnlyHint``;
    7. ``unwanted_write``: a tool was called and some called tool does not;
    8. ``other``: the rest (a call without a name; an effect failure after an acceptable decision).

    Args:
        case: the case (its label gives the class).
        verdict: the oracle's verdict on the decision.
        tools: the tools offered, by name (their ``readOnlyHint``).
        effect_failed: the decision's effect verdict failed.

    Returns:
        One of :data:`NO_TOOL_BUCKETS`; ``None`` when the case is not in the no-tool class or the
        decision passed.
    """
    if case.label is None or case.label.label_class != "no_tool" or (verdict.passed and not effect_failed):
        return None
    if verdict.kind == "forbidden":
        return "forbidden"
    if verdict.hallucinated:
        return "tool_not_offered"
    if verdict.kind == "wrong_reply":
        reply = verdict.reply
        if reply is not None and reply.reply in ("ask", "refuse") and reply.kind_ok is False:
            return "should_have_asked"
        return "wrong_reply"
    if verdict.kind == "phantom_action":
        return "phantom_action"
    called = [e["tool"] for e in verdict.emitted if e.get("tool")]
    if called and not verdict.passed:
        if all(n in tools and tools[n].read_only for n in called):
            return "redundant_read"
        return "unwanted_write"
    return "other"


def reply_due(case: Case) -> str | None:
    """The reply kind the label's first ``tool: null`` action that asks one asks for (``None``: none asked).

    With several null actions asking different kinds (``ask`` or ``refuse``, say) this is the
    first in label order whatever the reply did, so that a case stays in one ``reply_due`` group
    of the report across policies and trials; the verdict's ``matched`` names the null action
    the reply met (or came closest to).
    """
    assert case.label is not None
    for alt in case.label.valid_actions:
        if isinstance(alt, Action) and alt.tool is None and alt.reply is not None:
            return alt.reply
    return None
