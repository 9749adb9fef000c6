"""Import ToolTalk (Farn & Shin, 2023; ``microsoft/ToolTalk``, MIT) as a case family.

ToolTalk is 78 hand-written conversations (28 easy, 50 hard) with the gold tool calls of every
assistant turn.  Every decision point of a conversation becomes a case, the final stop included:

* an assistant turn **without** ``apis`` is one decision whose right action is no tool (the
  ``no_tool`` class: asking for a missing detail, confirming, answering);
* an assistant turn **with** ``apis`` is one decision per gold call, in the gold order, each
  state holding the calls before it and their results (or exceptions), then one decision after
  the last call whose right action is no tool (the reply that closes the turn).  At a call's
  decision, every remaining call of the turn whose arguments use no value first returned by a
  call still to come is also valid (independent calls may come in any order), so the class is
  ``single`` or ``several``.  A call that signs a user in or out (or registers or deletes an
  account) keeps its place: the calls after it act in another session.

The tools are ToolTalk's 28 APIs (``tooltalk_tools.json``: each API's description, parameters
and ``is_action`` read from the repository's ``src/tooltalk/apis/*.py`` as data; ``is_action``
becomes ``readOnlyHint: false``).  ToolTalk's executor supplies the user's ``session_token`` to
the tools that need it, so it is neither offered to the model nor kept in the gold calls.  Each
state starts with a system message naming the user and the conversation's time and place
(ToolTalk's ``metadata``), since the tools are meant to read "now" from it.

ToolTalk publishes gold labels, not model predictions, so the family has no ``recorded``
decisions: it is run with a model or an agent policy.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_tooleffect.data.importers import oracle_reference

__all__ = ["TOOLS_FILE", "conversation_cases", "import_tooltalk", "load_tools"]

TOOLS_FILE = Path(__file__).with_name("tooltalk_tools.json")
SUBSETS = ("easy", "tooltalk")
_AUTH_PARAM = "session_token"

FAMILY_NOTE = """\
ToolTalk (Farn & Shin, "ToolTalk: Evaluating Tool-Usage in a Conversation Setting", 2023),
microsoft/ToolTalk @ e05f4ce6132c80ed33392b81535b077d56ab28fd, data/easy and data/tooltalk,
MIT License, Copyright (c) Microsoft Corporation. Built by `tooleffect import tooltalk`.
"""


NOTICE = """\
# Notice

The cases in this folder are derived from ToolTalk (https://github.com/microsoft/ToolTalk, commit
e05f4ce6132c80ed33392b81535b077d56ab28fd: the conversations in `data/easy/` and `data/tooltalk/`,
and the tool descriptions and parameters of `src/tooltalk/apis/*.py`, read as data), by
`tooleffect import tooltalk`. ToolTalk is distributed under the MIT License:

    MIT License

    Copyright (c) Microsoft Corporation.

    Permission is hereby granted, free of charge, to any person obtaining a copy
    of this software and associated documentation files (the "Software"), to deal
    in the Software without restriction, including without limitation the rights
    to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
    copies of the Software, and to permit persons to whom the Software is
    furnished to do so, subject to the following conditions:

    The above copyright notice and this permission notice shall be included in all
    copies or substantial portions of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
    IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
    FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
    AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
    LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
    OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
    SOFTWARE.
"""


def load_tools() -> tuple[list[dict[str, Any]], frozenset[str]]:
    """ToolTalk's 28 tools in the family's form, and the names of those that take a session token.

    Returns:
        ``(tools, needs_auth)``: each tool's ``name``, ``description``, JSON-Schema ``parameters``
        and MCP ``annotations``.
    """
    doc = json.loads(TOOLS_FILE.read_text(encoding="utf-8"))
    tools, auth = [], set()
    for t in doc["tools"]:
        extra = t.get("x-tooltalk") or {}
        if extra.get("requires_auth"):
            auth.add(t["name"])
        tools.append({k: v for k, v in t.items() if k != "x-tooltalk"})
    return tools, frozenset(auth)


def _system(conv: Mapping[str, Any]) -> str:
    user, meta = conv.get("user") or {}, conv.get("metadata") or {}
    who = ", ".join(f"{k} {user[k]}" for k in ("name", "username", "email", "phone") if user.get(k))
    return (f"You are a helpful assistant with tools. The user is signed in ({who}). It is now "
            f"{meta.get('timestamp')} in {meta.get('location')}.")


def _args(call: Mapping[str, Any], auth: frozenset[str]) -> dict[str, Any]:
    name = call["request"]["api_name"]
    params = dict(call["request"].get("parameters") or {})
    if name in auth:
        params.pop(_AUTH_PARAM, None)
    return params


def _values(obj: Any) -> Iterator[str]:
    """Every string and number inside a JSON value, as strings."""
    if isinstance(obj, Mapping):
        for v in obj.values():
            yield from _values(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _values(v)
    elif isinstance(obj, (str, int, float)) and not isinstance(obj, bool):
        yield str(obj)


#: Account calls that change who is signed in: the calls after one act as another session (or none),
#: so nothing after one may come before it, and it may not come before the calls ahead of it.
SESSION_CALLS = frozenset({"UserLogin", "LogoutUser", "RegisterUser", "DeleteAccount"})


def _ready(calls: list[Mapping[str, Any]], j: int, auth: frozenset[str], known: str) -> list[int]:
    """The calls ``m ≥ j`` of a turn that could come next: the gold call ``j``, and each later call
    none of whose argument values appears in what a call between ``j`` and ``m`` returns without
    already appearing in the state (``known``: its text, results and the user's record), with no
    session call (:data:`SESSION_CALLS`) among ``j…m``.  Values are compared as text (a username
    inside a returned message counts), ignoring case; values under three characters are not
    evidence either way.
    """
    out = [j]
    for m in range(j + 1, len(calls)):
        if any(calls[k]["request"]["api_name"] in SESSION_CALLS for k in range(j, m + 1)):
            break
        later = " ".join(json.dumps(calls[k].get("response")) for k in range(j, m)).casefold()
        needs = {v.casefold() for v in _values(_args(calls[m], auth)) if len(v) >= 3}
        if not any(v in later and v not in known for v in needs):
            out.append(m)
    return out


def conversation_cases(conv: Mapping[str, Any], subset: str, auth: frozenset[str]) -> list[dict[str, Any]]:
    """Every decision point of one ToolTalk conversation as a labelled case (placement filled in).

    Args:
        conv: the conversation file's JSON.
        subset: ``easy`` or ``tooltalk`` (the case id's prefix).
        auth: the tools whose ``session_token`` the executor supplies.

    Returns:
        The cases in conversation order.
    """
    history: list[dict[str, Any]] = [{"role": "system", "content": _system(conv)}]
    known = (json.dumps(conv.get("user") or {}) + json.dumps(conv.get("metadata") or {})).casefold()
    points: list[tuple[list[dict[str, Any]], dict[str, Any], str]] = []
    for turn_no, turn in enumerate(conv.get("conversation") or []):
        text = turn.get("text") or ""
        if turn.get("role") == "user":
            history.append({"role": "user", "content": text})
            known += " " + text.casefold()
            continue
        calls = list(turn.get("apis") or [])
        for j, call in enumerate(calls):
            valid = [{"tool": calls[m]["request"]["api_name"], "args": _args(calls[m], auth),
                      "reason": "the gold call" + ("" if m == j else " (independent of the calls before it)")}
                     for m in _ready(calls, j, auth, known)]
            points.append((list(history), {"valid_actions": valid, "labelled_by": ["tooltalk-gold"]},
                           f"turn {turn_no} call {j + 1} of {len(calls)}"))
            cid = f"call_{turn_no}_{j}"
            history.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": cid, "type": "function",
                "function": {"name": call["request"]["api_name"], "arguments": json.dumps(_args(call, auth))}}]})
            result = {"error": call["exception"]} if call.get("exception") else call.get("response")
            history.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(result)})
            known += " " + json.dumps(call.get("response")).casefold()
        why = "the reply that closes the turn after its calls" if calls else "a turn ToolTalk answers with no call"
        points.append((list(history), {"valid_actions": [{"tool": None, "reason": why}],
                                       "labelled_by": ["tooltalk-gold"]}, f"turn {turn_no} reply"))
        history.append({"role": "assistant", "content": text})
        known += " " + text.casefold()
    n = len(points)
    stem = f"{subset}-{conv['name']}"
    cases = []
    for step, (messages, label, where) in enumerate(points):
        bucket = "last" if step == n - 1 else "first" if step == 0 else "middle"
        cases.append({"id": f"{stem}-d{step:02d}", "placement": {"step": step, "run_length": n, "bucket": bucket},
                      "messages": messages, "label": label,
                      "source": {"kind": "import", "dataset": "tooltalk", "trace_id": stem, "position": step,
                                 "note": where}})
    return cases


def import_tooltalk(source: Path, out: Path) -> dict[str, Any]:
    """Write the ToolTalk family: ``family.yaml`` (tools, census quota and population), ``cases.jsonl``.

    Args:
        source: the dataset folder (``…/datasets/tooltalk``, holding ``data/easy`` and ``data/tooltalk``).
        out: the family folder to write (created; its two files replaced).

    Returns:
        Counts: conversations, cases, cases per class and per bucket.

    Raises:
        OSError: a file cannot be read or written.
        ValueError: a conversation file is not valid JSON (names the file).
    """
    import yaml

    from pytest_tooleffect.formats import Label

    tools, auth = load_tools()
    cases: list[dict[str, Any]] = []
    conversations = 0
    for subset in SUBSETS:
        for path in sorted((source / "data" / subset).glob("*.json")):
            try:
                conv = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: not valid JSON ({exc.msg})") from exc
            conversations += 1
            cases += conversation_cases(conv, subset, auth)
    cases.sort(key=lambda c: c["id"])
    population = dict(Counter(c["placement"]["bucket"] for c in cases))
    population = {b: population.get(b, 0) for b in ("first", "middle", "last")}
    out.mkdir(parents=True, exist_ok=True)
    family = {"name": out.name,
              "description": "Every decision point of ToolTalk's 78 hand-written conversations (28 easy, 50 hard), "
                             "labelled with the gold calls of each assistant turn; no recorded decisions (run it "
                             "with a model or an agent policy).",
              "tools": tools, "oracle": oracle_reference(out, "tooltalk"),
              "licence": "MIT (ToolTalk, Copyright (c) Microsoft Corporation); see NOTICE.md",
              "quota": population, "population": population}
    header = "".join(f"# {line}\n" for line in FAMILY_NOTE.splitlines())
    (out / "family.yaml").write_text(header + yaml.safe_dump(family, sort_keys=False, allow_unicode=True, width=110),
                                     encoding="utf-8")
    (out / "NOTICE.md").write_text(NOTICE, encoding="utf-8")
    with open(out / "cases.jsonl", "w", encoding="utf-8") as fh:
        for c in cases:
            fh.write(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n")
    classes = Counter(Label.model_validate(c["label"]).label_class for c in cases)
    return {"conversations": conversations, "cases": len(cases), "classes": dict(sorted(classes.items())),
            "buckets": population}
