"""Turns a run cannot score, from an agent, a model or the model cache, and records that cannot be
written: each is that item's one-line error with a record, the rest of the run goes on, and no
INTERNALERROR, traceback or unbounded figure reaches the output.

Covers: text that is not valid Unicode (a lone surrogate, from an agent's return value or from a
model's JSON ``"\\ud800"``), an agent's message of another role than the assistant's, an exception
whose ``__str__`` raises, a provider's usage that is no count, a provider error whose message holds
litellm's traceback, a model-cache entry that does not validate, and a record a hook makes unwritable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.decide.agent import turn_role_problem
from pytest_tooleffect.decide.answer_shape import body_problem, parts_read
from pytest_tooleffect.decide.model_cache import turn_entry_problem
from pytest_tooleffect.decide.provider_errors import ProviderError
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from pytest_tooleffect.util.bounds import MAX_TOKENS, usage_problem
from pytest_tooleffect.util.exceptions import described, exception_text, without_traceback
from pytest_tooleffect.util.unicode import surrogate_problem, without_surrogates
from tests.demo_family import write_demo
from tests.run_outputs import clean as _clean
from tests.run_outputs import record_list as _records

NULL = {"tool": None}
READ = {"tool": "read_thread", "args": {"thread_id": "t"}}


def _case(cid: str, label: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"[{cid}] thanks!"}],
            "label": {"valid_actions": [label]}, "source": "authored"}


def _family(root: Path, cases: list[dict[str, Any]]) -> None:
    write_demo(root, cases)  # the demo family with these cases only (no census)




# --- the pieces ---------------------------------------------------------------------------------


class _Weird(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str failed")


class _Weirder(_Weird):
    def __repr__(self) -> str:
        raise RuntimeError("repr failed")


def test_an_exception_is_described_whatever_its_str_does() -> None:
    assert described(ValueError("bad\n  value")) == "ValueError: bad value"
    assert described(_Weird()) == "_Weird: _Weird()"  # str raises: its repr
    assert described(_Weirder()) == "_Weirder: <unprintable _Weirder>"  # repr raises too
    assert exception_text(ValueError("ok \ud800")) == "ok \ufffd"  # writable
    assert described(KeyError()) == "KeyError"


#: litellm's message of an answer with no message (its own traceback inside: litellm 1.110)
LITELLM_INVALID = (
    "litellm.InternalServerError: InternalServerError: OpenAIException - Invalid response object Traceback (most "
    "recent call last):\n  File \"/venv/lib/python3.11/site-packages/litellm/litellm_core_utils/llm_response_utils/"
    "convert_dict_to_response.py\", line 827, in convert_to_model_response_object\n    tool_calls = "
    "choice[\"message\"].get(\"tool_calls\", None)\n                 ~~~~~~^^^^^^^^^^^\nKeyError: 'message'\n\n\n"
    "received_args={'response_object': {'id': 'x', 'choices': [{'finish_reason': 'stop', 'index': 0}]}}")


def test_a_message_is_cut_at_an_embedded_traceback() -> None:
    cut = ("litellm.InternalServerError: InternalServerError: OpenAIException - Invalid response object "
           "(KeyError: 'message'; its traceback left out)")
    assert without_traceback(LITELLM_INVALID) == cut
    squeezed = " ".join(LITELLM_INVALID.split())  # as a one-line message holds it
    assert without_traceback(squeezed) == cut.replace("KeyError: 'message'", "KeyError")
    assert without_traceback("no traceback here") == "no traceback here"
    error = ProviderError("InternalServerError", squeezed)  # every provider error's text
    assert "File" not in error.message and "received_args" not in error.message and error.message.endswith(
        "(KeyError; its traceback left out)")


def test_lone_surrogates_are_found_where_they_are() -> None:
    assert surrogate_problem({"role": "assistant", "content": "ok \ud800 done"}, "m") == (
        "m.content holds U+D800, a lone surrogate, at character 3: not valid Unicode text")
    calls = {"tool_calls": [{"function": {"name": "lookup_order\udc80"}}]}
    assert surrogate_problem(calls).startswith("tool_calls[0].function.name holds U+DC80")  # type: ignore[union-attr]
    assert surrogate_problem({"a\ud800": 1}).startswith("a key holds U+D800")  # type: ignore[union-attr]
    assert surrogate_problem({"content": "ok \U0001f600 é"}) is None  # a pair is one code point: valid
    assert without_surrogates("a\ud800b") == "a\ufffdb"


def test_usage_is_whole_tokens_and_bounded_money() -> None:
    assert usage_problem(10, 5, 0.01) is None and usage_problem(None, None, None) is None
    assert usage_problem(-5, 10, None).startswith("input_tokens -5: a whole number of tokens")  # type: ignore[union-attr]
    assert usage_problem(1, 10**15, None).startswith("output_tokens 1000000000000000")  # type: ignore[union-attr]
    assert usage_problem(1.5, 1, None) is not None and usage_problem(True, 1, None) is not None
    assert usage_problem(MAX_TOKENS, MAX_TOKENS, None) is None
    assert usage_problem(1, 1, -99.0).startswith("cost_usd -99.0")  # type: ignore[union-attr]


@pytest.mark.parametrize(("emitted", "said"), [
    ({"role": "user", "content": "thanks"}, "role 'user' (role)"),
    ({"role": "system", "content": "Be brief."}, "role 'system' (role)"),
    ({"choices": [{"message": {"role": "tool", "content": "{}"}}]}, "role 'tool' (choices[0].message.role)"),
    ([{"role": "user", "content": "hi"}], "role 'user' ([0].role)"),
    ({"candidates": [{"content": {"role": "user", "parts": []}}]}, "(candidates[0].content.role)"),
    ({"output": [{"type": "message", "role": "developer"}]}, "role 'developer' (output[0].role)"),
    ({"role": {"not": "hashable"}, "content": "x"}, "role {'not': 'hashable'}"),
])
def test_a_turn_of_another_role_than_the_assistants_is_named(emitted: Any, said: str) -> None:
    problem = turn_role_problem(emitted)
    assert problem is not None and said in problem


@pytest.mark.parametrize("emitted", [
    {"role": "assistant", "content": "x"}, {"content": "x"}, {"candidates": [{"content": {"role": "model"}}]},
    [{"type": "text", "text": "x"}], {"choices": [{"message": {"role": "assistant", "content": "x"}}]},
])
def test_the_assistants_turn_in_every_shape_passes(emitted: Any) -> None:
    assert turn_role_problem(emitted) is None


def test_a_cache_entry_is_checked_as_a_live_answer_is() -> None:
    good = {"emitted": {"role": "assistant", "content": "ok"}, "cost": {"input_tokens": 3, "output_tokens": 1,
                                                                         "latency_ms": 2.5, "cost_usd": 0.001}}
    assert turn_entry_problem(good) is None
    assert turn_entry_problem({**good, "cost": {**good["cost"], "cost_usd": -99.0}}).startswith(  # type: ignore[union-attr]
        "cost.cost_usd -99.0")
    assert turn_entry_problem({**good, "cost": {"input_tokens": -1}}).startswith(  # type: ignore[union-attr]
        "cost.input_tokens -1")
    assert turn_entry_problem({**good, "emitted": {"content": "\ud800"}}).startswith(  # type: ignore[union-attr]
        "emitted.content holds U+D800")
    assert turn_entry_problem([1]) == "not a JSON object but list"
    assert turn_entry_problem({"cost": {}}) == "emitted: not a JSON object (the model's message)"


# --- agents ---------------------------------------------------------------------------------------

BAD_AGENTS = '''
REPLY = {"role": "assistant", "content": "done"}


class Weird(Exception):
    def __str__(self):
        raise RuntimeError("str failed")


def surrogate(state):
    return {"role": "assistant", "content": "ok \\ud800 done"}


def surrogate_tool(state):
    return {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                 "function": {"name": "read_thread\\udc80", "arguments": "{}"}}]}


def surrogate_key(state):
    return {"role": "assistant", "content": "done", "x\\udfff": 1}


def echo_last(state):
    return state.messages[-1]


def system_role(state):
    return {"role": "system", "content": "Be brief."}


def raise_weird(state):
    raise Weird()


async def araise_weird(state):
    raise Weird()


def raise_surrogate(state):
    raise ValueError("bad \\ud800 value")


def fine(state):
    return REPLY
'''
#: each agent above and the error type of its items
AGENT_KINDS = {"surrogate": "AgentReturnedUnreadable", "surrogate_tool": "AgentReturnedUnreadable",
               "surrogate_key": "AgentReturnedUnreadable", "echo_last": "AgentReturnedWrongRole",
               "system_role": "AgentReturnedWrongRole", "raise_weird": "Weird", "araise_weird": "Weird",
               "raise_surrogate": "ValueError"}
AGENT_SAID = {"surrogate": "a string at content holds U+D800, a lone surrogate, at character 3",
              "surrogate_tool": "a string at tool_calls[0].function.name holds U+DC80",
              "surrogate_key": "a key at the top holds U+DFFF",
              "echo_last": "the agent returned a turn of role 'user' (role), not the assistant's",
              "system_role": "the agent returned a turn of role 'system' (role)",
              "raise_weird": "Weird()", "araise_weird": "Weird()", "raise_surrogate": "bad \ufffd value"}


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", [0, 2])
def test_every_unscorable_agent_turn_is_its_one_line_error(pytester: pytest.Pytester, workers: int) -> None:
    """Lone surrogates (in a reply, a tool name, a key, the agent's own exception), the user's or the
    system's message returned as the decision, an exception whose ``__str__`` raises: each item an
    agent error of the agent's own type in one line, with its record; the good agent scored beside them."""
    _family(pytester.path, [_case("stop", NULL)])
    pytester.makepyfile(bad_agents=BAD_AGENTS)
    args = [f"--tooleffect-agent={name}=bad_agents:{name}" for name in [*AGENT_KINDS, "fine"]]
    result = pytester.runpytest("cases/", *args, "-n", str(workers), "--tooleffect-report=r.json")
    _clean(result)
    result.assert_outcomes(passed=1, errors=len(AGENT_KINDS))
    records = {r["policy"]: r for r in _records(pytester.path)}
    assert set(records) == {*AGENT_KINDS, "fine"}
    assert records["fine"]["verdict"]["kind"] == "ok_no_tool"
    for policy, kind in AGENT_KINDS.items():
        rec = records[policy]
        assert rec["outcome"] == "error" and rec["verdict"] is None and rec["error"]["type"] == kind, rec
        assert AGENT_SAID[policy] in rec["error"]["message"] and "\n" not in rec["error"]["message"], rec["error"]
    assert "in raise_weird" in records["raise_weird"]["error"]["traceback"]  # the agent's own traceback, kept
    result.stdout.fnmatch_lines_random([f"agent error (not scored): {kind}: *" for kind in set(AGENT_KINDS.values())])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert sum(b["n_errors"] for b in report["blocks"]) == len(AGENT_KINDS)


# --- records a hook makes unwritable ----------------------------------------------------------------

UNWRITABLE_HOOK = '''
def pytest_tooleffect_modify_record(record, item):
    if record["case_id"] == "b-bad":
        record["note"] = "ok \\ud800"
'''


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", [0, 2])
def test_a_record_that_cannot_be_written_is_the_items_error_and_the_run_goes_on(pytester: pytest.Pytester,
                                                                                workers: int) -> None:
    cases = [{**_case(cid, NULL), "recorded": {"tool_calls": [], "text": "You're welcome."}}
             for cid in ("a-good", "b-bad", "c-good")]
    _family(pytester.path, cases)
    pytester.makeconftest(UNWRITABLE_HOOK)
    result = pytester.runpytest("cases/", "-n", str(workers), "--tooleffect-report=r.json")
    _clean(result)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*demo/b-bad[[]replay[]]*", "record error (not counted as a decision): the item's "
                                 "record cannot be made or written: PydanticSerializationError: *surrogates not "
                                 "allowed"])
    records = {r["case_id"]: r for r in _records(pytester.path)}
    assert set(records) == {"a-good", "b-bad", "c-good"}
    assert records["b-bad"]["outcome"] == "error" and records["b-bad"]["error"]["type"] == "RecordError"
    assert [records[c]["outcome"] for c in ("a-good", "c-good")] == ["scored", "scored"]
    assert json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["status"] != "complete"


# --- a live model ------------------------------------------------------------------------------------

def _live(pytester: pytest.Pytester, server: ScriptedServer, *args: str) -> pytest.RunResult:
    return pytester.runpytest("cases/", "--tooleffect-model=openai/local-test", f"--tooleffect-api-base={server.base_url}",
                              "--tooleffect-report=r.json", *args)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_models_turn_that_is_not_valid_unicode_is_a_provider_error(pytester: pytest.Pytester, workers: int) -> None:
    """JSON ``"\\ud800"`` in a model's reply or tool name decodes to a lone surrogate: the item is an
    ``InvalidResponse`` error naming the field, never a record that cannot be written, nor cached."""
    by_case = {"a": Reply(text="ok \ud800 done"), "b": Reply(tool_calls=[("read_thread\udc80", {"thread_id": "t"})]),
               "c": Reply(text="You're welcome.")}

    def answer(body: dict[str, Any]) -> Reply:
        return by_case[body["messages"][-1]["content"][1]]

    _family(pytester.path, [_case(c, NULL) for c in by_case])
    with ScriptedServer(answer) as srv:
        result = _live(pytester, srv, "--tooleffect-cache=readwrite", "-n", str(workers))
    _clean(result)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random([
        "provider error (not scored): InvalidResponse: choices[[]0[]].message.content holds U+D800, a lone surrogate, "
        "at character 3: not valid Unicode text *",
        "provider error (not scored): InvalidResponse: choices[[]0[]].message.tool_calls[[]0[]].function.name holds "
        "U+DC80*"])
    records = {r["case_id"]: r for r in _records(pytester.path)}
    assert [records[c]["outcome"] for c in "abc"] == ["error", "error", "scored"]
    assert len(list((pytester.path / ".tooleffect-cache" / "model").glob("*.json"))) == 1  # the good answer alone


def test_a_providers_usage_that_is_no_count_is_a_provider_error_and_adds_nothing(pytester: pytest.Pytester) -> None:
    by_case = {"a": Reply(text="ok", prompt_tokens=-5), "b": Reply(text="ok", completion_tokens=10**15),
               "c": Reply(text="ok", prompt_tokens=100, completion_tokens=20)}

    def answer(body: dict[str, Any]) -> Reply:
        return by_case[body["messages"][-1]["content"][1]]

    _family(pytester.path, [_case(c, NULL) for c in by_case])
    with ScriptedServer(answer) as srv:
        result = _live(pytester, srv)
    _clean(result)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random([
        "provider error (not scored): BadUsage: the provider's usage is not a count: input_tokens -5: a whole number "
        "of tokens from 0 to 1,000,000,000, or absent",
        "provider error (not scored): BadUsage: the provider's usage is not a count: output_tokens 1000000000000000:*"])
    cost = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["blocks"][0]["cost"]
    assert (cost["input_tokens"], cost["output_tokens"]) == (100, 20), cost  # the good answer's alone


def test_a_provider_error_carries_no_traceback(pytester: pytest.Pytester) -> None:
    """A body litellm cannot read (a choice with no message, a call that is no function, numeric content)."""
    bodies = [{"choices": [{"index": 0, "finish_reason": "stop"}]},
              {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                  "role": "assistant", "content": None, "tool_calls": [{"id": "x", "type": "code_interpreter"}]}}]},
              {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": 12345}}]}]
    replies = {c: Reply(raw_body=json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m", **b}
                                            ).encode()) for c, b in zip("abc", bodies, strict=True)}
    _family(pytester.path, [_case(c, NULL) for c in "abc"])
    with ScriptedServer(lambda body: replies[body["messages"][-1]["content"][1]]) as srv:
        result = _live(pytester, srv)
    _clean(result)
    result.assert_outcomes(errors=3)
    lines = [x for x in result.stdout.lines if x.startswith("provider error (not scored): ")]
    assert all("File " not in x and "received_args" not in x and "traceback" not in x for x in lines), lines
    assert sorted(x.split(": ", 1)[1] for x in lines) == [
        "InvalidResponse: choices[0].message.content: a string, null or a list of text parts, got a number",
        "InvalidResponse: choices[0].message.tool_calls[0].function: a JSON object, got null",
        "InvalidResponse: choices[0].message: a JSON object, got null"], lines


def _body(message: dict[str, Any], usage: Any = None) -> bytes:
    doc = {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
           "choices": [{"index": 0, "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                        "message": message}]}
    return json.dumps({**doc, "usage": usage} if usage is not None else doc).encode()


#: break-it rows 27, 33, 42: answers litellm refuses with a message naming no field (InternalServerError)
MISSHAPEN = {
    "a": (_body({"role": "Assistant", "content": "ok"}),
          "choices[0].message.role is Assistant, not assistant: a role is written in lower case"),
    "b": (_body({"role": "assistant", "content": "ok"}, usage=[1, 2]), "usage: a JSON object, got a list"),
    "c": (_body({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "read_thread", "arguments": '{"thread_id": ' + "9" * 5000 + "}"}}]}),
          "choices[0].message.tool_calls[0].function.arguments: an integer of 5000 digits (over Python's "
          "4300-digit limit)"),
    "d": (_body({"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}),
          "choices[0].message.content[0]: a text or refusal part ({type: text, text: …}), got a part of type "
          "'image_url'"),
}


def test_a_body_is_read_field_by_field() -> None:
    assert body_problem('{"choices": [], "usage": {"prompt_tokens": ' + "1" * 4400 + "}}") == \
        "the body holds an integer of 4400 digits (over Python's 4300-digit limit)"
    assert body_problem({"choices": [{"message": {"role": 7}}]}) == \
        "choices[0].message.role: the string assistant, got a number"
    assert body_problem({"choices": {"a": 1}}) == "choices: a list, got a JSON object"
    assert body_problem({"content": [{"type": "text"}]}) is None  # not OpenAI chat: litellm's own words stand
    refused = {"choices": [{"message": {"role": "assistant", "content": [
        {"type": "refusal", "refusal": "I can't "}, {"type": "text", "text": "do that."}]}}]}
    assert body_problem(refused) is None
    read = parts_read(json.dumps(refused))
    assert read is not None and read["choices"][0]["message"]["content"] == "I can't do that."
    assert parts_read({"choices": [{"message": {"role": "assistant", "content": "plain"}}]}) is None


def test_an_answer_litellm_refuses_is_an_invalid_response_naming_its_field(pytester: pytest.Pytester) -> None:
    """A capitalised role, a usage that is a list, a call's arguments holding an integer Python will not read,
    a content part that is no text: each is the item's ``InvalidResponse`` naming the field, in one line."""
    _family(pytester.path, [_case(c, NULL) for c in MISSHAPEN])
    with ScriptedServer(lambda b: Reply(raw_body=MISSHAPEN[b["messages"][-1]["content"][1]][0])) as srv:
        result = _live(pytester, srv)
    _clean(result)
    result.assert_outcomes(errors=len(MISSHAPEN))
    errors = {r["case_id"]: r["error"] for r in _records(pytester.path)}
    assert errors == {c: {"type": "InvalidResponse", "message": said} for c, (_, said) in MISSHAPEN.items()}, errors
    assert "InternalServerError" not in result.stdout.str()


def test_an_answers_content_as_a_list_of_text_parts_is_read_as_its_text(pytester: pytest.Pytester) -> None:
    """Break-it row 41: OpenAI's API lets an assistant message's content be a list of text and refusal parts;
    litellm refused it (InternalServerError).  The parts are read as their text, in order."""
    parts = [{"type": "text", "text": "You're "}, {"type": "text", "text": "welcome."}]
    body = _body({"role": "assistant", "content": parts}, usage={"prompt_tokens": 5, "completion_tokens": 3,
                                                                  "total_tokens": 8})
    _family(pytester.path, [_case("a", NULL), _case("b", READ)])
    with ScriptedServer(lambda b: Reply(raw_body=body)) as srv:
        result = _live(pytester, srv)
    _clean(result)
    result.assert_outcomes(passed=1, failed=1)
    records = {r["case_id"]: r for r in _records(pytester.path)}
    assert {c: (r["outcome"], r["verdict"]["kind"], r["cost"]["output_tokens"]) for c, r in records.items()} == {
        "a": ("scored", "ok_no_tool", 3), "b": ("scored", "none_when_tool_needed", 3)}, records


def test_a_models_answer_in_another_role_is_a_provider_error_not_its_reply(pytester: pytest.Pytester) -> None:
    """A server answering with the user's turn (``role: user``) or a tool's is no decision: an
    ``InvalidResponse`` error, as an agent's turn of another role is ``AgentReturnedWrongRole``."""
    def body(role: str) -> bytes:
        return json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": role, "content": "Where is my order?"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}).encode()

    replies = {"a": Reply(raw_body=body("user")), "b": Reply(raw_body=body("tool")), "c": Reply(raw_body=body("assistant"))}
    _family(pytester.path, [_case(c, NULL) for c in "abc"])
    with ScriptedServer(lambda b: replies[b["messages"][-1]["content"][1]]) as srv:
        result = _live(pytester, srv)
    _clean(result)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random([
        "provider error (not scored): InvalidResponse: choices[[]0[]].message.role is user, not assistant:*",
        "provider error (not scored): InvalidResponse: choices[[]0[]].message.role is tool, not assistant:*"])


# --- the model cache ---------------------------------------------------------------------------------

def _cost_negative(doc: dict[str, Any]) -> None:
    doc["cost"]["cost_usd"] = -99.0


def _role_user(doc: dict[str, Any]) -> None:
    doc["emitted"]["role"] = "user"  # the user's turn stored as the model's: a live one is InvalidResponse


@pytest.mark.parametrize(("edit", "said"), [
    (_cost_negative, "cost.cost_usd -99.0: a number of US dollars from 0 to 1,000,000,000*"),
    (_role_user, "emitted.role is user, not assistant: the answer is not the model's own turn*")])
def test_a_cache_entry_that_does_not_validate_is_an_error_in_read_mode_and_asked_again_in_readwrite(
        pytester: pytest.Pytester, edit: Callable[[dict[str, Any]], None], said: str) -> None:
    _family(pytester.path, [_case(c, NULL) for c in "ab"])
    with ScriptedServer(lambda body: Reply(text="You're welcome.")) as srv:
        _live(pytester, srv, "--tooleffect-cache=write").assert_outcomes(passed=2)
        asked = len(srv.requests)
        entries = sorted((pytester.path / ".tooleffect-cache" / "model").glob("*.json"))
        assert len(entries) == 2
        for path in entries:
            doc = json.loads(path.read_text(encoding="utf-8"))
            edit(doc)
            path.write_text(json.dumps(doc), encoding="utf-8")
        read = _live(pytester, srv, "--tooleffect-cache=read")
        _clean(read)
        read.assert_outcomes(errors=2)
        assert len(srv.requests) == asked  # read mode asks no model
        read.stdout.fnmatch_lines_random([f"model cache error (not scored): CacheEntryInvalid: model cache {p}: {said}"
                                          for p in entries])
        records = _records(pytester.path)
        assert len(records) == 2 and all(r["error"]["type"] == "CacheEntryInvalid" for r in records)
        again = _live(pytester, srv, "--tooleffect-cache=readwrite", "-W", "default")
        _clean(again)
        again.assert_outcomes(passed=2)
        assert len(srv.requests) == asked + 2  # asked again, and said once
        assert again.stdout.str().count("CacheEntryWarning: model cache ") == 1
        assert all(turn_entry_problem(json.loads(p.read_text(encoding="utf-8"))) is None for p in entries)
        _live(pytester, srv, "--tooleffect-cache=read").assert_outcomes(passed=2)  # rewritten: read back


@pytest.mark.parametrize("workers", [0, 2])
def test_read_mode_asks_no_model_a_miss_is_the_items_cache_miss_error(pytester: pytest.Pytester, workers: int) -> None:
    """``--tooleffect-cache read`` is the mode where no model is asked: a decision the cache holds no
    answer for is the item's ``CacheMiss`` error naming the case and the file (its name the key), no
    request is made, and the report counts it among the errors; ``readwrite`` asks and stores it."""
    _family(pytester.path, [_case(c, NULL) for c in "ab"])
    folder = pytester.path / ".tooleffect-cache" / "model"
    with ScriptedServer(lambda body: Reply(text="You're welcome.")) as srv:
        read = _live(pytester, srv, "--tooleffect-cache=read", "-n", str(workers))
        _clean(read)
        read.assert_outcomes(errors=2)
        assert srv.requests == []  # no model asked
        assert not folder.exists()  # and nothing stored
        read.stdout.fnmatch_lines_random([
            f"model cache error (not scored): CacheMiss: case {c}: model cache {folder}/*.json: no stored answer for "
            "this decision: --tooleffect-cache read asks no model*" for c in "ab"])
        records = {r["case_id"]: r for r in _records(pytester.path)}
        assert [records[c]["error"]["type"] for c in "ab"] == ["CacheMiss", "CacheMiss"]
        report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
        assert report["status"] != "complete" and report["blocks"][0]["error_types"] == {"CacheMiss": 2}
        rw = _live(pytester, srv, "--tooleffect-cache=readwrite", "-n", str(workers))
        rw.assert_outcomes(passed=2)
        assert len(srv.requests) == 2 and len(list(folder.glob("*.json"))) == 2  # asked on a miss and stored
        again = _live(pytester, srv, "--tooleffect-cache=read", "-n", str(workers))
        again.assert_outcomes(passed=2)
        assert len(srv.requests) == 2  # read back, nothing asked
        assert all(r["cached"] for r in _records(pytester.path))
