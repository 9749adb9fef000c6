"""A small family for plugin tests, written into a pytester directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FAMILY = """\
name: demo
system_prompt: You schedule meetings.
tools:
  - name: read_thread
    parameters: {type: object, properties: {thread_id: {type: string}}, required: [thread_id]}
    annotations: {readOnlyHint: true}
  - name: calendar.create_event
    parameters:
      type: object
      properties: {title: {type: string}, start: {type: string, format: date-time}}
      required: [title, start]
    annotations: {readOnlyHint: false, destructiveHint: false}
oracle: ../../oracle/demo.yaml
"""
#: the demo family's quota and population per bucket, written with its own cases (a run checks the
#: quota against the cases, so a test that writes other cases writes neither)
CENSUS = """\
quota: {first: 2, middle: 2, last: 3}
population: {first: 20, middle: 50, last: 20}
"""

RULES = """\
fields:
  calendar.create_event.title: {normalise: [nfkc, casefold]}
"""


def msg(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def case(cid: str, bucket: str, label: dict[str, Any], recorded: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    step = {"first": 0, "middle": 1, "last": 2}[bucket]
    c = {"id": cid, "placement": {"step": step, "run_length": 3, "bucket": bucket}, "messages": msg("hi"),
         "timezone": "Europe/Madrid", "label": label, "source": "authored", **extra}
    if recorded is not None:
        c["recorded"] = recorded
    return c


READ = {"name": "read_thread", "arguments": '{"thread_id": "th-1"}'}
CREATE_UTC = {"name": "calendar.create_event", "arguments": '{"title": "Q3 Review", "start": "2025-03-19T14:00:00Z"}'}
CREATE_OK = {"name": "calendar.create_event", "arguments": '{"title": "Q3 review", "start": "2025-03-19T13:00:00Z"}'}
NULL = {"tool": None, "reason": "nothing to do"}
CREATE_LABEL = {"tool": "calendar.create_event", "args": {"title": "Q3 review", "start": "2025-03-19T14:00:00"}}

CASES = [
    case("a-read", "first", {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-1"}}]},
         {"tool_calls": [READ]}),
    case("b-create-ok", "middle", {"valid_actions": [CREATE_LABEL]}, {"tool_calls": [CREATE_OK]}),
    case("c-create-utc", "middle", {"valid_actions": [CREATE_LABEL]}, {"tool_calls": [CREATE_UTC]}),
    case("d-stop", "last", {"valid_actions": [NULL]}, {"tool_calls": [], "text": "Thanks!"}),
    case("e-redundant", "last", {"valid_actions": [NULL]}, {"tool_calls": [READ]}),
    case("f-duplicate", "last", {"valid_actions": [NULL], "forbidden_actions": ["calendar.create_event"]},
         {"tool_calls": [CREATE_OK]}, xfail="known duplicate-event fault"),
    case("g-nothing-recorded", "first", {"valid_actions": [NULL]}, None),
]


def write_demo(root: Path, cases: list[dict[str, Any]] | None = None, extra_lines: list[str] = ()) -> Path:
    fam = root / "cases" / "demo"
    fam.mkdir(parents=True, exist_ok=True)
    (root / "oracle").mkdir(exist_ok=True)
    (fam / "family.yaml").write_text(FAMILY + (CENSUS if cases is None and not extra_lines else ""))
    (root / "oracle" / "demo.yaml").write_text(RULES)
    lines = [json.dumps(c) for c in (CASES if cases is None else cases)] + list(extra_lines)
    (fam / "cases.jsonl").write_text("\n".join(lines) + "\n")
    return fam
