"""What a no-tool reply must do (scoring rule 6): reply kinds, must / must_not, the judge and the fallback."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from pytest_tooleffect.formats import Label, ParallelGroup
from pytest_tooleffect.oracle import CompareContext, score
from pytest_tooleffect.oracle.context import NO_CONTEXT
from pytest_tooleffect.oracle.reply import judge_reply
from pytest_tooleffect.oracle.sentences import sentences

TOOLS = [
    {"name": "read_thread", "parameters": {"type": "object", "properties": {"thread_id": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "calendar.create_event", "parameters": {"type": "object", "properties": {"title": {"type": "string"}}}},
]
NO_JUDGE = CompareContext()


def label(**null: Any) -> dict[str, Any]:
    return {"valid_actions": [{"tool": None, **null}], "forbidden_actions": ["calendar.create_event"]}


FALLBACK: list[tuple[str, str, bool]] = [
    ("ask", "Which of the two meetings should I book on Thursday?", True),
    ("ask", "Could you send me the project lead's email address, please.", True),
    ("ask", "Please confirm the reservation number.", True),
    ("ask", "Thursday at 11:00 suits the pricing review best.", False),        # a guess, not a question
    ("ask", "Sure thing! Anything else?", False),                              # a question, but no detail asked
    ("refuse", "I can only organise meetings, so I can't book trains.", True),
    ("refuse", "Per our policy, basic economy tickets are not eligible for cancellation.", True),
    ("refuse", "Sure, I've cancelled it for you.", False),
    # refusals as airline agents write them (tau-airline's recorded replies)
    ("refuse", "Unfortunately, without travel insurance basic economy tickets are non-refundable.", True),
    ("refuse", "The policy is strict, and there are no exceptions that I can apply.", True),
    ("refuse", "I'm sorry, but I don't have access to the cause of flight delays.", True),
    ("refuse", "Your insurance does not cover fees for voluntary changes.", True),
    ("refuse", "I recommend speaking with a human agent. Shall I transfer you?", False),
    ("answer", "Your reservation ABC123 is confirmed for 20 May.", True),
    ("answer", "Which reservation do you mean?", False),
    ("answer", "", False),
]


@pytest.mark.parametrize(("reply", "text", "ok"), FALLBACK)
def test_the_fallback_judges_the_reply_kind_and_is_approximate(reply: str, text: str, ok: bool) -> None:
    v = score({"content": text}, label(reply=reply), TOOLS)
    assert (v.kind, v.name_ok, v.name_args_ok) == (("ok_no_tool", True, True) if ok else ("wrong_reply", True, False))
    assert v.reply is not None and v.reply.kind_ok is ok and v.approximate
    assert v.to_dict()["reply"]["kind_ok"] is ok


def test_must_and_must_not_fallback() -> None:
    lab = label(reply="answer", must="states the fare difference is $10", must_not="promises a refund")
    ok = score({"content": "The fare difference is $10, payable by card."}, lab, TOOLS)
    assert ok.kind == "ok_no_tool", ok.reply
    missing = score({"content": "Your new flight leaves at noon."}, lab, TOOLS)
    assert missing.kind == "wrong_reply" and missing.reply is not None
    assert missing.reply.kind_ok is True and missing.reply.failures[0].startswith("must: states the fare difference")
    promised = score({"content": "The fare difference is $10, and we promise a full refund."}, lab, TOOLS)
    assert promised.kind == "wrong_reply" and promised.reply is not None
    assert promised.reply.failures[0].startswith("must_not: promises a refund")


def test_the_judge_decides_when_configured_and_the_verdict_is_not_approximate() -> None:
    asked: list[tuple[str | None, Any, Any]] = []

    def judge(rubric: str | None, expected: Any, got: Any) -> tuple[bool, str]:
        asked.append((rubric, expected, got))
        return "?" not in got, "it asks instead of declining"

    ctx = CompareContext(judge=judge)
    v = score({"content": "Shall I book it anyway?"}, label(reply="refuse", reason="out of scope"), TOOLS,
              context=ctx)
    assert v.kind == "wrong_reply" and not v.approximate
    assert v.reply is not None and v.reply.failures == ("reply refuse: it asks instead of declining",)
    assert asked and asked[0][1] == "out of scope" and "declines" in str(asked[0][0])
    assert score({"content": "I can't do that."}, label(reply="refuse"), TOOLS, context=ctx).kind == "ok_no_tool"


def test_a_null_action_without_criteria_accepts_any_reply_and_tools_are_judged_as_before() -> None:
    assert score({"content": "Sure, noon it is."}, label(), TOOLS).kind == "ok_no_tool"
    v = score({"tool_calls": [{"name": "read_thread", "arguments": {"thread_id": "t"}}]}, label(reply="ask"), TOOLS)
    assert v.kind == "tool_when_none_needed" and v.reply is None


def test_reply_criteria_belong_to_null_actions_only() -> None:
    with pytest.raises(ValidationError, match="only an action with tool: null"):
        Label.model_validate({"valid_actions": [{"tool": "read_thread", "args": {}, "reply": "ask"}]})
    with pytest.raises(ValidationError):
        Label.model_validate({"valid_actions": [{"tool": None, "reply": "guess"}]})


def test_judge_reply_checks_nothing_when_nothing_is_asked() -> None:
    check = judge_reply("hi", None, [], [], NO_JUDGE)
    assert check.ok and not check.approximate and check.kind_ok is None


TWO_NULLS = [{"tool": None, "reply": "ask"}, {"tool": None, "reply": "refuse"}]
ASKS = "Which of the two meetings should I book on Thursday?"
REFUSES = "I can only organise meetings, so I can't book trains."
NEITHER = "Thursday at 11:00 suits the pricing review best."


def two_nulls(order: list[dict[str, Any]], **extra: Any) -> Label:
    return Label.model_validate({"valid_actions": order + [extra] if extra else order,
                                 "forbidden_actions": ["calendar.create_event"]})


@pytest.mark.parametrize("compiled", [False, True], ids=["comparator", "compiled"])
@pytest.mark.parametrize("order", [TWO_NULLS, TWO_NULLS[::-1]], ids=["ask-first", "refuse-first"])
@pytest.mark.parametrize(("text", "matched"), [(ASKS, "ask"), (REFUSES, "refuse")], ids=["asks", "refuses"])
def test_a_reply_passes_when_it_meets_any_null_action_and_names_the_one_it_met(
        compiled: bool, order: list[dict[str, Any]], text: str, matched: str) -> None:
    from pytest_tooleffect.formats import ToolSpec
    from pytest_tooleffect.oracle.verdict import compile_label

    specs = [ToolSpec.model_validate(t) for t in TOOLS]
    lab = two_nulls(order, tool="read_thread", args={"thread_id": "t"})
    if compiled:
        compile_label(lab, specs)
    for _ in range(2):  # a second scoring reads the kept compiled form
        v = score({"content": text}, lab, specs)
        assert (v.kind, v.name_ok, v.name_args_ok) == ("ok_no_tool", True, True), v.reply
        assert v.matched == {"tool": None, "reply": matched}
        assert v.reply is not None and v.reply.ok and v.reply.reply == matched and v.approximate


@pytest.mark.parametrize("order", [TWO_NULLS, TWO_NULLS[::-1]], ids=["ask-first", "refuse-first"])
def test_a_reply_that_meets_no_null_action_is_reported_against_the_first_among_the_closest(
        order: list[dict[str, Any]]) -> None:
    v = score({"content": NEITHER}, two_nulls(order), TOOLS)
    assert (v.kind, v.name_ok, v.name_args_ok) == ("wrong_reply", True, False)
    first = order[0]["reply"]
    assert v.matched == {"tool": None, "reply": first} and v.reply is not None and v.reply.reply == first
    assert v.reply.failures == (f"reply {first}: the reply does not {first} (fallback)",)


def test_the_closest_null_action_is_the_one_with_the_fewest_failing_checks() -> None:
    strict = {"tool": None, "reply": "answer", "must": ["names the new flight", "mentions the seat"]}
    loose = {"tool": None, "reply": "answer", "must": ["states the fare difference", "mentions the seat"]}
    text = "The fare difference is $10, payable by card."
    v = score({"content": text}, two_nulls([strict, loose]), TOOLS)
    assert v.kind == "wrong_reply" and v.reply is not None
    assert v.matched is not None and v.matched["must"] == loose["must"]
    assert v.reply.failures == ("must: mentions the seat: not found in the reply (fallback)",)


def test_a_null_action_without_criteria_among_others_accepts_any_reply() -> None:
    v = score({"content": NEITHER}, two_nulls([TWO_NULLS[0], {"tool": None}]), TOOLS)
    assert v.kind == "ok_no_tool" and v.matched == {"tool": None} and v.reply is None


def test_the_judge_is_asked_until_a_null_action_is_met() -> None:
    asked: list[str | None] = []

    def judge(rubric: str | None, expected: Any, got: Any) -> tuple[bool, str]:
        asked.append(rubric)
        return "declines" in str(rubric), "no"

    v = score({"content": REFUSES}, two_nulls(TWO_NULLS + [{"tool": None, "reply": "answer"}]), TOOLS,
              context=CompareContext(judge=judge))
    assert v.kind == "ok_no_tool" and v.matched == {"tool": None, "reply": "refuse"} and not v.approximate
    assert len(asked) == 2 and "asks" in str(asked[0]) and "declines" in str(asked[1])


BAD_CRITERIA = [
    ({"tool": None, "reply": "refuse", "must": ""}, "label.valid_actions[0].must",
     "criterion 0 is empty: each criterion is a sentence saying what the reply does"),
    ({"tool": None, "must": ["names the fare", "  "]}, "label.valid_actions[0].must", "criterion 1 is empty"),
    ({"tool": None, "must_not": [""]}, "label.valid_actions[0].must_not", "criterion 0 is empty"),
    ({"tool": None, "must": "only handles weather", "must_not": "only handles weather"},
     "label.valid_actions[0].must_not",
     "'only handles weather' is both required (must) and forbidden (must_not): no reply can pass"),
    ({"tool": None, "must": ["asks the date", "Only  handles WEATHER"], "must_not": ["only handles weather"]},
     "label.valid_actions[0].must_not", "is both required (must) and forbidden (must_not)"),
    ({"tool": None, "must": 5}, "label.valid_actions[0].must", "a criterion is a sentence, or a list of sentences"),
    ({"tool": None, "args": {"x": 1}}, "label.valid_actions[0]", "an action with tool: null cannot carry args"),
]


@pytest.mark.parametrize(("null", "field", "message"), BAD_CRITERIA,
                         ids=["empty", "blank-in-list", "empty-must-not", "contradiction", "contradiction-folded",
                              "not-text", "null-with-args"])
def test_a_criterion_that_is_empty_or_both_required_and_forbidden_is_refused_naming_file_case_and_field(
        tmp_path: Any, null: dict[str, Any], field: str, message: str) -> None:
    import json

    from pytest_tooleffect.collect.cases import load_case_file
    from pytest_tooleffect.collect.family import load_family

    fam = tmp_path / "f"
    fam.mkdir()
    (fam / "family.yaml").write_text(json.dumps({"name": "f", "tools": TOOLS}))
    case = {"id": "c7", "source": "authored", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
            "messages": [{"role": "user", "content": "book me a train"}],
            "label": {"valid_actions": [null], "labelled_by": ["a"]}}
    (fam / "cases.jsonl").write_text(json.dumps(case) + "\n")
    cases, problems = load_case_file(fam / "cases.jsonl", load_family(fam))
    assert not cases and len(problems) == 1, problems
    p = problems[0]
    assert (p.case_id, p.field) == ("c7", field) and message in p.message, str(p)
    assert str(p).startswith(f"{fam / 'cases.jsonl'}: case c7: {field}: ")


def test_criteria_that_differ_load() -> None:
    lab = Label.model_validate({"valid_actions": [{"tool": None, "must": "says it only handles weather",
                                                   "must_not": "promises a refund"}]})
    null = lab.valid_actions[0]
    assert not isinstance(null, ParallelGroup)
    assert (null.must, null.must_not) == (["says it only handles weather"], ["promises a refund"])


def test_a_question_holding_a_price_asks() -> None:
    """A decimal point is not the end of a sentence: the question with a price asks."""
    for text in ("Shall I refund $49.99 to your original payment method?",
                 "Your balance is 12.50 dollars. Shall I refund $49.99 to your original payment method?",
                 "Version 2.3.1 is installed. Should I upgrade it to 3.0?"):
        check = judge_reply(text, "ask", [], [], NO_CONTEXT)
        assert check.ok and check.kind_ok and check.approximate, (text, check)
    # a sentence that ends after a number is still a sentence of its own
    assert sentences("It costs 49. Why?") == ["It costs 49.", "Why?"]
    assert not judge_reply("I refunded $49.99 to your card.", "ask", [], [], NO_CONTEXT).ok
