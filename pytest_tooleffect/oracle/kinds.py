"""The verdict kinds, and everything a kind says about the rest of a verdict.

:data:`KINDS` are the kinds the oracle gives (``docs/design.md``, words).  :func:`kind_problem` and
:func:`verdict_problem` are the one consistency rule every verdict read back from a file obeys (a
record log's ``verdict``, a baseline's decision): a verdict
:func:`~pytest_tooleffect.oracle.verdict.score` cannot give is refused, never counted.  The rule is
read off how :mod:`.verdict` builds each verdict (``_score_turn``, ``_score_reply``,
``phantom_check``):

* the levels (:data:`LEVELS`): ``ok`` and ``ok_no_tool`` are right at both; ``right_tool_wrong_args``,
  ``wrong_reply`` and ``phantom_action`` have the right name and fail the arguments (or the reply);
  ``forbidden``, ``wrong_tool``, ``tool_when_none_needed`` and ``none_when_tool_needed`` fail both;
  ``malformed_call`` fails ``name_args`` and may have the right names;
* the turn (:data:`NO_CALL`, :data:`CALLS`): ``ok_no_tool``, ``wrong_reply`` and
  ``none_when_tool_needed`` called nothing (``emitted`` is ``[{"tool": null}]``); ``ok``,
  ``right_tool_wrong_args``, ``wrong_tool`` and ``tool_when_none_needed`` made parsed calls only;
  ``malformed_call`` holds a malformed attempt; ``forbidden`` called the forbidden entry's tool;
  ``phantom_action`` either called nothing or made parsed calls only;
* the entries: a ``forbidden`` entry exactly on ``forbidden``; ``hallucinated`` only on a kind that
  called a tool it did not match (:data:`MAY_HALLUCINATE`), naming emitted tools; a ``reply`` check
  only on a turn that called nothing where null is valid, failed on ``wrong_reply``; a ``phantom``
  claim on every ``phantom_action`` and never on a passing kind or ``wrong_reply``; a ``matched``
  alternative exactly on the kinds that matched one (:data:`MATCHED`);
* the class (:data:`NULL_VALID`, :data:`NULL_NOT_VALID`): a kind that says null was valid (or not)
  fixes whether the label is of the ``no_tool`` class, and so does a null ``matched`` alternative.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["CALLS", "KINDS", "LEVELS", "MATCHED", "MAY_HALLUCINATE", "NO_CALL", "NULL_NOT_VALID", "NULL_VALID",
           "OK_KINDS", "Kind", "class_problem", "kind_problem", "verdict_problem"]

Kind = Literal[
    "ok", "ok_no_tool", "wrong_tool", "tool_when_none_needed", "none_when_tool_needed",
    "forbidden", "right_tool_wrong_args", "malformed_call", "wrong_reply", "phantom_action",
]
#: Every kind a verdict can have, in the report's order.
KINDS: tuple[str, ...] = (
    "ok", "ok_no_tool", "wrong_tool", "tool_when_none_needed", "none_when_tool_needed",
    "forbidden", "right_tool_wrong_args", "malformed_call", "wrong_reply", "phantom_action",
)
#: The passing kinds.
OK_KINDS: tuple[str, ...] = ("ok", "ok_no_tool")
#: ``(name_ok, name_args_ok)`` each kind has (``None``: either; only ``malformed_call``'s name level).
LEVELS: dict[str, tuple[bool | None, bool]] = {
    "ok": (True, True), "ok_no_tool": (True, True), "right_tool_wrong_args": (True, False),
    "wrong_reply": (True, False), "phantom_action": (True, False), "forbidden": (False, False),
    "wrong_tool": (False, False), "tool_when_none_needed": (False, False), "none_when_tool_needed": (False, False),
    "malformed_call": (None, False),
}
#: The kinds of a turn that called nothing.
NO_CALL: frozenset[str] = frozenset({"ok_no_tool", "wrong_reply", "none_when_tool_needed"})
#: The kinds of a turn whose calls were all parsed (at least one).
CALLS: frozenset[str] = frozenset({"ok", "right_tool_wrong_args", "wrong_tool", "tool_when_none_needed"})
#: The kinds that name tools not offered (``hallucinated``) when the turn called any.
MAY_HALLUCINATE: frozenset[str] = frozenset({"forbidden", "malformed_call", "wrong_tool", "tool_when_none_needed"})
#: The kinds whose verdict holds the valid alternative the turn was matched to.
MATCHED: frozenset[str] = frozenset({"ok", "ok_no_tool", "right_tool_wrong_args", "wrong_reply", "phantom_action"})
#: The kinds the oracle gives only where null is a valid action (the ``no_tool`` class).
NULL_VALID: frozenset[str] = frozenset({"ok_no_tool", "wrong_reply", "tool_when_none_needed"})
#: The kinds the oracle gives only where null is not valid (``single`` or ``several``).
NULL_NOT_VALID: frozenset[str] = frozenset({"wrong_tool", "none_when_tool_needed"})


def _bool(value: bool) -> str:
    return str(value).lower()


def kind_problem(kind: str, name_ok: bool, name_args_ok: bool, forbidden: Any = None,
                 label_class: str | None = None) -> str | None:
    """What is inconsistent in a verdict's kind, levels and class, in words; ``None`` when nothing is.

    What a baseline keeps of a verdict; :func:`verdict_problem` checks a whole verdict.

    Args:
        kind: the verdict's kind (one of :data:`KINDS`; another value is itself the problem).
        name_ok: the ``name`` level.
        name_args_ok: the ``name_args`` level.
        forbidden: the forbidden entry the verdict says was hit (``None``: none, or not known).
        label_class: the label's class (``None``: not known).

    Returns:
        One line (``kind forbidden with name_ok true and name_args_ok false: the oracle gives it with
        name_ok false and name_args_ok false``), or ``None``.
    """
    if kind not in KINDS:
        return f"unknown kind {kind!r}: a verdict's kind is one of {', '.join(KINDS)}"
    name, args = LEVELS[kind]
    if (name is not None and name_ok is not name) or name_args_ok is not args:
        want = ("either name_ok" if name is None else f"name_ok {_bool(name)}") + f" and name_args_ok {_bool(args)}"
        return (f"kind {kind} with name_ok {_bool(name_ok)} and name_args_ok {_bool(name_args_ok)}: "
                f"the oracle gives it with {want}")
    if forbidden is not None and kind != "forbidden":
        return f"kind {kind} with a forbidden entry: a decision that hit a forbidden action has kind forbidden"
    return class_problem(kind, label_class) if label_class is not None else None


def class_problem(kind: str, label_class: str, matched: Any = None, called: bool | None = None) -> str | None:
    """Whether the label's class fits the verdict: ``None`` when it does, else why not, in words.

    Args:
        kind: the verdict's kind.
        label_class: ``single``, ``several`` or ``no_tool``.
        matched: the verdict's matched alternative (a null one says null is valid).
        called: the turn called something (``False``: ``emitted`` is the null action; ``None``: not known).

    Returns:
        One line, or ``None``.
    """
    null_valid = (kind in NULL_VALID or (isinstance(matched, Mapping) and "tool" in matched and matched["tool"] is None)
                  or (kind == "phantom_action" and called is False))
    if null_valid and label_class != "no_tool":
        return f"class {label_class} with kind {kind}: the oracle gives it only where null is valid (class no_tool)"
    if kind in NULL_NOT_VALID and label_class == "no_tool":
        return f"class no_tool with kind {kind}: the oracle gives it only where null is not valid"
    return None


def verdict_problem(kind: str, name_ok: bool, name_args_ok: bool, *, forbidden: Mapping[str, Any] | None,
                    emitted: Sequence[Mapping[str, Any]], malformed: Sequence[str], hallucinated: Sequence[str],
                    matched: Any, reply_ok: bool | None, phantom: bool) -> str | None:
    """What is inconsistent in a whole verdict (a record's), in words; ``None`` when nothing is.

    Args:
        kind: the verdict's kind.
        name_ok: the ``name`` level.
        name_args_ok: the ``name_args`` level.
        forbidden: the forbidden entry hit (``None``: none).
        emitted: the emitted actions (``[{"tool": null}]`` for no call; a malformed attempt has ``malformed``).
        malformed: why call attempts could not be parsed.
        hallucinated: the called tools that were not offered.
        matched: the valid alternative matched, or ``None``.
        reply_ok: the reply check's ``ok`` (``None``: no reply check).
        phantom: the verdict holds a phantom claim.

    Returns:
        One line naming the field that contradicts the kind, or ``None``.
    """
    why = kind_problem(kind, name_ok, name_args_ok, forbidden)
    if why is not None:
        return why
    if not emitted:
        return "emitted is empty: the oracle writes the turn's actions, [{\"tool\": null}] for no call"
    called = [e.get("tool") for e in emitted]
    no_call = called == [None] and "malformed" not in emitted[0]
    attempts = sum(1 for e in emitted if "malformed" in e)
    if not no_call and any(t is None for t in called[:len(called) - attempts]):
        return "emitted holds a null action beside calls: a turn either calls or does not"
    if attempts != len(malformed):
        return f"emitted holds {attempts} malformed attempts and malformed {len(malformed)}: one entry each"
    if kind in NO_CALL and not no_call:
        return f"kind {kind} with a call emitted: the oracle gives it to a turn that called nothing"
    if kind in CALLS and (no_call or attempts):
        what = "no call" if no_call else "a malformed attempt"
        return f"kind {kind} with {what} emitted: the oracle gives it to a turn whose calls were all parsed"
    if kind == "phantom_action" and attempts:
        return "kind phantom_action with a malformed attempt emitted: such a turn's kind is malformed_call"
    if kind == "malformed_call" and not attempts:
        return "kind malformed_call with no malformed attempt emitted"
    if kind == "forbidden":
        tool = forbidden.get("tool") if isinstance(forbidden, Mapping) else None
        if tool is None:
            return "kind forbidden without the forbidden entry that was hit"
        if tool not in called:
            return f"kind forbidden with forbidden entry {tool!r} that no emitted call names"
    if hallucinated:
        if kind not in MAY_HALLUCINATE:
            return (f"kind {kind} with hallucinated tools: the oracle names them only on "
                    f"{', '.join(sorted(MAY_HALLUCINATE))}")
        stray = [n for n in hallucinated if n not in called]
        if stray:
            return f"hallucinated {stray[0]!r} that no emitted call names"
    if (matched is not None) != (kind in MATCHED):
        return (f"kind {kind} {'with' if matched is not None else 'without'} a matched alternative: the oracle "
                f"matches one exactly on {', '.join(sorted(MATCHED))}")
    if reply_ok is not None and kind not in ("ok_no_tool", "wrong_reply", "phantom_action"):
        return (f"kind {kind} with a reply check: the oracle checks a reply only where a turn called nothing and "
                "null is valid")
    if kind == "wrong_reply" and reply_ok is not False:
        return "kind wrong_reply without a failed reply check"
    if kind == "ok_no_tool" and reply_ok is False:
        return "kind ok_no_tool with a failed reply check: its kind is wrong_reply"
    if kind == "phantom_action" and not phantom:
        return "kind phantom_action without the phantom claim"
    if phantom and kind in ("ok", "ok_no_tool", "wrong_reply"):
        return f"kind {kind} with a phantom claim: such a turn's kind is phantom_action"
    return None
