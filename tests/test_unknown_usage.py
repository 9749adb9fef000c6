"""A usage nobody reported is unknown (``null``), never 0: a model server's answer with no ``usage``
(litellm fills it with zeros, so the body the server sent is read), and an agent returning litellm's
response to such an answer; the report adds the known counts and says how many decisions had none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.decide.reported_usage import reported_counts
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.demo_family import write_demo
from tests.run_outputs import clean as _clean
from tests.run_outputs import records_by_case as _records

NULL = {"tool": None}
USAGE: dict[str, Any] = {  # per case: the body's usage (absent, null, the server's zeros, counts)
    "a": ..., "b": None, "c": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    "d": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}


def _case(cid: str) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"[{cid}] thanks!"}],
            "label": {"valid_actions": [NULL]}, "source": "authored"}


def _body(usage: Any) -> bytes:
    doc: dict[str, Any] = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "You're welcome."}}]}
    if usage is not ...:
        doc["usage"] = usage
    return json.dumps(doc).encode()


def _answer(body: dict[str, Any]) -> Reply:
    return Reply(raw_body=_body(USAGE[body["messages"][-1]["content"][1]]))




def test_the_body_tells_whether_usage_was_reported() -> None:
    none = (False, False)
    assert reported_counts(_body(...)) == none and reported_counts(_body(None)) == none
    assert reported_counts(_body({})) == none
    assert reported_counts(_body(USAGE["c"])) == (True, True)  # the server said 0: that is a report
    assert reported_counts({"candidates": [], "usageMetadata": {"promptTokenCount": 3}}) == (True, False)
    assert reported_counts({"candidates": []}) == none
    assert reported_counts({"type": "message", "stop_reason": "end_turn", "content": []}) == none
    assert reported_counts(None) is None and reported_counts("<html>") is None and reported_counts({"x": 1}) is None


@pytest.mark.parametrize("workers", [0, 2])
def test_a_server_answer_with_no_usage_is_unknown_tokens_never_0(pytester: pytest.Pytester, workers: int) -> None:
    write_demo(pytester.path, [_case(c) for c in USAGE])
    pytester.makefile(".yaml", prices="openai/local-test: {input_per_mtok: 1.0, output_per_mtok: 2.0}\n")
    with ScriptedServer(_answer) as srv:
        result = pytester.runpytest("cases/", "--tooleffect-model=openai/local-test",
                                    f"--tooleffect-api-base={srv.base_url}", "--tooleffect-prices=prices.yaml",
                                    "--tooleffect-report=r.json", "--tooleffect-html=r.html", "-n", str(workers))
    out = _clean(result)
    result.assert_outcomes(passed=4)
    records = _records(pytester.path)
    tokens = {c: (r["cost"]["input_tokens"], r["cost"]["output_tokens"], r["cost"]["cost_usd"])
              for c, r in records.items()}
    assert tokens == {"a": (None, None, None), "b": (None, None, None), "c": (0, 0, 0.0),
                      "d": (100, 20, pytest.approx(140 / 1e6))}, tokens
    cost = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["blocks"][0]["cost"]
    assert (cost["input_tokens"], cost["input_tokens_unknown"], cost["cost_usd_unknown"]) == (100, 2, 2), cost
    line = "cost: 100 in / 20 out tokens (tokens unknown for 2 of 4 decisions: not added), $0.000140 (+2 decisions"
    assert line + " unpriced)" in out, out
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert "(tokens unknown for 2 of 4 decisions: not added)" in html


def test_a_block_whose_every_answer_had_no_usage_says_so(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [_case("a"), _case("b")])
    with ScriptedServer(_answer) as srv:
        result = pytester.runpytest("cases/", "--tooleffect-model=openai/local-test",
                                    f"--tooleffect-api-base={srv.base_url}", "--tooleffect-html=r.html")
    out = _clean(result)
    result.assert_outcomes(passed=2)
    assert "cost: tokens unknown for all 2 decisions (no usage reported), money unknown, latency p50 " in out, out
    assert " 0 in / 0 out tokens" not in out
    assert "tokens unknown for all 2 decisions (no usage reported), money unknown" in (
        pytester.path / "r.html").read_text(encoding="utf-8")


AGENTS = '''
import os

import litellm


def _ask(state, case):
    return litellm.completion(model="openai/m", api_base=os.environ["UNKNOWN_USAGE_BASE"], api_key="unused",
                              messages=[{"role": "user", "content": f"[{case}] thanks!"}], num_retries=0)


def via_litellm(state):
    return _ask(state, state.case_id)


def plain(state):
    return {"role": "assistant", "content": "You're welcome."}
'''


@pytest.mark.subprocess
def test_an_agents_litellm_response_to_an_answer_with_no_usage_is_unknown_tokens(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent door: litellm's response carries ``Usage(0, 0)`` for a body with no usage, and no
    request is sent with 0 input tokens, so 0 in and 0 out is unknown; a usage with counts is kept,
    and a plain message (no usage at all) is unknown as before."""
    write_demo(pytester.path, [_case("a"), _case("d")])
    pytester.makepyfile(usage_agents=AGENTS)
    with ScriptedServer(_answer) as srv:
        monkeypatch.setenv("UNKNOWN_USAGE_BASE", srv.base_url)
        result = pytester.runpytest_subprocess("cases/", "--tooleffect-agent=via_litellm=usage_agents:via_litellm",
                                               "--tooleffect-agent=plain=usage_agents:plain")
    _clean(result)
    result.assert_outcomes(passed=4)
    text = (pytester.path / "reports" / "tooleffect-records.jsonl").read_text(encoding="utf-8")
    got = {(r["policy"], r["case_id"]): (r["cost"]["input_tokens"], r["cost"]["output_tokens"])
           for r in map(json.loads, text.splitlines())}
    assert got == {("via_litellm", "a"): (None, None), ("via_litellm", "d"): (100, 20),
                   ("plain", "a"): (None, None), ("plain", "d"): (None, None)}, got


def test_the_judge_keeps_calls_with_no_usage_apart_from_its_counts(tmp_path: Path) -> None:
    """The judge's door: a call whose provider reported no usage adds no 0 to the judge's tokens, is
    counted apart, and makes its money unknown (litellm prices its zeros at $0 for a model it knows)."""
    from pytest_tooleffect.scoring.judge import Judge

    def judged(usage: Any) -> Reply:
        doc = json.loads(_body(usage))
        doc["choices"][0]["message"]["content"] = json.dumps({"verdict": "pass", "reason": "the same time"})
        return Reply(raw_body=json.dumps(doc).encode())

    with ScriptedServer([judged(...), judged(USAGE["d"])]) as srv:
        judge = Judge("openai/gpt-4o-mini", srv.base_url)
        assert judge("confirms the time", "Booked for 15:00.", "Done: 15:00.") and judge("r", "a b c", "a b c")
    usage = judge.usage
    assert (usage.calls, usage.tokens_unknown, usage.input_tokens, usage.output_tokens) == (2, 1, 100, 20), usage
    assert usage.cost_usd is None
