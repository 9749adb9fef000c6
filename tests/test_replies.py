"""Replies you can audit: every record keeps the text the policy gave (and the raw text of each
malformed call attempt), redacted and bounded with the cut said, and a failure line quotes it.

Through real runs: the demo family's tools with recorded decisions replayed, and one live turn
from the scripted model server.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.options import OPT_API_BASE, OPT_MODEL
from pytest_tooleffect.scoring.record import MALFORMED_RAW_LIMIT, REPLY_TEXT_LIMIT, Record, record_schema
from pytest_tooleffect.scoring.scorer import FAILURE_REPLY_LIMIT
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from pytest_tooleffect.util.redaction import REDACTED
from tests.conftest import schema_validator
from tests.demo_family import write_demo

REFUND_QUESTION = "Shall I refund $49.99 to your original payment method?"
ASK = {"valid_actions": [{"tool": None, "reply": "ask", "reason": "the refund needs the user's yes"}]}
READ = {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-1"}}]}
#: 10,000 characters, no question in them
LONG = "Your booking is confirmed for the morning flight. " * 200
TEXT_CALL = 'Let me look. <tool_call>{"name": "read_thread", "arguments": {"thread_id": "th-1"}}</tool_call>'


def _case(cid: str, label: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 1, "run_length": 2, "bucket": "last"},
            "messages": [{"role": "user", "content": f"[{cid}] I was charged twice for my $49.99 order."}],
            "label": label, "recorded": recorded, "source": "authored"}


def _records(root: Path) -> dict[str, dict[str, Any]]:
    """The run's record log by case id, each record checked against the generated schema."""
    lines = (root / "reports" / "tooleffect-records.jsonl").read_text().splitlines()
    out = {}
    validator = schema_validator(record_schema())
    for line in lines:
        rec = json.loads(line)
        validator.validate(rec)
        assert Record.model_validate(rec).to_json() == rec
        out[rec["case_id"]] = rec
    return out


@pytest.fixture(scope="module")
def canary() -> str:
    """A key the run knows as a secret (its variable's name says it holds one)."""
    return "sk-reply-" + secrets.token_hex(12)


@pytest.fixture
def replayed(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, canary: str) -> dict[str, Any]:
    """One replayed run of decisions whose replies are the point: the refund question, a long reply,
    replies holding a known secret, calls that cannot be parsed."""
    monkeypatch.setenv("TOOLEFFECT_TEST_REPLY_API_KEY", canary)
    write_demo(pytester.path, [
        _case("refund-question", ASK, {"tool_calls": [], "text": REFUND_QUESTION}),
        _case("refund-guessed", ASK, {"tool_calls": [], "text": "I refunded $49.99 to your card."}),
        _case("long-reply", ASK, {"tool_calls": [], "text": LONG}),
        _case("secret-reply", ASK, {"tool_calls": [], "text": f"I see the key {canary} in your note. Shall I rotate it?"}),
        _case("secret-at-the-cut", ASK, {"tool_calls": [], "text": "x" * (REPLY_TEXT_LIMIT - 5) + canary + "y" * 100}),
        _case("text-call", READ, {"tool_calls": [], "text": TEXT_CALL}),
        _case("bad-arguments", READ, {"tool_calls": [{"name": "read_thread",
                                                      "arguments": f'{{"thread_id": "th-1", "key": "{canary}"'}]}),
        _case("long-arguments", READ, {"tool_calls": [{"name": "read_thread",
                                                       "arguments": '{"thread_id": "' + "7" * 5000}]}),
    ])
    result = pytester.runpytest("cases/", "-rf")
    result.assert_outcomes(passed=2, failed=6)
    return {"result": result, "records": _records(pytester.path), "root": pytester.path}


def test_the_refund_question_asks_and_its_text_is_in_the_record(replayed: dict[str, Any]) -> None:
    rec = replayed["records"]["refund-question"]
    assert rec["policy"] == "replay"  # a replayed decision carries its reply too
    assert rec["verdict"]["kind"] == "ok_no_tool" and rec["verdict"]["reply"]["ok"]
    assert rec["verdict"]["reply_text"] == REFUND_QUESTION
    assert rec["verdict"]["malformed_raw"] == []


def test_a_long_reply_is_cut_and_the_cut_is_said(replayed: dict[str, Any]) -> None:
    assert len(LONG) == 10_000 and REPLY_TEXT_LIMIT == 4_000
    rec = replayed["records"]["long-reply"]
    assert rec["verdict"]["kind"] == "wrong_reply"
    assert rec["verdict"]["reply_text"] == LONG[:4_000] + " … (10,000 characters, cut)"


def test_a_known_secret_in_a_reply_is_redacted_in_the_record(replayed: dict[str, Any], canary: str) -> None:
    recs = replayed["records"]
    assert recs["secret-reply"]["verdict"]["reply_text"] == f"I see the key {REDACTED} in your note. Shall I rotate it?"
    # redacted before it is cut: a key across the cut is not kept in part
    at_cut = recs["secret-at-the-cut"]["verdict"]["reply_text"]
    whole = REPLY_TEXT_LIMIT - 5 + len(REDACTED) + 100
    assert at_cut == "x" * (REPLY_TEXT_LIMIT - 5) + REDACTED[:5] + f" … ({whole:,} characters, cut)"
    assert recs["bad-arguments"]["verdict"]["malformed_raw"] == [f'{{"thread_id": "th-1", "key": "{REDACTED}"']
    log = (replayed["root"] / "reports" / "tooleffect-records.jsonl").read_text()
    assert canary[:12] not in log
    assert canary[:12] not in replayed["result"].stdout.str()


def test_a_malformed_call_keeps_its_raw_text(replayed: dict[str, Any]) -> None:
    recs = replayed["records"]
    text_call = recs["text-call"]["verdict"]
    assert text_call["kind"] == "malformed_call"
    assert text_call["malformed"] == ["<tool_call> tag in the text channel"]
    assert text_call["reply_text"] == TEXT_CALL  # the text the call was written into, whole
    assert text_call["malformed_raw"] == ['{"name": "read_thread", "arguments": {"thread_id": "th-1"}}</tool_call>']
    long_arguments = recs["long-arguments"]["verdict"]
    assert long_arguments["kind"] == "malformed_call" and long_arguments["reply_text"] is None
    raw = '{"thread_id": "' + "7" * 5000
    assert long_arguments["malformed_raw"] == [raw[:MALFORMED_RAW_LIMIT] + f" … ({len(raw):,} characters, cut)"]


def _failure_line(result: pytest.RunResult, cid: str) -> str:
    """The failure's one line, printed under its record id as headline."""
    lines = result.stdout.lines
    (at,) = [i for i, x in enumerate(lines) if x.startswith("_") and f" demo/{cid}[replay] " in x]
    return lines[at + 1]


def test_the_failure_line_names_the_reply_bounded(replayed: dict[str, Any]) -> None:
    result = replayed["result"]
    assert _failure_line(result, "refund-guessed").startswith("wrong_reply: expected {null}, emitted null; ")
    assert _failure_line(result, "refund-guessed").endswith('; reply: "I refunded $49.99 to your card."')
    assert FAILURE_REPLY_LIMIT == 200
    head = ("Your booking is confirmed for the morning flight. " * 4).strip()  # its first 200 characters
    long_line = _failure_line(result, "long-reply")
    assert long_line.endswith(f'; reply: "{head} … (10,000 characters, cut)"') and len(long_line) < 400
    # a call written into the text channel: its text is what the turn did
    assert _failure_line(result, "text-call").endswith(f'; reply: "{TEXT_CALL}"')
    # a call made through the tool-call channel: no reply to quote
    assert "reply:" not in _failure_line(result, "bad-arguments")


def test_a_live_turn_keeps_its_reply(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [_case("refund-question", ASK, {"tool_calls": []})])
    with ScriptedServer(lambda body: Reply(text=REFUND_QUESTION)) as srv:
        result = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}")
    result.assert_outcomes(passed=1)
    rec = _records(pytester.path)["refund-question"]
    assert rec["policy"] != "replay" and rec["model"] == "openai/local-test"
    assert rec["verdict"]["kind"] == "ok_no_tool" and rec["verdict"]["reply_text"] == REFUND_QUESTION
