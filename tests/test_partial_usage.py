"""Each count of a usage is known on its own: a server's usage that gives the input tokens and not
the output tokens (absent or ``null``), or only a total, leaves the count it does not give unknown
(``null`` in the record, never litellm's 0), the money unknown, and the report's cost line says per
direction how many decisions lacked it.  The same for the judge and for an agent returning
litellm's response to such an answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.decide.reported_usage import agent_usage, reported_counts
from pytest_tooleffect.report.model import CLASSES, CostSummary
from pytest_tooleffect.report.terminal import cost_tokens
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.demo_family import write_demo

NULL = {"tool": None}
#: per case: the body's usage (the server's word, as the tester's server sent it)
USAGE: dict[str, Any] = {
    "half": {"prompt_tokens": 10},  # no completion_tokens
    "nullin": {"prompt_tokens": None, "completion_tokens": 5, "total_tokens": 5},
    "total": {"total_tokens": 50},  # a total alone: it does not say how it splits
    "full": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
}


def _case(cid: str) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"[{cid}] thanks!"}],
            "label": {"valid_actions": [NULL]}, "source": "authored"}


def _body(usage: Any, content: str = "You're welcome.") -> bytes:
    doc: dict[str, Any] = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}
    doc["usage"] = usage
    return json.dumps(doc).encode()


def _answer(body: dict[str, Any]) -> Reply:
    text = body["messages"][-1]["content"]
    return Reply(raw_body=_body(USAGE[text[1:text.index("]")]]))


def _costs(root: Path) -> dict[tuple[str, str], tuple[Any, Any, Any]]:
    text = (root / "reports" / "tooleffect-records.jsonl").read_text(encoding="utf-8")
    return {(r["policy"], r["case_id"]): (r["cost"]["input_tokens"], r["cost"]["output_tokens"], r["cost"]["cost_usd"])
            for r in map(json.loads, text.splitlines())}


def _clean(result: pytest.RunResult) -> str:
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out, out[-5000:]
    return out


# --- the pieces ---------------------------------------------------------------------------------


def test_each_count_of_a_body_is_known_only_when_it_is_a_number() -> None:
    assert reported_counts(_body(USAGE["half"])) == (True, False)
    assert reported_counts(_body(USAGE["nullin"])) == (False, True)
    assert reported_counts(_body(USAGE["total"])) == (False, False)
    assert reported_counts(_body({"prompt_tokens": 0, "completion_tokens": 0})) == (True, True)  # the server said 0
    assert reported_counts(_body({"prompt_tokens": "10", "completion_tokens": True})) == (False, False)
    assert reported_counts(_body(None)) == (False, False) and reported_counts(_body({})) == (False, False)
    gemini = {"candidates": [], "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 3}}
    assert reported_counts(gemini) == (True, False)
    anthropic = {"type": "message", "stop_reason": "end_turn", "usage": {"output_tokens": 4}}
    assert reported_counts(anthropic) == (False, True)
    responses = {"output": [], "usage": {"input_tokens": 7, "output_tokens": None}}
    assert reported_counts(json.dumps(responses)) == (True, False)
    assert reported_counts(None) is None and reported_counts("<html>") is None and reported_counts({"x": 1}) is None


def test_an_agents_usage_object_leaves_litellms_zeros_for_counts_not_given_unknown() -> None:
    # litellm's Usage for each body above: 0 for every count the server left out
    assert agent_usage({"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 0}) == (10, None)
    assert agent_usage({"prompt_tokens": 0, "completion_tokens": 5, "total_tokens": 5}) == (None, 5)
    assert agent_usage({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 50}) == (None, None)
    assert agent_usage({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}) == (100, 20)
    assert agent_usage({"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10}) == (10, 0)  # a true 0
    assert agent_usage({"prompt_tokens": 10}) == (10, None) and agent_usage({"completion_tokens": None}) == (None, None)
    assert agent_usage({"prompt_tokens": -5, "completion_tokens": 1}) == (-5, 1)  # for usage_problem to refuse


def test_the_cost_line_counts_unknown_tokens_per_direction() -> None:
    spend = {"n": 0, "input_tokens": None, "cost_usd": None, "cost_usd_unknown": 0}
    base: dict[str, Any] = {"cost_usd": None, "cost_usd_unknown": 5, "latency_ms_p50": None, "latency_ms_p95": None,
                            "no_tool_input_tokens": None, "by_class": {c: spend for c in CLASSES},
                            "by_kind": {}, "no_tool_spend": spend, "most_expensive": [], "from_cache": 0}

    def line(tin: Any, uin: int, tout: Any, uout: int) -> str:
        return cost_tokens(CostSummary.model_validate({**base, "input_tokens": tin, "input_tokens_unknown": uin,
                                                       "output_tokens": tout, "output_tokens_unknown": uout}), 5)

    assert line(50, 0, None, 5) == "50 in / unknown out tokens (output tokens unknown for 5 of 5 decisions: not added)"
    assert line(None, 5, 25, 0) == "unknown in / 25 out tokens (input tokens unknown for 5 of 5 decisions: not added)"
    assert line(50, 1, 20, 3) == ("50 in / 20 out tokens (input tokens unknown for 1 of 5 decisions, output tokens "
                                  "unknown for 3 of 5: not added)")
    assert line(50, 2, 20, 2) == "50 in / 20 out tokens (tokens unknown for 2 of 5 decisions: not added)"
    assert line(None, 5, None, 5) == "tokens unknown for all 5 decisions (no usage reported)"


# --- a real server on 127.0.0.1 -----------------------------------------------------------------


def test_a_count_the_server_left_out_is_unknown_in_the_record_and_the_report(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [_case(c) for c in USAGE])
    pytester.makefile(".yaml", prices="openai/local-test: {input_per_mtok: 1.0, output_per_mtok: 2.0}\n")
    with ScriptedServer(_answer) as srv:
        result = pytester.runpytest("cases/", "--tooleffect-model=openai/local-test",
                                    f"--tooleffect-api-base={srv.base_url}", "--tooleffect-prices=prices.yaml",
                                    "--tooleffect-report=r.json", "--tooleffect-html=r.html")
    out = _clean(result)
    result.assert_outcomes(passed=4)
    policy = "openai/local-test"
    assert _costs(pytester.path) == {
        (policy, "half"): (10, None, None), (policy, "nullin"): (None, 5, None), (policy, "total"): (None, None, None),
        (policy, "full"): (100, 20, pytest.approx(140 / 1e6))}
    cost = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))["blocks"][0]["cost"]
    assert (cost["input_tokens"], cost["input_tokens_unknown"], cost["output_tokens"],
            cost["output_tokens_unknown"], cost["no_tool_input_tokens"]) == (110, 2, 25, 2, 110), cost
    line = ("cost: 110 in / 25 out tokens (tokens unknown for 2 of 4 decisions: not added), $0.000140 "
            "(+3 decisions unpriced)")
    assert line in out, out
    assert " 0 out tokens" not in out and " 0 in /" not in out


def test_a_block_whose_answers_gave_no_output_count_says_so_per_direction(pytester: pytest.Pytester) -> None:
    """The tester's ``usage_half``: every answer gives the input count only."""
    write_demo(pytester.path, [_case("half"), _case("half2")])
    with ScriptedServer(lambda body: Reply(raw_body=_body(USAGE["half"]))) as srv:
        result = pytester.runpytest("cases/", "--tooleffect-model=openai/local-test",
                                    f"--tooleffect-api-base={srv.base_url}", "--tooleffect-html=r.html")
    out = _clean(result)
    result.assert_outcomes(passed=2)
    said = "20 in / unknown out tokens (output tokens unknown for 2 of 2 decisions: not added), money unknown"
    assert f"cost: {said}" in out, out
    assert said in (pytester.path / "r.html").read_text(encoding="utf-8")


AGENTS = '''
import os

import litellm


def via_litellm(state):
    return litellm.completion(model="openai/m", api_base=os.environ["PARTIAL_USAGE_BASE"], api_key="unused",
                              messages=[{"role": "user", "content": f"[{state.case_id}] thanks!"}], num_retries=0)
'''


@pytest.mark.subprocess
def test_an_agents_litellm_response_to_a_partial_usage_keeps_the_missing_count_unknown(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_demo(pytester.path, [_case(c) for c in USAGE])
    pytester.makepyfile(partial_agents=AGENTS)
    with ScriptedServer(_answer) as srv:
        monkeypatch.setenv("PARTIAL_USAGE_BASE", srv.base_url)
        result = pytester.runpytest_subprocess("cases/", "--tooleffect-agent=via_litellm=partial_agents:via_litellm")
    _clean(result)
    result.assert_outcomes(passed=4)
    got = {c: v[:2] for (_, c), v in _costs(pytester.path).items()}
    assert got == {"half": (10, None), "nullin": (None, 5), "total": (None, None), "full": (100, 20)}, got


def test_the_judge_adds_only_the_counts_a_call_reported(tmp_path: Path) -> None:
    from pytest_tooleffect.report.reporter import judge_line
    from pytest_tooleffect.report.run_model import JudgeSection, JudgeUsage
    from pytest_tooleffect.scoring.judge import Judge

    def judged(usage: Any) -> Reply:
        return Reply(raw_body=_body(usage, json.dumps({"verdict": "pass", "reason": "the same time"})))

    with ScriptedServer([judged(USAGE[k]) for k in ("half", "nullin", "total", "full")]) as srv:
        judge = Judge("openai/gpt-4o-mini", srv.base_url)
        assert all(judge("confirms the time", f"Booked {i}.", f"Done {i}.") for i in range(4))
    u = judge.usage
    assert (u.calls, u.tokens_unknown, u.input_tokens_unknown, u.output_tokens_unknown) == (4, 1, 2, 2), u
    assert (u.input_tokens, u.output_tokens, u.cost_usd) == (110, 25, None), u
    section = JudgeSection(model=judge.model, calibration="not measured", usage=JudgeUsage(**{
        **u.to_dict(), "input_tokens_unknown": 1, "output_tokens_unknown": 3, "tokens_unknown": 0}))

    class _Report:
        judge = section

    line = judge_line(_Report())  # type: ignore[arg-type]
    assert line is not None and ("110 in / 25 out tokens (input tokens unknown for 1 of 4 calls, output tokens "
                                 "unknown for 3 of 4: not added), money unknown") in line, line


def test_a_cost_gate_over_a_partial_usage_is_not_judged_naming_the_unknown_decisions(
        pytester: pytest.Pytester) -> None:
    """The tester's ``usage_half_cost``: the output price is huge, the output count unknown: the known
    input part ($0.000010) is under the ceiling, yet the gate cannot pass on it.
    """
    write_demo(pytester.path, [_case("half"), _case("full")])
    pytester.makefile(".yaml", prices="openai/local-test: {input_per_mtok: 1.0, output_per_mtok: 1000000.0}\n")
    pytester.makefile(".toml", pyproject='[tool.tooleffect.gates."*"]\nmax_cost_usd = 1000\n'
                                         'max_cost_usd_per_decision = 1000\n')
    with ScriptedServer(_answer) as srv:
        result = pytester.runpytest("cases/", "--tooleffect-model=openai/local-test",
                                    f"--tooleffect-api-base={srv.base_url}", "--tooleffect-prices=prices.yaml")
    out = _clean(result)
    assert _costs(pytester.path)[("openai/local-test", "half")] == (10, None, None)
    assert "gate demo/openai/local-test cost <= $1000: NOT JUDGED (cost unknown for 1 of 2 decisions)" in out, out
    assert ("gate demo/openai/local-test cost per decision <= $1000: NOT JUDGED (cost unknown for 1 of 2 decisions)"
            in out), out
    assert "PASSED" not in out
    assert result.ret == 1
