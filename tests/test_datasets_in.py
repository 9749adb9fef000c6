"""Datasets in, as users have them: traces whose runs offered different tools (some in BFCL's schema
dialect), a labelled JSONL file in OpenAI message format, and ToolTalk as a shipped family.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_REPORT
from tests.conftest import REPO, SHARED

WEATHER_BFCL = {"name": "get_weather", "description": "Weather in a city.",
                "parameters": {"type": "dict", "properties": {
                    "city": {"type": "string"}, "days": {"type": "integer", "default": 1},
                    "units": {"type": "array", "items": {"type": "string"}, "enum": ["c", "f"]},
                    "lat": {"type": "float"}}, "required": ["city"]}}
MAIL_OPENAI = {"type": "function", "function": {
    "name": "read_thread", "description": "Read a mail thread.",
    "parameters": {"type": "object", "properties": {"thread_id": {"type": "string"}}, "required": ["thread_id"]}}}


def _call(name: str, args: dict[str, Any], cid: str = "c1") -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _runs(path: Path) -> None:
    weather = {"id": "w", "tools": [WEATHER_BFCL], "messages": [
        {"role": "user", "content": "Weather in Oslo?"}, _call("get_weather", {"city": "Oslo"}),
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}, {"role": "assistant", "content": "Sunny."}]}
    mail = {"id": "m", "tools": [MAIL_OPENAI], "messages": [
        {"role": "user", "content": "Read th-1"}, _call("read_thread", {"thread_id": "th-1"}),
        {"role": "tool", "tool_call_id": "c1", "content": "hi"}, {"role": "assistant", "content": "It says hi."}]}
    path.write_text(json.dumps(weather) + "\n" + json.dumps(mail) + "\n")


def test_sample_keeps_each_runs_tools_and_maps_the_bfcl_dialect(tmp_path: Path) -> None:
    _runs(tmp_path / "runs.jsonl")
    out = tmp_path / "fam"
    assert main(["sample", str(tmp_path / "runs.jsonl"), "--out", str(out), "--quota",
                 "first=5,middle=5,last=5"]) == 0
    cases = [json.loads(x) for x in (out / "cases.jsonl").read_text().splitlines()]
    family = yaml.safe_load((out / "family.yaml").read_text())
    assert len(cases) == 4 and not family.get("tools")  # the runs differ: no family-wide tools
    by_run = {c["source"]["trace_id"]: c["tools"] for c in cases}
    assert [t["name"] for t in by_run["m"]] == ["read_thread"]
    (weather,) = by_run["w"]
    params = weather["parameters"]
    assert params["type"] == "object" and params["properties"]["lat"] == {"type": "number"}
    assert params["properties"]["units"] == {"type": "array", "items": {"type": "string", "enum": ["c", "f"]}}
    # every sampled state is scored against the tools its run offered: the recorded calls are valid
    from pytest_tooleffect.collect.cases import load_case_file
    from pytest_tooleffect.collect.family import load_family

    for c in cases:
        calls = c["recorded"]["tool_calls"]
        args = calls[0]["arguments"] if calls else None
        c["label"] = {"valid_actions": [
            {"tool": calls[0]["name"], "args": json.loads(args) if isinstance(args, str) else args}
            if calls else {"tool": None}]}
    (out / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    loaded, problems = load_case_file(out / "cases.jsonl", load_family(out))
    assert problems == [] and len(loaded) == 4


def test_sample_keeps_shared_tools_on_the_family(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    _runs(runs)
    first = runs.read_text().splitlines()[0]
    runs.write_text(first + "\n" + first.replace('"id": "w"', '"id": "w2"') + "\n")
    out = tmp_path / "fam"
    assert main(["sample", str(runs), "--out", str(out)]) == 0
    family = yaml.safe_load((out / "family.yaml").read_text())
    assert [t["name"] for t in family["tools"]] == ["get_weather"]
    assert family["tools"][0]["parameters"]["type"] == "object"  # the dialect mapped on the family too
    assert all("tools" not in json.loads(x) for x in (out / "cases.jsonl").read_text().splitlines())


ROWS = [
    {"id": "ask-city", "messages": [{"role": "system", "content": "You help with weather."},
                                    {"role": "user", "content": "What's the weather?"}],
     "tools": [WEATHER_BFCL],
     "label": {"valid_actions": [{"tool": None, "reason": "the city is missing"}],
               "forbidden_actions": ["get_weather"]},
     "recorded": _call("get_weather", {"city": "Paris"})},
    {"id": "oslo", "messages": [{"role": "system", "content": "You help with weather."},
                                {"role": "user", "content": "Weather in Oslo?"}],
     "tools": [WEATHER_BFCL],
     "label": {"valid_actions": [{"tool": "get_weather", "args": {"city": "Oslo"}}]},
     "recorded": _call("get_weather", {"city": "Oslo"})},
]


def test_a_labelled_openai_jsonl_imports_as_a_family_and_runs(tmp_path: Path, pytester: pytest.Pytester) -> None:
    rows = pytester.path / "rows.jsonl"
    bad = {"id": "typo", "messages": [{"role": "system", "content": "You help with weather."},
                                      {"role": "user", "content": "Oslo?"}], "tools": [WEATHER_BFCL],
           "label": {"valid_actions": [{"tool": "get_wether"}]}}
    rows.write_text("\n".join(json.dumps(r) for r in [*ROWS, bad]) + "\n")
    out = pytester.path / "cases" / "weather"
    run = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "import", "labelled-jsonl",
                          "--input", str(rows), "--out", str(out)], capture_output=True, text=True)
    assert run.returncode == 1, run.stderr  # one row's label names a tool that is not offered
    assert "rows.jsonl: line 3: case typo: label.valid_actions[0].tool: unknown tool 'get_wether'" in run.stderr
    counts = json.loads(run.stdout)
    assert counts["cases"] == 3 and counts["valid"] == 2 and counts["classes"] == {"no_tool": 1, "single": 1}
    family = yaml.safe_load((out / "family.yaml").read_text())
    assert family["system_prompt"] == "You help with weather." and family["tools"][0]["parameters"]["type"] == "object"
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, errors=1)  # the guess where it should ask fails; the typo is listed
    report = json.loads((pytester.path / "r.json").read_text())
    (block,) = report["blocks"]
    assert block["kinds"]["forbidden"] == 1 and block["kinds"]["ok"] == 1
    assert report["invalid"][0]["ids"] == ["typo"] and report["status"] == "incomplete"


# ---------------------------------------------------------------------------------------- ToolTalk

TOOLTALK = SHARED / "datasets" / "tooltalk"


@pytest.mark.shared
@pytest.mark.parametrize("where", ["--shared", "TOOLEFFECT_SHARED"])
def test_import_tooltalk_rebuilds_the_shipped_family_byte_for_byte(
        tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "cases" / "tooltalk"  # the repository's layout: cases/<family> beside oracle/
    (tmp_path / "oracle").mkdir()
    (tmp_path / "oracle" / "tooltalk.yaml").write_bytes((REPO / "oracle" / "tooltalk.yaml").read_bytes())
    monkeypatch.chdir(tmp_path)  # no ../shared from here: the data comes from the option or the variable
    if where == "--shared":
        assert main(["import", "tooltalk", "--shared", str(SHARED), "--out", str(out)]) == 0
    else:
        monkeypatch.setenv("TOOLEFFECT_SHARED", str(SHARED))
        assert main(["import", "tooltalk", "--out", str(out)]) == 0
    for name in ("family.yaml", "cases.jsonl", "NOTICE.md"):
        assert (out / name).read_bytes() == (REPO / "cases" / "tooltalk" / name).read_bytes(), name


@pytest.mark.shared
@pytest.mark.parametrize("source", ["tooltalk", "tau-airline"])
def test_a_family_imported_outside_the_repository_layout_carries_its_rules(
        tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Written anywhere (not cases/<name> beside an oracle/ folder), the family still loads: the
    shipped rules are copied in beside it; in the repository's layout it points at oracle/."""
    from pytest_tooleffect.collect.family import load_family

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "elsewhere" / "fam"
    assert main(["import", source, "--shared", str(SHARED), "--out", str(out)]) == 0
    fam = load_family(out)
    assert (out / "oracle.yaml").read_bytes() == (REPO / "oracle" / f"{source}.yaml").read_bytes()
    assert fam.family.oracle == "oracle.yaml" and fam.rules.fields, fam.family.oracle
    assert out / "oracle.yaml" in fam.referenced_files  # never collected as a case file


def test_tooltalk_decision_points_and_labels() -> None:
    cases = [json.loads(x) for x in (REPO / "cases" / "tooltalk" / "cases.jsonl").read_text().splitlines()]
    from pytest_tooleffect.formats import Label

    classes = Counter(Label.model_validate(c["label"]).label_class for c in cases)
    assert classes == {"no_tool": 230, "single": 187, "several": 79}
    # the dataset's own counts (PROVENANCE.md): 66 assistant turns without calls, 266 gold calls
    no_call_turns = [c for c in cases if c["source"]["note"].endswith("reply")
                     and c["messages"][-1]["role"] != "tool"]
    assert len(no_call_turns) == 66
    assert classes["single"] + classes["several"] == 266
    # the executor supplies the session token: neither offered nor in any gold call
    tools = yaml.safe_load((REPO / "cases" / "tooltalk" / "family.yaml").read_text())["tools"]
    assert len(tools) == 28 and all("session_token" not in t["parameters"]["properties"] for t in tools)
    assert all("session_token" not in json.dumps(a.get("args", {}))
               for c in cases for a in c["label"]["valid_actions"])
    assert sum(1 for t in tools if t["annotations"]["readOnlyHint"]) == 10  # PROVENANCE.md: 10 read-only tools


def _turn(name: str, note: str) -> list[str | None]:
    from pytest_tooleffect.data.importers.tooltalk import conversation_cases, load_tools

    _, auth = load_tools()
    conv = json.loads((TOOLTALK / "data" / "tooltalk" / f"{name}.json").read_text())
    (case,) = [c for c in conversation_cases(conv, "tooltalk", auth) if c["source"]["note"] == note]
    return [a["tool"] for a in case["label"]["valid_actions"]]


@pytest.mark.shared
def test_tooltalk_independent_calls_may_come_in_any_order_dependent_ones_may_not() -> None:
    # four SendMessage calls to guests are independent of each other: any may come first
    assert _turn("Calendar-Messages-Weather-SendMessage-1", "turn 1 call 2 of 4") == ["SendMessage"] * 3
    # the guests' usernames come back from SearchMessages: nothing that uses them may come before it,
    # and once it has answered, adding them to the event and messaging each may come in any order
    assert _turn("Calendar-Messages-Reminder-CreateEvent-1", "turn 9 call 1 of 6") == ["SearchMessages"]
    assert _turn("Calendar-Messages-Reminder-CreateEvent-1", "turn 9 call 2 of 6") == ["ModifyEvent",
                                                                                      *["SendMessage"] * 4]
    # signing in keeps its place: nothing after it may come before it
    assert _turn("AccountTools-Alarm-Email-GetAccountInformati-0", "turn 3 call 1 of 2") == ["UserLogin"]
    assert _turn("golden_conversation_5", "turn 9 call 1 of 5") == ["DeleteAccount"]
    assert _turn("golden_conversation_5", "turn 9 call 3 of 5") == ["AddAlarm", "CreateEvent", "CreateEvent"]


def test_the_tooltalk_family_runs_with_an_agent_policy(pytester: pytest.Pytester) -> None:
    import shutil

    shutil.copytree(REPO / "cases" / "tooltalk", pytester.path / "cases" / "tooltalk")
    (pytester.path / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "tooltalk.yaml", pytester.path / "oracle" / "tooltalk.yaml")
    shutil.copytree(REPO / "examples", pytester.path / "examples")
    replay = pytester.runpytest("cases/", "-p", "no:cacheprovider", f"{OPT_REPORT}=replay.json")
    replay.assert_outcomes(skipped=496)  # gold labels only: nothing to replay, and the report says so
    skipped = json.loads((pytester.path / "replay.json").read_text())
    assert skipped["status"] == "incomplete" and skipped["skipped"][0]["count"] == 496
    pytester.syspathinsert(pytester.path)
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider", "-n", "2", f"{OPT_REPORT}=r.json",
                                "--tooleffect-agent=abstain=examples.agents.reference:abstain")
    result.assert_outcomes(passed=230, failed=266)
    (block,) = json.loads((pytester.path / "r.json").read_text())["blocks"]
    assert block["classes"]["no_tool"]["name"]["correct"] == 230 and block["micro"]["name_display"] == "46.4"
    assert block["kinds"]["none_when_tool_needed"] == 266


def test_a_labelled_row_whose_recorded_turn_is_not_the_agents_is_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A row whose recorded decision was ``{role: user, content: hi}`` was imported (the role dropped)
    and replayed as the agent's reply, scored ok_no_tool: the provider and agent doors refuse such a
    turn.  The row is left out now, named."""
    rows = tmp_path / "rows.jsonl"
    base = {"messages": [{"role": "user", "content": "Thanks!"}], "tools": [WEATHER_BFCL],
            "label": {"valid_actions": [{"tool": None}]}}
    rows.write_text("".join(json.dumps({**base, "id": i, "recorded": {"role": role, "content": "hi"}}) + "\n"
                            for i, role in (("a", "user"), ("b", "assistant"), ("c", "tool"))))
    out = tmp_path / "cases" / "weather"
    assert main(["import", "labelled-jsonl", "--input", str(rows), "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"tooleffect import: {rows}: line {n}: case {i}: recorded.role: {role!r}: the recorded decision is "
                   "the agent's own message (role assistant); the row is left out"
                   for n, i, role in ((1, "a", "user"), (3, "c", "tool"))]
    cases = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert [c["id"] for c in cases] == ["b"] and cases[0]["recorded"] == {"tool_calls": [], "text": "hi"}


def test_a_labelled_jsonl_whose_every_row_is_invalid_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    typo = {"id": "typo", "messages": [{"role": "user", "content": "Oslo?"}], "tools": [WEATHER_BFCL],
            "label": {"valid_actions": [{"tool": "get_wether"}]}}
    rows.write_text(json.dumps(typo) + "\n" + "not json\n" + json.dumps({"id": "x"}) + "\n")
    out = tmp_path / "cases" / "weather"
    assert main(["import", "labelled-jsonl", "--input", str(rows), "--out", str(out), "--force"]) == 1
    err = capsys.readouterr().err
    assert "line 1: case typo: label.valid_actions[0].tool: unknown tool 'get_wether'" in err
    assert "line 2:" in err and "line 3: messages" in err
    assert f"no row makes a valid case (1 read as cases): nothing written to {out}" in err
    assert not out.exists()
    # an earlier family in the folder is kept as it was
    good = {"id": "ok", "messages": [{"role": "user", "content": "Oslo?"}], "tools": [WEATHER_BFCL],
            "label": {"valid_actions": [{"tool": "get_weather", "args": {"city": "Oslo"}}]}}
    (tmp_path / "good.jsonl").write_text(json.dumps(good) + "\n")
    assert main(["import", "labelled-jsonl", "--input", str(tmp_path / "good.jsonl"), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["import", "labelled-jsonl", "--input", str(rows), "--out", str(out), "--force"]) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
