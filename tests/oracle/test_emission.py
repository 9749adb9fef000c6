"""Provider output → actions, for every shape the oracle reads (DESIGN.md scoring rule 1)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tooleffect.oracle import Call, parse_emission

OFFERED = ["get_weather", "calendar.create_event"]

CASES: list[tuple[str, Any, list[Call], int]] = [
    ("chat message, string args",
     {"role": "assistant", "content": None, "tool_calls": [
         {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
     [Call("get_weather", {"city": "Oslo"})], 0),
    ("chat message, object args", {"tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
     [Call("get_weather", {"city": "Oslo"})], 0),
    ("compact recorded form, empty-string args", {"tool_calls": [{"name": "get_weather", "arguments": ""}]},
     [Call("get_weather", {})], 0),
    ("null args", {"tool_calls": [{"name": "get_weather", "arguments": None}]}, [Call("get_weather", {})], 0),
    ("full chat completion", {"choices": [{"message": {"tool_calls": [
        {"function": {"name": "get_weather", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]},
     [Call("get_weather", {})], 0),
    ("responses API items", {"output": [
        {"type": "message", "content": [{"type": "output_text", "text": "checking"}]},
        {"type": "function_call", "name": "get_weather", "arguments": '{"city": "Rome"}', "call_id": "x"}]},
     [Call("get_weather", {"city": "Rome"})], 0),
    ("anthropic tool_use blocks", [{"type": "text", "text": "ok"},
                                   {"type": "tool_use", "id": "t", "name": "get_weather", "input": {"city": "Bern"}}],
     [Call("get_weather", {"city": "Bern"})], 0),
    ("gemini functionCall parts", {"candidates": [{"content": {"parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Lima"}}}]}}]},
     [Call("get_weather", {"city": "Lima"})], 0),
    ("no call, plain text", {"content": "It is sunny."}, [], 0),
    ("finish_reason stop does not hide calls",
     {"tool_calls": [{"name": "get_weather", "arguments": "{}"}], "finish_reason": "stop"}, [Call("get_weather", {})], 0),
    ("invalid JSON args", {"tool_calls": [{"name": "get_weather", "arguments": '{"city": '}]}, [], 1),
    ("args that are a JSON list", {"tool_calls": [{"name": "get_weather", "arguments": "[1, 2]"}]}, [], 1),
    ("call without a name", {"tool_calls": [{"name": "", "arguments": "{}"}]}, [], 1),
    ("<tool_call> tags in text", {"content": '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'}, [], 1),
    ("[TOOL_CALLS] marker", {"content": '[TOOL_CALLS] [{"name": "get_weather", "arguments": {}}]'}, [], 1),
    ("python tag", {"content": '<|python_tag|>get_weather.call(city="Oslo")'}, [], 1),
    ("<function=…> form", {"content": '<function=get_weather>{"city": "Oslo"}</function>'}, [], 1),
    ("bare JSON naming an offered tool", {"content": '{"name": "get_weather", "arguments": {"city": "Oslo"}}'}, [], 1),
    ("fenced JSON naming an offered tool", {"content": '```json\n{"name": "calendar.create_event", "parameters": {}}\n```'},
     [], 1),
    ("JSON answer naming no tool is text", {"content": '{"name": "Ada Lovelace", "born": 1815}'}, [], 0),
]


@pytest.mark.parametrize(("output", "calls", "n_malformed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_emission(output: Any, calls: list[Call], n_malformed: int) -> None:
    em = parse_emission(output, offered=OFFERED)
    assert list(em.calls) == calls
    assert len(em.malformed) == n_malformed
    assert em.is_null == (not calls and not n_malformed)


def test_model_dump_objects_are_read() -> None:
    class Resp:
        def model_dump(self) -> dict[str, Any]:
            return {"choices": [{"message": {"content": "hi"}}]}

    assert parse_emission(Resp()).is_null


def test_unreadable_output_raises() -> None:
    with pytest.raises(TypeError, match="cannot read a model turn"):
        parse_emission(42)


@pytest.mark.parametrize("output", [
    {"choices": [{"message": "hi"}]},  # a message that is not an object
    {"candidates": [{"content": "x"}]},  # Gemini content that is not an object
    {"content": {"parts": ["x"]}},  # Gemini parts holding a string
    [{"type": "message", "content": [None]}],  # a Responses message part that is not an object
    {"content": [{"type": "message", "content": ["x"]}]},
], ids=["message", "gemini-content", "gemini-part", "responses-part", "nested-part"])
def test_nested_parts_that_are_not_objects_raise_the_documented_error(output: Any) -> None:
    with pytest.raises(TypeError, match="cannot read a model turn"):
        parse_emission(output)


def test_a_function_call_that_is_not_an_object_is_a_malformed_call() -> None:
    em = parse_emission([{"functionCall": "get_weather"}])
    assert em.calls == () and em.malformed == ("a function call that is a str, not an object",)


def test_a_call_under_an_mcp_servers_own_name_is_the_familys_tool() -> None:
    """An MCP tool the import renamed (``notes.add`` → ``notes_add``, its server name kept as
    ``mcp_name``): a call under the server's name, in the call channel or written in the text, is
    the family's tool; without the aliases it stays a call to a tool not offered."""
    from pytest_tooleffect.formats import ToolSpec
    from pytest_tooleffect.oracle import score, tool_aliases

    params = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools = [ToolSpec(name="notes_add", mcp_name="notes.add", parameters=params), ToolSpec(name="notes_list")]
    aliases = tool_aliases(tools)
    assert aliases == {"notes.add": "notes_add"}
    offered = [t.name for t in tools]
    turn = {"tool_calls": [{"name": "notes.add", "arguments": '{"text": "milk"}'}, {"name": "notes_list",
                                                                                      "arguments": "{}"}]}
    assert list(parse_emission(turn, offered, aliases).calls) == [Call("notes_add", {"text": "milk"}),
                                                                  Call("notes_list", {})]
    assert parse_emission(turn, offered).calls[0].name == "notes.add"  # no aliases: as written
    bad = {"tool_calls": [{"name": "notes.add", "arguments": '{"text": '}]}
    assert parse_emission(bad, offered, aliases).malformed_names == ("notes_add",)
    text = {"content": '<tool_call>{"name": "notes.add", "arguments": {}}</tool_call>'}
    assert parse_emission(text, offered, aliases).malformed_names == ("notes_add",)
    bare = {"content": '{"notes.add": {"text": "milk"}}'}  # {tool: args}: a call only when the key names a tool
    assert parse_emission(bare, offered, aliases).malformed_names == ("notes_add",)
    assert parse_emission(bare, offered).is_null
    # an alias of a tool not offered at the state is no alias there
    assert parse_emission(turn, ["notes_list"], aliases).calls[0].name == "notes.add"
    label = {"valid_actions": [{"tool": "notes_add", "args": {"text": "milk"}}]}
    one = {"tool_calls": [{"name": "notes.add", "arguments": '{"text": "milk"}'}]}
    verdict = score(one, label, tools)
    assert (verdict.kind, verdict.hallucinated) == ("ok", ())
    assert score(one, label, [ToolSpec(name="notes_add", parameters=params), tools[1]]).hallucinated == ("notes.add",)


def test_arguments_holding_an_integer_past_pythons_digit_limit_are_named_by_its_size() -> None:
    """Break-it row 42 (an agent's door): the malformed call said ``cannot be read: ValueError``."""
    turn = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "lookup_order", "arguments": '{"order_id": ' + "9" * 5000 + "}"}}]}
    em = parse_emission(turn, ["lookup_order"])
    assert em.calls == () and em.malformed == (
        "arguments of lookup_order cannot be read: an integer of 5000 digits (over Python's 4300-digit limit)",)
