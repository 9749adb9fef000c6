"""The recorded decisions of case families served as a model: each state's wire form (what a
model receives for it) mapped to the turn the recorded agent took there.

``tooleffect serve`` answers a live run with it, so the live path can be tried with no provider
and scores exactly as replay.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_tooleffect.collect.cases import FamilyError, is_case_file, load_case_file, load_family
from pytest_tooleffect.collect.family import FAMILY_FILE, family_dirs
from pytest_tooleffect.decide.model_turn import build_request
from pytest_tooleffect.formats import Policy
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from pytest_tooleffect.util.display import shown

__all__ = ["RecordedStates", "recorded_server", "replay_index", "request_problem", "turn_key"]


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


class RecordedStates:
    """The recorded states under a folder of families, read again when its files change.

    Before each answer the folders under ``cases_dir`` and the files of each family (its case
    files, its family file and the files that names) are looked at (``stat``: modification time
    and size, no file read); when one was added, removed or changed since the states were read,
    they are read again, so a case added while ``tooleffect serve`` runs is answered without a
    restart.  A change made within the file system's timestamp resolution of the last reading,
    with the size unchanged, is not seen.

    Args:
        cases_dir: a folder of case families.
        system: key states on their system prompt too (as :func:`turn_key`).
        say: where a reload is told (one line), default stderr.
    """

    def __init__(self, cases_dir: Path, *, system: bool = True, say: Callable[[str], None] | None = None) -> None:
        self.cases_dir = cases_dir
        self.system = system
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self._lock = threading.Lock()
        self._named: frozenset[Path] = frozenset()
        self._stamp = self._files()
        self.index = self._read()

    def __len__(self) -> int:
        return len(self.index)

    def answer(self, body: Mapping[str, Any]) -> Reply | None:
        """The recorded turn of the state ``body`` asks about (an OpenAI chat request), or ``None``."""
        self.refresh()
        return self.index.get(turn_key(body, system=self.system))

    def refresh(self) -> bool:
        """Read the states again if the files changed since they were read; whether they were."""
        if self._files() == self._stamp:
            return False
        with self._lock:
            stamp = self._files()  # before reading: a change made while reading is seen next time
            if stamp == self._stamp:
                return False
            self.index, self._stamp = self._read(), stamp
        self.say(f"tooleffect serve: the cases under {self.cases_dir} changed: read again, {len(self.index)} "
                 "recorded states")
        return True

    def _read(self) -> dict[str, Reply]:
        named: set[Path] = set()
        index = replay_index(self.cases_dir, system=self.system, named=named)
        self._named = frozenset(named)
        return index

    def _files(self) -> tuple[tuple[str, int, int], ...]:
        """Every folder under ``cases_dir`` and every file of its families (and the files they name),
        with its modification time (ns) and size.
        """
        out: list[tuple[str, int, int]] = []
        for top, dirs, files in os.walk(self.cases_dir):
            dirs.sort()
            st = _stat(top)
            out.append((top, *st))
            if FAMILY_FILE in files:
                out.extend((os.path.join(top, f), *_stat(os.path.join(top, f))) for f in sorted(files))
        out.extend((str(p), *_stat(p)) for p in sorted(self._named))
        return tuple(out)


def _stat(path: str | Path) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def recorded_server(cases_dir: Path, *, port: int = 0, system: bool = True) -> tuple[ScriptedServer, int, str]:
    """The server ``tooleffect serve`` runs: the recorded decisions under ``cases_dir`` as an
    OpenAI-compatible model named ``recorded-agent``, answering a state it does not hold with a 404
    that says so.  The cases are read again when their files change (:class:`RecordedStates`).

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
    states = RecordedStates(cases_dir, system=system)
    keyed_on = "messages, tools and system prompt" if system else "messages and tools (system prompt ignored)"

    def script(body: dict[str, Any]) -> Reply:
        malformed = request_problem(body)
        if malformed is not None:  # not a chat request: said as such, never answered as a state not recorded
            return Reply(status=400, error_message=f"tooleffect serve: {malformed}")
        found = states.answer(body)
        if found is not None:
            return found
        return Reply(status=404, error_message=(
            f"tooleffect serve: no recorded state under {cases_dir} has this request's {keyed_on} ({len(states)} "
            "recorded states; the case files are read again whenever they change)"))

    server = ScriptedServer(script, port=port, models=("recorded-agent",), keep_requests=False)
    return server, len(states), keyed_on


def request_problem(body: Mapping[str, Any]) -> str | None:
    """What makes ``body`` no OpenAI chat request (``messages`` not a non-empty list of objects each
    with a text ``role``; ``tools`` present and not a list of objects), naming the field; ``None`` when
    it is one.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        got = "missing" if messages is None else f"a JSON {type(messages).__name__}" if messages else "empty"
        return f"messages: a chat request's messages are a non-empty list of message objects, got {got}"
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            return f"messages[{i}]: a message is an object with a text role, got {json.dumps(m)[:80]}"
    tools = body.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, Mapping) for t in tools)):
        return "tools: a list of tool objects"
    return None


def replay_index(cases_dir: Path, *, system: bool = True, tools: bool = True,
                 named: set[Path] | None = None) -> dict[str, Any]:
    """Map the wire form of every recorded state under ``cases_dir`` to its recorded turn.

    Args:
        cases_dir: a folder of case families (searched for family files).
        system: key states on their system prompt too (as :func:`turn_key`).
        tools: key states on their tools too (as :func:`turn_key`).
        named: when given, the files the families' files name (tools, prompt, rules) are added to it.

    Returns:
        :func:`turn_key` of each recorded state's request → a :class:`~pytest_tooleffect.servers.scripted.Reply`
        with its recorded turn.  States whose keys are equal and whose recorded turns differ are
        counted on stderr (the last one answers for all); a family file, a case file or a case that
        is invalid is named on stderr (file, case id, field, message) and skipped, the rest served.
    """
    index: dict[str, Any] = {}
    ambiguous, invalid = 0, 0
    for directory in family_dirs([cases_dir]) if cases_dir.is_dir() else []:
        try:
            fam = load_family(directory)
        except FamilyError as exc:
            print(f"tooleffect serve: skipping {shown(exc)}", file=sys.stderr)
            if named is not None:
                named.update(exc.referenced_files)
            continue
        if named is not None:
            named.update(fam.referenced_files)
        for path in sorted(directory.iterdir()):
            if not is_case_file(path, fam.referenced_files):
                continue
            try:
                cases, problems = load_case_file(path, fam)
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                print(f"tooleffect serve: skipping {shown(path)}: cannot be read ({exc})", file=sys.stderr)
                continue
            for problem in problems:  # each invalid case named; the valid rest is served
                at = f" (line {problem.line})" if problem.line is not None else ""
                print(f"tooleffect serve: skipping an invalid case: {shown(problem)}{at}", file=sys.stderr)
            invalid += len(problems)
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
    if invalid:
        print(f"tooleffect serve: {invalid} invalid cases skipped (each named above); the valid ones are served",
              file=sys.stderr)
    if ambiguous:
        print(f"tooleffect serve: {ambiguous} states share their messages, tools and system prompt with another "
              "and were recorded otherwise; the last recorded turn answers for all of them", file=sys.stderr)
    return index
