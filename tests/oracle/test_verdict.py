"""Verdict kinds, their precedence, alternatives and parallel matching (scoring rules 2–3)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tooleffect.oracle import KINDS, score

TOOLS = [
    {"name": "read_thread", "parameters": {"type": "object", "properties": {"thread_id": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "list_availability", "parameters": {"type": "object", "properties": {"who": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "calendar.create_event", "parameters": {"type": "object", "properties": {
        "title": {"type": "string"}, "start": {"type": "string", "format": "date-time"}}}},
    {"name": "mail.reply", "parameters": {"type": "object", "properties": {
        "thread_id": {"type": "string"}, "kind": {"type": "string", "enum": ["ack", "question"]}}}},
]

SEED_LABEL = {  # the seed's tsel-0142
    "valid_actions": [{"tool": None, "reason": "confirmation received"},
                      {"tool": "mail.reply", "args": {"thread_id": "th-8831", "kind": "ack"}}],
    "forbidden_actions": ["list_availability", "calendar.create_event"],
}


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def turn(*calls: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    return {"tool_calls": list(calls), "text": text}


ROWS: list[tuple[str, dict[str, Any], dict[str, Any], tuple[bool, bool, str]]] = [
    ("abstention where null is valid", turn(text="Great!"), SEED_LABEL, (True, True, "ok_no_tool")),
    ("acceptable acknowledgement", turn(call("mail.reply", thread_id="th-8831", kind="ack")), SEED_LABEL,
     (True, True, "ok")),
    ("redundant read where null is valid", turn(call("read_thread", thread_id="th-8831")), SEED_LABEL,
     (False, False, "tool_when_none_needed")),
    # the seed's sketch let tool_when_none_needed overwrite forbidden: forbidden must win
    ("forbidden write in the no-tool class", turn(call("calendar.create_event", title="x")), SEED_LABEL,
     (False, False, "forbidden")),
    ("forbidden beats malformed", turn(call("list_availability", who="a"),
                                       {"name": "mail.reply", "arguments": "{bad"}), SEED_LABEL,
     (False, False, "forbidden")),
    ("malformed call naming a forbidden tool", turn(text='<tool_call>{"name": "list_availability"}</tool_call>'),
     SEED_LABEL, (False, False, "forbidden")),
    ("malformed call otherwise", turn(text='<tool_call>{"name": "read_thread"}</tool_call>'), SEED_LABEL,
     (False, False, "malformed_call")),
    ("right tool, wrong enum", turn(call("mail.reply", thread_id="th-8831", kind="question")), SEED_LABEL,
     (True, False, "right_tool_wrong_args")),
    ("no call where a tool is needed", turn(text="Done."),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]}, (False, False, "none_when_tool_needed")),
    ("wrong tool", turn(call("list_availability", who="a")),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]}, (False, False, "wrong_tool")),
    ("forbidden only with those args", turn(call("read_thread", thread_id="other")),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}],
      "forbidden_actions": [{"tool": "read_thread", "args": {"thread_id": "secret"}}]},
     (True, False, "right_tool_wrong_args")),
    ("forbidden args hit", turn(call("read_thread", thread_id="secret")),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}],
      "forbidden_actions": [{"tool": "read_thread", "args": {"thread_id": "secret"}}]},
     (False, False, "forbidden")),
    ("extra call beyond the single valid action", turn(call("read_thread", thread_id="t"), call("list_availability", who="a")),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]}, (False, False, "wrong_tool")),
    ("parallel group, reversed order", turn(call("list_availability", who="b"), call("list_availability", who="a")),
     {"valid_actions": [{"parallel": [{"tool": "list_availability", "args": {"who": "a"}},
                                      {"tool": "list_availability", "args": {"who": "b"}}]}]}, (True, True, "ok")),
    ("parallel group, order matters", turn(call("list_availability", who="b"), call("list_availability", who="a")),
     {"valid_actions": [{"parallel": [{"tool": "list_availability", "args": {"who": "a"}},
                                      {"tool": "list_availability", "args": {"who": "b"}}], "order_matters": True}]},
     (True, False, "right_tool_wrong_args")),
    ("parallel group, a call missing", turn(call("list_availability", who="a")),
     {"valid_actions": [{"parallel": [{"tool": "list_availability", "args": {"who": "a"}},
                                      {"tool": "read_thread", "args": {"thread_id": "t"}}]}]}, (False, False, "wrong_tool")),
]


@pytest.mark.parametrize(("emitted", "label", "want"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_kind(emitted: dict[str, Any], label: dict[str, Any], want: tuple[bool, bool, str]) -> None:
    v = score(emitted, label, TOOLS)
    assert (v.name_ok, v.name_args_ok, v.kind) == want, v.to_dict()
    assert v.kind in KINDS


def test_fewest_failing_fields_picks_the_matched_action() -> None:
    label = {"valid_actions": [
        {"tool": "mail.reply", "args": {"thread_id": "a", "kind": "question"}},
        {"tool": "mail.reply", "args": {"thread_id": "b", "kind": "ack"}},
    ]}
    v = score(turn(call("mail.reply", thread_id="b", kind="question")), label, TOOLS)
    assert v.kind == "right_tool_wrong_args"
    # both alternatives fail one field; the first in label order wins the tie
    assert v.matched == {"tool": "mail.reply", "args": {"thread_id": "a", "kind": "question"}}
    v = score(turn(call("mail.reply", thread_id="x", kind="ack")), {"valid_actions": [
        {"tool": "mail.reply", "args": {"thread_id": "a", "kind": "question"}},
        {"tool": "mail.reply", "args": {"thread_id": "b", "kind": "ack"}}]}, TOOLS)
    assert v.matched["args"]["thread_id"] == "b"
    assert [f.path for f in v.failing_fields] == ["mail.reply.thread_id"]


def test_compiled_label_and_tools_are_reused_without_leaking_edits() -> None:
    from pytest_tooleffect.formats import Label, ToolSpec
    from pytest_tooleffect.oracle import RuleSet

    label = Label.model_validate({"valid_actions": [{"tool": "mail.reply", "args": {"thread_id": "a", "kind": "ack"}}]})
    tools = [ToolSpec.model_validate(t) for t in TOOLS]
    rules = RuleSet()
    first = score(turn(call("mail.reply", thread_id="a", kind="ack")), label, tools, rules)
    record = first.to_dict()
    record["matched"]["args"]["thread_id"] = "edited by a hook"  # records may be edited in place
    second = score(turn(call("mail.reply", thread_id="b", kind="ack")), label, tools, rules)
    assert first.kind == "ok"
    assert second.kind == "right_tool_wrong_args"
    assert second.matched == {"tool": "mail.reply", "args": {"thread_id": "a", "kind": "ack"}}
    assert [(f.path, f.expected, f.got) for f in second.failing_fields] == [("mail.reply.thread_id", "a", "b")]
    assert len(rules.compiled) == 1  # the tool's schema, compiled once for both decisions
    (kept,) = label._oracle.alternatives[0].plans  # the label call, compiled against it once, kept on the label
    assert len(kept) == 1 and kept[0][0] is rules
    # the compiled form is a cache, not part of the label's value
    assert label == Label.model_validate(label.model_dump())
    assert label.model_copy(deep=True)._oracle is None
    import pickle

    assert pickle.loads(pickle.dumps(label)) == label and pickle.loads(pickle.dumps(label))._oracle is None


def test_parallel_assignment_is_optimal_not_greedy() -> None:
    # first-fit would pair the first emitted call with the first required call (same name) and fail
    label = {"valid_actions": [{"parallel": [
        {"tool": "mail.reply", "args": {"thread_id": "t1", "kind": "ack"}},
        {"tool": "mail.reply", "args": {"thread_id": "t2", "kind": "question"}}]}]}
    v = score(turn(call("mail.reply", thread_id="t2", kind="question"), call("mail.reply", thread_id="t1", kind="ack")),
              label, TOOLS)
    assert (v.name_ok, v.name_args_ok, v.kind) == (True, True, "ok")


def test_one_line_reason_names_kind_expected_and_emitted() -> None:
    from pytest_tooleffect.formats import Label

    label = Label.model_validate(SEED_LABEL)
    v = score(turn(call("read_thread", thread_id="th-8831")), label, TOOLS)
    assert v.one_line(label) == "tool_when_none_needed: expected {null, mail.reply}, emitted read_thread"
    twice = Label.model_validate({"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "a"}},
                                                    {"tool": "read_thread", "args": {"thread_id": "b"}}]})
    assert score(turn(), twice, TOOLS).one_line(twice) == "none_when_tool_needed: expected {read_thread ×2}, emitted null"


def test_a_copy_with_other_actions_is_scored_by_its_own_actions_and_records_never_share_the_labels_values() -> None:
    from pytest_tooleffect.formats import Action, ForbiddenAction, Label

    label = Label.model_validate({"valid_actions": [{"tool": "mail.reply", "args": {"thread_id": "a", "kind": "ack"}}]})
    good = turn(call("mail.reply", thread_id="a", kind="ack"))
    assert score(good, label, TOOLS).kind == "ok"
    assert score(good, label, TOOLS).kind == "ok"  # compiled now
    abstain = label.model_copy(update={"valid_actions": [Action(tool=None)]})
    assert score({"content": "done"}, abstain, TOOLS).kind == "ok_no_tool"
    banned = label.model_copy(update={"forbidden_actions": [ForbiddenAction(tool="mail.reply")]})
    assert score(good, banned, TOOLS).kind == "forbidden"
    # a hook editing a record in place leaves the label (and later verdicts) alone
    record = score(turn(call("mail.reply", thread_id="b", kind="ack")), label, TOOLS).to_dict()
    record["fields"][0]["expected"] = "edited"
    listed = Label.model_validate({"valid_actions": [{"tool": "mail.reply", "args": {"thread_id": "a", "kind": "ack"}}]})
    assert label == listed and score(good, label, TOOLS).kind == "ok"


def test_a_parallel_call_with_very_many_failing_fields_is_still_the_right_tool() -> None:
    tools = [{"name": "t", "parameters": {"type": "object", "properties": {"p": {"type": "array", "items": {"type": "string"}}}}},
             {"name": "u", "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}}}]
    label = {"valid_actions": [{"parallel": [{"tool": "t", "args": {"p": ["a"] * 10_000}}, {"tool": "u", "args": {"q": 1}}]}]}
    emitted = {"tool_calls": [{"name": "t", "arguments": {"p": ["b"] * 10_000}}, {"name": "u", "arguments": {"q": 1}}]}
    v = score(emitted, label, tools)
    assert (v.kind, v.name_ok, len(v.failing_fields)) == ("right_tool_wrong_args", True, 10_000)


MALFORMED_ROWS: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    # the name level asks only whether the tool was acceptable: a readable name says it
    ("truncated JSON to the valid tool", turn({"name": "read_thread", "arguments": '{"thread_id": "t'}),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]}, True),
    ("trailing characters after the JSON", turn({"name": "read_thread", "arguments": '{"thread_id": "t"}}'}),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]}, True),
    ("arguments a JSON list", turn({"name": "read_thread", "arguments": '["t"]'}),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]}, True),
    ("truncated JSON to a tool that is not valid", turn({"name": "list_availability", "arguments": '{"who": '}),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]}, False),
    ("truncated JSON on a no-tool state to a valid tool", turn({"name": "mail.reply", "arguments": '{"kind": "ack'}),
     {"valid_actions": [{"tool": None}, {"tool": "mail.reply", "args": {"thread_id": "a", "kind": "ack"}}]}, True),
    ("truncated JSON where only null is valid", turn({"name": "read_thread", "arguments": "{"}),
     {"valid_actions": [{"tool": None}]}, False),
    ("one of a parallel group malformed, names acceptable",
     turn(call("list_availability", who="a"), {"name": "list_availability", "arguments": '{"who": "b"'}),
     {"valid_actions": [{"parallel": [{"tool": "list_availability", "args": {"who": "a"}},
                                      {"tool": "list_availability", "args": {"who": "b"}}]}]}, True),
    ("a call without a name", turn({"name": "", "arguments": "{}"}),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]}, False),
    ("a call written into the text channel", turn(text='<tool_call>{"name": "read_thread"}</tool_call>'),
     {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]}, False),
]


@pytest.mark.parametrize(("emitted", "label", "name_ok"), [r[1:] for r in MALFORMED_ROWS],
                         ids=[r[0] for r in MALFORMED_ROWS])
def test_a_malformed_call_keeps_its_kind_and_its_name_level_says_whether_the_tool_was_acceptable(
        emitted: dict[str, Any], label: dict[str, Any], name_ok: bool) -> None:
    v = score(emitted, label, TOOLS)
    assert (v.kind, v.name_ok, v.name_args_ok) == ("malformed_call", name_ok, False), v.to_dict()
