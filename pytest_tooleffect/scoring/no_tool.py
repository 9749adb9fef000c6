"""The no-tool class's failures sorted into one bucket each, and the reply kind a no-tool label asks for.

Both are fields of a record (:func:`pytest_tooleffect.scoring.build.build_record` sets them); the
report counts the buckets per family × policy and groups the no-tool rows by the reply kind due.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_tooleffect.formats import Action, Case, ToolSpec
from pytest_tooleffect.oracle import Verdict
from pytest_tooleffect.oracle.kinds import OK_KINDS, class_problem

__all__ = ["NO_TOOL_BUCKETS", "no_tool_buckets", "no_tool_failure", "record_problem", "reply_due"]

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
    if case.label is None:
        return None
    reply = verdict.reply
    asked = reply is not None and reply.reply in ("ask", "refuse") and reply.kind_ok is False
    return no_tool_buckets(case.label.label_class, verdict.kind, verdict.emitted, verdict.hallucinated, asked,
                           effect_failed, lambda n: n in tools and tools[n].read_only)[0]


def no_tool_buckets(label_class: str, kind: str, emitted: Iterable[Mapping[str, Any]], hallucinated: Sequence[str],
                    missed_ask: bool, effect_failed: bool,
                    read_only: Callable[[str], bool] | None = None) -> tuple[str | None, ...]:
    """The bucket (:func:`no_tool_failure`'s rule) of a decision, from what its record holds.

    Args:
        label_class: the label's class.
        kind: the verdict's kind.
        emitted: the emitted actions (``tool`` each).
        hallucinated: the called tools not offered.
        missed_ask: the reply check asked for ``ask`` or ``refuse`` and the reply did not do it.
        effect_failed: the decision's effect verdict failed.
        read_only: whether a tool declares ``readOnlyHint``; ``None`` when the tools are not known.

    Returns:
        ``(bucket,)`` (``(None,)``: no bucket); without ``read_only``, a call's bucket is
        ``("redundant_read", "unwanted_write")``: either, as the tools' hints say.
    """
    if label_class != "no_tool" or (kind in OK_KINDS and not effect_failed):
        return (None,)
    if kind == "forbidden":
        return ("forbidden",)
    if hallucinated:
        return ("tool_not_offered",)
    if kind == "wrong_reply":
        return ("should_have_asked",) if missed_ask else ("wrong_reply",)
    if kind == "phantom_action":
        return ("phantom_action",)
    called = [str(e["tool"]) for e in emitted if e.get("tool")]
    if called and kind not in OK_KINDS:
        if read_only is None:
            return ("redundant_read", "unwanted_write")
        return ("redundant_read",) if all(read_only(n) for n in called) else ("unwanted_write",)
    return ("other",)


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


def record_problem(label_class: str, no_tool_failure: str | None, verdict: Any,
                   effect_passed: bool | None) -> str | None:
    """What is inconsistent in a record's class, verdict and ``no_tool_failure``, in words (``None``: nothing).

    The record-level half of the read-back rule (the verdict's own is
    :func:`pytest_tooleffect.oracle.kinds.verdict_problem`): the class the verdict implies
    (:func:`~pytest_tooleffect.oracle.kinds.class_problem`), and the bucket :func:`no_tool_failure`
    gives such a decision (the read and write buckets told apart only by the tools' hints).

    Args:
        label_class: the record's ``class``.
        no_tool_failure: the record's ``no_tool_failure``.
        verdict: the record's verdict (a :class:`~pytest_tooleffect.scoring.record.VerdictRecord`), or
            ``None`` for an error record.
        effect_passed: the record's ``effect.passed`` (``None``: no effect judged).

    Returns:
        One line naming the field, or ``None``.
    """
    if verdict is None:
        return None if no_tool_failure is None else "no_tool_failure on a record with no verdict"
    reply = verdict.reply
    called = [e.get("tool") for e in verdict.emitted] != [None]
    why = class_problem(verdict.kind, label_class, verdict.matched, called)
    if why is not None:
        return why
    missed = reply is not None and reply.reply in ("ask", "refuse") and reply.kind_ok is False
    due = no_tool_buckets(label_class, verdict.kind, verdict.emitted, verdict.hallucinated, missed,
                          effect_passed is False)
    if no_tool_failure not in due:
        said = "null" if no_tool_failure is None else no_tool_failure
        return (f"no_tool_failure {said} on a {label_class} record of kind {verdict.kind}: the scoring gives "
                + " or ".join("null" if b is None else b for b in due))
    return None
