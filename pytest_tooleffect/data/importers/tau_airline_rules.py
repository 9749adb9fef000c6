"""Rule labeller for τ-bench airline states (labelling pass 1).

Uses only the task's gold actions and the airline policy, never ``recorded``:

* a gold write is valid where the conversation has reached it with the user's explicit
  confirmation (the user's last message says yes to an assistant message that listed it);
  before that, the write is forbidden (the policy requires confirmation first);
* a write tool that no gold action uses is forbidden, and so is ``transfer_to_human_agents``
  when the gold actions never transfer;
* a read is valid where it fetches something the next step needs: the user's profile once
  the user id is known, a gold read whose arguments already appear in the conversation,
  a reservation the user named that has not been read yet;
* a reply (``tool: null``) is valid where nothing is left to do, or a question must be asked
  (user id unknown, a write awaiting confirmation, nothing readable yet), and after a tool
  result (to report it).

The rules are deliberately simple and auditable; an independent manual pass and
adjudication produce the final labels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_tooleffect.data.importers.tau_airline_tools import READ_ONLY, WRITE_TOOLS

__all__ = ["rule_label"]

_CONFIRM = re.compile(
    r"\b(yes|yeah|yep|confirm(ed)?|proceed|go ahead|please do|sounds good|that'?s (correct|right|fine)|correct|"
    r"i agree|do it|ok(ay)?|sure)\b",
    re.I,
)
_DECLINE = re.compile(r"\b(no|don'?t|do not|wait|hold on|not yet|instead)\b", re.I)
_USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{3,5}\b")
_RES_ID = re.compile(r"\b[A-Z0-9]{6}\b")


def _text(m: Mapping[str, Any]) -> str:
    return str(m.get("content") or "")


def _calls(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", tc)
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {}
            out.append((fn["name"], args if isinstance(args, dict) else {}))
    return out


def _same_call(a: tuple[str, Mapping[str, Any]], b: tuple[str, Mapping[str, Any]]) -> bool:
    return a[0] == b[0] and json.dumps(a[1], sort_keys=True).lower() == json.dumps(b[1], sort_keys=True).lower()


def _values(obj: Any) -> list[str]:
    if isinstance(obj, Mapping):
        return [v for x in obj.values() for v in _values(x)]
    if isinstance(obj, list):
        return [v for x in obj for v in _values(x)]
    return [str(obj)]


def rule_label(messages: Sequence[Mapping[str, Any]], gold: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Label one state from the gold actions and the policy.

    Args:
        messages: the conversation before the decision (no system prompt).
        gold: the task's gold actions, ``[{"name", "kwargs"}]``.

    Returns:
        A label mapping: ``valid_actions``, ``forbidden_actions``, ``labelled_by``.

    """
    history = _calls(messages)
    gold_calls = [(g["name"], dict(g.get("kwargs") or {})) for g in gold]
    done = [any(_same_call(g, h) for h in history) for g in gold_calls]
    pending = [g for g, d in zip(gold_calls, done) if not d]
    convo_text = "\n".join(_text(m) for m in messages)
    last = messages[-1] if messages else {}
    prev_assistant = next((m for m in reversed(messages[:-1]) if m.get("role") == "assistant"
                           and not m.get("tool_calls")), None)
    user_ids = set(_USER_ID.findall(" ".join(_text(m) for m in messages if m.get("role") == "user")))
    user_ids |= {a.get("user_id") for n, a in history if a.get("user_id")}
    fetched_users = {a.get("user_id") for n, a in history if n == "get_user_details"}
    fetched_res = {a.get("reservation_id") for n, a in history if n == "get_reservation_details"}

    valid: list[dict[str, Any]] = []
    forbidden: list[dict[str, Any]] = []
    must_ask = False

    def add(tool: str | None, args: Mapping[str, Any] | None, reason: str) -> None:
        entry: dict[str, Any] = {"tool": tool, "reason": reason}
        if tool is not None:
            entry["args"] = dict(args or {})
        if not any(v["tool"] == tool and v.get("args") == entry.get("args") for v in valid):
            valid.append(entry)

    # writes: confirmed gold writes are valid, unconfirmed ones forbidden
    confirmed = (
        last.get("role") == "user"
        and bool(_CONFIRM.search(_text(last)))
        and not _DECLINE.search(_text(last).split(".")[0])
        and prev_assistant is not None
    )
    gold_write_tools = {n for n, _ in gold_calls if n in WRITE_TOOLS}
    confirmed_writes = []
    for name, args in pending:
        if name not in WRITE_TOOLS:
            continue
        reached = prev_assistant is not None and any(
            v in _text(prev_assistant) for v in _values(args) if len(v) >= 5 and not v.isdigit()
        )
        if confirmed and reached:
            confirmed_writes.append((name, args))
    for name, args in confirmed_writes:
        add(name, args, "gold write the user has just confirmed")
    valid_write_tools = {n for n, _ in confirmed_writes}
    for name in sorted(WRITE_TOOLS):
        if name not in gold_write_tools:
            forbidden.append({"tool": name, "reason": "write not among the task's gold actions"})
        elif name not in valid_write_tools:
            forbidden.append({"tool": name, "reason": "gold write not yet listed and confirmed by the user"})
            must_ask = must_ask or any(n == name for n, _ in pending)
    if "transfer_to_human_agents" in {n for n, _ in gold_calls}:
        if last.get("role") == "user" and re.search(r"\b(human|agent|representative|transfer)\b", _text(last), re.I):
            add("transfer_to_human_agents", {}, "gold transfer the user asks for")
    else:
        forbidden.append({"tool": "transfer_to_human_agents", "reason": "the task can be handled without transfer"})

    # reads the next step needs (only when no confirmed write is waiting)
    if not confirmed_writes:
        for uid in sorted(user_ids - fetched_users):
            if uid:
                add("get_user_details", {"user_id": uid}, "user id known, profile not read yet")
        for name, args in pending:
            if name in READ_ONLY and name != "calculate" and all(v in convo_text for v in _values(args)):
                add(name, args, "gold read whose arguments the conversation already holds")
        named = set(_RES_ID.findall(" ".join(_text(m) for m in messages if m.get("role") == "user")))
        gold_res = {a.get("reservation_id") for _, a in gold_calls if a.get("reservation_id")}
        for rid in sorted((named & gold_res) - fetched_res):
            add("get_reservation_details", {"reservation_id": rid}, "reservation the user named, not read yet")

    # replies
    nothing_left = not pending
    if not user_ids:
        must_ask = True
    if last.get("role") == "tool":
        add(None, None, "report the tool result to the user")
    elif not confirmed_writes and (nothing_left or must_ask or not valid):
        add(None, None, "nothing left to do" if nothing_left else "a question must be asked first")
    if not valid:
        add(None, None, "no gold step is reachable yet")
    valid_names = {v["tool"] for v in valid}
    forbidden = [f for f in forbidden if f["tool"] not in valid_names]
    return {"valid_actions": valid, "forbidden_actions": forbidden, "labelled_by": ["rules-v1"]}
