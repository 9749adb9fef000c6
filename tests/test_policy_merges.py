"""Logs made by two different policies under one policy name are not one run: ``tooleffect report``
refuses to merge them, naming both policies and both logs (break-it row 77: shards of two agents
merged as one complete run).  A baseline made by another agent under the same name is what a
baseline is for: comparing against it is never refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.formats import Policy, policy_identity
from pytest_tooleffect.options import OPT_AGENT, OPT_BASELINE, OPT_RECORDS, OPT_SHARD
from tests.demo_family import CASES, write_demo

CALM = "def decide(state):\n    return {'role': 'assistant', 'content': 'Done.'}\n"
HASTY = ("def decide(state):\n    return {'role': 'assistant', 'tool_calls': [{'id': 'c', 'type': 'function', "
         "'function': {'name': 'read_thread', 'arguments': '{\"thread_id\": \"th-1\"}'}}]}\n")


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    write_demo(pytester.path, CASES[:4])
    pytester.makepyfile(calm=CALM, hasty=HASTY)
    return pytester.path


def _shard(pytester: pytest.Pytester, i: int, agent: str) -> Path:
    log = pytester.path / "logs" / f"s{i}.jsonl"
    pytester.runpytest("cases/", f"{OPT_SHARD}={i}/2", f"{OPT_AGENT}=my-agent={agent}", f"{OPT_RECORDS}={log}")
    assert log.is_file()
    return log


def test_shards_of_two_agents_under_one_name_are_refused_naming_both(
        project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = _shard(pytester, 1, "calm:decide"), _shard(pytester, 2, "hasty:decide")
    capsys.readouterr()
    assert main(["report", str(project / "logs")]) == 2
    err = capsys.readouterr().err
    assert "policy my-agent: agent calm:decide (" in err and f") in {one} but agent hasty:decide (" in err
    assert f") in {two}: one policy name, two policies" in err


def test_shards_of_one_agent_merge(project: Path, pytester: pytest.Pytester,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    _shard(pytester, 1, "calm:decide"), _shard(pytester, 2, "calm:decide")
    capsys.readouterr()  # the runs' own output
    status = main(["report", str(project / "logs"), "--json"])
    out = capsys.readouterr()
    assert status in (0, 1), out.err  # the gates' verdict, not a refusal
    assert json.loads(out.out)["status"] == "complete"


def test_the_identity_tells_agents_models_api_bases_and_settings_apart() -> None:
    a = policy_identity(Policy(name="p", agent="m:f"))
    assert a[0] == "agent m:f" and a != policy_identity(Policy(name="p", agent="m:g"))
    assert a != policy_identity(Policy(name="p", agent="m:f", settings={"depth": 2}))
    assert a == policy_identity(Policy(name="q", agent="m:f", timeout_s=9))  # the name and timeout are no part
    assert policy_identity(Policy(name="p", model="openai/x", api_base="http://127.0.0.1:1/v1"))[0] == \
        "model openai/x at http://127.0.0.1:1/v1"
    assert policy_identity(Policy(name="p", model="openai/x", api_base="http://127.0.0.1:1/v1")) != \
        policy_identity(Policy(name="p", model="openai/x", api_base="http://127.0.0.1:2/v1"))


def test_a_baseline_of_another_agent_under_the_name_is_compared_not_refused(
        project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    accepted = project / "accepted.jsonl"
    assert pytester.runpytest("cases/", f"{OPT_AGENT}=my-agent=calm:decide", f"{OPT_RECORDS}={accepted}").ret in (0, 1)
    assert main(["baseline", "save", str(accepted), "--out", str(project / "base.json")]) == 0
    later = project / "later.jsonl"
    result = pytester.runpytest("cases/", f"{OPT_AGENT}=my-agent=hasty:decide", f"{OPT_BASELINE}=base.json",
                                f"{OPT_RECORDS}={later}")
    assert result.ret in (0, 1)  # compared: a verdict, never a usage error
    result.stdout.no_fnmatch_line("*one policy name, two policies*")
    said = ("policy my-agent: agent calm:decide (*) in the baseline, agent hasty:decide (*) now (compared: another "
            "policy under the same name)")
    result.stdout.fnmatch_lines([said])
    capsys.readouterr()
    assert main(["compare", str(project / "base.json"), str(later)]) in (0, 1)
    assert "policy my-agent: agent calm:decide (" in capsys.readouterr().out


def test_a_baseline_or_a_comparison_of_one_log_with_two_policies_under_one_name_is_refused(
        project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = _shard(pytester, 1, "calm:decide"), _shard(pytester, 2, "hasty:decide")
    mixed = project / "mixed.jsonl"
    mixed.write_text(one.read_text() + two.read_text())
    capsys.readouterr()
    assert main(["compare", str(mixed), str(one)]) == 2
    err = capsys.readouterr().err
    assert "policy my-agent: agent calm:decide (" in err and "but agent hasty:decide (" in err
    assert "one policy name, two policies" in err


@pytest.mark.parametrize("command", ["html", "plan"])
def test_html_and_plan_refuse_one_log_of_two_policies_under_one_name_as_report_does(
        project: Path, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """Break-it row 323: html drew two agents' decisions under one policy name, status complete, exit 0."""
    one, two = _shard(pytester, 1, "calm:decide"), _shard(pytester, 2, "hasty:decide")
    mixed = project / "mixed.jsonl"
    mixed.write_text(one.read_text() + two.read_text())
    capsys.readouterr()
    assert main(["report", str(mixed)]) == 2
    said = capsys.readouterr().err.replace("tooleffect report: ", f"tooleffect {command}: ")
    page = project / "mixed.html"
    assert main([command, str(mixed), *(["--out", str(page)] if command == "html" else [])]) == 2
    out = capsys.readouterr()
    assert out.err == said and "one policy name, two policies" in said and out.out == ""
    assert not page.exists()
