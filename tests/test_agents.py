"""The example agents (examples/agents/) as policies, run against the local scripted server.

The server answers every state of the shipped families with that state's recorded decision (the
wire form of the request, system prompt left out, is looked up in ``replay_index``), so an agent
that passes the state through faithfully scores exactly as ``replay``; a state nothing recorded
(a rollout's later step) gets a closing text answer.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.servers.recorded import replay_index, turn_key
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.conftest import REPO
from tests.demo_family import write_demo

FAMILIES = ["cases/scheduling", "cases/tau-airline"]
SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MODEL = "openai/gpt-4o"  # a model litellm's bundled price map knows, so the agents' cost is priced
PLAIN = "examples.agents.plain_litellm"
LANGCHAIN = "examples.agents.langchain_agent"
CLOSING = "All done, anything else?"


def _gpt4o_usd(tokens_in: int, tokens_out: int) -> float:
    return tokens_in * 2.5e-6 + tokens_out * 1e-5  # gpt-4o in litellm's bundled map


def _replies(delay_s: Mapping[str, float] | None = None) -> Callable[[dict[str, Any]], Reply]:
    """The script: a state's recorded decision, else a closing text answer (after ``delay_s["s"]``)."""
    index = replay_index(REPO / "cases", system=False)  # the agents write their own prompt

    def answer(body: dict[str, Any]) -> Reply:
        reply = index.get(turn_key(body, system=False), Reply(text=CLOSING))
        return Reply(tool_calls=reply.tool_calls, text=reply.text, delay_s=(delay_s or {}).get("s", 0.0))

    return answer


def _env(server: ScriptedServer, pythonpath: Iterable[Path] = ()) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLEFFECT_EXAMPLE_")}
    env["TOOLEFFECT_EXAMPLE_MODEL"] = MODEL
    env["TOOLEFFECT_EXAMPLE_API_BASE"] = server.base_url
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _pytest(args: list[str], out: Path, env: Mapping[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """pytest in a fresh interpreter, records and report written under ``out``."""
    return subprocess.run([sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider",
                           "--tooleffect-sandbox=local", f"--tooleffect-records={out / 'records.jsonl'}",
                           f"--tooleffect-report={out / 'report.json'}"],
                          cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=600)


def _records(out: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    return {r["id"]: r for r in rows}


def _by_policy(records: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records.values():
        out.setdefault(r["policy"], {})[f"{r['family']}/{r['case_id']}"] = r
    return out


def _scored_like_replay(records: Mapping[str, dict[str, Any]], policies: list[str]) -> None:
    """Every item of each agent policy scored (no error), with replay's verdict and effect, and the
    agent's usage and price in its cost."""
    by = _by_policy(records)
    replay = by["replay"]
    assert len(replay) >= 250
    for policy in policies:
        mine = by[policy]
        assert mine.keys() == replay.keys(), policy
        for key, rec in mine.items():
            assert rec["outcome"] == "scored" and rec["error"] is None, (policy, key, rec["error"])
            assert rec["verdict"] == replay[key]["verdict"], (policy, key)
            assert rec.get("effect") == replay[key].get("effect"), (policy, key)  # world cases only
            cost = rec["cost"]
            assert (cost["input_tokens"], cost["output_tokens"]) == (100, 20), (policy, key, cost)
            assert cost["cost_usd"] == pytest.approx(_gpt4o_usd(100, 20)), (policy, key, cost)
            assert cost["latency_ms"] > 0


def test_both_example_agents_score_the_shipped_families_as_replay(tmp_path: Path) -> None:
    """The plain litellm agent (sync and async) and the LangChain agent by import path, beside replay."""
    with ScriptedServer(_replies()) as srv:
        run = _pytest([*FAMILIES, "--tooleffect-policy=replay", f"--tooleffect-agent=plain={PLAIN}:decide",
                       f"--tooleffect-agent=plain_async={PLAIN}:adecide",
                       f"--tooleffect-agent=langchain={LANGCHAIN}:decide"], tmp_path, _env(srv))
        requests = list(srv.requests)
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]  # 1: the recorded agent fails some
    assert " error" not in run.stdout.splitlines()[-1], run.stdout[-3000:]
    records = _records(tmp_path)
    _scored_like_replay(records, ["plain", "plain_async", "langchain"])
    by = _by_policy(records)
    # the sync and async variants of one agent decide alike
    assert {k: r["verdict"] for k, r in by["plain"].items()} == {k: r["verdict"] for k, r in by["plain_async"].items()}
    agent = by["plain"]["scheduling/sch-one-04"]["agent"]
    assert agent["callable"] == f"{PLAIN}:decide" and agent["model"] == "gpt-4o"
    assert agent["tool_names"] == {"calendar.create_event": "calendar_create_event", "mail.reply": "mail_reply"}
    assert by["langchain"]["scheduling/sch-one-04"]["agent"]["framework"] == "langchain"
    for block in json.loads((tmp_path / "report.json").read_text())["blocks"]:
        assert block["n_errors"] == 0 and block["n_scored"] > 0, (block["family"], block["policy"])
    # what the agents sent: one request per item, tools under provider-safe names, both prompts
    n = len(by["replay"])
    assert len(requests) == 3 * n
    from examples.agents.plain_litellm import AGENT_PROMPT

    family_prompts = {"calendar_create_event": "You are the scheduling assistant of Elena Marín",
                      "book_reservation": "As an airline agent, you can help users book, modify, or cancel"}
    plain = 0
    for body in requests:
        names = [t["function"]["name"] for t in body["tools"]]
        assert all(SAFE.match(name) for name in names), names
        system = body["messages"][0]
        assert system["role"] == "system"
        plain += system["content"].startswith(AGENT_PROMPT)
        (prompt,) = (text for tool, text in family_prompts.items() if tool in names)
        assert prompt in system["content"]
        if "calendar_create_event" in names:
            assert "calendar.create_event" not in json.dumps(body)  # nor in the history's calls
    assert plain == 2 * n  # the plain agent's own wording before the family's prompt; LangChain sends the family's


@pytest.mark.subprocess
def test_the_langchain_agent_through_the_conftest_hook(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """A project as a user lays it out: the shipped families, a policy in pyproject.toml and the
    example's ``pytest_tooleffect_agent`` hook in its conftest.py (the async LangChain agent).

    In a child process: what the conftest imports (LangChain and its clients) is process-wide state a
    run in this process does not undo; later runs in this process came up without the plugin's options."""
    for folder in ("cases/scheduling", "cases/tau-airline", "oracle"):
        shutil.copytree(REPO / folder, pytester.path / folder)
    conftest = (REPO / "conftest.py").read_text()  # the shipped families' predicates
    pytester.makeconftest(conftest + "\nfrom examples.agents.conftest import pytest_tooleffect_agent  # noqa: E402,F401\n")
    with ScriptedServer(_replies()) as srv:
        pytester.makepyprojecttoml(f"""
            [tool.pytest.ini_options]
            [tool.tooleffect.policies.langchain]
            settings = {{model = "gpt-4o", api_base = "{srv.base_url}", temperature = 0}}
        """)
        for key, value in _env(srv).items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("TOOLEFFECT_EXAMPLE_API_BASE")  # the policy's settings say where the model is
        result = pytester.runpytest_subprocess("cases/", "--tooleffect-policy=replay", "--tooleffect-policy=langchain",
                                               "--tooleffect-sandbox=local", "--tooleffect-concurrency=8")
        requests = list(srv.requests)
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    records = {r["id"]: r for r in map(json.loads, (pytester.path / "reports" / "tooleffect-records.jsonl")
                                       .read_text().splitlines())}
    _scored_like_replay(records, ["langchain"])
    lc = [r for r in records.values() if r["policy"] == "langchain"]
    assert all(r["agent"] == {"callable": "pytest_tooleffect_agent", "framework": "langchain", "model": "gpt-4o"}
               for r in lc)
    assert len(requests) == len(lc)
    assert all(SAFE.match(t["function"]["name"]) for body in requests for t in body["tools"])


AGENTS_UNDER_TEST = '''
import asyncio


def boom(state):
    return _lookup(state)


def _lookup(state):
    raise RuntimeError(f"no route for {state.case_id}")


async def aboom(state):
    await asyncio.sleep(0)
    raise KeyError("async agent lost its key")


def nothing(state):
    return None
'''


def _demo_family(root: Path, cases: list[dict[str, Any]]) -> None:
    write_demo(root, cases)  # the demo family with these cases only (no census)


def _demo_case(cid: str, label: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "user", "content": f"[{cid}] please help"}], "label": label, "source": "authored"}


@pytest.mark.subprocess  # the example agent imports litellm, which then stays half-loaded in this process
def test_an_agent_that_raises_or_returns_nothing_is_an_error_not_a_verdict(pytester: pytest.Pytester,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cases = [_demo_case("stop", {"valid_actions": [{"tool": None}]}),
             _demo_case("read", {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]})]
    _demo_family(pytester.path, cases)
    pytester.makepyfile(agents_under_test=AGENTS_UNDER_TEST)
    with ScriptedServer([Reply(status=500)]) as srv:  # the example agent's provider fails: litellm raises
        for key, value in _env(srv, [pytester.path]).items():
            monkeypatch.setenv(key, value)
        result = pytester.runpytest("cases/", "--tooleffect-agent=boom=agents_under_test:boom",
                                    "--tooleffect-agent=aboom=agents_under_test:aboom",
                                    "--tooleffect-agent=nothing=agents_under_test:nothing",
                                    f"--tooleffect-agent=plain={PLAIN}:decide", "--tooleffect-report=r.json")
    result.assert_outcomes(errors=8)
    result.stdout.fnmatch_lines_random(["*ERROR at setup of demo/read[[]boom[]]*",
                                        "agent error (not scored): RuntimeError: no route for read",
                                        "agent error (not scored): KeyError: 'async agent lost its key'",
                                        "agent error (not scored): AgentReturnedNothing: the agent returned None*"])
    records = {(r["policy"], r["case_id"]): r for r in map(
        json.loads, (pytester.path / "reports" / "tooleffect-records.jsonl").read_text().splitlines())}
    assert len(records) == 8
    for (policy, _), rec in records.items():
        assert rec["outcome"] == "error" and rec["verdict"] is None, rec
        error = rec["error"]
        expected = {"boom": "RuntimeError", "aboom": "KeyError", "nothing": "AgentReturnedNothing"}.get(policy)
        if expected:
            assert error["type"] == expected
        else:  # the example agent let litellm's exception through, as an agent's own failure
            assert error["type"] in ("InternalServerError", "APIError"), error
    tb = records[("boom", "read")]["error"]["traceback"]
    assert "agents_under_test.py" in tb and "in _lookup" in tb and "RuntimeError: no route for read" in tb
    assert "agents_under_test.py" in records[("aboom", "stop")]["error"]["traceback"]
    assert "plain_litellm.py" in records[("plain", "stop")]["error"]["traceback"]
    nothing = records[("nothing", "stop")]["error"]
    assert "returned None" in nothing["message"] and nothing.get("traceback") is None  # nothing was raised
    report = json.loads((pytester.path / "r.json").read_text())
    assert all(b["n_scored"] == 0 and b["n_errors"] == 2 for b in report["blocks"])


def test_the_async_agent_runs_concurrently_and_the_same_under_xdist(tmp_path: Path) -> None:
    """49 scheduling items, each answered after 0.3 s: at concurrency 16 many are in flight at once
    (one after another they would take 14.7 s); under -n 2 the records are those of -n 0."""
    delay = 0.3
    delays = {"s": delay}
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    outputs: dict[str, str] = {}  # shown when the runs differ
    with ScriptedServer(_replies(delays)) as srv:
        for name, extra in (("n0", []), ("n2", ["-n", "2"])):
            out = tmp_path / name
            run = _pytest(["cases/scheduling", f"--tooleffect-agent=plain_async={PLAIN}:adecide",
                           "--tooleffect-concurrency=16", *extra], out, _env(srv))
            assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
            runs[name] = _records(out)
            outputs[name] = run.stdout[-4000:] + run.stderr[-2000:]
            if name == "n0":
                arrivals = sorted(r["_received"] for r in srv.requests)
                delays["s"] = 0.0  # the -n 2 run is compared, not timed
    n = len(runs["n0"])
    assert n == len(arrivals) >= 40
    # a loose check, not a benchmark: in one answer's time most requests were already in flight
    in_flight = max(sum(t <= a < t + delay for a in arrivals) for t in arrivals)
    assert in_flight >= 8, in_flight
    assert arrivals[-1] - arrivals[0] < n * delay / 3, arrivals[-1] - arrivals[0]

    def stable(rec: dict[str, Any]) -> dict[str, Any]:  # what does not depend on timing or the worker
        cost = {k: v for k, v in rec["cost"].items() if k != "latency_ms"}
        calls = [{k: v for k, v in c.items() if k != "latency_ms"} for s in rec["steps"] for c in s["calls"]]
        return {"outcome": rec["outcome"], "verdict": rec["verdict"], "effect": rec.get("effect"), "cost": cost,
                "error": rec["error"], "calls": calls}

    assert runs["n0"].keys() == runs["n2"].keys(), outputs["n2"]
    assert all(r["outcome"] == "scored" for r in runs["n2"].values())
    assert {k: stable(r) for k, r in runs["n0"].items()} == {k: stable(r) for k, r in runs["n2"].items()}
    assert {r["sandbox"]["worker"] for r in runs["n2"].values()} == {"gw0", "gw1"}


RECORDING_AGENT = '''
import json
import time
import os

from examples.agents import plain_litellm


def _log(state):
    with open(os.environ["AGENT_STATE_LOG"], "a") as f:
        f.write(json.dumps({"policy": state.policy["name"], "case_id": state.case_id, "step": state.step,
                            "messages": list(state.messages)}) + "\\n")


def decide(state):
    _log(state)
    return plain_litellm.decide(state)


async def adecide(state):
    _log(state)
    return await plain_litellm.adecide(state)
'''


def test_a_rollout_calls_the_agent_again_with_the_tool_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """Two scheduling world cases, three steps at most in the local sandbox: the agent's call runs,
    and the agent is asked again at step 2 with its call and the result in the messages."""
    (tmp_path / "recording_agent.py").write_text(RECORDING_AGENT)
    log = tmp_path / "states.jsonl"
    with ScriptedServer(_replies()) as srv:
        env = _env(srv, [tmp_path])
        env["AGENT_STATE_LOG"] = str(log)
        run = _pytest(["cases/scheduling", "-k", "sch-one-01 or sch-one-04", "--tooleffect-rollout=3",
                       "--tooleffect-agent=rec=recording_agent:decide",
                       "--tooleffect-agent=arec=recording_agent:adecide"], tmp_path, env)
        requests = list(srv.requests)
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]  # sch-one-04's recorded start is UTC
    states = [json.loads(x) for x in log.read_text().splitlines()]
    records = _records(tmp_path)
    assert len(records) == 4
    for rec in records.values():
        mine = sorted((s for s in states if (s["policy"], s["case_id"]) == (rec["policy"], rec["case_id"])),
                      key=lambda s: s["step"])
        assert [s["step"] for s in mine] == [1, 2], rec["id"]  # the closing text at step 2 ends the rollout
        first, second = mine
        (call,) = rec["steps"][0]["calls"]
        assistant, result = second["messages"][len(first["messages"]):]
        assert assistant["role"] == "assistant"
        assert [tc["function"]["name"] for tc in assistant["tool_calls"]] == [call["name"]]  # original names
        assert result == {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "name": call["name"],
                          "content": call["content"]}
        assert rec["rollout"]["steps"] == 2 and rec["rollout"]["stopped"] == "no_tool"
        assert rec["steps"][1]["text"] == CLOSING and rec["steps"][1]["cost"]["input_tokens"] == 100
        assert rec["rollout"]["cost"]["input_tokens"] == 200
    create = next(r for r in records.values() if r["case_id"] == "sch-one-04")
    assert create["steps"][0]["calls"][0]["name"] == "calendar.create_event"
    # on the wire, the step-2 history carried the call under its provider-safe name, then its result
    assert len(requests) == 8
    result = create["steps"][0]["calls"][0]["content"]
    sent = [b["messages"][-2:] for b in requests if b["messages"][-1].get("content") == result]
    assert len(sent) == 2  # rec and arec
    assert all([tc["function"]["name"] for tc in call["tool_calls"]] == ["calendar_create_event"] for call, _ in sent)


HUNG_AND_MEDDLING = '''
import asyncio


async def hangs(state):
    await asyncio.sleep(60)


def meddles(state):
    state.tools[0]["function"]["parameters"]["properties"].clear()
    state.messages[-1]["content"] = "changed"
    return {"role": "assistant", "content": "done"}
'''


def test_a_hung_async_agent_times_out_as_an_error(pytester: pytest.Pytester) -> None:
    _demo_family(pytester.path, [_demo_case("stop", {"valid_actions": [{"tool": None}]})])
    pytester.makepyfile(agents_under_test=HUNG_AND_MEDDLING)
    result = pytester.runpytest("cases/", "--tooleffect-agent=hangs=agents_under_test:hangs",
                                "--tooleffect-timeout=1")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*agent error (not scored): Timeout: the agent gave no decision within 1 s*"])


def test_an_agent_that_edits_its_state_changes_nothing_the_oracle_or_the_next_policy_reads() -> None:
    from pytest_tooleffect.decide.agent import agent_state
    from pytest_tooleffect.formats import Case, Policy, ToolSpec

    tool = ToolSpec.model_validate({"name": "read_thread", "parameters": {
        "type": "object", "properties": {"thread_id": {"type": "string"}}, "required": ["thread_id"]}})
    case = Case.model_validate(_demo_case("read", {"valid_actions": [{"tool": "read_thread",
                                                                      "args": {"thread_id": "t"}}]}))
    state = agent_state(case, [tool], None, Policy(name="p", agent="m:f", settings={"k": [1]}))
    state.tools[0]["function"]["parameters"]["properties"].clear()
    state.messages[-1]["content"] = "changed"
    state.policy["settings"]["k"].append(2)
    assert tool.parameters["properties"] == {"thread_id": {"type": "string"}}
    assert case.messages[-1]["content"] == "[read] please help"
    again = agent_state(case, [tool], None, Policy(name="p", agent="m:f", settings={"k": [1]}))
    assert again.tools[0]["function"]["parameters"]["properties"] and again.policy["settings"]["k"] == [1]


def test_the_run_header_names_agent_policies(pytester: pytest.Pytester) -> None:
    _demo_family(pytester.path, [_demo_case("stop", {"valid_actions": [{"tool": None}]})])
    pytester.makepyfile(agents_under_test="def polite(state):\n    return {'role': 'assistant', 'content': 'ok'}\n")
    result = pytester.runpytest("cases/", "--tooleffect-agent=agents_under_test:polite", "--tooleffect-records=")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["tooleffect: policies polite; records off"])


@pytest.mark.parametrize("args", [
    ["--tooleffect-agent=a=agents_under_test:polite", "--tooleffect-agent=a=agents_under_test:polite"],
    ["--tooleffect-model=openai/x", "--tooleffect-agent=openai/x=agents_under_test:polite"],
])
def test_one_name_for_two_policies_is_refused(pytester: pytest.Pytester, args: list[str]) -> None:
    _demo_family(pytester.path, [_demo_case("stop", {"valid_actions": [{"tool": None}]})])
    pytester.makepyfile(agents_under_test="def polite(state):\n    return {'role': 'assistant', 'content': 'ok'}\n")
    result = pytester.runpytest("cases/", *args, "--tooleffect-records=")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*policy names given twice (*): every policy of a run needs its own name*"])


def test_a_command_line_agent_named_as_a_pyproject_policy_warns_naming_both(pytester: pytest.Pytester) -> None:
    """``--tooleffect-agent support=…`` runs in place of ``[tool.tooleffect.policies.support]``: a warning
    names both (with the file and the settings not used, never their values) and how to run both; the
    agent runs under the name (so a variant pairs with a baseline saved under it)."""
    _demo_family(pytester.path, [_demo_case("stop", {"valid_actions": [{"tool": None}]})])
    pytester.makepyfile(agents_under_test="def polite(state):\n    return {'role': 'assistant', 'content': "
                                          "str(state.policy.get('settings'))}\n")
    pytester.makepyprojecttoml("""
        [tool.tooleffect.policies.support]
        agent = "agents_under_test:polite"
        settings = {model = "openai/gpt-4o-mini", temperature = 0}
        timeout_s = 30
    """)
    result = pytester.runpytest("cases/", "--tooleffect-agent=support=agents_under_test:variant",
                                "--tooleffect-records=")
    result.assert_outcomes(errors=1)  # the variant does not exist: it ran, not the pyproject policy
    result.stdout.fnmatch_lines([
        "*PolicyShadowWarning: --tooleffect-agent support=agents_under_test:variant runs as policy 'support' in "
        "place of [[]tool.tooleffect.policies.support[]] in */pyproject.toml (not used: agent, settings, "
        "timeout_s); its records and baseline decisions under 'support' are this agent's. To run both, give the "
        "command line's agent another name (--tooleffect-agent support-variant=agents_under_test:variant)"])
    assert "gpt-4o-mini" not in result.stdout.str()
    other = pytester.runpytest("cases/", "--tooleffect-agent=support-variant=agents_under_test:polite",
                               "--tooleffect-policy=support", "--tooleffect-records=")
    other.assert_outcomes(passed=2)
    assert "PolicyShadowWarning" not in other.stdout.str()


BAD_AGENTS = '''
import sys
from pytest_tooleffect.decide.agent import AgentTurn

REPLY = {"role": "assistant", "content": "done"}


class Escaped(BaseException):
    pass


def negative(state):
    return AgentTurn(REPLY, input_tokens=-5)


def nan_cost(state):
    return AgentTurn(REPLY, cost_usd=float("nan"))


def inf_tokens(state):
    return AgentTurn(REPLY, output_tokens=float("inf"))


def text_tokens(state):
    return AgentTurn(REPLY, input_tokens="12")


def not_json(state):
    return AgentTurn(REPLY, extra={"seen": {1, 2}})


def forty_two(state):
    return 42


def text(state):
    return "hello"


def generator(state):
    return (x for x in [REPLY])


def exits(state):
    sys.exit(3)


def escapes(state):
    raise Escaped("out of the agent")


async def async_exits(state):
    raise SystemExit(1)


async def async_interrupts(state):
    raise KeyboardInterrupt


async def async_fine(state):
    return REPLY
'''
BAD_KINDS = {"negative": "AgentBadUsage", "nan_cost": "AgentBadUsage", "inf_tokens": "AgentBadUsage",
             "text_tokens": "AgentBadUsage", "not_json": "AgentBadExtra", "forty_two": "AgentReturnedUnreadable",
             "text": "AgentReturnedUnreadable", "generator": "AgentReturnedUnreadable", "exits": "SystemExit",
             "escapes": "Escaped", "async_exits": "SystemExit", "async_interrupts": "KeyboardInterrupt"}


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", [0, 2])
def test_every_way_an_agent_fails_is_its_error_with_a_record(pytester: pytest.Pytester, workers: int) -> None:
    """Bad numbers, unreadable returns, SystemExit and BaseException (sync and async: the pool's loop
    survives them): each an agent error, none a verdict, none lost."""
    _demo_family(pytester.path, [_demo_case("stop", {"valid_actions": [{"tool": None}]})])
    pytester.makepyfile(bad_agents=BAD_AGENTS)
    args = [f"--tooleffect-agent={name}=bad_agents:{name}" for name in BAD_KINDS]
    result = pytester.runpytest_subprocess("cases/", *args, "--tooleffect-agent=async_fine=bad_agents:async_fine",
                                           "--tooleffect-timeout=10", "-n", str(workers), "--tooleffect-report=r.json",
                                           timeout=120)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, errors=len(BAD_KINDS))
    records = {r["policy"]: r for r in map(
        json.loads, (pytester.path / "reports" / "tooleffect-records.jsonl").read_text().splitlines())}
    assert set(records) == {*BAD_KINDS, "async_fine"}
    assert records["async_fine"]["verdict"]["kind"] == "ok_no_tool"  # after the loop met SystemExit
    for policy, kind in BAD_KINDS.items():
        rec = records[policy]
        assert rec["outcome"] == "error" and rec["verdict"] is None and rec["error"]["type"] == kind, rec
    json.loads((pytester.path / "r.json").read_text(),  # no NaN or Infinity written as a value
               parse_constant=lambda c: pytest.fail(f"{c} in the report"))


@pytest.mark.subprocess
def test_an_agent_module_that_exits_on_import_is_an_error_naming_it(pytester: pytest.Pytester) -> None:
    _demo_family(pytester.path, [_demo_case("stop", {"valid_actions": [{"tool": None}]})])
    pytester.makepyfile(exits_on_import="import sys\nsys.exit(2)\n")
    result = pytester.runpytest_subprocess("cases/", "--tooleffect-agent=mine=exits_on_import:decide", timeout=120)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*policy 'mine': agent exits_on_import:decide: cannot import exits_on_import: "
                                 "SystemExit: 2*"])


@pytest.mark.subprocess
def test_a_sync_agent_that_hangs_and_an_async_one_that_blocks_its_loop_time_out(pytester: pytest.Pytester) -> None:
    _demo_family(pytester.path, [_demo_case("stop", {"valid_actions": [{"tool": None}]})])
    pytester.makepyfile(stuck="import time\n\n\ndef hangs(state):\n    time.sleep(3600)\n\n\n"
                              "async def blocks(state):\n    time.sleep(3600)\n")
    started = time.monotonic()
    result = pytester.runpytest_subprocess("cases/", "--tooleffect-agent=hangs=stuck:hangs",
                                           "--tooleffect-agent=blocks=stuck:blocks", "--tooleffect-timeout=1",
                                           timeout=120)
    assert time.monotonic() - started < 60  # bounded: each is its timeout (plus the loop's grace), not an hour
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines_random([
        "*agent error (not scored): Timeout: the agent gave no decision within 1 s (--tooleffect-timeout); it is "
        "left running in its thread*",
        "*agent error (not scored): Timeout: the agent gave no decision within 1 s (--tooleffect-timeout), and its "
        "event loop did not answer: a blocking call inside async def?*"])


ODD_RETURNS = '''
from collections import OrderedDict

REPLY = {"role": "assistant", "content": "done"}


def _call(args):
    return {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                 "function": {"name": "read_thread", "arguments": args}}]}


class BrokenGet(dict):
    def get(self, *args, **kwargs):
        raise RuntimeError("get is broken")


class BrokenIter(dict):
    def __iter__(self):
        raise RuntimeError("iter is broken")

    def keys(self):
        raise RuntimeError("keys is broken")


class Hostile:
    def __eq__(self, other):
        raise RuntimeError("eq is broken")

    def __iter__(self):
        raise RuntimeError("iter is broken")

    __hash__ = None


class HostileList(list):
    def __iter__(self):
        raise RuntimeError("iter is broken")


class BrokenDump:
    def model_dump(self):
        raise RuntimeError("model_dump is broken")


class Dumps:
    def __init__(self, data):
        self.data = data

    def model_dump(self):
        return self.data


class OddKey(str):
    def __eq__(self, other):
        raise RuntimeError("eq is broken")

    __hash__ = str.__hash__


def broken_get(state):
    return BrokenGet(REPLY)


def broken_iter(state):
    return BrokenIter(REPLY)


def hostile(state):
    return Hostile()


def hostile_list(state):
    return HostileList([REPLY])


def broken_dump(state):
    return BrokenDump()


def nothing(state):
    return None


def text(state):
    return "just words"


def words(state):
    return ["a", "b"]


def int_keys(state):
    return {1: "assistant", 2: "done"}


def int_arg_keys(state):
    return _call({1: "t"})


def object_arg(state):
    return _call({"thread_id": object()})


def set_arg(state):
    return _call({"thread_id": {"t"}})


def nan_arg(state):
    return _call({"thread_id": float("nan")})


def cycle(state):
    message = dict(REPLY)
    message["tool_calls"] = [message]
    return message


def deep(state):
    args = value = {}
    for _ in range(200):
        value["n"] = {}
        value = value["n"]
    return _call(args)


def huge_text(state):
    return "x" * 5_000_000


def huge_reply(state):
    return {"role": "assistant", "content": "[" * 2_000_000}


def fine_subclass(state):
    return OrderedDict(REPLY)


def fine_models(state):
    return Dumps({"role": "assistant", "tool_calls": [Dumps({"id": "c1", "type": "function", "function": Dumps(
        {"name": "read_thread", "arguments": {"thread_id": "t"}})})]})


def fine_odd_key(state):
    return {OddKey("role"): "assistant", OddKey("content"): "done"}
'''
#: each odd return and the error kind it is (every one a one-line agent error, none a verdict)
ODD_KINDS = {"broken_get": "AgentReturnedUnreadable", "broken_iter": "AgentReturnedUnreadable",
             "hostile": "AgentReturnedUnreadable", "hostile_list": "AgentReturnedUnreadable",
             "broken_dump": "AgentReturnedUnreadable", "nothing": "AgentReturnedNothing",
             "text": "AgentReturnedUnreadable", "words": "AgentReturnedUnreadable",
             "int_keys": "AgentReturnedUnreadable", "int_arg_keys": "AgentReturnedUnreadable",
             "object_arg": "AgentReturnedUnreadable", "set_arg": "AgentReturnedUnreadable",
             "nan_arg": "AgentReturnedUnreadable", "cycle": "AgentReturnedUnreadable",
             "deep": "AgentReturnedUnreadable", "huge_text": "AgentReturnedTooLarge",
             "huge_reply": "AgentReturnedTooLarge"}
ODD_MESSAGES = {"broken_get": "the agent returned BrokenGet, which cannot be read: reading it raised RuntimeError: "
                              "get is broken",
                "broken_iter": "reading it raised RuntimeError: iter is broken",
                "hostile": "the agent returned Hostile, which is no decision: a value of type Hostile at the top: "
                           "not JSON data",
                "int_keys": "a key that is int (1), not a string, at the top",
                "int_arg_keys": "a key that is int (1), not a string, at tool_calls[0].function.arguments",
                "set_arg": "a value of type set at tool_calls[0].function.arguments.thread_id: not JSON data",
                "nan_arg": "nan at tool_calls[0].function.arguments.thread_id: not a JSON number",
                "cycle": "it holds itself at tool_calls[0] (a cycle)",
                "deep": "nested deeper than 64 levels",
                "huge_reply": "holding more than 1,000,000 characters and values"}


def test_every_odd_return_is_a_one_line_agent_error(pytester: pytest.Pytester) -> None:
    """A dict subclass whose get() raises, objects whose __eq__/__iter__/model_dump raise, None, a
    string, a list of strings, keys that are no strings, sets, NaN, a cycle, 200 levels, 5 MB of
    text: each an agent error in one line (never the plugin's traceback, never a verdict), its
    record saying which.  Mappings, pydantic-style models at any depth and a str subclass key that
    are data are read as data and scored.
    """
    _demo_family(pytester.path, [_demo_case("stop", {"valid_actions": [{"tool": None}]}),
                                 _demo_case("read", {"valid_actions": [{"tool": "read_thread",
                                                                        "args": {"thread_id": "t"}}]})])
    pytester.makepyfile(odd_returns=ODD_RETURNS)
    fine = ["fine_subclass", "fine_models", "fine_odd_key"]
    args = [f"--tooleffect-agent={name}=odd_returns:{name}" for name in [*ODD_KINDS, *fine]]
    started = time.monotonic()
    result = pytester.runpytest("cases/", *args, "--tooleffect-report=r.json")
    assert time.monotonic() - started < 120
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out and "pytest_tooleffect/" not in out, out[-5000:]
    records = {(r["policy"], r["case_id"]): r for r in map(
        json.loads, (pytester.path / "reports" / "tooleffect-records.jsonl").read_text().splitlines())}
    assert len(records) == 2 * (len(ODD_KINDS) + len(fine))
    for (policy, case), rec in records.items():
        if policy in fine:
            assert rec["outcome"] == "scored", rec
            calls = policy == "fine_models"  # read as the call it is; the others as the reply they are
            expected = {("stop", False): "ok_no_tool", ("read", False): "none_when_tool_needed",
                        ("stop", True): "tool_when_none_needed", ("read", True): "ok"}[(case, calls)]
            assert rec["verdict"]["kind"] == expected, rec
            continue
        error = rec["error"]
        assert rec["outcome"] == "error" and rec["verdict"] is None and error["type"] == ODD_KINDS[policy], rec
        assert "\n" not in error["message"] and len(error["message"]) <= 500 and "traceback" not in error
        assert ODD_MESSAGES.get(policy, "") in error["message"], error
    # in the run's output each is one line: the section under its "ERROR at setup" header holds it alone
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in result.stdout.lines:
        header = re.match(r"^_+ ERROR at setup of demo/(\w+)\[(\w+)\] _+$", line)
        if header:
            current = sections.setdefault(f"{header[1]}[{header[2]}]", [])
        elif re.match(r"^[=_]{3,}", line):
            current = None
        elif current is not None and line.strip():
            current.append(line)
    assert sorted(sections) == sorted(f"{c}[{p}]" for p in ODD_KINDS for c in ("read", "stop"))
    for name, lines in sections.items():
        kind = ODD_KINDS[name.split("[")[1].rstrip("]")]
        assert len(lines) == 1 and lines[0].startswith(f"agent error (not scored): {kind}: "), (name, lines)
    result.assert_outcomes(errors=2 * len(ODD_KINDS), passed=3, failed=3)
    report = json.loads((pytester.path / "r.json").read_text())
    assert sum(b["n_errors"] for b in report["blocks"]) == 2 * len(ODD_KINDS)


LEAKY_AGENTS = '''
import atexit
import concurrent.futures
import os
import sys
import threading
import time

REPLY = {"role": "assistant", "content": "done"}
_stuck = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agent-pool")
_idle = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="idle-pool")


@atexit.register
def _said_goodbye():
    with open(os.environ["EXIT_HANDLER_LOG"], "a") as fh:
        fh.write(f"{os.getpid()}\\\\n")


def leaks(state):
    threading.Thread(target=time.sleep, args=(3600,), name="agent-poller", daemon=False).start()
    return REPLY


def pool_leaks(state):
    _stuck.submit(time.sleep, 3600)
    return REPLY


def idle_pool(state):
    _idle.submit(time.sleep, 0.01).result()
    return REPLY


async def async_leaks(state):
    threading.Thread(target=time.sleep, args=(3600,), name="async-poller", daemon=False).start()
    return REPLY
'''


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", [0, 2])
def test_an_agent_that_leaves_a_thread_running_does_not_keep_pytest_alive(pytester: pytest.Pytester,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          workers: int) -> None:
    """Non-daemon threads and a thread pool task that never return, started by sync and async
    agents: the report and the records are written, the threads are named on stderr, the exit
    handlers run, and the process ends with the run's own status (1: a decision failed) instead of
    waiting for them forever.  An idle pool's workers are no leak: never named.
    """
    _demo_family(pytester.path, [_demo_case("stop", {"valid_actions": [{"tool": None}]}),
                                 _demo_case("read", {"valid_actions": [{"tool": "read_thread",
                                                                        "args": {"thread_id": "t"}}]})])
    pytester.makepyfile(leaky_agents=LEAKY_AGENTS)
    goodbyes = pytester.path / "exit-handlers.log"
    monkeypatch.setenv("EXIT_HANDLER_LOG", str(goodbyes))
    names = ["leaks", "pool_leaks", "idle_pool", "async_leaks"]
    started = time.monotonic()
    result = pytester.runpytest_subprocess("cases/", *[f"--tooleffect-agent={n}=leaky_agents:{n}" for n in names],
                                           "--tooleffect-report=r.json", "-n", str(workers), timeout=180)
    assert time.monotonic() - started < 180
    result.assert_outcomes(passed=4, failed=4)  # each agent replies: right at "stop", wrong at "read"
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = json.loads((pytester.path / "r.json").read_text())
    assert sum(b["n_scored"] for b in report["blocks"]) == 8
    # at -n 0 the process says so on stderr as it ends; a worker's stderr reaches the terminal only while
    # the controller still captures, so the workers hand their non-daemon threads to the controller's summary
    out, err = result.stdout.str(), result.stderr.str()
    said = [line for line in (err if workers == 0 else out).splitlines() if line.startswith("tooleffect")
            and "still running" in line]
    assert said, out[-3000:] + err[-3000:]
    text = "\n".join(said)
    leaked = [("agent-poller", "leaky_agents.leaks"), ("async-poller", "leaky_agents.async_leaks")]
    if workers == 0:  # a pool worker is told stuck from idle at shutdown only: named on stderr, best effort under -n
        leaked.append(("agent-pool_0", "leaky_agents.pool_leaks"))
    for name, agent in leaked:
        # the agent whose turn started it, with any whose turn overlapped (async turns run beside sync ones)
        named = re.search(rf"'{name}'(?: ×\d+)? \(started during a turn of ([^)]*)\)", text)
        assert named and agent in named[1].split(" or "), text
    assert "idle-pool" not in text
    assert ("with the run's exit status 1" in text) if workers == 0 else ("when worker gw" in text)
    assert goodbyes.read_text().split(), "the exit handlers did not run"


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--tooleffect-agent", "x`\n### ✅ forged\x1b[2J=agents_under_test:nothing",
     "the policy name 'x`\\n### ✅ forged\\x1b[2J' holds the character U+000A (a control character or a "
     "bidirectional override): names are shown in test ids and on the terminal"),
    ("--tooleffect-agent", "agent\u202e=agents_under_test:nothing", "holds the character U+202E"),
    ("--tooleffect-model", "openai/gpt\x1b]0;title\x07", "the model name (the policy's name, shown in test ids) "
                                                        "holds the character U+001B"),
], ids=["agent name with a newline and ESC", "agent name with a bidi override", "model with an OSC escape"])
def test_a_policy_name_from_the_command_line_with_control_characters_is_refused(
        pytester: pytest.Pytester, option: str, value: str, said: str) -> None:
    """As a family's or a pyproject policy's name is: before, the agent's name reached pytest's test
    ids raw (an ESC and a real newline in the failure header), and a model name a collection traceback."""
    from tests.demo_family import write_demo

    write_demo(pytester.path)
    pytester.makepyfile(agents_under_test="def nothing(state):\n    return {'tool_calls': []}\n")
    result = pytester.runpytest("cases/", f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"error: argument {option}: {value!r}: " in err and said in err, err
    assert "\x1b" not in err and "Traceback" not in err
