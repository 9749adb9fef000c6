"""The verdict kinds, and what a kind says about the verdict's levels.

:data:`KINDS` are the kinds the oracle gives (``docs/design.md``, words); :func:`kind_problem` is the
one consistency rule every verdict read back from a file obeys (a record log's ``verdict``, a
baseline's decision): a verdict :func:`~pytest_tooleffect.oracle.verdict.score` cannot give is refused,
never counted.  The rule follows :func:`~pytest_tooleffect.oracle.verdict.score`'s precedence: a
passing kind is right at both levels, arguments are judged on the right name only, and a forbidden
entry is hit only by a ``forbidden`` verdict.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["KINDS", "OK_KINDS", "Kind", "kind_problem"]

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


def _bool(value: bool) -> str:
    return str(value).lower()


def kind_problem(kind: str, name_ok: bool, name_args_ok: bool, forbidden: Any = None) -> str | None:
    """What is inconsistent in a verdict's kind and levels, in words; ``None`` when nothing is.

    Args:
        kind: the verdict's kind (one of :data:`KINDS`; another value is itself the problem).
        name_ok: the ``name`` level.
        name_args_ok: the ``name_args`` level.
        forbidden: the forbidden entry the verdict says was hit (``None``: none).

    Returns:
        One line (``kind ok_no_tool with name_ok false and name_args_ok false: an ok decision is right
        at both levels``), or ``None``.
    """
    levels = f"name_ok {_bool(name_ok)} and name_args_ok {_bool(name_args_ok)}"
    if kind not in KINDS:
        return f"unknown kind {kind!r}: a verdict's kind is one of {', '.join(KINDS)}"
    if name_args_ok and not name_ok:
        return "name_args_ok true with name_ok false: arguments are judged on the right name"
    if kind in OK_KINDS and not (name_ok and name_args_ok):
        return f"kind {kind} with {levels}: an ok decision is right at both levels"
    if forbidden is not None and kind != "forbidden":
        return f"kind {kind} with a forbidden entry: a decision that hit a forbidden action has kind forbidden"
    return None
