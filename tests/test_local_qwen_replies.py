"""Real replies of a real model, replayed: Qwen2.5-Coder-0.5B-Instruct through llama.cpp's
``llama-server`` (``--jinja``, temperature 0, ``max_tokens`` 384) on the shipped families,
captured once from the live run (``tests/fixtures/local-qwen-replies.jsonl``: the assistant
message as the server returned it, its cost, and the verdict kind the run gave it).

The model never used the structured ``tool_calls`` channel: it wrote its calls into the text
(provider-safe names, JSON followed by the tool result it imagined, several objects, calls to
tools it was never offered).  Each reply is scored again here against its case's label with the
family's rules, as the plugin scores it: the kind must stay the one the live run recorded (or,
where the labels were revised after the capture to say what a reply must do, the kind under the
revised label, ``kind_relabelled``; where the reply fallback was revised after the capture to read
the one act a reply asks of the user, the kind it gives now, ``kind_rescored``: two replies that
report and then ask the user to choose, where the label says ``answer``), and a reply whose text
holds a call must never be scored as
no call.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.collect.cases import load_case_file
from pytest_tooleffect.collect.family import is_case_file, load_family
from pytest_tooleffect.oracle import CompareContext, parse_emission, score

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "local-qwen-replies.jsonl"
ROWS = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
_CASES: dict[str, tuple[Any, dict[str, Any]]] = {}


def _family(name: str) -> tuple[Any, dict[str, Any]]:
    if name not in _CASES:
        family = load_family(ROOT / "cases" / name)
        cases: dict[str, Any] = {}
        for path in sorted(family.directory.iterdir()):
            if path.is_file() and is_case_file(path, family.referenced_files):
                cases.update((c.id, c) for c in load_case_file(path, family)[0])
        _CASES[name] = (family, cases)
    return _CASES[name]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['family']}/{r['case_id']}" for r in ROWS])
def test_captured_reply_scores_as_in_the_live_run(row: dict[str, Any]) -> None:
    family, cases = _family(row["family"])
    case = cases[row["case_id"]]
    tools = list(case.tools) if case.tools is not None else list(family.tools)
    em = parse_emission(row["emitted"], offered=[t.name for t in tools])
    ctx = CompareContext(timezone=case.timezone, state=case.state, messages=case.messages)
    verdict = score(em, case.label, tools, family.rules, ctx)
    assert verdict.kind == row.get("kind_rescored", row.get("kind_relabelled", row["kind_at_capture"]))
    if "kind_relabelled" in row or "kind_rescored" in row:  # a revision moves only an abstention whose reply fails its criteria
        assert row["kind_at_capture"] == "ok_no_tool" and verdict.reply is not None and not verdict.reply.ok
    text = row["emitted"].get("content") or ""
    if re.search(r'"name"\s*:\s*"', text):  # the reply writes a call: never "no call"
        assert not em.is_null and verdict.kind not in ("ok_no_tool", "none_when_tool_needed")


def test_the_fixture_holds_real_text_channel_calls() -> None:
    """The replies the fixture keeps are the kinds the model produced, not a chosen few."""
    assert len(ROWS) >= 30
    with_calls = [r for r in ROWS if '"name"' in (r["emitted"].get("content") or "")]
    assert with_calls and all(not r["emitted"].get("tool_calls") for r in ROWS)
