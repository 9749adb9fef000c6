"""The LLM judge for free-text fields, over litellm's HTTP path against a scripted server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.options import OPT_JUDGE, OPT_JUDGE_BASE, OPT_REPORT
from pytest_tooleffect.scoring.judge import Z_975, Judge, JudgeError, JudgeProviderError, calibrate, cohens_kappa
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.conftest import REPO


def verdicts(body: dict[str, Any]) -> Reply:
    """A stand-in judge: passes when the emitted text repeats the reference's first number."""
    prompt = body["messages"][-1]["content"]
    ref = re.search(r"Reference text.*?: (.*)", prompt).group(1)  # type: ignore[union-attr]
    got = re.search(r"Emitted text.*?: (.*)", prompt).group(1)  # type: ignore[union-attr]
    number = re.search(r"\d+", ref)
    ok = (number.group(0) in got) if number else len(set(ref.lower().split()) & set(got.lower().split())) >= 3
    doc = {"verdict": "pass" if ok else "fail", "reason": "same number" if ok else "differs"}
    return Reply(text=json.dumps(doc), prompt_tokens=200, completion_tokens=12)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(verdicts) as srv:
        yield srv


def test_judge_calls_and_caches(server: ScriptedServer, tmp_path: Path) -> None:
    judge = Judge("openai/judge-test", server.base_url, tmp_path / "cache")
    assert judge("same day", "Booked for 15:00", "I booked it for 15:00") == (True, "same number")
    assert judge("same day", "Booked for 15:00", "Booked for 16:00")[0] is False
    n = len(server.requests)
    assert judge("same day", "Booked for 15:00", "I booked it for 15:00") == (True, "same number")
    assert len(server.requests) == n  # answered from the cache
    assert judge.usage.calls == 2 and judge.usage.cached == 1 and judge.usage.input_tokens == 400
    assert judge.usage.cost_usd is None  # a model the cost map does not know: unknown, not zero
    request = server.requests[-1]
    assert request["response_format"]["type"] == "json_schema" and request["temperature"] == 0


def test_unreadable_verdict_is_an_error(tmp_path: Path) -> None:
    with ScriptedServer([Reply(text="I think it is fine")]) as srv:
        with pytest.raises(JudgeError, match="judge openai/j"):
            Judge("openai/j", srv.base_url)("r", "a", "b")


def _body(message: dict[str, object]) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop", "message": message}]}).encode()


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # litellm's, on the parts it then refuses
def test_a_judge_answer_litellm_refuses_is_named_by_field_and_text_parts_are_read(tmp_path: Path) -> None:
    """Break-it rows 27, 41 at the judge's door: a capitalised role named; a content list of text parts read."""
    verdict = json.dumps({"verdict": "pass", "reason": "same"})
    with ScriptedServer([Reply(raw_body=_body({"role": "Assistant", "content": verdict})),
                         Reply(raw_body=_body({"role": "assistant", "content": [
                             {"type": "text", "text": verdict[:5]}, {"type": "text", "text": verdict[5:]}]}))]) as srv:
        judge = Judge("openai/j", srv.base_url)
        with pytest.raises(JudgeProviderError) as raised:
            judge("r", "a", "b")
        assert str(raised.value) == ("judge openai/j: InvalidResponse: choices[0].message.role is Assistant, not "
                                     "assistant: a role is written in lower case")
        assert judge("r", "a", "c") == (True, "same")


def test_calibration_kappa(server: ScriptedServer) -> None:
    pairs = [json.loads(x) for x in (REPO / "examples" / "judge" / "pairs.jsonl").read_text().splitlines()]
    res = calibrate(Judge("openai/judge-test", server.base_url), pairs)
    table = [res["table"]["human_fail"], res["table"]["human_pass"]]  # rows: human; columns: judge fail/pass
    n = res["n"]
    po = (table[0][0] + table[1][1]) / n
    pe = ((table[0][0] + table[0][1]) * (table[0][0] + table[1][0])
          + (table[1][0] + table[1][1]) * (table[0][1] + table[1][1])) / n ** 2
    assert n == len(pairs) == 16
    assert res["kappa"] == pytest.approx((po - pe) / (1 - pe))  # Cohen (1960)
    assert -1 <= res["kappa_ci95"][0] <= res["kappa"] <= res["kappa_ci95"][1] <= 1
    assert len(res["disagreements"]) == n - round(po * n)


@pytest.mark.parametrize(("table", "expected"), [
    # statsmodels.stats.inter_rater.cohens_kappa(table): kappa, kappa_low, kappa_upp (statsmodels 0.14)
    ([[5, 1], [2, 8]], (0.6129032258064516, 0.2223873422379707, 1.0034191093749325)),
    ([[3, 2], [1, 10]], (0.5384615384615384, 0.08382640180931128, 0.9930966751137655)),
    ([[18, 27], [25, 24]], (-0.11040436165379389, -0.31094853313983706, 0.09013980983224931)),
    ([[6, 0], [0, 10]], (1.0, 1.0, 1.0)),
    ([[0, 4], [4, 0]], (-1.0, -1.0, -1.0)),
])
def test_cohens_kappa_gives_statsmodels_figures(table: list[list[int]], expected: tuple[float, float, float]) -> None:
    assert cohens_kappa(table) == expected


def test_cohens_kappa_three_categories_and_no_kappa() -> None:
    table = [[10, 2, 1], [3, 12, 2], [0, 1, 9]]
    n, po = 40, (10 + 12 + 9) / 40
    pe = sum(sum(table[i]) * sum(row[i] for row in table) for i in range(3)) / n ** 2
    kappa, low, high = cohens_kappa(table)
    assert kappa == pytest.approx((po - pe) / (1 - pe)) and low < kappa < high
    assert kappa - low == pytest.approx(high - kappa)
    kappa, low, high = cohens_kappa([[5, 0], [0, 0]])  # chance alone predicts full agreement
    assert kappa != kappa and low != low and high != high  # nan


def test_z_975_is_scipys_normal_quantile() -> None:
    from scipy.stats import norm

    assert Z_975 == norm.isf(0.025)


FAMILY = """\
name: replies
tools:
  - name: mail.reply
    parameters: {type: object, properties: {thread_id: {type: string}, body: {type: string}}, required: [thread_id]}
oracle: ../../oracle/replies.yaml
"""


@pytest.mark.usefixtures("litellm_imported")
def test_plugin_uses_the_judge_and_reports_it(pytester: pytest.Pytester, server: ScriptedServer) -> None:
    fam = pytester.path / "cases" / "replies"
    fam.mkdir(parents=True)
    (pytester.path / "oracle").mkdir()
    (fam / "family.yaml").write_text(FAMILY)
    (pytester.path / "oracle" / "replies.yaml").write_text(
        "fields:\n  mail.reply.body: {compare: free_text, rubric: confirms the booked time}\n")
    cases = []
    for cid, got in (("same", "Done - it is booked for 15:00."), ("other", "Done - it is booked for 16:00.")):
        cases.append({"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"},
                      "messages": [{"role": "user", "content": "book it"}], "source": "authored",
                      "label": {"valid_actions": [{"tool": "mail.reply", "args": {"thread_id": "t",
                                                                                  "body": "Booked for 15:00."}}]},
                      "recorded": {"tool_calls": [{"name": "mail.reply",
                                                   "arguments": json.dumps({"thread_id": "t", "body": got})}]}})
    (fam / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    args = ["cases/", f"{OPT_JUDGE}=openai/judge-test", f"{OPT_JUDGE_BASE}={server.base_url}",
            f"{OPT_REPORT}=r.json"]
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*judge openai/judge-test: last measured agreement not measured; 2 calls, 0 cached*"])
    recs = {json.loads(x)["case_id"]: json.loads(x) for x in
            (pytester.path / "reports" / "tooleffect-records.jsonl").read_text().splitlines()}
    field = recs["same"]["verdict"]["fields"][-1]
    assert field["rule"].endswith("(judge)") and not recs["same"]["verdict"]["approximate"]
    assert recs["same"]["judge"]["calls"] == 1 and recs["same"]["judge"]["input_tokens"] == 200
    assert recs["same"]["cost"]["input_tokens"] is None  # the agent's cost stays apart
    # a calibration file for this judge is named in the next report; verdicts come from the cache
    (pytester.path / "reports" / "judge-calibration.json").write_text(json.dumps(
        {"model": "openai/judge-test", "n": 16, "agreement": 0.9, "kappa": 0.8, "kappa_ci95": [0.5, 1.0]}))
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*judge openai/judge-test: last measured agreement Cohen's kappa 0.80 "
                                 "[[]0.50, 1.00[]] on 16 hand-labelled pairs; 0 calls, 2 cached*"])
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["judge"]["calibration"]["kappa"] == 0.8


def test_without_a_judge_free_text_is_approximate() -> None:
    from pytest_tooleffect.oracle import RuleSet, score

    rules = RuleSet.from_mapping({"fields": {"r.body": {"compare": "free_text", "threshold": 0.5}}})
    tools = [{"name": "r", "parameters": {"type": "object", "properties": {"body": {"type": "string"}}}}]
    v = score({"tool_calls": [{"name": "r", "arguments": {"body": "booked for 15:00 today"}}]},
              {"valid_actions": [{"tool": "r", "args": {"body": "booked today for 15:00"}}]}, tools, rules)
    assert v.passed and v.approximate


def test_calibrate_command(server: ScriptedServer, tmp_path: Path) -> None:
    from pytest_tooleffect.cli import main

    out = tmp_path / "cal.json"
    assert main(["calibrate-judge", str(REPO / "examples" / "judge" / "pairs.jsonl"), "--judge-model",
                 "openai/judge-test", "--api-base", server.base_url, "--out", str(out)]) == 0
    cal = json.loads(out.read_text())
    assert cal["model"] == "openai/judge-test" and cal["n"] == 16 and "measured_at" in cal
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "expected": "a", "got": "b"}\n')
    assert main(["calibrate-judge", str(bad), "--judge-model", "openai/judge-test"]) == 2


def test_calibrate_on_no_pair_or_one_category_says_so(server: ScriptedServer, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """An empty pairs file ended in a raw TypeError; a set whose every pair falls in one category (no
    kappa) would print and write ``NaN``.  Refused, and said with ``kappa`` null, now."""
    from pytest_tooleffect.cli import main

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["calibrate-judge", str(empty), "--judge-model", "openai/judge-test", "--api-base", server.base_url,
                 "--out", str(tmp_path / "e.json")]) == 2
    assert capsys.readouterr().err == f"tooleffect calibrate-judge: {empty}: holds no pair: nothing to calibrate the " \
                                      "judge on\n"
    one = tmp_path / "one.jsonl"
    one.write_text((REPO / "examples" / "judge" / "pairs.jsonl").read_text().splitlines()[0] + "\n")
    out = tmp_path / "cal.json"
    assert main(["calibrate-judge", str(one), "--judge-model", "openai/judge-test", "--api-base", server.base_url,
                 "--out", str(out)]) == 0
    cal = json.loads(out.read_text())  # null, not NaN (which is no JSON)
    assert cal["n"] == 1 and cal["kappa"] is None and cal["kappa_ci95"] is None
    assert "no Cohen's kappa (every pair fell in one category for both" in capsys.readouterr().out
