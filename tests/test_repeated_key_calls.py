"""A call whose arguments give one key twice is a malformed call, never read last-wins: JSON leaves
its meaning open, and case files refuse a key twice for the same reason.  Every door a call's
arguments JSON text comes through reads it with the one repeated-key reader
(:mod:`pytest_tooleffect.util.json_keys`): a model's tool call, a call written in the text channel,
an agent's returned message, a recorded decision in a case file, and a model-cache entry.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_tooleffect.oracle import parse_emission
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.demo_family import write_demo
from tests.run_outputs import clean as _clean
from tests.run_outputs import records_by_case as _records

TWICE = '{"thread_id": "t-9", "thread_id": "th-1"}'
REASON = "arguments of read_thread hold the key 'thread_id' twice: JSON keeps only one of them without a word"
READ = {"tool": "read_thread", "args": {"thread_id": "th-1"}}


def _case(cid: str, recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"[{cid}] read th-1"}],
        "label": {"valid_actions": [READ]}, "source": "authored"}
    if recorded is not None:
        c["recorded"] = recorded
    return c




def _live(pytester: pytest.Pytester, server: ScriptedServer, *args: str) -> pytest.RunResult:
    return pytester.runpytest("cases/", "--tooleffect-model=openai/local-test", f"--tooleffect-api-base={server.base_url}",
                              *args)


# --- the pieces ---------------------------------------------------------------------------------


def test_arguments_giving_a_key_twice_are_a_malformed_call() -> None:
    tools = ["read_thread", "refund"]
    e = parse_emission({"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_thread", "arguments": TWICE}}]}, tools)
    assert (e.calls, e.malformed, e.malformed_raw) == ((), (REASON,), (TWICE,))
    nested = '{"thread_id": "th-1", "filter": {"a": 1, "a": 2}}'
    e = parse_emission({"tool_calls": [{"name": "read_thread", "arguments": nested}]}, tools)
    assert e.calls == () and e.malformed == (REASON.replace("'thread_id'", "'a'"),)
    # a call written in the text channel: its JSON is read with the same reader
    text = '<tool_call>{"name": "refund", "arguments": {"order_id": "9999", "order_id": "1042"}}</tool_call>'
    e = parse_emission({"role": "assistant", "content": text}, tools)
    assert e.calls == () and e.malformed == ("JSON call holding the key 'order_id' twice in <tool_call> tag "
                                             "in the text channel",), e.malformed
    # the key given once each: the call as before
    e = parse_emission({"tool_calls": [{"name": "read_thread", "arguments": '{"thread_id": "th-1"}'}]}, tools)
    assert [(c.name, dict(c.args)) for c in e.calls] == [("read_thread", {"thread_id": "th-1"})]


# --- a real server on 127.0.0.1, an agent, a case file, the model cache --------------------------


def test_a_models_call_giving_a_key_twice_is_scored_malformed_call(pytester: pytest.Pytester) -> None:
    """The tester's ``args_dupkey``: last-wins would read ``th-1`` and score it ok."""
    write_demo(pytester.path, [_case("a"), _case("b")])
    answers = {"a": Reply(tool_calls=[("read_thread", TWICE)]),
               "b": Reply(text='<tool_call>{"name": "read_thread", "arguments": ' + TWICE + '}</tool_call>')}
    with ScriptedServer(lambda body: answers[body["messages"][-1]["content"][1]]) as srv:
        result = _live(pytester, srv)
    out = _clean(result)
    result.assert_outcomes(failed=2)
    records = _records(pytester.path)
    assert {c: r["verdict"]["kind"] for c, r in records.items()} == {"a": "malformed_call", "b": "malformed_call"}
    assert records["a"]["verdict"]["malformed"] == [REASON]
    assert records["b"]["verdict"]["malformed"] == ["JSON call holding the key 'thread_id' twice in <tool_call> tag "
                                                    "in the text channel"]
    assert "hold the key 'thread_id' twice" in out


AGENT = f'''
def agent(state):
    return {{"role": "assistant", "tool_calls": [{{"id": "c1", "type": "function",
            "function": {{"name": "read_thread", "arguments": {TWICE!r}}}}}]}}
'''


def test_an_agents_call_and_a_recorded_call_giving_a_key_twice_are_malformed_calls(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [_case("a", {"tool_calls": [{"name": "read_thread", "arguments": TWICE}]})])
    pytester.makepyfile(twice_agent=AGENT)
    result = pytester.runpytest("cases/", "--tooleffect-agent=mine=twice_agent:agent",
                                "--tooleffect-policy=replay")
    _clean(result)
    text = (pytester.path / "reports" / "tooleffect-records.jsonl").read_text(encoding="utf-8")
    got = {r["policy"]: (r["verdict"]["kind"], r["verdict"]["malformed"]) for r in map(json.loads, text.splitlines())}
    assert got == {"replay": ("malformed_call", [REASON]), "mine": ("malformed_call", [REASON])}, got


def test_a_model_cache_entry_giving_a_key_twice_is_read_with_the_same_reader(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [_case("a"), _case("b")])
    with ScriptedServer(lambda body: Reply(tool_calls=[("read_thread", '{"thread_id": "th-1"}')])) as srv:
        _live(pytester, srv, "--tooleffect-cache=write").assert_outcomes(passed=2)
        entries = sorted((pytester.path / ".tooleffect-cache" / "model").glob("*.json"))
        assert len(entries) == 2
        texts = [p.read_text(encoding="utf-8") for p in entries]
        assert all(t.count('{\\"thread_id\\": \\"th-1\\"}') == 1 for t in texts), texts
        # one entry's call arguments give the key twice; the other entry gives its own key "cost" twice
        entries[0].write_text(texts[0].replace('{\\"thread_id\\": \\"th-1\\"}', json.dumps(TWICE)[1:-1]),
                              encoding="utf-8")
        doc = json.loads(texts[1])
        entries[1].write_text(json.dumps(doc)[:-1] + ', "cost": ' + json.dumps(doc["cost"]) + "}", encoding="utf-8")
        read = _live(pytester, srv, "--tooleffect-cache=read")
    _clean(read)
    read.assert_outcomes(failed=1, errors=1)
    records = list(_records(pytester.path).values())
    kinds = sorted((r["verdict"] or {}).get("kind") or r["error"]["type"] for r in records)
    assert kinds == ["CacheEntryInvalid", "malformed_call"], records
    bad = next(r for r in records if r["error"])
    assert "the key 'cost' is given twice" in bad["error"]["message"], bad
    called = next(r for r in records if r["verdict"])
    assert called["verdict"]["malformed"] == [REASON]
