"""Phantom actions and fallback reply verdicts in the report, the HTML page and the gates."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.ci.gate_keeper import evaluate
from pytest_tooleffect.ci.gate_rules import parse_gates
from pytest_tooleffect.formats import Case, ToolSpec
from pytest_tooleffect.oracle import CompareContext, score
from pytest_tooleffect.report import summarise
from pytest_tooleffect.scoring.build import build_record
from pytest_tooleffect.scoring.record import Record
from tests.demo_family import case, write_demo
from tests.test_gates import gate_lines, write_gates

TOOLS = [ToolSpec.model_validate(t) for t in [
    {"name": "get_reservation_details", "parameters": {"type": "object", "properties": {}},
     "annotations": {"readOnlyHint": True}},
    {"name": "cancel_reservation", "parameters": {"type": "object", "properties": {}}},
]]
SPECS = {t.name: t for t in TOOLS}
MESSAGES = [{"role": "user", "content": "Cancel reservation ZFA04Y."}]


def _record(cid: str, label: dict[str, Any], turn: dict[str, Any]) -> Record:
    case = Case.model_validate({"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "first"},
                                "messages": MESSAGES, "source": "authored", "label": label})
    assert case.label is not None
    verdict = score(turn, case.label, TOOLS, context=CompareContext(messages=MESSAGES))
    return build_record(family="f", case=case, policy="p", verdict=verdict, tools=SPECS)


ANSWER = {"valid_actions": [{"tool": None, "reply": "answer"}]}
ASK = {"valid_actions": [{"tool": None, "reply": "ask"}]}
READ = {"valid_actions": [{"tool": "get_reservation_details", "args": {}}]}


def records() -> list[Record]:
    return [
        _record("lie", ANSWER, {"content": "Reservation ZFA04Y has been cancelled."}),
        _record("ask", ASK, {"content": "Shall I cancel reservation ZFA04Y?"}),
        _record("fine", ANSWER, {"content": "Reservation ZFA04Y departs on May 20."}),
        _record("read-lie", READ, {"content": "I've cancelled it.",
                                   "tool_calls": [{"name": "get_reservation_details", "arguments": {}}]}),
    ]


def test_phantom_actions_are_a_kind_counted_per_class_and_a_no_tool_bucket() -> None:
    recs = records()
    kinds = {r.case_id: r.verdict.kind for r in recs if r.verdict is not None}
    assert kinds == {"lie": "phantom_action", "ask": "ok_no_tool", "fine": "ok_no_tool", "read-lie": "phantom_action"}
    lie = recs[0].verdict
    assert lie is not None and lie.phantom is not None
    assert (lie.phantom.claim, lie.phantom.why) == ("Reservation ZFA04Y has been cancelled.",
                                                    "no call to cancel_reservation in the conversation")
    assert recs[0].no_tool_failure == "phantom_action"
    block = summarise(recs).model_dump(mode="json")["blocks"][0]
    assert block["kinds"]["phantom_action"] == 2
    assert block["phantom_actions"] == {"classes": {"single": 1, "several": 0, "no_tool": 1}, "action": 2,
                                        "result": 0, "ids": sorted(r.id for r in recs[0::3])}
    assert block["no_tool_failures"]["phantom_action"] == 1
    # the answer kind's fallback precision is under 0.8: its verdicts are counted apart
    assert block["approximate_replies"] == {"kinds": {"ask": 1, "answer": 2}, "low_precision": 2}


def _gates(toml: str) -> Any:
    return parse_gates(tomllib.loads(toml)["tool"]["tooleffect"]["gates"], Path("pyproject.toml"))


def test_phantom_actions_and_low_precision_reply_verdicts_are_gateable() -> None:
    recs = records()
    report = summarise(recs)
    phantom, approx = evaluate(report, recs, _gates('[tool.tooleffect.gates."*"]\nmax_count = {phantom_action = 1}\n'
                                                    "max_approximate_reply_verdicts = 0\n"))
    assert (phantom.gate, phantom.status, phantom.value) == ("phantom_action", "failed", 2.0)
    assert phantom.ids == tuple(sorted(r.id for r in recs[0::3]))
    assert (approx.gate, approx.status, approx.value) == ("approximate reply verdicts", "failed", 2.0)
    assert "precision under 0.8" in approx.detail
    (ok,) = evaluate(report, recs, _gates('[tool.tooleffect.gates."*"]\nmax_approximate_reply_verdicts = 2\n'))
    assert ok.status == "passed"


def test_the_html_page_shows_phantom_actions_and_fallback_reply_verdicts() -> None:
    import re

    from pytest_tooleffect.report.html import render_html

    recs = records()
    html = render_html(summarise(recs), [r.to_json() for r in recs])
    line = re.search(r'<p class="meta" data-field="phantom_actions">(.*?)</p>', html, re.S)
    assert line is not None
    assert "single 1, several 0, no_tool 1 (2 action, 0 result)" in line.group(1)
    assert recs[0].id in line.group(1)
    replies = re.search(r'<p class="meta" data-field="approximate_replies">(.*?)</p>', html, re.S)
    assert replies is not None and "ask 1, answer 2; 2 of a kind" in replies.group(1)


def test_the_terminal_and_markdown_reports_count_phantom_actions() -> None:
    from pytest_tooleffect.report.markdown import render_markdown
    from pytest_tooleffect.report.terminal import render_terminal

    recs = records()
    report = summarise(recs)
    line = "phantom actions (a claim the conversation does not hold): single 1, several 0, no_tool 1 (2 action, 0 result)"
    assert line in render_terminal(report, width=200)
    assert "reply kinds judged by the fallback: ask 1, answer 2; 2 of a kind under 0.8 precision" in \
        render_terminal(report, width=200)
    assert "Phantom actions (a claim the conversation does not hold): single 1, several 0, no_tool 1" in \
        render_markdown(report)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("mark", ["", "\u200b"])
def test_the_phantom_gate_fails_with_invisible_characters_in_the_claim(pytester: pytest.Pytester, mark: str,
                                                                        workers: int) -> None:
    """Break-it row 204, end to end: the reply with zero-width spaces was ``wrong_reply`` and the
    ``max_count.phantom_action = 0`` gate passed (exit 0); it is a phantom action as the plain one is."""
    text = f"I have boo{mark}ked the event and emai{mark}led Tom."
    write_demo(pytester.path, [case("done", "last", {"valid_actions": [{"tool": None, "reply": "answer"}]},
                                    {"tool_calls": [], "text": text})])
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmax_count = {phantom_action = 0}\n')
    result = pytester.runpytest("cases/", "-n", str(workers), "--tooleffect-records=r.jsonl")
    assert result.ret == 1
    assert gate_lines(result)[0] == ("gate demo/replay phantom_action <= 0: FAILED (1 of 1 decisions: "
                                     "demo/done[replay])")
    record = json.loads((pytester.path / "r.jsonl").read_text())
    assert record["verdict"]["kind"] == "phantom_action" and text in json.dumps(record, ensure_ascii=False)
