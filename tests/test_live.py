"""Live model turns through litellm's real HTTP path, against scripted servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.formats import Case, Policy
from pytest_tooleffect.options import (
    INI_RATE_FILE,
    INI_RATE_WINDOW,
    INI_TPM,
    OPT_API_BASE,
    OPT_CACHE,
    OPT_CONCURRENCY,
    OPT_MODEL,
    OPT_POLICY,
    OPT_PRICES,
    OPT_RECORDS,
    OPT_REPEATS,
    OPT_REPORT,
    OPT_RETRIES,
    OPT_RPM,
    OPT_TIMEOUT,
)
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.demo_family import FAMILY, RULES

CREATE = {"tool": "calendar.create_event", "args": {"title": "Q3 review", "start": "2025-03-19T14:00:00"}}
NULL = {"tool": None}


def _case(cid: str, label: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "user", "content": f"[{cid}] please help"}], "label": label,
            "recorded": {"tool_calls": []}, "source": "authored"}


CASES = [
    _case("call-dotted", {"valid_actions": [CREATE]}),
    _case("no-call", {"valid_actions": [NULL]}),
    _case("malformed", {"valid_actions": [NULL]}),
    _case("server-500", {"valid_actions": [NULL]}),
    _case("bad-body", {"valid_actions": [NULL]}),
    _case("timeout", {"valid_actions": [NULL]}),
    _case("client-400", {"valid_actions": [NULL]}),
]

REPLIES = {
    "call-dotted": Reply(tool_calls=[("calendar_create_event",
                                      '{"title": "Q3 Review", "start": "2025-03-19T13:00:00Z"}')],
                         prompt_tokens=1000, completion_tokens=50),
    "no-call": Reply(text="Happy to help - anything else?", prompt_tokens=800, completion_tokens=10),
    "malformed": Reply(text='<tool_call>{"name": "read_thread", "arguments": {"thread_id": "t"}}</tool_call>'),
    "server-500": Reply(status=500),
    "bad-body": Reply(raw_body=b"<html>upstream proxy error</html>"),
    "timeout": Reply(delay_s=8.0),
    "client-400": Reply(status=400),
}


def script(body: dict[str, Any]) -> Reply:
    text = json.dumps(body.get("messages") or body.get("contents") or [])
    for cid, reply in REPLIES.items():
        if f"[{cid}]" in text:
            return reply
    return Reply(text="?")


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(script) as srv:
        yield srv


def _family(root: Path, cases: list[dict[str, Any]] = CASES, extra_family: str = "") -> None:
    fam = root / "cases" / "demo"
    fam.mkdir(parents=True, exist_ok=True)
    (root / "oracle").mkdir(exist_ok=True)
    (fam / "family.yaml").write_text(FAMILY + extra_family)
    (root / "oracle" / "demo.yaml").write_text(RULES)
    (fam / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")


def _workers(workers: int) -> list[str]:
    """The command line of a run at ``workers`` xdist workers (0: in process, no xdist)."""
    return ["-n", str(workers)] if workers else []


def _records(root: Path) -> dict[str, dict[str, Any]]:
    lines = (root / "reports" / "tooleffect-records.jsonl").read_text().splitlines()
    return {json.loads(x)["case_id"]: json.loads(x) for x in lines}


@pytest.mark.parametrize("workers", [0, 2])
def test_openai_over_http(pytester: pytest.Pytester, server: ScriptedServer, workers: int) -> None:
    _family(pytester.path)
    result = pytester.runpytest("cases/", *_workers(workers), f"{OPT_MODEL}=openai/local-test",
                                f"{OPT_API_BASE}={server.base_url}", f"{OPT_TIMEOUT}=3", f"{OPT_RETRIES}=0",
                                f"{OPT_REPORT}=r.json", "--json-report", "--json-report-file=j.json")
    result.assert_outcomes(passed=2, failed=1, errors=4)
    result.stdout.fnmatch_lines_random([
        "_* demo/malformed[[]openai/local-test[]] _*", "malformed_call: *",
        "*provider error (not scored): InternalServerError*",
        "*provider error (not scored): Timeout*",
    ])
    recs = _records(pytester.path)
    dotted = recs["call-dotted"]
    assert dotted["verdict"]["kind"] == "ok"  # title casefolded by the family rule; 13:00Z is 14:00 Madrid
    assert dotted["provider_tool_names"] == {"calendar.create_event": "calendar_create_event"}
    assert dotted["verdict"]["emitted"] == [{"tool": "calendar.create_event", "args": {
        "title": "Q3 Review", "start": "2025-03-19T13:00:00Z"}}]
    assert dotted["cost"]["input_tokens"] == 1000 and dotted["cost"]["output_tokens"] == 50
    assert dotted["cost"]["cost_usd"] is None and dotted["cost"]["priced_by"] is None  # unknown model: never 0
    assert dotted["cost"]["latency_ms"] > 0
    assert recs["no-call"]["verdict"]["kind"] == "ok_no_tool"
    assert recs["malformed"]["verdict"]["kind"] == "malformed_call"
    for cid, kind in (("server-500", "InternalServerError"), ("bad-body", "InternalServerError"),
                      ("timeout", "Timeout"), ("client-400", "BadRequestError")):
        assert recs[cid]["outcome"] == "error" and recs[cid]["verdict"] is None
        assert recs[cid]["error"]["type"] in (kind, "APIError", "APIConnectionError"), recs[cid]["error"]
    (block,) = json.loads((pytester.path / "r.json").read_text())["blocks"]
    assert block["n_scored"] == 3 and block["n_errors"] == 4
    assert block["classes"]["no_tool"]["n"] == 2  # errors are excluded from every rate
    assert block["cost"]["input_tokens"] > 0 and block["cost"]["cost_usd"] is None
    assert block["cost"]["cost_usd_unknown"] == 3
    assert block["cost"]["no_tool_input_tokens"] >= 800
    pj = json.loads((pytester.path / "j.json").read_text())
    errors = [t for t in pj["tests"] if t["outcome"] == "error"]
    assert len(errors) == 4 and all(t["metadata"]["tooleffect"]["outcome"] == "error" for t in errors)
    # the dotted name went out provider-safe, in the tool list
    req = next(r for r in server.requests if "[call-dotted]" in json.dumps(r.get("messages")))
    assert {t["function"]["name"] for t in req["tools"]} == {"read_thread", "calendar_create_event"}
    assert req["messages"][0] == {"role": "system", "content": "You schedule meetings."}


def test_prices_from_a_user_table(pytester: pytest.Pytester, server: ScriptedServer) -> None:
    _family(pytester.path, CASES[:2])
    pytester.makefile(".yaml", prices="openai/local-test: {input_per_mtok: 2.0, output_per_mtok: 10.0}\n")
    result = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={server.base_url}",
                                f"{OPT_PRICES}=prices.yaml")
    result.assert_outcomes(passed=2)
    recs = _records(pytester.path)
    assert recs["call-dotted"]["cost"]["cost_usd"] == pytest.approx((1000 * 2.0 + 50 * 10.0) / 1e6)
    assert recs["call-dotted"]["cost"]["priced_by"] == "user"


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    """Count the calls the plugin's own code makes to litellm's ``name`` (litellm calls it too),
    passing each to the real function.  Turns run in this process here (``run_turn``): a run's
    turns run in its child process, where a wrapper set in the test cannot see them.
    """
    import sys

    from pytest_tooleffect.decide.model_turn import import_litellm

    litellm = import_litellm()
    real = getattr(litellm, name)
    calls: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        if sys._getframe(1).f_globals.get("__name__", "").startswith("pytest_tooleffect"):
            calls.append(kwargs.get("model", args[0] if args else None))
        return real(*args, **kwargs)

    monkeypatch.setattr(litellm, name, counted)
    return calls


def test_litellm_is_asked_whether_it_prices_a_model_once_per_run(monkeypatch: pytest.MonkeyPatch,
                                                                server: ScriptedServer) -> None:
    """Whether litellm's price map knows the model is asked once, not at every decision (an unmapped
    model made litellm build and raise an error per decision); the cost stays unknown, never 0.
    """
    from pytest_tooleffect.decide.model_turn import run_turn

    asked = _counting(monkeypatch, "get_model_info")
    model = f"openai/local-test-{id(asked)}"  # a name no earlier turn of this process priced
    policy = Policy(name="p", model=model, api_base=server.base_url)
    costs = [run_turn(Case.model_validate(c), [], None, policy, api_key="x").cost
             for c in CASES if c["id"] in ("call-dotted", "no-call", "malformed")]
    assert all(c["cost_usd"] is None and c["input_tokens"] for c in costs)
    assert asked == [model]


def test_known_model_priced_by_litellm(monkeypatch: pytest.MonkeyPatch, server: ScriptedServer) -> None:
    """litellm's own price of the answer is taken as it is: the response is not priced a second time."""
    from pytest_tooleffect.decide.model_turn import run_turn

    priced = _counting(monkeypatch, "completion_cost")
    case = Case.model_validate(next(c for c in CASES if c["id"] == "no-call"))
    cost = run_turn(case, [], None, Policy(name="p", model="openai/gpt-4o", api_base=server.base_url),
                    api_key="x").cost
    assert cost["priced_by"] == "litellm"
    assert cost["cost_usd"] == pytest.approx(800 * 2.5e-6 + 10 * 1e-5)  # gpt-4o in litellm's bundled map
    assert priced == []  # litellm's price, not computed again


@pytest.mark.subprocess
def test_a_live_run_makes_its_requests_in_a_child_process_and_never_imports_litellm(
        pytester: pytest.Pytester, server: ScriptedServer) -> None:
    """The requests leave from the run's child process (:mod:`pytest_tooleffect.decide.turn_process`), so
    litellm's import runs beside collection, not in turns with it: the pytest process itself never
    imports litellm, and the child is gone when the run ends.
    """
    _family(pytester.path, CASES[:3])
    pytester.makeconftest("""
import json, os, sys
from pytest_tooleffect.decide.decision import pool_key

def pytest_sessionfinish(session):
    child = session.config.stash[pool_key].process._proc
    seen = {"pid": os.getpid(), "child": child.pid, "running": child.poll() is None}
    (session.config.rootpath / "seen.json").write_text(json.dumps(seen))

def pytest_unconfigure(config):
    seen = json.loads((config.rootpath / "seen.json").read_text())
    seen["litellm"] = "litellm" in sys.modules
    (config.rootpath / "seen.json").write_text(json.dumps(seen))
""")
    before = len(server.requests)
    result = pytester.runpytest_subprocess("cases/", f"{OPT_MODEL}=openai/local-test",
                                           f"{OPT_API_BASE}={server.base_url}", timeout=120)
    result.assert_outcomes(passed=2, failed=1)
    seen = json.loads((pytester.path / "seen.json").read_text())
    assert seen["litellm"] is False and len(server.requests) - before == 3
    assert seen["child"] != seen["pid"] and seen["running"]
    with pytest.raises(ProcessLookupError):
        os.kill(seen["child"], 0)  # ended (and reaped) with the run


@pytest.mark.parametrize(("model", "base"), [("anthropic/claude-local-test", "root_url"),
                                             ("gemini/gemini-local-test", "root_url")])
def test_anthropic_and_gemini_formats(pytester: pytest.Pytester, server: ScriptedServer, model: str, base: str) -> None:
    _family(pytester.path, CASES[:3])
    result = pytester.runpytest("cases/", f"{OPT_MODEL}={model}", f"{OPT_API_BASE}={getattr(server, base)}")
    result.assert_outcomes(passed=2, failed=1)
    recs = _records(pytester.path)
    assert recs["call-dotted"]["verdict"]["kind"] == "ok"
    assert recs["call-dotted"]["cost"]["input_tokens"] == 1000
    assert recs["malformed"]["verdict"]["kind"] == "malformed_call"


POLICIES = """\
policies:
  - {name: terse, model: openai/local-test, temperature: 0.0, system_prompt: Be brief.,
     tool_descriptions: {read_thread: Read a mail thread.}}
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_named_policies_side_by_side(pytester: pytest.Pytester, server: ScriptedServer, workers: int) -> None:
    cases = [{**c, "recorded": {"tool_calls": [], "text": "ok"}} for c in CASES[:2]]
    _family(pytester.path, cases, extra_family=POLICIES.replace(
        "tool_descriptions", f"api_base: '{server.base_url}',\n     tool_descriptions"))
    pytester.makepyprojecttoml(f"""
        [tool.tooleffect.policies.other]
        model = "openai/local-test"
        api_base = "{server.base_url}"
    """)
    result = pytester.runpytest("cases/", *_workers(workers), f"{OPT_POLICY}=replay", f"{OPT_POLICY}=terse",
                                f"{OPT_POLICY}=other", f"{OPT_REPORT}=r.json")
    result.assert_outcomes(passed=5, failed=1)  # replay's recorded text fails call-dotted
    rep = json.loads((pytester.path / "r.json").read_text())
    assert [b["policy"] for b in rep["blocks"]] == ["other", "replay", "terse"]
    (comp,) = rep["comparisons"]
    assert comp["policies"] == ["other", "replay", "terse"] and comp["shared_n"] == 2
    assert comp["all"]["replay"]["name_micro_display"] == "50.0"
    assert comp["all"]["terse"]["name_micro_display"] == "100.0"
    result.stdout.fnmatch_lines(["*policies side by side * family demo * the 2 cases every policy scored*"])
    terse = next(r for r in server.requests if r.get("messages", [{}])[0].get("content") == "Be brief.")
    assert terse["temperature"] == 0.0
    described = next(t for t in terse["tools"] if t["function"]["name"] == "read_thread")["function"]
    assert described["description"] == "Read a mail thread."


def test_unknown_policy_is_a_clear_error(pytester: pytest.Pytester) -> None:
    _family(pytester.path, CASES[:1])
    result = pytester.runpytest("cases/", f"{OPT_POLICY}=nope")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*policy 'nope' is not defined for family demo (known: replay)*"])


def test_score_fixture_and_function(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        from pytest_tooleffect import score

        TOOLS = [{"name": "get_weather", "parameters": {"type": "object",
                  "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
        LABEL = {"valid_actions": [{"tool": None}, {"tool": "get_weather", "args": {"city": "Oslo"}}]}

        def test_function():
            verdict = score({"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}]}, LABEL, TOOLS)
            assert verdict.kind == "ok" and verdict.passed

        def test_fixture(tooleffect_score):
            verdict = tooleffect_score({"content": "It's sunny"}, LABEL, TOOLS)
            assert verdict.kind == "ok_no_tool"
            verdict = tooleffect_score({"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Rome"}'}]},
                                       LABEL, TOOLS)
            assert verdict.kind == "right_tool_wrong_args"
    """)
    pytester.runpytest().assert_outcomes(passed=2)


@pytest.mark.parametrize("workers", [0, 2])
def test_live_path_reproduces_replay(tmp_path: Path, workers: int) -> None:
    """The scheduling family through litellm, answered with its recorded turns, scores exactly as replay
    (in one process); the live run at ``workers`` xdist workers.
    """
    import subprocess
    import sys

    from pytest_tooleffect.servers.recorded import replay_index, turn_key
    from tests.conftest import REPO

    index = replay_index(REPO / "cases")
    with ScriptedServer(lambda body: index.get(turn_key(body), Reply(status=404))) as srv:
        reports = {}
        for name, extra in (("replay", []), ("live", [f"{OPT_MODEL}=openai/recorded-agent",
                                                      f"{OPT_API_BASE}={srv.base_url}", *_workers(workers)])):
            out = tmp_path / f"{name}.json"
            run = subprocess.run([sys.executable, "-m", "pytest", "cases/scheduling", "-q", "-p", "no:cacheprovider",
                                  f"{OPT_REPORT}={out}", f"{OPT_RECORDS}=", *extra],
                                 cwd=REPO, capture_output=True, text=True)
            assert run.returncode == 1, run.stdout[-2000:]
            reports[name] = json.loads(out.read_text())["blocks"][0]
    live, replay = reports["live"], reports["replay"]
    assert live["n_errors"] == 0 and live["n_scored"] == replay["n_scored"] >= 40
    for key in ("classes", "micro", "macro", "kinds", "argument_failures", "no_tool_failures", "buckets"):
        assert live[key] == replay[key], key
    assert live["cost"]["input_tokens"] > 0 and replay["cost"]["input_tokens"] is None


def test_a_dripping_server_times_out_on_the_wall_clock(tmp_path: Path) -> None:
    from pytest_tooleffect.decide.model_turn import import_litellm, run_turn
    from pytest_tooleffect.decide.provider_errors import ProviderError
    from pytest_tooleffect.formats import Case, Policy

    case = Case.model_validate(_case("drip", {"valid_actions": [NULL]}))
    import_litellm()  # its import takes seconds and is not part of the bound being tested
    with ScriptedServer([Reply(text="ok", drip_s=0.5)]) as srv:
        import time

        t0 = time.perf_counter()
        with pytest.raises(ProviderError, match="no complete answer within 1 s"):
            run_turn(case, [], None, Policy(name="p", model="openai/x", api_base=srv.base_url), timeout_s=1.0,
                     api_key="x")
        assert time.perf_counter() - t0 < 10


def test_missing_usage_is_unknown_not_zero() -> None:
    from pytest_tooleffect.decide.model_turn import run_turn
    from pytest_tooleffect.formats import Case, Policy

    case = Case.model_validate(_case("nousage", {"valid_actions": [NULL]}))
    body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}).encode()
    with ScriptedServer([Reply(raw_body=body)]) as srv:
        turn = run_turn(case, [], None, Policy(name="p", model="openai/x", api_base=srv.base_url), api_key="x")
    assert turn.cost["cost_usd"] is None
    assert turn.cost["input_tokens"] in (None, 0)  # litellm may fill a zero usage; the price stays unknown


@pytest.mark.parametrize(("toml", "message"), [
    ("[tool.tooleffect]\npolicies = 5\n", "must be a table of policy tables"),
    ("[tool.tooleffect.policies]\ngpt = 5\n", "policies.gpt] must be a table"),
    ("[tool.tooleffect.policies.replay]\nmodel = \"openai/x\"\n", "'replay' is the built-in offline policy"),
])
def test_bad_pyproject_policies_are_usage_errors(pytester: pytest.Pytester, toml: str, message: str) -> None:
    _family(pytester.path, CASES[1:2])
    pytester.makepyprojecttoml(toml)
    result = pytester.runpytest("cases/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_a_policy_with_no_model_and_no_agent_is_an_error_where_it_is_used(pytester: pytest.Pytester) -> None:
    """Its agent may come from a conftest's pytest_tooleffect_agent hook: refused only when none does."""
    _family(pytester.path, CASES[1:2])
    pytester.makepyprojecttoml("[tool.tooleffect.policies.terse]\ntemperature = 0.0\n")
    pytester.runpytest("cases/").assert_outcomes(passed=1)  # defined, not used: the replay runs
    result = pytester.runpytest("cases/", f"{OPT_POLICY}=terse", "-rE")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*policy 'terse' has no model and no agent, and no pytest_tooleffect_agent hook "
                                 "returned one*"])


PRICE_RULE = "a price is a finite number of USD per million tokens from 0 to 1,000,000"
BAD_PRICES = [
    ("m: {input_per_mtok: .nan, output_per_mtok: 1}", f"model 'm': input_per_mtok: nan, not a finite number; {PRICE_RULE}"),
    ("m: {input_per_mtok: -1, output_per_mtok: 1}", f"model 'm': input_per_mtok: -1, below 0; {PRICE_RULE}"),
    ("m: {input_per_mtok: 1, output_per_mtok: true}",
     f"model 'm': output_per_mtok: a number of USD, got true; {PRICE_RULE}"),
    ("m: {input_per_mtok: [1], output_per_mtok: 1}",
     f"model 'm': input_per_mtok: a number of USD, got [1]; {PRICE_RULE}"),
    ("m: {input_per_mtok: 1.0e+308, output_per_mtok: 1}",
     f"model 'm': input_per_mtok: 1e+308, more than 1,000,000; {PRICE_RULE}"),
    ("m: {input_per_mtok: 1e308, output_per_mtok: 1}",  # text to YAML 1.1, a number to the user
     f"model 'm': input_per_mtok: 1e308, more than 1,000,000; {PRICE_RULE}"),
    ("[1]", "the file is a mapping {model: {input_per_mtok: USD, output_per_mtok: USD}}, got a list"),
    ("m: [1]", "model 'm': a mapping {input_per_mtok: USD, output_per_mtok: USD}, got a list"),
    ("m: {input_per_mtok: 1}",
     "model 'm': output_per_mtok is missing (a price per million input and per million output tokens, in USD)"),
    ("m: {input_per_mtok: 1, output_per_mtok: 2, cached: 0}",
     "model 'm': 'cached' is not a price field (input_per_mtok, output_per_mtok)"),
]


@pytest.mark.parametrize(("prices", "said"), BAD_PRICES, ids=[p for p, _ in BAD_PRICES])
def test_bad_prices_are_usage_errors_naming_the_model_and_the_field(
        pytester: pytest.Pytester, prices: str, said: str) -> None:
    """Before, a list gave "'list' object has no attribute 'items'", [1] "list indices must be integers",
    and 1e308 "prices are finite numbers >= 0" (false of a finite number)."""
    _family(pytester.path, CASES[1:2])
    pytester.makefile(".yaml", prices=prices + "\n")
    result = pytester.runpytest("cases/", f"{OPT_PRICES}=prices.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {OPT_PRICES} prices.yaml: {said}" in result.stderr.lines
    assert "Traceback" not in result.stderr.str()


def test_a_prices_file_past_its_bound_is_refused_before_it_is_parsed(pytester: pytest.Pytester) -> None:
    """A 36 MB prices file took 53 s and 2 GB before the first test (the bound was the 1 GiB of any
    input): past 1 MiB it is a usage error naming the file, its size and the bound; 1 MiB is read.
    """
    from pytest_tooleffect.price_file import MAX_PRICES_BYTES

    _family(pytester.path, CASES[1:2])
    line = "vendor/model-{:07d}: {{input_per_mtok: 1.25, output_per_mtok: 10.0}}\n"
    rows = [line.format(i) for i in range(MAX_PRICES_BYTES // len(line.format(0)) + 1)]
    text = "".join(rows)
    assert len(text) > MAX_PRICES_BYTES
    (pytester.path / "prices.yaml").write_text(text)
    result = pytester.runpytest("cases/", f"{OPT_PRICES}=prices.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (f"ERROR: {OPT_PRICES} prices.yaml: 1.0 MB, more than the 1 MiB a prices file may hold (about 15,000 "
            "models); list only the models the run uses, litellm prices the others") in result.stderr.lines
    (pytester.path / "prices.yaml").write_text("".join(rows[:-1]))
    pytester.runpytest("cases/", f"{OPT_PRICES}=prices.yaml").assert_outcomes(passed=1)


def test_prices_in_exponent_form_and_at_the_bounds_are_read(pytester: pytest.Pytester) -> None:
    _family(pytester.path, CASES[1:2])
    pytester.makefile(".yaml", prices="m: {input_per_mtok: 1e3, output_per_mtok: 1000000}\nn: {input_per_mtok: 0, "
                                      "output_per_mtok: 0.5}\n")
    pytester.runpytest("cases/", f"{OPT_PRICES}=prices.yaml").assert_outcomes(passed=1)


def test_stale_outputs_are_replaced_when_nothing_is_scored(pytester: pytest.Pytester) -> None:
    _family(pytester.path, CASES[1:2])
    pytester.runpytest("cases/", f"{OPT_REPORT}=r.json").assert_outcomes(passed=1)  # replays a null
    assert (pytester.path / "reports" / "tooleffect-records.jsonl").read_text()
    assert len(json.loads((pytester.path / "r.json").read_text())["blocks"]) == 1
    nothing = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json", "-k", "nothing-matches")
    assert nothing.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    nothing.assert_outcomes(deselected=1)  # the run collected the case and ran none
    assert (pytester.path / "reports" / "tooleffect-records.jsonl").read_text() == ""
    assert json.loads((pytester.path / "r.json").read_text())["blocks"] == []


@pytest.mark.parametrize("workers", [0, 2])
def test_repeats_pass_hat_k_cache_and_cost_views(pytester: pytest.Pytester, workers: int) -> None:
    """Three trials per case against a server that alternates, then the same run from the cache."""
    answers = iter([Reply(text="fine"), Reply(tool_calls=[("read_thread", '{"thread_id": "t"}')]),
                    Reply(text="fine")] * 4)
    with ScriptedServer(lambda body: next(answers)) as srv:
        _family(pytester.path, CASES[1:2])  # no-call: null is the only valid action
        args = ["cases/", *_workers(workers), f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}",
                f"{OPT_REPEATS}=3", f"{OPT_CACHE}=readwrite", f"{OPT_REPORT}=r.json"]
        first = pytester.runpytest(*args)
        first.assert_outcomes(passed=2, failed=1)
        block = json.loads((pytester.path / "r.json").read_text())["blocks"][0]
        rep = block["repeats"]
        assert rep["trials"] == 3 and rep["cases"] == 1 and rep["flip_share"] == 1.0
        assert rep["pass_hat_k"] == {"1": pytest.approx(2 / 3), "2": pytest.approx(1 / 3), "3": 0.0}
        first.stdout.fnmatch_lines(["*repeats: 3 trials of 1 cases: pass^1 66.7 %, pass^2 33.3 %, pass^3 0.0 %*"])
        assert block["cost"]["by_kind"]["tool_when_none_needed"]["n"] == 1
        assert block["cost"]["no_tool_spend"]["input_tokens"] == 300
        assert len(block["cost"]["most_expensive"]) == 3
        requests = len(srv.requests)
        second = pytester.runpytest(*args)
        second.assert_outcomes(passed=2, failed=1)  # the same verdicts, deterministically
        assert len(srv.requests) == requests  # every answer came from the cache
        recs = [json.loads(x) for x in (pytester.path / "reports" / "tooleffect-records.jsonl").read_text().splitlines()]
        assert all(r["cached"] for r in recs) and sorted(r["trial"] for r in recs) == [1, 2, 3]
        assert json.loads((pytester.path / "r.json").read_text())["blocks"][0]["cost"]["from_cache"] == 3


def test_retries_recover_from_a_transient_500(pytester: pytest.Pytester) -> None:
    with ScriptedServer([Reply(status=500), Reply(text="fine")]) as srv:
        _family(pytester.path, CASES[1:2])
        result = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/local-test",
                                    f"{OPT_API_BASE}={srv.base_url}", f"{OPT_RETRIES}=2")
        result.assert_outcomes(passed=1)
        assert len(srv.requests) == 2


def test_concurrent_turns_overlap(pytester: pytest.Pytester) -> None:
    """Ten turns of 0.6 s each with concurrency 10 are all in flight together."""
    cases = [_case(f"c{i}", {"valid_actions": [NULL]}) for i in range(10)]
    with ScriptedServer([Reply(text="fine", delay_s=0.6)]) as srv:
        _family(pytester.path, cases)
        result = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/local-test",
                                    f"{OPT_API_BASE}={srv.base_url}", f"{OPT_CONCURRENCY}=10",
                                    f"{OPT_REPORT}=r.json")
        result.assert_outcomes(passed=10)
        arrivals = sorted(r["_received"] for r in srv.requests)
    assert len(arrivals) == 10
    # one after another, each would wait for the previous answer: one arrival per 0.6 s window,
    # 5.4 s in all; together, most arrive within one answer's time (a loaded machine may hold one back)
    in_one_window = max(sum(t <= a < t + 0.6 for a in arrivals) for t in arrivals)
    assert in_one_window >= 8 and arrivals[-1] - arrivals[0] < 1.8, arrivals
    block = json.loads((pytester.path / "r.json").read_text())["blocks"][0]
    assert block["cost"]["latency_ms_p50"] >= 550  # each decision's own latency is the server's delay


def test_provider_error_on_an_xfail_case_is_an_error(pytester: pytest.Pytester) -> None:
    _family(pytester.path, [{**CASES[1], "xfail": "known over-eager reply"}])
    result = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/local-test",
                                f"{OPT_API_BASE}=http://127.0.0.1:9/v1", f"{OPT_RETRIES}=0")
    result.assert_outcomes(errors=1)  # not xfailed: the provider failed, the agent decided nothing


def test_rate_limit_holds_across_xdist_workers(pytester: pytest.Pytester) -> None:
    """12 turns on two workers at 4 requests per 1 s window (the per-minute window scaled down)."""
    cases = [_case(f"r{i:02d}", {"valid_actions": [NULL]}) for i in range(12)]
    with ScriptedServer([Reply(text="fine")]) as srv:
        _family(pytester.path, cases)
        result = pytester.runpytest("cases/", "-n", "2", "-v", f"{OPT_MODEL}=openai/local-test",
                                    f"{OPT_API_BASE}={srv.base_url}", f"{OPT_RPM}=4",
                                    "-o", f"{INI_RATE_WINDOW}=1")
        result.assert_outcomes(passed=12)
        arrivals = sorted(r["_received"] for r in srv.requests)
    result.stdout.fnmatch_lines_random(["*[[]gw0[]]*PASSED*", "*[[]gw1[]]*PASSED*"])  # both workers asked
    result.stdout.fnmatch_lines(["*tooleffect rate limit: 4 requests per 1 s over all workers; "
                                 "* of 12 model turns waited for it*(not counted in latency)*"])
    assert len(arrivals) == 12
    slack = 0.15  # admission to arrival at the server: the local HTTP hop, on a shared machine
    assert max(sum(1 for u in arrivals if t <= u < t + 1 - slack) for t in arrivals) <= 4
    assert arrivals[-1] - arrivals[0] >= 2 - slack  # 12 at 4 per window need two more windows
    recs = list(_records(pytester.path).values())
    longest = max(recs, key=lambda r: r["rate_wait_ms"])
    assert longest["rate_wait_ms"] >= 500
    assert longest["cost"]["latency_ms"] < longest["rate_wait_ms"]  # the wait is not the decision's latency


def test_a_named_rate_file_is_shared_by_consecutive_runs(pytester: pytest.Pytester) -> None:
    """Two runs naming one state file share one limit: the second waits for the first's requests."""
    # the window must outlast the second run's start-up, or its requests find the window empty and
    # never wait: in-process, the second run takes the first one's model-turn child (no litellm
    # import), so its start-up is its collection of three cases
    WINDOW = 15  # noqa: N806
    cases = [_case(f"s{i}", {"valid_actions": [NULL]}) for i in range(3)]
    with ScriptedServer([Reply(text="fine")]) as srv:
        _family(pytester.path, cases)
        args = ["cases/", f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}",
                f"{OPT_RPM}=3", "-o", f"{INI_RATE_WINDOW}={WINDOW}", "-o",
                f"{INI_RATE_FILE}=state/limit.db"]
        pytester.runpytest(*args).assert_outcomes(passed=3)
        second = pytester.runpytest(*args)
        second.assert_outcomes(passed=3)
        arrivals = sorted(r["_received"] for r in srv.requests)
    assert (pytester.path / "state" / "limit.db").is_file()  # kept for the next run
    assert len(arrivals) == 6
    # the window outlasts the second run's start-up: its requests waited for the first run's
    assert arrivals[3] - arrivals[0] >= WINDOW - 0.3
    second.stdout.fnmatch_lines([f"*tooleffect rate limit: 3 requests per {WINDOW} s*; [123] of 3 model turns "
                                 "waited for it*"])


def test_retries_pass_through_the_rate_limit(tmp_path: Path) -> None:
    """A 500 then an answer, at 1 request per 2 s: the retry waits for the limit, and says so."""
    from pytest_tooleffect.decide.model_turn import TurnPool, run_turn
    from pytest_tooleffect.decide.ratelimit import RateLimit
    from pytest_tooleffect.formats import Case, Policy

    case = Case.model_validate(_case("retry", {"valid_actions": [NULL]}))
    pool = TurnPool(1, RateLimit(tmp_path / "limit.sqlite", rpm=1, window_s=2.0))
    try:
        with ScriptedServer([Reply(status=500), Reply(text="fine")]) as srv:
            turn = run_turn(case, [], None, Policy(name="p", model="openai/x", api_base=srv.base_url),
                            api_key="x", retries=2, pool=pool)
            first, second = (r["_received"] for r in srv.requests)
    finally:
        pool.close()
    assert turn.emitted["content"] == "fine"
    assert second - first >= 2 - 0.1
    assert turn.rate_wait_ms >= 1000  # the backoff (0.5 s) is the call's; the rest was the limit's
    assert turn.cost["latency_ms"] < 2000


@pytest.mark.parametrize(("args", "message"), [
    ([f"{OPT_RPM}=0"], "must be at least 1"),
    (["-o", f"{INI_TPM}=lots"], "ini tooleffect_tpm = 'lots'*not a whole number"),
    (["-o", f"{INI_RATE_WINDOW}=0"], "ini tooleffect_rate_window = '0'*must be a number of seconds above 0"),
])
def test_bad_rate_limits_are_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    _family(pytester.path, CASES[1:2])
    result = pytester.runpytest("cases/", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_interrupt_drops_turns_not_yet_finished() -> None:
    """Ctrl-C (the pool cancelled): with one turn in flight at a time, the queued turns never reach the server."""
    import time

    from pytest_tooleffect.decide.model_turn import TurnPool, import_litellm, wait_turn
    from pytest_tooleffect.decide.provider_errors import ProviderError
    from pytest_tooleffect.formats import Case, Policy

    import_litellm()
    pool = TurnPool(1)
    try:
        with ScriptedServer([Reply(text="slow", delay_s=1.0)]) as srv:
            policy = Policy(name="p", model="openai/x", api_base=srv.base_url)
            futures = [pool.submit(Case.model_validate(_case(f"q{i}", {"valid_actions": [NULL]})), [], None, policy,
                                   timeout_s=5.0, api_key="x") for i in range(4)]
            deadline = time.monotonic() + 10
            while not srv.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            pool.cancel()
            for f in futures:
                with pytest.raises(ProviderError, match="cancelled"):
                    wait_turn(f, 5.0)
            time.sleep(0.3)
            assert len(srv.requests) == 1  # the three queued turns were dropped before they started
    finally:
        pool.close()


def test_a_limit_that_makes_the_run_long_is_announced(pytester: pytest.Pytester) -> None:
    cases = [_case(f"w{i}", {"valid_actions": [NULL]}) for i in range(7)]
    _family(pytester.path, cases)
    result = pytester.runpytest("cases/", "--collect-only", "-q", f"{OPT_MODEL}=openai/local-test",
                                f"{OPT_API_BASE}=http://127.0.0.1:9/v1", f"{OPT_RPM}=2")
    # 7 turns at 2 per minute: three more windows after the first, 3 min, under ten: nothing said
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*7 tests collected*"])
    result.stdout.no_fnmatch_line("*take at least*")
    slow = pytester.runpytest("cases/", "--collect-only", "-q", f"{OPT_MODEL}=openai/local-test",
                              f"{OPT_API_BASE}=http://127.0.0.1:9/v1", f"{OPT_RPM}=1",
                              "-o", f"{INI_RATE_WINDOW}=120")
    slow.stdout.fnmatch_lines(["*tooleffect: at 1 requests per 120 s, 7 live model turns take at least 12 min*"])


def test_a_case_line_changed_before_its_turn_is_prefetched_is_that_items_error(pytester: pytest.Pytester) -> None:
    """Prefetch reads every queued item's case again: a line edited in place after collection is
    the error of its own item, not an internal error that ended the run with no records."""
    cases = [_case(f"e{i}", {"valid_actions": [NULL]}) for i in range(6)]
    pytester.makeconftest("""
        import pytest
        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(session):
            path = session.config.rootpath / "cases" / "demo" / "cases.jsonl"
            path.write_text(path.read_text().replace("[e3] please help", "[e3] please HELP"))  # same length
    """)
    with ScriptedServer([Reply(text="fine")]) as srv:
        _family(pytester.path, cases)
        result = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}",
                                    f"{OPT_CONCURRENCY}=8")
    result.assert_outcomes(passed=5, errors=1)
    result.stdout.fnmatch_lines(["*case e3: the line at byte * is not the one collected*"])


@pytest.mark.parametrize("flag", ["--setup-plan", "--setup-only"])
def test_setup_plan_and_setup_only_ask_no_model(pytester: pytest.Pytester, flag: str) -> None:
    """pytest's --setup-plan and --setup-only run no call phase: no decision is made, so no
    request leaves (each item's setup obtained its decision, a live request, only to drop it)."""
    cases = [_case(f"p{i}", {"valid_actions": [NULL]}) for i in range(5)]
    with ScriptedServer([Reply(text="fine")]) as srv:
        _family(pytester.path, cases)
        result = pytester.runpytest("cases/", flag, f"{OPT_MODEL}=openai/local-test",
                                    f"{OPT_API_BASE}={srv.base_url}", f"{OPT_CONCURRENCY}=4")
        asked = len(srv.requests)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*cases.jsonl::p0*"])
    assert asked == 0, asked


def test_requests_carry_a_max_tokens_cap_and_a_policy_sets_its_own_timeout(pytester: pytest.Pytester,
                                                                          server: ScriptedServer) -> None:
    """A live request always carries ``max_tokens`` (the policy's, else the default), so a runaway
    turn ends; a policy's own ``timeout_s`` wins over ``--tooleffect-timeout`` (a CPU model's first
    decision outlasts a hosted model's timeout).
    """
    from pytest_tooleffect.decide.model_turn import DEFAULT_MAX_TOKENS

    slow = _case("slow-ok", {"valid_actions": [NULL]})
    REPLIES["slow-ok"] = Reply(text="Done.", delay_s=8.0)
    try:
        _family(pytester.path, [CASES[1], slow])
        pytester.makepyprojecttoml(f"""
            [tool.tooleffect.policies.capped]
            model = "openai/local-test"
            api_base = "{server.base_url}"
            max_tokens = 77
            timeout_s = 60
            [tool.tooleffect.policies.plain]
            model = "openai/local-test"
            api_base = "{server.base_url}"
        """)
        result = pytester.runpytest("cases/", f"{OPT_POLICY}=capped", f"{OPT_POLICY}=plain", f"{OPT_TIMEOUT}=4",
                                    f"{OPT_RETRIES}=0")
        result.assert_outcomes(passed=3, errors=1)  # plain times out on the slow case; capped waits
        result.stdout.fnmatch_lines_random(["*ERROR at setup of demo/slow-ok[[]plain[]]*",
                                            "*provider error (not scored): Timeout*"])
    finally:
        del REPLIES["slow-ok"]
    # the module's server also answered other tests (Anthropic and Gemini bodies have no "messages")
    sent = {r.get("max_tokens") for r in server.requests if r.get("model") == "local-test"
            and "[no-call]" in json.dumps(r.get("messages"))}
    assert {77, DEFAULT_MAX_TOKENS} <= sent


@pytest.mark.parametrize("dist", [["--dist", "loadgroup"], []], ids=["loadgroup", "load"])
def test_each_worker_is_handed_whole_chunks_it_prefetches(pytester: pytest.Pytester, dist: list[str]) -> None:
    """-n 2, alone (pytest-xdist's ``--dist load``) or with ``--dist loadgroup``: 140 live items are
    four chunks of 35 positions; each worker queues the chunk it is handed at the run's concurrency,
    so both workers have turns in flight together (2 × C at the most) and no turn is asked twice.
    pytest-xdist's own loadgroup, whose node-id suffix pytest 9 drops, ran every item on its own:
    each worker had one turn queued ahead of the one it waited for (4 in flight), and prefetching
    its markers' chunks asked every turn on both workers.  Under xdist's own ``load`` a worker whose
    last test took 0.1 s or more is not refilled while it holds two items: 4 in flight too."""
    cases = [_case(f"g{i:03d}", {"valid_actions": [NULL]}) for i in range(140)]
    delay = 1.0
    with ScriptedServer([Reply(text="fine", delay_s=delay)]) as srv:
        _family(pytester.path, cases)
        result = pytester.runpytest("cases/", "-n", "2", *dist, "-v",
                                    f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}",
                                    f"{OPT_CONCURRENCY}=8")
        result.assert_outcomes(passed=140)
        asked = [r["messages"][-1]["content"] for r in srv.requests]
        arrivals = sorted(r["_received"] for r in srv.requests)
    result.stdout.fnmatch_lines_random(["*[[]gw0[]]*PASSED*", "*[[]gw1[]]*PASSED*"])
    assert len(asked) == 140 and len(set(asked)) == 140, len(asked)  # every turn asked once
    in_flight = max(sum(t <= a < t + delay for a in arrivals) for t in arrivals)
    assert 8 < in_flight <= 16, in_flight  # more than one worker's concurrency, at most both workers'


def test_chunks_are_at_most_64_positions_and_at_least_two_per_worker() -> None:
    """A run of a few dozen items spreads over every worker (49 items on 2 workers: 4 chunks, not
    one chunk of 64 that left the second worker idle), a large run keeps chunks of 64."""
    from pytest_tooleffect.collect.chunks import CHUNK, chunk_size, group_of

    assert [chunk_size(n, 2) for n in (1, 12, 49, 140, 256, 10_000)] == [1, 3, 13, 35, 64, CHUNK]
    assert chunk_size(49, 0) == 25  # no worker count: as one worker
    assert len({group_of(f"c[{i}]", i, chunk_size(49, 2)) for i in range(49)}) == 4
    assert group_of("c[3]@solo", 3, 13) == "solo"


def test_loadgroup_item_whose_id_carries_a_group_is_prefetched_with_its_group_only(pytester: pytest.Pytester) -> None:
    """An item whose node id carries an xdist group (``…@solo``: pytest-xdist's loadgroup write on
    pytest 8, reproduced here by the conftest) is scheduled with its group, not its chunk; the worker
    must prefetch by the same units, or the chunk's worker and the group's worker both ask its turn."""
    cases = [_case(f"g{i:03d}", {"valid_actions": [NULL]}) for i in range(100)]
    pytester.makeconftest("""
        import pytest
        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(items):
            for it in items[:10]:
                it._id = f"{it.nodeid}@solo"
    """)
    with ScriptedServer([Reply(text="fine", delay_s=0.3)]) as srv:
        _family(pytester.path, cases)
        result = pytester.runpytest("cases/", "-n", "2", "--dist", "loadgroup",
                                    f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}",
                                    f"{OPT_CONCURRENCY}=8")
        result.assert_outcomes(passed=100)
        asked = [r["messages"][-1]["content"] for r in srv.requests]
    assert len(asked) == 100 and len(set(asked)) == 100, len(asked)  # every turn asked once


@pytest.mark.subprocess
def test_a_worker_that_dies_mid_chunk_leaves_its_crashed_item_failed_once_and_no_turn_asked_twice(
        pytester: pytest.Pytester) -> None:
    """-n 2, live: gw0 dies (SIGKILL) in the call of its third item.  pytest-xdist reports that
    item failed ("worker crashed") and, like its own ``--dist load``, must not run it again:
    xdist's ``loadscope`` put the dead worker's chunk back with the crashed item in it, so the item
    was reported failed and then passed, or the run hung with the replacement worker holding its
    last item and never told to shut down.  The worker handed the rest of the chunk queues only the
    items it is handed, not the chunk's finished ones (their turns were asked again)."""
    cases = [_case(f"k{i:02d}", {"valid_actions": [NULL]}) for i in range(12)]
    pytester.makeconftest("""
        import os, signal
        seen = []
        def pytest_runtest_call(item):
            seen.append(item)
            if len(seen) == 3 and os.environ.get("PYTEST_XDIST_WORKER") == "gw0" and not os.path.exists("killed"):
                open("killed", "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
    """)
    with ScriptedServer([Reply(text="fine", delay_s=0.2)]) as srv:
        _family(pytester.path, cases)
        result = pytester.runpytest_subprocess("cases/", "-n", "2", "-v", "-p", "no:randomly",
                                               f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}",
                                               f"{OPT_CONCURRENCY}=8", timeout=120)
        asked = [r["messages"][-1]["content"] for r in srv.requests]
    assert (pytester.path / "killed").exists()
    result.stdout.fnmatch_lines(["*worker 'gw0' crashed while running*"])
    result.assert_outcomes(passed=11, failed=1)
    verdicts = [line for line in result.stdout.lines if line.startswith("[gw") and ("PASSED" in line or "FAILED" in line)]
    names = [line.split("::")[1].split()[0] for line in verdicts]
    assert len(names) == len(set(names)) == 12, verdicts  # each item reported once
    assert len(asked) == len(set(asked)), sorted(asked)  # no turn asked twice


def test_ctrl_c_to_the_process_group_cancels_the_turns_and_ends_the_child(pytester: pytest.Pytester) -> None:
    """The terminal's Ctrl-C reaches every process of the group, the model-turn child too: the child
    ignores it, the run ends interrupted with its finished records whole and its unfinished turns
    cancelled (not failed as a dead child's), and no process of the group is left.
    """
    import signal
    import subprocess
    import sys
    import time

    _family(pytester.path, [_case(f"n{i:02d}", {"valid_actions": [NULL]}) for i in range(24)])
    log = pytester.path / "rec.jsonl"
    with ScriptedServer([Reply(text="Anything else?", delay_s=1.0)]) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "cases/",
             f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}", "--tooleffect-concurrency=2",
             f"{OPT_RECORDS}=rec.jsonl", f"{OPT_REPORT}=report.json"],
            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)  # its own process group, as a shell's foreground job
        try:
            deadline = time.monotonic() + 120
            while (not log.exists() or len(log.read_text().splitlines()) < 4) and proc.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
            assert proc.poll() is None
            os.killpg(proc.pid, signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert 4 <= len(records) < 24
    errors = [r["error"]["type"] for r in records if r["outcome"] == "error"]
    assert "TurnProcessExited" not in errors and set(errors) <= {"Cancelled"}, errors
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["status"] == "interrupted"
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # the child ended with the run: no process of the group is left


def _signal_the_child_at(pytester: pytest.Pytester, case_id: str, signal_name: str) -> None:
    """A conftest that sends the run's model-turn child ``signal_name`` in ``case_id``'s setup."""
    pytester.makeconftest(f"""
import os, signal
from pytest_tooleffect.decide.decision import pool_key

def pytest_runtest_setup(item):
    if item.name.startswith({case_id!r}):
        os.kill(item.config.stash[pool_key].process._proc.pid, signal.{signal_name})
""")


@pytest.mark.subprocess
def test_a_model_turn_process_that_dies_fails_its_unanswered_turns_as_errors_and_the_run_goes_on(
        pytester: pytest.Pytester) -> None:
    """Killed mid-run, the child takes no turn with it silently: every turn it had not answered is
    an error record (``TurnProcessExited``, with its exit code), never a verdict and never a hang;
    and every item is in the report.
    """
    _family(pytester.path, [_case(f"n{i:02d}", {"valid_actions": [NULL]}) for i in range(12)])
    _signal_the_child_at(pytester, "n03", "SIGKILL")
    with ScriptedServer([Reply(text="Anything else?", delay_s=0.5)]) as srv:
        result = pytester.runpytest_subprocess("cases/", "-p", "no:randomly", f"{OPT_MODEL}=openai/local-test",
                                               f"{OPT_API_BASE}={srv.base_url}", "--tooleffect-concurrency=2",
                                               f"{OPT_REPORT}=r.json", timeout=120)
    recs = _records(pytester.path)
    assert len(recs) == 12
    errors = {cid: r["error"] for cid, r in recs.items() if r["outcome"] == "error"}
    assert errors and all(e["type"] == "TurnProcessExited" and "exited (code -9)" in e["message"]
                          for e in errors.values()), errors
    assert all(recs[f"n{i:02d}"]["outcome"] == "scored" for i in range(2))  # answered before the kill
    result.assert_outcomes(passed=12 - len(errors), errors=len(errors))
    assert json.loads((pytester.path / "r.json").read_text())["status"] == "incomplete"


def _assert_gone_within(pid: int, seconds: float, otherwise: str) -> None:
    """The process ``pid`` (not this one's child) ends within ``seconds``; else it is killed and the test fails."""
    import psutil

    try:
        psutil.Process(pid).wait(seconds)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        psutil.Process(pid).kill()
        pytest.fail(f"the model-turn child {pid} {otherwise}")


def _null_cases_in_private_tmp(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, count: int) -> Path:
    """``count`` cases whose one acceptable action is to call nothing, and a temporary folder of
    the run's own (``TMPDIR``), returned."""
    scratch = pytester.path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    _family(pytester.path, [_case(f"n{i:02d}", {"valid_actions": [NULL]}) for i in range(count)])
    return scratch


@pytest.mark.subprocess
def test_a_run_killed_outright_leaves_no_child_and_no_file_behind(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL to pytest itself: the child sees its input end and exits, and its output file has
    no name to leave in the temporary folder."""

    scratch = _null_cases_in_private_tmp(pytester, monkeypatch, 6)
    pytester.makeconftest("""
import os, signal
from pytest_tooleffect.decide.decision import pool_key

def pytest_runtest_setup(item):
    if item.name.startswith("n02"):
        (item.config.rootpath / "child.pid").write_text(str(item.config.stash[pool_key].process._proc.pid))
        os.kill(os.getpid(), signal.SIGKILL)
""")
    with ScriptedServer([Reply(text="Anything else?")]) as srv:
        result = pytester.runpytest_subprocess("cases/", "-p", "no:randomly", f"{OPT_MODEL}=openai/local-test",
                                               f"{OPT_API_BASE}={srv.base_url}", timeout=120)
    assert result.ret == -9
    _assert_gone_within(int((pytester.path / "child.pid").read_text()), 30, "outlived its killed parent")
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("tooleffect-turns-")]


@pytest.mark.subprocess
def test_the_next_run_removes_the_rate_limit_folder_a_killed_run_left(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A run with a rate limit keeps its limiter file in a private temporary folder it removes at
    its end; killed outright it cannot, so the next run with a rate limit removes it."""
    scratch = _null_cases_in_private_tmp(pytester, monkeypatch, 4)
    pytester.makeconftest("""
import os, signal

def pytest_runtest_setup(item):
    if item.name.startswith("n02") and os.environ.get("KILL_AT_N02"):
        os.kill(os.getpid(), signal.SIGKILL)
""")
    args = ("cases/", "-p", "no:randomly", f"{OPT_MODEL}=openai/local-test", f"{OPT_RPM}=600")

    def left() -> list[str]:
        return sorted(p.name for p in scratch.iterdir() if p.name.startswith("tooleffect-rate-"))

    with ScriptedServer([Reply(text="Anything else?")]) as srv:
        monkeypatch.setenv("KILL_AT_N02", "1")
        killed = pytester.runpytest_subprocess(*args, f"{OPT_API_BASE}={srv.base_url}", timeout=120)
        assert killed.ret == -9
        leftover = left()
        assert len(leftover) == 1, leftover
        monkeypatch.delenv("KILL_AT_N02")
        pytester.runpytest_subprocess(*args, f"{OPT_API_BASE}={srv.base_url}",
                                      timeout=120).assert_outcomes(passed=4)
    assert left() == []


@pytest.mark.subprocess
def test_a_child_still_importing_litellm_exits_when_its_run_is_killed(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The child reads its input only once litellm is imported; killed during the import, the run
    still takes its child with it: the child watches its input pipe for the hang-up meanwhile."""
    import os

    slow = pytester.path / "slow"
    (slow / "litellm").mkdir(parents=True)
    (slow / "litellm" / "__init__.py").write_text("import time\ntime.sleep(120)\n")  # an import that never ends here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(slow), os.environ.get("PYTHONPATH")) if p))
    _family(pytester.path, [_case("n00", {"valid_actions": [NULL]})])
    pytester.makeconftest("""
import os, signal
import pytest
from pytest_tooleffect.decide.decision import pool_key

@pytest.hookimpl(trylast=True)  # after the plugin's configure started the child
def pytest_configure(config):
    (config.rootpath / "child.pid").write_text(str(config.stash[pool_key].process._proc.pid))
    os.kill(os.getpid(), signal.SIGKILL)
""")
    result = pytester.runpytest_subprocess("cases/", f"{OPT_MODEL}=openai/local-test",
                                           f"{OPT_API_BASE}=http://127.0.0.1:9/v1", timeout=60)
    assert result.ret == -9
    _assert_gone_within(int((pytester.path / "child.pid").read_text()), 60,  # half the fake import's sleep
                        "was still importing a minute after its run was killed")


def test_a_later_run_in_the_process_takes_the_idle_child_with_its_own_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle child is kept for the next run in the process (litellm imported once per process,
    not once per run); the next run's environment replaces the earlier one's in it; a child started
    under another import environment, or one that died meanwhile, is not taken.
    """
    import signal

    from pytest_tooleffect.decide.turn_process import TurnProcess, end_parked

    def keys_of(turns: TurnProcess) -> bool:
        _, found = turns.call("keys", {"model": "openai/gpt-4o", "api_base": ""})
        return bool(found.result(120))

    end_parked()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    first = TurnProcess()
    try:
        assert keys_of(first) is False
        pid = first._proc.pid if first._proc else 0
    finally:
        first.close()
    os.kill(pid, 0)  # kept, alive
    monkeypatch.setenv("OPENAI_API_KEY", "sk-second-run")
    second = TurnProcess()
    try:
        assert keys_of(second) is True  # this run's key, seen by the kept child
        assert second._proc is not None and second._proc.pid == pid
    finally:
        second.close()
    monkeypatch.setenv("LITELLM_LOG", "ERROR")  # read by litellm's import: a new child
    third = TurnProcess()
    try:
        assert keys_of(third) is True
        assert third._proc is not None and third._proc.pid != pid
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the kept one that did not fit was ended (and reaped)
        pid = third._proc.pid
    finally:
        third.close()
    os.kill(pid, signal.SIGKILL)  # the kept child dies before the next run
    time.sleep(0.5)
    fourth = TurnProcess()
    try:
        assert keys_of(fourth) is True
        assert fourth._proc is not None and fourth._proc.pid != pid
    finally:
        fourth.close()
        end_parked()


def test_a_child_that_dies_fails_its_own_calls_even_when_a_new_one_was_started_meanwhile() -> None:
    """A call made after the child died, before its reader noticed, starts a new child: the dead
    one's unanswered calls still fail (``TurnProcessExited``), never wait forever.
    """
    import signal

    from pytest_tooleffect.decide.provider_errors import ProviderError
    from pytest_tooleffect.decide.turn_process import TurnProcess

    with ScriptedServer([Reply(text="hi", delay_s=3)]) as srv:
        turns = TurnProcess()
        try:
            _, ready = turns.call("keys", {"model": "openai/x", "api_base": srv.base_url})
            ready.result(60)  # the child has imported litellm
            kwargs = {"model": "openai/x", "messages": [{"role": "user", "content": "hi"}], "api_base": srv.base_url,
                      "api_key": "k"}
            _, asked = turns.call("answer", {"kwargs": kwargs, "timeout_s": 10, "bound_s": 11, "model": "openai/x",
                                             "prices": {}})
            first = turns._proc
            assert first is not None
            os.kill(first.pid, signal.SIGKILL)
            first.wait()
            _, later = turns.call("keys", {"model": "openai/x", "api_base": srv.base_url})  # a new child
            with pytest.raises(ProviderError, match=r"TurnProcessExited: the model-turn process exited \(code -9\)"):
                asked.result(30)
            assert later.result(60) is False and turns._proc is not first
        finally:
            turns.close()


@pytest.mark.subprocess
def test_a_frozen_child_gives_a_timeout_error_within_the_turns_bound(pytester: pytest.Pytester) -> None:
    """The parent bounds each request too: a child that stops answering (here SIGSTOP) gives the
    item a Timeout error record soon after the request's own bound, and the run ends.
    """
    _family(pytester.path, [_case(f"n{i:02d}", {"valid_actions": [NULL]}) for i in range(3)])
    _signal_the_child_at(pytester, "n01", "SIGSTOP")
    with ScriptedServer([Reply(text="Anything else?", delay_s=0.3)]) as srv:
        result = pytester.runpytest_subprocess("cases/", "-p", "no:randomly", f"{OPT_MODEL}=openai/local-test",
                                               f"{OPT_API_BASE}={srv.base_url}", "--tooleffect-concurrency=1",
                                               "--tooleffect-timeout=1", f"{OPT_RETRIES}=0", timeout=90)
    recs = _records(pytester.path)
    assert recs["n00"]["outcome"] == "scored"
    stuck = [r for r in recs.values() if r["outcome"] == "error"]
    assert stuck and all(r["error"]["type"] == "Timeout" and "did not answer" in r["error"]["message"]
                         for r in stuck), stuck
    result.assert_outcomes(passed=3 - len(stuck), errors=len(stuck))


@pytest.mark.subprocess
def test_a_worker_crash_that_leaves_one_item_to_hand_again_does_not_hang_the_run(pytester: pytest.Pytester) -> None:
    """Under chunk scheduling, the unit a crashed worker left may hold one unfinished item: the
    replacement worker is handed it and told to shut down, so it runs it (a worker runs its last
    item only once another item or the shutdown comes; before, the run waited forever).
    """
    from tests.demo_family import CASES as DEMO
    from tests.demo_family import write_demo

    write_demo(pytester.path, DEMO)
    pytester.makeconftest("""
import os

def pytest_runtest_setup(item):
    if "c-create-utc" in item.nodeid:
        os._exit(3)
""")
    reply = Reply(tool_calls=[("read_thread", '{"thread_id": "th-1"}')], delay_s=0.5)
    with ScriptedServer([reply]) as srv:
        result = pytester.runpytest_subprocess("cases/", "-p", "no:randomly", "-n", "2", f"{OPT_MODEL}=openai/x",
                                               f"{OPT_API_BASE}={srv.base_url}", f"{OPT_REPORT}=r.json", timeout=150)
    report = json.loads((pytester.path / "r.json").read_text())
    recorded = {r["case_id"] for r in map(json.loads, (pytester.path / "reports" / "tooleffect-records.jsonl")
                                          .read_text().splitlines())}
    assert recorded == {c["id"] for c in DEMO} - {"c-create-utc"}, result.stdout.str()[-2000:]
    (unrecorded,) = report["unrecorded"]
    assert [i.split("::")[-1].split("[")[0] for i in unrecorded["ids"]] == ["c-create-utc"]
