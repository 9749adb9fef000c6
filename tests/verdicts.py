"""Verdicts and records for tests, built as the oracle and the scoring build them for a kind.

A test that writes a record by hand states the kind; the fields the kind fixes (the levels, the
emitted turn, the forbidden entry, the matched alternative, the reply check, the phantom claim,
``no_tool_failure``) follow it, so that every record read back obeys the read-back rule
(:func:`pytest_tooleffect.oracle.kinds.verdict_problem`, :func:`pytest_tooleffect.scoring.no_tool.record_problem`).
"""

from __future__ import annotations

from typing import Any

from pytest_tooleffect.oracle.kinds import CALLS, LEVELS, NO_CALL
from pytest_tooleffect.scoring.no_tool import no_tool_buckets

__all__ = ["no_tool_bucket", "verdict"]


def verdict(kind: str, tool: str = "t", *, name_ok: bool | None = None, **fields: Any) -> dict[str, Any]:
    """A record's ``verdict`` of ``kind`` calling ``tool`` (or nothing, for a kind of a turn that called nothing).

    Args:
        kind: the verdict's kind.
        tool: the tool the turn called (the forbidden one for ``forbidden``).
        name_ok: ``malformed_call``'s name level (the kind fixes every other's; default ``False``).
        fields: more verdict fields, written over the derived ones.

    Returns:
        The verdict as a record holds it.
    """
    name, args = LEVELS.get(kind, (True, True))
    out: dict[str, Any] = {"name_ok": bool(name_ok) if name is None else name, "name_args_ok": args, "kind": kind,
                           "fields": [], "unruled": []}
    null_turn = kind in NO_CALL
    out["emitted"] = [{"tool": None}] if null_turn else [{"tool": tool, "args": {}}]
    if kind == "malformed_call":
        out["emitted"] = [{"tool": tool, "malformed": f"arguments of {tool} are not valid JSON"}]
        out["malformed"] = [f"arguments of {tool} are not valid JSON"]
    if kind == "forbidden":
        out["forbidden"] = {"tool": tool}
    if kind in CALLS - {"wrong_tool", "tool_when_none_needed"} or kind == "phantom_action":
        out["matched"] = {"tool": tool}
    if kind in ("ok_no_tool", "wrong_reply"):
        out["matched"] = {"tool": None}
    if kind == "wrong_reply":
        out["reply"] = {"ok": False, "reply": "answer", "kind_ok": True, "failures": ["must: x"], "approximate": True}
    if kind == "phantom_action":
        out["phantom"] = {"kind": "action", "claim": "I did it.", "verb": "done", "tools": [tool],
                          "why": f"no call to {tool} in the conversation"}
    out.update(fields)
    return out


def no_tool_bucket(cls: str, v: dict[str, Any] | None, effect_failed: bool = False) -> str | None:
    """The ``no_tool_failure`` the scoring gives a record of class ``cls`` and verdict ``v`` (a call's is
    ``unwanted_write``: the tools' hints are not known here).
    """
    if v is None:
        return None
    reply = v.get("reply") or {}
    missed = reply.get("reply") in ("ask", "refuse") and reply.get("kind_ok") is False
    return no_tool_buckets(cls, v["kind"], v.get("emitted", []), v.get("hallucinated", []), missed,
                           effect_failed)[-1]
