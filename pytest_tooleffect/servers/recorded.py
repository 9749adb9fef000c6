"""The recorded decisions of case families served as a model: each state's wire form (what a
model receives for it) mapped to the turn the recorded agent took there.

``tooleffect serve`` answers a live run with it, so the live path can be tried with no provider
and scores exactly as replay.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_tooleffect.collect.cases import FamilyError, is_case_file, load_case_file, load_family
from pytest_tooleffect.collect.family import family_dirs
from pytest_tooleffect.decide.model_turn import build_request
from pytest_tooleffect.formats import Policy
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer

__all__ = ["recorded_server", "replay_index", "turn_key"]


def turn_key(request: Mapping[str, Any], *, system: bool = True, tools: bool = True) -> str:
    """What identifies a state on the wire: its messages, the tools offered and the system prompt.

    Two states with the same messages and different tools (or a different system prompt) are two
    states: an agent that is offered other tools may rightly decide otherwise.

    Args:
        request: an OpenAI chat request body (or the litellm keyword arguments): ``messages``
            and ``tools``.
        system: key on the system prompt (the text of ``system`` and ``developer`` messages).
            ``False`` for an agent that writes its own prompt around the family's.
        tools: key on the tools offered (each tool's name, description and parameters, in any order).

    Returns:
        A canonical JSON string: the messages' roles, texts and called tool names (call ids and
        argument formatting left out), then the system prompt and the tools when asked.
    """
    rows: list[Any] = []
    prompt: list[str] = []
    for m in request.get("messages") or []:
        if not isinstance(m, Mapping):
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
        if m.get("role") in ("system", "developer"):
            prompt.append(str(content or ""))
            continue
        names = [str((tc.get("function") or {}).get("name")) for tc in m.get("tool_calls") or []]
        rows.append([m.get("role"), content or "", names])
    key: dict[str, Any] = {"messages": rows}
    if system:
        key["system"] = "\n".join(prompt)
    if tools:
        offered = []
        for t in request.get("tools") or []:
            if isinstance(t, Mapping):
                inner = t.get("function")
                f: Mapping[str, Any] = inner if isinstance(inner, Mapping) else t
                offered.append(json.dumps([f.get("name"), f.get("description") or "", f.get("parameters") or {}],
                                          sort_keys=True))
        key["tools"] = sorted(offered)
    return json.dumps(key, sort_keys=True)


def recorded_server(cases_dir: Path, *, port: int = 0, system: bool = True) -> tuple[ScriptedServer, int, str]:
    """The server ``tooleffect serve`` runs: the recorded decisions under ``cases_dir`` as an
    OpenAI-compatible model named ``recorded-agent``, answering a state it does not hold with a 404.

    It keeps no request body past its request (``keep_requests=False``): it runs for as long as the
    user lets it, and its memory does not grow with the requests it answered.

    Args:
        cases_dir: a folder of case families.
        port: the port on 127.0.0.1 (0: any free one).
        system: key states on their system prompt too (as :func:`turn_key`).

    Returns:
        ``(server, states, keyed_on)``: the :class:`~pytest_tooleffect.servers.scripted.ScriptedServer`
        (not started), the number of recorded states it answers, and what a state is keyed on, in words.

    Raises:
        OSError: the port cannot be bound.
        OverflowError: the port is out of range.
    """
    index: dict[str, Reply] = replay_index(cases_dir, system=system)
    keyed_on = "messages, tools and system prompt" if system else "messages and tools (system prompt ignored)"
    missing = Reply(status=404, error_message=f"tooleffect serve: no recorded state under {cases_dir} has this "
                                              f"request's {keyed_on}")

    def script(body: dict[str, Any]) -> Reply:
        return index.get(turn_key(body, system=system), missing)

    server = ScriptedServer(script, port=port, models=("recorded-agent",), keep_requests=False)
    return server, len(index), keyed_on


def replay_index(cases_dir: Path, *, system: bool = True, tools: bool = True) -> dict[str, Any]:
    """Map the wire form of every recorded state under ``cases_dir`` to its recorded turn.

    Args:
        cases_dir: a folder of case families (searched for family files).
        system: key states on their system prompt too (as :func:`turn_key`).
        tools: key states on their tools too (as :func:`turn_key`).

    Returns:
        :func:`turn_key` of each recorded state's request → a :class:`~pytest_tooleffect.servers.scripted.Reply`
        with its recorded turn.  States whose keys are equal and whose recorded turns differ are
        counted on stderr (the last one answers for all).
    """
    index: dict[str, Any] = {}
    ambiguous = 0
    for directory in family_dirs([cases_dir]) if cases_dir.is_dir() else []:
        try:
            fam = load_family(directory)
        except FamilyError as exc:
            print(f"tooleffect serve: skipping {exc}", file=sys.stderr)
            continue
        for path in sorted(directory.iterdir()):
            if not is_case_file(path, fam.referenced_files):
                continue
            cases, _ = load_case_file(path, fam)
            for case in cases:
                if case.recorded is None:
                    continue
                offered = list(case.tools) if case.tools is not None else list(fam.tools)
                request, names = build_request(case, offered, fam.system_prompt, Policy(name="serve", model="x"))
                calls = []
                for c in case.recorded.tool_calls:
                    args = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
                    calls.append((names.out(c.name) if isinstance(c.name, str) else "", args))
                key = turn_key(request, system=system, tools=tools)
                reply = Reply(tool_calls=calls, text=case.recorded.text)
                if key in index and (index[key].tool_calls, index[key].text) != (reply.tool_calls, reply.text):
                    ambiguous += 1
                index[key] = reply
    if ambiguous:
        print(f"tooleffect serve: {ambiguous} states share their messages, tools and system prompt with another "
              "and were recorded otherwise; the last recorded turn answers for all of them", file=sys.stderr)
    return index
