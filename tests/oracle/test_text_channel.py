"""Calls written into the text channel, in the forms real models write them (scoring rule 1).

Each is a call attempt (``malformed_call``), never "no call"; the name is the original tool
name whether the model wrote it or the provider-safe one it was given; several per reply count
one by one; a tool result the model wrote itself is a finding, never a clean abstention.
"""

from __future__ import annotations

import pytest

from pytest_tooleffect.oracle import parse_emission, score

OFFERED = ["read_thread", "list_availability", "calendar.create_event", "reply_to_thread"]

FORMS: list[tuple[str, str, list[str], str]] = [
    ("fenced JSON, provider-safe name",
     '```json\n{"name": "calendar_create_event", "arguments": {"title": "Q3"}}\n```',
     ["calendar.create_event"], "fenced JSON call"),
    ("bare JSON followed by prose",
     '{"name": "read_thread", "arguments": {"thread_id": "th-1"}}\n\nI will read the thread first.',
     ["read_thread"], "JSON call"),
    ("prose then JSON", 'Let me check.\n{"name": "read_thread", "arguments": {"thread_id": "th-1"}}',
     ["read_thread"], "JSON call"),
    ("<tools> wrapper", '<tools>\n{"name": "list_availability", "arguments": {"attendees": ["a@x"]}}\n</tools>',
     ["list_availability"], "<tools> tag"),
    ("two objects", '{"name": "read_thread", "arguments": {}}\n{"name": "list_availability", "arguments": {}}',
     ["read_thread", "list_availability"], "JSON call"),
    ("doubled braces", '{{"name": "read_thread", "arguments": {"thread_id": "th-1"}}}',
     ["read_thread"], "JSON call"),
    ("functions.x: stub", 'functions.calendar_create_event:\n{"title": "Q3", "start": "2025-03-19T14:00:00"}',
     ["calendar.create_event"], "functions.… stub"),
    ("<tool_call> (Qwen/Hermes)", '<tool_call>\n{"name": "read_thread", "arguments": {"thread_id": "t"}}\n</tool_call>',
     ["read_thread"], "<tool_call> tag"),
    ("two <tool_call> blocks", '<tool_call>{"name": "read_thread", "arguments": {}}</tool_call>\n'
                               '<tool_call>{"name": "calendar_create_event", "arguments": {}}</tool_call>',
     ["read_thread", "calendar.create_event"], "<tool_call> tag"),
    ("[TOOL_CALLS] list (Mistral)", '[TOOL_CALLS] [{"name": "read_thread", "arguments": {"thread_id": "t"}}]',
     ["read_thread"], "[TOOL_CALLS] marker"),
    ("[TOOL_CALLS] name[ARGS] (Mistral v11)", '[TOOL_CALLS]read_thread[ARGS]{"thread_id": "t"}',
     ["read_thread"], "[TOOL_CALLS] marker"),
    ("<|python_tag|> JSON (Llama 3.1)", '<|python_tag|>{"name": "read_thread", "parameters": {"thread_id": "t"}}',
     ["read_thread"], "<|python_tag|>"),
    ("<|python_tag|> call (Llama 3.1 built-in)", '<|python_tag|>read_thread.call(thread_id="t")',
     ["read_thread"], "<|python_tag|>"),
    ("<function=…> (Llama 3.2)", '<function=calendar_create_event>{"title": "Q3"}</function>',
     ["calendar.create_event"], "<function=…> call"),
    ("OpenAI-shaped object", '{"type": "function", "function": {"name": "read_thread", "arguments": "{}"}}',
     ["read_thread"], "JSON call"),
    ("tool_calls object", '{"tool_calls": [{"name": "read_thread", "arguments": {}}]}',
     ["read_thread"], "JSON call"),
    ("name as the only key", '{"read_thread": {"thread_id": "th-1"}}', ["read_thread"], "JSON call"),
    ("call to a tool not offered", '{"name": "send_email", "arguments": {"to": "x"}}', ["send_email"], "JSON call"),
    ("cut off mid-JSON", 'Sure:\n{"name": "calendar_create_event", "arguments": {"title": "Q3", "sta',
     ["calendar.create_event"], "unterminated JSON call"),
    ("<tool_call> with unreadable JSON", "<tool_call>\nread_thread th-1\n</tool_call>",
     [""], "<tool_call> tag without a readable call"),
]


@pytest.mark.parametrize(("text", "names", "form"), [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
def test_text_channel_call_forms(text: str, names: list[str], form: str) -> None:
    em = parse_emission({"role": "assistant", "content": text}, offered=OFFERED)
    assert em.calls == ()
    assert list(em.malformed_names) == names
    assert all(r.startswith(form) and r.endswith("in the text channel") for r in em.malformed), em.malformed
    assert not em.is_null


@pytest.mark.parametrize("text", [
    "I need the thread id before I can read it. Which thread is it?",
    'The event {"title": "Q3"} is booked.',  # JSON that names no tool
    '{"name": "Ada Lovelace", "born": 1815}',
    "Use the functions listed above: none is needed here.",
    "[1, 2, 3] are the options; {x} is a placeholder.",
], ids=["question", "json-no-tool", "name-not-a-tool", "word-functions", "brackets"])
def test_plain_replies_are_no_call(text: str) -> None:
    assert parse_emission({"content": text}, offered=OFFERED).is_null


def test_echoed_json_beside_a_structured_call_is_not_a_second_call() -> None:
    em = parse_emission({"content": '{"name": "read_thread", "arguments": {}}',
                         "tool_calls": [{"name": "read_thread", "arguments": "{}"}]}, offered=OFFERED)
    assert len(em.calls) == 1 and em.malformed == ()


def test_invented_tool_result_is_a_finding_never_a_clean_abstention() -> None:
    text = "The meeting is booked.\n<tool_response>\n{\"status\": \"confirmed\"}\n</tool_response>"
    em = parse_emission({"content": text}, offered=OFFERED)
    assert em.invented_results and "invented tool result (<tool_response>)" in em.invented_results[0]
    verdict = score(em, {"valid_actions": [{"tool": None}]}, [{"name": n} for n in OFFERED])
    assert verdict.kind == "malformed_call" and not verdict.name_ok


def test_provider_safe_name_in_text_meets_the_forbidden_rule() -> None:
    em = parse_emission({"content": '{"name": "calendar_create_event", "arguments": {}}'}, offered=OFFERED)
    verdict = score(em, {"valid_actions": [{"tool": None}], "forbidden_actions": ["calendar.create_event"]},
                    [{"name": n} for n in OFFERED])
    assert verdict.kind == "forbidden"


def test_json_after_a_text_call_that_is_not_a_call_is_an_invented_result() -> None:
    """The 0.5B model writes its call, then the thread it imagines the tool returned (captured reply)."""
    text = ('{"name": "read_thread", "arguments": {"thread_id": "th-8125"}}\n'
            '{"subject": "Packaging workshop", "participants": ["elena.marin@alba-labs.eu"]}')
    em = parse_emission({"content": text}, offered=OFFERED)
    assert em.malformed_names == ("read_thread",)
    assert len(em.invented_results) == 1 and "after the call" in em.invented_results[0]
    plain = parse_emission({"content": 'Booked. {"title": "Q3"}'}, offered=OFFERED)
    assert plain.is_null and plain.invented_results == ()


@pytest.mark.parametrize(("turn", "raw"), [
    pytest.param({"content": 'Two calls. {"name": "read_thread", "arguments": {}} then '
                             '{"name": "list_availability", "arguments": {}}'},
                 ['{"name": "read_thread", "arguments": {}} then ', '{"name": "list_availability", "arguments": {}}'],
                 id="text: from each call to the next"),
    pytest.param({"content": '[TOOL_CALLS]read_thread[ARGS]{"thread_id": "t"} done'},
                 ['[TOOL_CALLS]read_thread[ARGS]{"thread_id": "t"} done'], id="text: a named form and its arguments"),
    pytest.param({"content": 'Sure <tool_response>{"ok": true}</tool_response>'},
                 ['<tool_response>{"ok": true}</tool_response>'], id="text: an invented result"),
    pytest.param({"tool_calls": [{"function": {"name": "read_thread", "arguments": '{"thread_id": "t'}}]},
                 ['{"thread_id": "t'], id="call channel: arguments as sent"),
    pytest.param({"tool_calls": [{"function": {"name": "read_thread", "arguments": ["t", 1]}}]},
                 ['["t", 1]'], id="call channel: arguments that are not a string, as JSON"),
    pytest.param({"tool_calls": [{"function": {"arguments": '{"thread_id": "t"}'}}, "read_thread"]},
                 ['{"thread_id": "t"}', 'read_thread'], id="call channel: no name, a string"),
])
def test_each_malformed_attempt_keeps_what_it_was_read_from(turn: dict[str, object], raw: list[str]) -> None:
    em = parse_emission(turn, offered=OFFERED)
    assert list(em.malformed_raw) == raw
    assert len(em.malformed_raw) == len(em.malformed) == len(em.malformed_names)


@pytest.mark.parametrize(("value", "said"), [
    ("[" * 50_000 + "]" * 50_000, "nested deeper than it follows (Python's recursion limit, "),
    ("7" * 5_000, "a number of 5,000 digits (4,300 at most)"),
], ids=["too deep", "number too long"])
@pytest.mark.parametrize("wrap", ["{}", "<tool_call>{}</tool_call>", "```json\n{}\n```"], ids=["bare", "tag", "fence"])
def test_a_whole_call_past_the_json_reader_s_limits_says_which_limit(value: str, said: str, wrap: str) -> None:
    """A call nested 990 deep or holding a 5,000-digit number was an "unterminated JSON call": it is
    whole, and the reply says which limit of the reader it went past.
    """
    text = wrap.replace("{}", '{"name": "read_thread", "arguments": {"thread_id": ' + value + "}}")
    em = parse_emission({"role": "assistant", "content": text}, offered=OFFERED)
    assert list(em.malformed_names) == ["read_thread"]
    (why,) = em.malformed
    assert why.startswith("JSON call past the JSON reader's limits") and said in why, why
    assert "unterminated" not in why


def _channel_texts() -> list[str]:
    """Every text a turn of the shipped cases or of the local model's replies holds, the forms above, and
    each of them with one character of every call sign taken out (what is left may still hold a call)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = [text for _, text, _, _ in FORMS]
    for path in [*sorted((root / "cases").glob("*/cases.jsonl")), root / "tests" / "fixtures" / "local-qwen-replies.jsonl"]:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            turns = [*row.get("messages", []), row.get("recorded") or {}, row.get("emitted") or {}]
            out += [t.get("content") or t.get("text") for t in turns if isinstance(t, dict)]
    out = [t for t in out if isinstance(t, str) and t]
    for text in [t for _, t, _, _ in FORMS] + ["<|python_tag|>read_thread.call(x=1)", "<｜tool▁calls▁begin｜>",
                                                "{name: 'read_thread', args: {}", "\\u007b"]:
        out.append(text)
        for sign in ("<", "[", '"', "\\", "{", "functions."):
            out.append(text.replace(sign, " "))
    return out


def test_a_text_without_a_call_sign_is_not_read_and_holds_no_call() -> None:
    """A text with none of the call signs (no ``<``, ``[TOOL_CALLS]``, ``functions.``, quote, backslash
    or brace) has no call written in it: the full reading finds no attempt and no result there, so
    skipping it changes nothing; a text with one is read."""
    from pytest_tooleffect.oracle import emission

    skipped = read = 0
    for text in _channel_texts():
        for has_calls in (False, True):
            full = emission._scan_text_channel(text, OFFERED, has_calls)
            if emission.could_hold_call(text):
                read += 1
                assert emission._text_channel_calls(text, OFFERED, has_calls) == full
            else:
                skipped += 1
                assert full == ([], 0), text
                assert emission._text_channel_calls(text, OFFERED, has_calls) == ([], 0)
    assert skipped > 100 and read > 100  # both paths taken many times
