"""The report's run metadata: start and end time, the command, versions read from package metadata
(litellm never imported for it), the cases' git commit, each policy's parameters without a secret,
and the failing record ids of each block; the report keeps to its generated schema.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from importlib import metadata
from pathlib import Path

import jsonschema
import pytest

from pytest_tooleffect.formats import Policy, policy_params
from pytest_tooleffect.options import OPT_AGENT, OPT_POLICY, OPT_RECORDS, OPT_REPORT
from pytest_tooleffect.report.runinfo import git_state
from tests.conftest import generated_report_schema
from tests.demo_family import CASES, write_demo

AGENT = "def decide(state):\n    return {'tool_calls': []}\n"
PYPROJECT = """
[tool.tooleffect.policies.mine]
agent = "myagent:decide"
temperature = 0.3

[tool.tooleffect.policies.mine.settings]
api_key = "sk-canary-1"
depth = 3
[tool.tooleffect.policies.mine.settings.nested]
auth_token = "sk-canary-2"
keep = "me"
"""
# which of sys.modules the run imported, written at the very end of the session
SPY = """
import json, sys

def pytest_unconfigure(config):
    with open("modules.json", "w") as fh:
        json.dump(sorted(m for m in sys.modules if m.split(".")[0] == "litellm"), fh)
"""


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.subprocess
def test_the_report_says_when_how_with_what_and_on_which_commit(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, CASES)
    (pytester.path / "myagent.py").write_text(AGENT)
    pytester.makepyprojecttoml(PYPROJECT)
    pytester.makeconftest(SPY)
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "cases", "oracle")
    _git(pytester.path, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "cases")
    head = _git(pytester.path, "rev-parse", "HEAD")
    args = ["cases/", OPT_POLICY, "replay", OPT_POLICY, "mine", OPT_REPORT, "r.json", OPT_RECORDS, "rec.jsonl",
            "-p", "no:randomly"]
    before = datetime.now().astimezone()
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = (pytester.path / "r.json").read_text()
    report = json.loads(text)
    jsonschema.validate(report, generated_report_schema())
    run = report["run"]
    start, end = (datetime.fromisoformat(run[k].replace("Z", "+00:00")) for k in ("started_at", "ended_at"))
    assert before.timestamp() - 1 <= start.timestamp() <= end.timestamp() <= datetime.now().timestamp() + 1
    assert run["command"][-len(args):] == args  # after the --basetemp pytester adds
    assert Path(run["directory"]) == pytester.path
    assert run["versions"]["plugin"] == metadata.version("pytest-tooleffect")
    assert run["versions"]["pytest"] == pytest.__version__
    assert run["versions"]["litellm"] == metadata.version("litellm")
    assert json.loads((pytester.path / "modules.json").read_text()) == []  # read from metadata, never imported
    assert run["cases_git"] == {"demo": {"commit": head, "dirty": False}}
    assert run["policies"]["replay"] == {"name": "replay"}
    assert run["policies"]["mine"] == {"name": "mine", "agent": "myagent:decide", "temperature": 0.3,
                                       "settings": {"depth": 3, "nested": {"keep": "me"}}}
    assert "sk-canary" not in text
    records = [json.loads(line) for line in (pytester.path / "rec.jsonl").read_text().splitlines()]
    for block in report["blocks"]:
        mine = [r for r in records if r["policy"] == block["policy"] and r["outcome"] == "scored"]
        failing = sorted(r["id"] for r in mine if r["verdict"]["kind"] not in ("ok", "ok_no_tool"))
        assert failing and block["failing"] == failing
    # an edited case file: the commit is no longer the whole story
    cases = pytester.path / "cases" / "demo" / "cases.jsonl"
    cases.write_text(cases.read_text() + "\n")
    pytester.runpytest_subprocess(*args)
    assert json.loads((pytester.path / "r.json").read_text())["run"]["cases_git"]["demo"]["dirty"] is True


def test_cases_outside_git_have_no_commit(tmp_path: Path) -> None:
    assert git_state([tmp_path]) == {}


def test_no_secret_reaches_a_policys_parameters() -> None:
    policy = Policy(name="p", model="openai/x", api_base="http://127.0.0.1:9/v1", max_tokens=64,
                    tool_descriptions={"get_token": "keeps tool names"},
                    settings={"password": "x", "api-key": "y", "Authorization": "z", "items": [{"secret": 1, "n": 2}],
                              "tokens_per_call": 5})
    assert policy_params(policy) == {"name": "p", "model": "openai/x", "api_base": "http://127.0.0.1:9/v1",
                                     "max_tokens": 64, "tool_descriptions": {"get_token": "keeps tool names"},
                                     "settings": {"items": [{"n": 2}], "tokens_per_call": 5}}


def test_an_agent_policy_run_alone_names_its_agent(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, CASES[:2])
    (pytester.path / "myagent.py").write_text(AGENT)
    pytester.runpytest("cases/", OPT_AGENT, "mine=myagent:decide", OPT_REPORT, "r.json")
    run = json.loads((pytester.path / "r.json").read_text())["run"]
    assert run["policies"] == {"mine": {"name": "mine", "agent": "myagent:decide"}}
    assert run["cases_git"] == {}  # not in a git work tree
