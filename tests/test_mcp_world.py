"""The MCP world in a pytest run: a real MCP server (tests/fixtures) acting on a directory, its
hints checked against the calls' effects, and its failures as error records with its stderr.

The servers are real processes started by the sandbox service (the local provider, so the host's
``mcp`` SDK serves them); the same world runs in the Docker image in tests/test_mcp_git.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pytest_tooleffect.options import OPT_HTML, OPT_RECORDS, OPT_REPORT, OPT_SANDBOX, OPT_SUMMARY_MD
from tests.conftest import generated_report_schema

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
FIXTURES = Path(__file__).parent / "fixtures"
LIAR = [sys.executable, str(FIXTURES / "mcp_liar_server.py"), "{root}"]
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
ADDITIVE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
TOOLS = [
    {"name": "read_note", "description": "The note's text.", "parameters": NAME, "annotations": READ_ONLY},
    {"name": "peek_note", "description": "The note's first line.", "parameters": NAME, "annotations": READ_ONLY,
     "title": "Peek at a note"},
    {"name": "append_line", "description": "Append a line.", "annotations": ADDITIVE,
     "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "line": {"type": "string"}}}},
    {"name": "tidy", "description": "Tidy a note.", "parameters": NAME, "annotations": ADDITIVE},
    {"name": "crash", "description": "Exit."}, {"name": "hang", "description": "Never answer."},
    {"name": "grow", "description": "Add a tool."},
    {"name": "count", "description": "Count the notes.",
     "outputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}}},
]


def _case(cid: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    first = calls[0]
    return {"id": cid, "source": "authored", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
            "messages": [{"role": "user", "content": "Look at my notes."}],
            "label": {"valid_actions": [{"parallel": [{"tool": n, "args": a} for n, a in calls]}] if len(calls) > 1
                      else [{"tool": first[0], "args": first[1]}]},
            "recorded": {"tool_calls": [{"name": n, "arguments": json.dumps(a)} for n, a in calls]},
            "world": {"setup": [{"step": 1, "op": "write", "path": "a.txt", "content": "hello\nworld\n"}]}}


def _family(pytester: pytest.Pytester, command: list[str], cases: list[dict[str, Any]], timeout_s: float = 20) -> None:
    folder = pytester.path / "cases" / "notes"
    folder.mkdir(parents=True)
    (folder / "tools.json").write_text(json.dumps(TOOLS))
    (folder / "family.yaml").write_text(yaml.safe_dump({
        "name": "notes", "tools_file": "tools.json",
        "sandbox": {"world": "mcp", "mcp": {"command": command, "probe": "files", "root_alias": "/notes",
                                            "timeout_s": timeout_s}}}))
    (folder / "cases.yaml").write_text(yaml.safe_dump(cases))


def _records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["case_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_a_read_only_tool_that_writes_is_the_servers_violation_not_the_agents_failure(
        pytester: pytest.Pytester) -> None:
    _family(pytester, LIAR, [
        _case("read-01", [("read_note", {"name": "a.txt"})]),
        _case("peek-01", [("peek_note", {"name": "a.txt"})]),
        _case("append-01", [("append_line", {"name": "a.txt", "line": "x"}),
                            ("append_line", {"name": "a.txt", "line": "x"})]),
        _case("tidy-01", [("tidy", {"name": "a.txt"})]),
        _case("missing-01", [("read_note", {"name": "gone.txt"})]),
    ])
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider", OPT_SANDBOX, "local", OPT_RECORDS, "rec.jsonl",
                                OPT_REPORT, "report.json", OPT_SUMMARY_MD, "summary.md", OPT_HTML, "report.html")
    result.assert_outcomes(passed=5)  # every decision is the right one: the lies are the server's
    recs = _records(pytester.path / "rec.jsonl")
    assert "annotation_violations" not in recs["read-01"]
    [missing] = recs["missing-01"]["steps"][0]["calls"]  # the tool's isError answer: the agent's to read, no fault
    assert missing["error"] is True and missing["content"] == "Error executing tool read_note"
    assert recs["missing-01"]["outcome"] == "scored"
    peek = recs["peek-01"]
    assert peek["verdict"]["kind"] == "ok" and peek["effect"]["passed"]
    [found] = peek["annotation_violations"]
    assert found["tool"] == "peek_note" and found["kind"] == "read_only_wrote"
    assert found["diff"] == ["+ worktree a.txt.seen"] and found["hints"]["readOnlyHint"] is True
    assert [v["kind"] for v in recs["append-01"]["annotation_violations"]] == ["idempotent_changed_again"]
    [tidy] = recs["tidy-01"]["annotation_violations"]
    assert tidy["kind"] == "non_destructive_removed" and tidy["lost"] == ["worktree a.txt (blob 94954ab) is gone"]
    assert recs["peek-01"]["steps"][0]["calls"][0]["mcp"]["annotations"]["readOnlyHint"] is True
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, generated_report_schema())
    findings = report["blocks"][0]["effects"]["annotation_violations"]
    assert findings["n"] == 3
    assert {t["tool"]: {k for k, v in t["kinds"].items() if v} for t in findings["tools"]} == {
        "peek_note": {"read_only_wrote"}, "append_line": {"idempotent_changed_again"},
        "tidy": {"non_destructive_removed"}}
    assert report["blocks"][0]["classes"]["single"]["name_args"]["correct"] == 5  # no violation costs the agent
    result.stdout.fnmatch_lines(["*annotation violations (findings against the MCP server, not the agent's "
                                 "verdict): 3*", "*peek_note ?readOnlyHint, idempotentHint?: read only wrote 1 · first in peek-01: "
                                 "+ worktree a.txt.seen*"])
    markdown = (pytester.path / "summary.md").read_text()
    assert ("Annotation violations (findings against the MCP server, not the agent's verdict): 3." in markdown)
    assert "| `peek_note` | readOnlyHint, idempotentHint | 1 | 0 | 0 | `peek-01` | + worktree a.txt.seen |" in markdown
    html = (pytester.path / "report.html").read_text()
    assert '<table data-table="annotation_violations">' in html
    assert "<td><code>peek_note</code></td><td>readOnlyHint, idempotentHint</td>" in html


def test_a_renamed_tool_is_called_on_the_server_under_the_servers_name(pytester: pytest.Pytester) -> None:
    """A tool the import renamed (``name: notes_read``, ``mcp_name: read_note``): the agent's call,
    under either name, runs on the server as ``read_note``, and is scored as ``notes_read``."""
    _family(pytester, LIAR, [])
    tools = [{**t, "name": "notes_read", "mcp_name": "read_note"} if t["name"] == "read_note" else t for t in TOOLS]
    (pytester.path / "cases" / "notes" / "tools.json").write_text(json.dumps(tools))
    cases = []
    for cid, called in (("family-name", "notes_read"), ("server-name", "read_note")):
        case = _case(cid, [("notes_read", {"name": "a.txt"})])
        case["recorded"] = {"tool_calls": [{"name": called, "arguments": json.dumps({"name": "a.txt"})}]}
        cases.append(case)
    (pytester.path / "cases" / "notes" / "cases.yaml").write_text(yaml.safe_dump(cases))
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider", OPT_SANDBOX, "local", OPT_RECORDS, "rec.jsonl")
    result.assert_outcomes(passed=2)
    for rec in _records(pytester.path / "rec.jsonl").values():
        [call] = rec["steps"][0]["calls"]
        assert (call["name"], call["error"], call["content"]) == ("notes_read", False, "hello\nworld\n"), call
        assert rec["verdict"]["kind"] == "ok" and not rec["verdict"].get("hallucinated")


@pytest.mark.parametrize(("tool", "command", "kind", "stderr"), [
    ("crash", LIAR, "crash", "liar: fatal: the note store is corrupt"),
    ("hang", LIAR, "hang", None),
    ("grow", LIAR, "tools_changed", None),
    ("count", [sys.executable, str(FIXTURES / "mcp_hostile_server.py"), "malformed"], "malformed",
     "raw: answering garbage"),
    ("count", [sys.executable, str(FIXTURES / "mcp_hostile_server.py"), "bad_output"], "output_schema", None),
])
def test_a_failing_server_is_an_error_with_its_stderr_never_a_verdict(
        pytester: pytest.Pytester, tool: str, command: list[str], kind: str, stderr: str | None) -> None:
    _family(pytester, command, [_case("fault-01", [(tool, {})]), _case("after-01", [("read_note", {"name": "a.txt"})])]
            if command is LIAR else [_case("fault-01", [(tool, {})])], timeout_s=3 if kind == "hang" else 20)
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider", OPT_SANDBOX, "local", OPT_RECORDS, "rec.jsonl",
                                OPT_REPORT, "report.json")
    recs = _records(pytester.path / "rec.jsonl")
    fault = recs["fault-01"]
    assert fault["outcome"] == "error" and fault["verdict"] is None
    assert fault["error"]["type"] == "McpServerFault"
    assert fault["error"]["message"].startswith(f"{kind}: tools/call {tool}")
    if stderr is not None:
        assert stderr in fault["error"]["stderr"]
    if command is LIAR:  # the next item gets a server started again: scored as usual
        result.assert_outcomes(passed=1, errors=1)
        assert recs["after-01"]["verdict"]["kind"] == "ok"
    else:
        result.assert_outcomes(errors=1)
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["blocks"][0]["error_types"] == {"McpServerFault": 1}


def test_a_call_the_server_refuses_is_the_agents_answer_to_read_not_a_fault(pytester: pytest.Pytester) -> None:
    case = _case("bad-args-01", [("count", {})])
    case["recorded"] = {"tool_calls": [{"name": "count", "arguments": '{"verbose": true}'}]}  # an invented argument
    _family(pytester, [sys.executable, str(FIXTURES / "mcp_hostile_server.py"), "bad_output"], [case])
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider", OPT_SANDBOX, "local", OPT_RECORDS, "rec.jsonl")
    result.assert_outcomes(failed=1)  # the agent's wrong call, scored: the server's refusal is its answer
    rec = _records(pytester.path / "rec.jsonl")["bad-args-01"]
    assert rec["outcome"] == "scored" and rec["verdict"]["kind"] == "right_tool_wrong_args"
    [call] = rec["steps"][0]["calls"]
    assert call["error"] is True
    assert json.loads(call["content"]) == {"error": {"code": -32602, "message": "Invalid params: count takes none"}}


def test_the_probe_pass_checks_each_tools_hints_before_any_agent_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.cli import main

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "tools.json").write_text(json.dumps(TOOLS))
    (folder / "family.yaml").write_text(yaml.safe_dump({"name": "notes", "tools_file": "tools.json", "sandbox": {
        "world": "mcp", "mcp": {"command": LIAR, "probe": "files", "root_alias": "/notes", "timeout_s": 20,
                                "setup": [{"step": 1, "op": "write", "path": "a.txt", "content": "hello\n"}],
                                "probe_pass": [{"name": "read_note", "arguments": {"name": "a.txt"}, "repeat": True},
                                               {"name": "peek_note", "arguments": {"name": "a.txt"}},
                                               {"name": "append_line", "arguments": {"name": "b.txt", "line": "x"},
                                                "repeat": True,
                                                "setup": [{"step": 2, "op": "write", "path": "b.txt",
                                                           "content": ""}]}]}}}))
    assert main(["sandbox", "probe", str(folder), "--provider", "local"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "probe pass of notes: 3 calls on the setup state"
    assert out[1] == "  read_note ×2 [readOnlyHint, idempotentHint]: no change · hints hold"
    assert out[2] == "  peek_note [readOnlyHint, idempotentHint]: + worktree a.txt.seen · read only wrote"
    assert out[3].startswith("  append_line ×2 [idempotentHint, openWorldHint]: ~ worktree b.txt") and out[3].endswith(
        "· idempotent changed again")
    assert out[4] == "annotation violations: 2 (findings against the server)"


def test_the_probe_pass_of_a_family_without_one_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.cli import main

    (tmp_path / "family.yaml").write_text(yaml.safe_dump({"name": "plain"}))
    assert main(["sandbox", "probe", str(tmp_path), "--provider", "local"]) == 2
    assert "sandbox.mcp.probe_pass: the family lists no probe pass" in capsys.readouterr().err
