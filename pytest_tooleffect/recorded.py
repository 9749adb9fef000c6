"""The recorded decisions of case families served as a model: each state's wire form (what a
model receives for it) mapped to the turn the recorded agent took there.

``tooleffect serve`` answers a live run with it, so the live path can be tried with no provider
and scores exactly as replay.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .cases import FAMILY_FILE, FamilyError, is_case_file, load_case_file, load_family
from .model_turn import build_request
from .models import Policy
from .scripted import Reply

__all__ = ["replay_index", "turn_key"]


def turn_key(messages: Sequence[Any]) -> str:
    """What identifies a state on the wire: roles, texts and called tool names (no system prompt)."""
    rows = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") == "system":
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        names = [str((tc.get("function") or {}).get("name")) for tc in m.get("tool_calls") or []]
        rows.append([m.get("role"), content or "", names])
    return json.dumps(rows, sort_keys=True)


def replay_index(cases_dir: Path) -> dict[str, Any]:
    """Map the wire form of every recorded state under ``cases_dir`` to its recorded turn."""
    index: dict[str, Any] = {}
    ambiguous = 0
    for fam_file in sorted(cases_dir.rglob(FAMILY_FILE)):
        try:
            fam = load_family(fam_file.parent)
        except FamilyError as exc:
            print(f"tooleffect serve: skipping {exc}", file=sys.stderr)
            continue
        for path in sorted(fam_file.parent.iterdir()):
            if not is_case_file(path, fam.referenced_files):
                continue
            cases, _ = load_case_file(path, fam)
            for case in cases:
                if case.recorded is None:
                    continue
                tools = list(case.tools) if case.tools is not None else list(fam.tools)
                request, names = build_request(case, tools, fam.system_prompt, Policy(name="serve", model="x"))
                calls = []
                for c in case.recorded.tool_calls:
                    args = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
                    calls.append((names.out(c.name) if isinstance(c.name, str) else "", args))
                key = turn_key(request["messages"])
                if key in index:
                    ambiguous += 1
                index[key] = Reply(tool_calls=calls, text=case.recorded.text)
    if ambiguous:
        print(f"tooleffect serve: {ambiguous} states share their messages with another; the last recorded turn "
              "answers for all of them", file=sys.stderr)
    return index
