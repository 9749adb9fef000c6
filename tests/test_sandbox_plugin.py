"""World cases in a pytest run: the sandboxed scheduling family, per-worker pools, Ctrl-C, kept
sandboxes, bad world input, injected faults and self-steered rollouts (against a real Docker
engine and a local OpenAI-compatible server).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import docker
import jsonschema
import pytest
import yaml

from pytest_tooleffect.options import (
    INI_IMAGE,
    OPT_API_BASE,
    OPT_KEEP,
    OPT_MODEL,
    OPT_RECORDS,
    OPT_REPORT,
    OPT_ROLLOUT,
    OPT_SANDBOX,
)
from pytest_tooleffect.sandbox.docker import remove_container
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.conftest import REPO, DockerTcp, generated_report_schema

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
REPORT_SCHEMA = generated_report_schema()

FAULTY_ON_EFFECT = {"sch-dup-01": "forbidden_effect", "sch-dup-02": "forbidden_effect",
                    "sch-dup-03": "forbidden_effect", "sch-one-04": "effect_missing", "sch-one-07": "effect_missing",
                    "sch-sev-06": "effect_missing"}


def _scheduling(pytester: pytest.Pytester) -> None:
    shutil.copytree(REPO / "cases" / "scheduling", pytester.path / "cases" / "scheduling")
    (pytester.path / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "scheduling.yaml", pytester.path / "oracle" / "scheduling.yaml")
    shutil.copy(REPO / "conftest.py", pytester.path / "conftest.py")


def _own_cases(folder: Path) -> None:
    """The shipped scheduling family in ``folder`` without its cases: a test writes its own, so the
    family's quota and population (the sampled set's, checked against the cases) go too.
    """
    (folder / "cases.yaml").unlink()
    family = folder / "family.yaml"
    family.write_text("".join(line for line in family.read_text().splitlines(keepends=True)
                              if not line.startswith(("quota:", "population:"))))


def _records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["case_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def _run_containers(run: str) -> list[Any]:
    client = docker.from_env()
    try:
        return list(client.containers.list(all=True, filters={"label": f"tooleffect.run={run}"}))
    finally:
        client.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_scheduling_runs_in_docker_and_its_faults_fail_on_their_effect(pytester: pytest.Pytester,
                                                                       workers: int) -> None:
    _scheduling(pytester)
    result = pytester.runpytest("cases/", "-n", str(workers), OPT_RECORDS, "rec.jsonl", OPT_REPORT, "report.json")
    result.assert_outcomes(passed=32, failed=17)  # 4 wrong_reply by the stricter reply check (docs/report.md)
    recs = _records(pytester.path / "rec.jsonl")
    assert len(recs) == 49
    assert all(r["sandbox"]["provider"] == "docker" and r["effect"] is not None for r in recs.values())
    for cid, kind in FAULTY_ON_EFFECT.items():
        assert recs[cid]["effect"]["kind"] == kind, cid
    dup = recs["sch-dup-02"]["effect"]
    assert [e["thread_id"] for e in dup["diff"]["events"]["inserted"]] == ["th-5521"]
    assert any("exactly one event for th-5521 (found 2)" in f for f in dup["failures"])
    tz = recs["sch-one-04"]["effect"]["diff"]["events"]["inserted"][0]
    assert tz["start"] == "2025-03-19T14:00:00+00:00"  # 14:00Z, an hour after the 14:00 Madrid the label asks for
    assert sum(1 for r in recs.values() if r["effect"]["passed"]) == 39
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, REPORT_SCHEMA)
    eff = report["blocks"][0]["effects"]
    assert eff["n"] == 49 and eff["micro_display"] == "79.6"
    assert eff["sandbox"]["restrictions"] == sorted(["network_none", "read_only_root", "cap_drop_all",
                                                     "no_new_privileges", "non_root_user", "init", "pids_limit",
                                                     "memory_limit"])
    result.stdout.fnmatch_lines(["*effect ok*effect %*", "*effects (49 decisions run in a sandbox)*",
                                 "*sandbox docker: cap_drop_all, init*"])
    runs = {r["sandbox"]["run"] for r in recs.values()}
    assert len(runs) == 1
    assert _run_containers(runs.pop()) == []  # every container removed at the end
    by_worker: dict[str, set[str]] = {}
    for r in recs.values():
        by_worker.setdefault(r["sandbox"]["worker"], set()).add(r["sandbox"]["id"])
    if workers:
        assert len(by_worker) == 2
        ids = list(by_worker.values())
        assert not ids[0] & ids[1]  # no container served two workers
    assert all(len(ids) == 1 for ids in by_worker.values())  # one warm container per process


@pytest.mark.subprocess
def test_scheduling_runs_on_a_remote_engine_through_its_api_alone(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _scheduling(pytester)
    endpoint = DockerTcp()  # the engine reached as a remote one is: its API on a TCP port
    monkeypatch.setenv("DOCKER_HOST", endpoint.url)
    # the run's own temporary folder: another test's local sandboxes (te-*) do not land in it
    tmp = pytester.path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    try:
        result = pytester.runpytest_subprocess("cases/", "-n", "2", OPT_RECORDS, "rec.jsonl")
    finally:
        endpoint.stop()
    result.assert_outcomes(passed=32, failed=17)  # 4 wrong_reply by the stricter reply check (docs/report.md)
    recs = _records(pytester.path / "rec.jsonl")
    assert len(recs) == 49 and all(r["sandbox"]["provider"] == "docker" for r in recs.values())
    for cid, kind in FAULTY_ON_EFFECT.items():
        assert recs[cid]["effect"]["kind"] == kind, cid
    assert sum(1 for r in recs.values() if r["effect"]["passed"]) == 39  # as on the local socket
    assert not list(tmp.glob("te-*"))  # no host directory for any sandbox
    monkeypatch.delenv("DOCKER_HOST")
    assert _run_containers(next(iter(recs.values()))["sandbox"]["run"]) == []


def test_ctrl_c_removes_the_containers_and_keeps_finished_records(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    with open(pytester.path / "conftest.py", "a") as fh:
        fh.write("\n\n_seen = []\n\ndef pytest_runtest_call(item):\n    _seen.append(item)\n"
                 "    if len(_seen) == 6:\n        raise KeyboardInterrupt\n")
    # in this process pytester raises the run's KeyboardInterrupt again unless told not to
    result = pytester.runpytest_inprocess("cases/", "-p", "no:randomly", OPT_RECORDS, "rec.jsonl", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    recs = _records(pytester.path / "rec.jsonl")
    assert len(recs) == 5
    run = next(iter(recs.values()))["sandbox"]["run"]
    assert _run_containers(run) == []


def test_keep_failed_leaves_the_failed_items_container(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    result = pytester.runpytest("cases/", "-k", "sch-dup-01 or sch-conf-01", f"{OPT_KEEP}=failed",
                                OPT_RECORDS, "rec.jsonl", "-rA")
    result.assert_outcomes(passed=1, failed=1)
    recs = _records(pytester.path / "rec.jsonl")
    run = recs["sch-dup-01"]["sandbox"]["run"]
    left = _run_containers(run)
    try:
        assert len(left) == 1 and left[0].name.startswith("tooleffect-kept-") and left[0].status == "running"
        result.stdout.fnmatch_lines([f"*sandbox kept: container tooleffect-kept-{left[0].id[:12]}*"])
    finally:
        for c in left:
            remove_container(c)  # the container and its socket folder


BAD_CASES = [
    {"id": "bad-world", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
     "messages": [{"role": "user", "content": "hi"}], "source": "authored",
     "label": {"valid_actions": [{"tool": None}]}, "recorded": {"text": "hello"},
     "world": {"calendar": [{"id": 1}], "threads": [{"thread_id": "t", "colour": "red"}]},
     "expected_effects": [{"table": "events", "where": {"room": "A"}}],
     "faults": {"book_flight": 503}},
    {"id": "bad-effect", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
     "messages": [{"role": "user", "content": "hi"}], "source": "authored",
     "label": {"valid_actions": [{"tool": None}]}, "recorded": {"text": "hello"},
     "world": {"threads": [{"thread_id": "t"}]},
     "expected_effects": [{"table": "events", "count": 1, "at_most": 2}]},
    {"id": "good", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
     "messages": [{"role": "user", "content": "hi"}], "source": "authored",
     "label": {"valid_actions": [{"tool": None}]}, "recorded": {"text": "hello"},
     "world": {"threads": [{"thread_id": "t"}]}, "expected_effects": [{"unchanged": ["events"]}]},
]


def test_bad_world_input_names_file_case_and_field_and_the_rest_runs(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    _own_cases(pytester.path / "cases" / "scheduling")
    (pytester.path / "cases" / "scheduling" / "bad.yaml").write_text(yaml.safe_dump(BAD_CASES))
    result = pytester.runpytest("cases/", "-rA")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*bad.yaml: case bad-effect: expected_effects[[]0[]]: *give count, or at_least / at_most, not both*",
        "*bad.yaml: case bad-world: world.calendar: no table 'calendar'*",
        "*bad.yaml: case bad-world: world.threads[[]0[]].colour: no column 'colour' in threads*",
        "*bad.yaml: case bad-world: expected_effects[[]0[]].where.room: no column 'room' in events*",
        "*bad.yaml: case bad-world: faults.book_flight: unknown tool 'book_flight'*",
    ])


def test_a_world_case_in_a_family_without_a_sandbox_is_an_error(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    family = pytester.path / "cases" / "scheduling" / "family.yaml"
    family.write_text(family.read_text().replace("sandbox: {world: scheduling}", ""))
    result = pytester.runpytest("cases/", "-k", "sch-conf-01")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*case sch-conf-01: world: family scheduling declares no sandbox*"])


def test_missing_image_is_an_error_outcome_not_a_verdict(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    result = pytester.runpytest("cases/", "-k", "sch-conf-01 or sch-dup-01", OPT_RECORDS, "rec.jsonl",
                                "-o", f"{INI_IMAGE}=tooleffect-sandbox:not-built")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*sandbox error (not scored): sandbox image tooleffect-sandbox:not-built is not "
                                 "built*never pulled*"])
    recs = _records(pytester.path / "rec.jsonl")  # the errors are recorded, and excluded from every rate
    assert {r["outcome"] for r in recs.values()} == {"error"}
    assert all(r["error"]["type"] == "SandboxError" and "not built" in r["error"]["message"] for r in recs.values())


# ------------------------------------------------------------------------- faults and rollouts

ROLLOUT_CASES = [
    ("retry", {"calendar.create_event": 503}),
    ("give-up", {"calendar.create_event": {"kind": "timeout", "after_ms": 30}}),
    ("duplicate", {}),
]
CREATE_ARGS = {"thread_id": "th-9001", "title": "Roadmap sync", "start": "2025-03-20T14:00:00",
               "attendees": ["tom.okafor@northwind.co.uk"]}
STEPS = {  # what the scripted model answers at each step of each case
    "retry": [Reply(tool_calls=[("calendar_create_event", CREATE_ARGS)]),
              Reply(tool_calls=[("calendar_create_event", CREATE_ARGS)]),
              Reply(text="Booked: Roadmap sync, Thursday 14:00.")],
    "give-up": [Reply(tool_calls=[("calendar_create_event", CREATE_ARGS)]),
                Reply(text="The calendar did not answer, so nothing is booked yet; shall I try again later?")],
    "duplicate": [Reply(tool_calls=[("read_thread", {"thread_id": "th-9001"})]),
                  Reply(tool_calls=[("calendar_create_event", CREATE_ARGS)]),
                  Reply(tool_calls=[("calendar_create_event", CREATE_ARGS)]),
                  Reply(text="Done.")],
}


def _rollout_case(name: str, faults: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"ro-{name}", "placement": {"step": 0, "run_length": 3, "bucket": "first"}, "source": "authored",
        "timezone": "Europe/Madrid", "state": {"thread_id": "th-9001"},
        "messages": [{"role": "user", "content": f"[{name}] Tom and I agreed on Thursday 20 March 14:00 for the "
                                                 "roadmap sync (th-9001). Please book it."}],
        "label": {"valid_actions": [{"tool": "calendar.create_event", "args": CREATE_ARGS},
                                    {"tool": "read_thread", "args": {"thread_id": "th-9001"}}]},
        "world": {"threads": [{"thread_id": "th-9001", "subject": "Roadmap sync",
                               "participants": ["elena.marin@alba-labs.eu", "tom.okafor@northwind.co.uk"]}]},
        "expected_effects": [{"table": "events", "where": {"thread_id": "th-9001", "start": "2025-03-20T14:00:00"},
                              "count": 1}, {"only_changed": ["events"]}],
        "faults": faults,
    }


def _script(body: dict[str, Any]) -> Reply:
    messages = body.get("messages") or []
    text = json.dumps(messages[:2])
    for name, replies in STEPS.items():
        if f"[{name}]" in text:
            step = sum(1 for m in messages if m.get("role") == "assistant")
            return replies[min(step, len(replies) - 1)]
    return Reply(status=404)


@pytest.mark.parametrize("workers", [0, 2])
def test_rollouts_with_faults_report_recovery_and_single_step_beside_self_steered(
        pytester: pytest.Pytester, workers: int) -> None:
    _scheduling(pytester)
    folder = pytester.path / "cases" / "scheduling"
    _own_cases(folder)
    (folder / "rollouts.yaml").write_text(yaml.safe_dump([_rollout_case(n, f) for n, f in ROLLOUT_CASES]))
    with ScriptedServer(_script) as srv:
        result = pytester.runpytest("cases/", "-n", str(workers), OPT_MODEL, "openai/scripted", OPT_API_BASE,
                                    srv.base_url, OPT_ROLLOUT, "3", OPT_RECORDS, "rec.jsonl", OPT_REPORT, "report.json")
        requests = srv.requests
    result.assert_outcomes(passed=1, failed=2)
    recs = _records(pytester.path / "rec.jsonl")
    assert {r["sandbox"]["worker"] == "main" for r in recs.values()} == {not workers}  # where the rollouts ran
    retry, give_up, dup = recs["ro-retry"], recs["ro-give-up"], recs["ro-duplicate"]
    assert [r["verdict"]["kind"] for r in (retry, give_up, dup)] == ["ok", "ok", "ok"]  # every first step is right
    assert retry["recovery"] == "retried" and retry["effect"]["passed"]
    assert [c["fault"] for c in retry["steps"][0]["calls"]] == ["status"]
    assert {k: v for k, v in retry["rollout"].items() if k != "cost"} == {"steps": 3, "stopped": "no_tool",
                                                                         "limit": 3, "self_steered": True}
    assert retry["rollout"]["cost"]["input_tokens"] == 300 and retry["rollout"]["cost"]["output_tokens"] == 60
    assert give_up["recovery"] == "told_user" and give_up["effect"]["kind"] == "effect_missing"
    assert dup["recovery"] is None and dup["rollout"]["stopped"] == "max_steps"
    assert dup["effect"]["kind"] == "effect_missing" and "found 2" in dup["effect"]["failures"][0]
    assert all(s["cost"]["input_tokens"] == 100 and s["cost"]["latency_ms"] > 0 for s in dup["steps"])
    # the model saw the tool results of its own calls, the injected 503 among them
    second = [r for r in requests if "[retry]" in json.dumps(r["messages"][:2])][1]["messages"]
    assert second[-1]["role"] == "tool" and json.loads(second[-1]["content"])["error"]["status"] == 503
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, REPORT_SCHEMA)
    eff = report["blocks"][0]["effects"]
    assert eff["recovery"] == {"observed": 2, "recovered": 2, "rate_pct": 100.0, "rate_display": "100.0",
                               "by_kind": {"retried": 1, "other_path": 0, "told_user": 1, "none": 0,
                                           "not_observed": 0}}
    assert eff["rollout"]["single_step_display"] == "100.0" and eff["rollout"]["self_steered_display"] == "33.3"
    result.stdout.fnmatch_lines(["*recovery from injected faults: 100.0 % (2/2 observed; retried 1, told user 1)*",
                                 "*single-step (teacher-forced, upper bound; first decision, name + args) 100.0 %"
                                 " · self-steered (end state meets the effects) 33.3 %*"])  # one line when piped


def test_replay_fault_is_not_observed_without_a_rollout(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    folder = pytester.path / "cases" / "scheduling"
    _own_cases(folder)
    case = _rollout_case("retry", {"calendar.create_event": 503})
    case["recorded"] = {"tool_calls": [{"name": "calendar.create_event", "arguments": json.dumps(CREATE_ARGS)}]}
    (folder / "one.yaml").write_text(yaml.safe_dump([case]))
    result = pytester.runpytest("cases/", f"{OPT_SANDBOX}=local", OPT_RECORDS, "rec.jsonl")
    result.assert_outcomes(failed=1)
    rec = _records(pytester.path / "rec.jsonl")["ro-retry"]
    assert rec["recovery"] == "not_observed" and rec["effect"]["kind"] == "effect_missing"
    assert rec["sandbox"]["provider"] == "local" and rec["sandbox"]["restrictions"] == []


def test_a_rollout_without_a_live_policy_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    result = pytester.runpytest("cases/", OPT_ROLLOUT, "3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tooleffect-rollout 3: a rollout needs a live policy*"])


CUT_ENDPOINT = """

import os, signal, socket, time

import pytest

_items = []


@pytest.fixture(autouse=True)
def _cut_at_the_fifth(request):  # the engine's endpoint is lost once the fifth item's sandbox is reset
    _items.append(request.node)
    if len(_items) != 5:
        return
    request.getfixturevalue("tooleffect_sandbox")
    os.kill(int(os.environ["TOOLEFFECT_TEST_CUT_PID"]), signal.SIGTERM)
    port = int(os.environ["DOCKER_HOST"].rsplit(":", 1)[1])
    for _ in range(1000):  # until the endpoint is gone: the decision's calls then meet the cut stream
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.01)
    raise RuntimeError("the endpoint did not go away")
"""


@pytest.mark.subprocess
def test_an_engine_lost_mid_run_is_an_error_record_for_every_item_after(pytester: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint cut mid-run: the item whose stream is cut and every one after (image check,
    container start, reset) end as sandbox errors with a record and a one-line reason."""
    _scheduling(pytester)
    with open(pytester.path / "conftest.py", "a") as fh:
        fh.write(CUT_ENDPOINT)
    endpoint = DockerTcp()
    monkeypatch.setenv("DOCKER_HOST", endpoint.url)
    monkeypatch.setenv("TOOLEFFECT_TEST_CUT_PID", str(endpoint.process.pid))
    try:
        result = pytester.runpytest_subprocess("cases/", "-p", "no:randomly", OPT_RECORDS, "rec.jsonl",
                                               OPT_REPORT, "report.json")
    finally:
        endpoint.stop()
    out = result.stdout.str()
    recs = [json.loads(x) for x in (pytester.path / "rec.jsonl").read_text().splitlines()]
    assert len(recs) == 49 == len({r["id"] for r in recs}), out[-3000:]  # every item collected has its record
    errors = [r for r in recs if r["outcome"] == "error"]
    assert [r["outcome"] for r in recs] == ["scored"] * 4 + ["error"] * 45, out[-3000:]
    for r in errors:
        assert r["error"]["type"] == "SandboxError", r["error"]
        assert "\n" not in r["error"]["message"] and len(r["error"]["message"]) < 500, r["error"]
    assert any("Docker engine failed" in r["error"]["message"] for r in errors)
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["status"] == "incomplete"
    assert sum(b["n_scored"] + b["n_errors"] for b in report["blocks"]) == 49
    assert sum(b["n_errors"] for b in report["blocks"]) == len(errors)
    assert "requests.exceptions" not in out and "Traceback" not in out, out[-3000:]
    monkeypatch.delenv("DOCKER_HOST")
    left = _run_containers(recs[0]["sandbox"]["run"])  # the cut item's: out of the run's reach, ended by its lease
    for container in left:
        remove_container(container)
    assert len(left) <= 1


def test_a_rollout_with_the_sandbox_off_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    result = pytester.runpytest("cases/", f"{OPT_SANDBOX}=off", OPT_MODEL, "openai/scripted", OPT_API_BASE,
                                "http://127.0.0.1:9/v1", OPT_ROLLOUT, "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tooleffect-rollout 2: a rollout runs the policy's calls in a sandbox and "
                                 "--tooleffect-sandbox off runs none*"])


PLAIN_FAMILY = """\
name: plain
system_prompt: You help.
tools:
  - name: get_weather
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    annotations: {readOnlyHint: true}
oracle: rules.yaml
"""
PLAIN_CASE = {"id": "p1", "source": "authored", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
              "messages": [{"role": "user", "content": "weather in Paris?"}],
              "label": {"valid_actions": [{"tool": "get_weather", "args": {"city": "Paris"}}]}}
AGENT = '''\
def decide(state):
    if state.step == 1:
        return {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": state.tools[0]["function"]["name"] if "function" in state.tools[0]
                             else state.tools[0]["name"], "arguments": "{}"}}]}
    return {"role": "assistant", "content": "Done."}
'''


def test_a_rollout_names_the_families_it_did_not_reach(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    folder = pytester.path / "cases" / "scheduling"
    _own_cases(folder)
    (folder / "rollouts.yaml").write_text(yaml.safe_dump([_rollout_case("retry", {})]))
    plain = pytester.path / "cases" / "plain"
    plain.mkdir()
    (plain / "family.yaml").write_text(PLAIN_FAMILY)
    (plain / "rules.yaml").write_text("version: 1\n")
    (plain / "cases.yaml").write_text(yaml.safe_dump([PLAIN_CASE]))
    (pytester.path / "rollout_agent.py").write_text(AGENT)
    pytester.syspathinsert()
    result = pytester.runpytest("cases/", f"{OPT_SANDBOX}=local", "--tooleffect-agent", "rollout_agent:decide",
                                OPT_ROLLOUT, "3", OPT_RECORDS, "rec.jsonl")
    recs = _records(pytester.path / "rec.jsonl")
    assert recs["ro-retry"]["rollout"]["limit"] == 3 and recs["p1"].get("rollout") is None
    notes = [line for line in result.outlines if "did not apply" in line]
    assert notes == ["tooleffect: --tooleffect-rollout 3 did not apply to family plain: none of its decisions ran in "
                     "a sandbox (its cases have no world: family.yaml sandbox:); its decisions are single-step, "
                     "teacher-forced"]
    # without the option, no note
    result = pytester.runpytest("cases/", f"{OPT_SANDBOX}=local", "--tooleffect-agent", "rollout_agent:decide")
    assert not [line for line in result.outlines if "did not apply" in line]


CLAIMED = {"thread_id": "th-1", "title": "Budget sync", "start": "2025-03-20T10:00:00",
           "attendees": ["dana@example.com"]}
PHANTOM_CASES = [
    {"id": f"claim-{fault}", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
     "messages": [{"role": "user", "content": "Book the budget sync from th-1 on Thursday 20 March at 10:00."}],
     "source": "authored", "timezone": "Europe/Madrid", "state": {"thread_id": "th-1"},
     "label": {"valid_actions": [{"tool": "calendar.create_event", "args": CLAIMED}]},
     "recorded": {"text": "I've booked the budget sync for Thursday 20 March at 10:00.",
                  "tool_calls": [{"name": "calendar.create_event", "arguments": json.dumps(CLAIMED)}]},
     "world": {"threads": [{"thread_id": "th-1", "subject": "Budget sync", "messages": []}]},
     **({"faults": {"calendar.create_event": fault}} if fault else {})}
    for fault in (0, 503)
]


def test_a_write_claimed_while_the_sandbox_shows_no_change_is_a_phantom_action(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    _own_cases(pytester.path / "cases" / "scheduling")
    (pytester.path / "cases" / "scheduling" / "claims.yaml").write_text(yaml.safe_dump(PHANTOM_CASES))
    result = pytester.runpytest("cases/", OPT_RECORDS, "rec.jsonl", "-rA")
    recs = _records(pytester.path / "rec.jsonl")
    done, failed = recs["claim-0"], recs["claim-503"]
    assert done["verdict"]["kind"] == "ok" and done["verdict"].get("phantom") is None
    assert done["effect"]["diff"]["events"]["inserted"]
    assert failed["effect"]["diff"] == {}
    assert failed["verdict"]["kind"] == "phantom_action"
    assert failed["verdict"]["phantom"]["why"] == \
        "calendar.create_event was called, but the sandbox's world did not change"
    result.stdout.fnmatch_lines(["*phantom_action*claims*I've booked the budget sync*world did not change"])
