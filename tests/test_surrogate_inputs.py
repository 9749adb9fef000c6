"""Lone UTF-16 surrogates (a JSON ``"\\ud800"`` escape, a YAML one, or a Python ``str`` holding one)
at every door text comes in by: case files (JSONL, YAML), a family's tools file, traces given to
``tooleffect sample``, case files given to ``tooleffect label export``, imported rows (labelled JSONL,
BFCL), a model's answer (its tool call's arguments, a call written into its text), an agent's
return value and the model cache.  Each is refused where it enters, in one line naming the file,
the line or case id and the field, and the character; nothing already on disk is replaced.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_tooleffect.cli import main
from pytest_tooleffect.decide.model_cache import turn_entry_problem
from pytest_tooleffect.oracle.rules import UniqueKeyLoader
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from pytest_tooleffect.util.jsonl import LoneSurrogate, loads
from pytest_tooleffect.util.unicode import find_surrogate, surrogate_problem
from tests.demo_family import write_demo
from tests.run_outputs import clean as _clean
from tests.run_outputs import record_list as _records
from tests.test_bfcl_import import ANSWER, ENTRY

NULL = {"tool": None}
#: a tool call whose arguments are JSON text holding an escaped lone surrogate (ASCII itself)
ESCAPED_ARGS = '{"thread_id": "t\\ud80042"}'
ESCAPED_KEY = '{"thread_\\udc00id": "t"}'


def _case(cid: str, label: dict[str, Any] = NULL, text: str = "thanks!") -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"[{cid}] {text}"}],
            "label": {"valid_actions": [label]}, "source": "authored"}




# --- the one check ------------------------------------------------------------------------------


def test_the_check_reads_a_calls_arguments_text_and_names_the_field() -> None:
    message = {"role": "assistant", "tool_calls": [{"function": {"name": "x", "arguments": ESCAPED_ARGS}}]}
    assert surrogate_problem(message, "m") == (
        "m.tool_calls[0].function.arguments (JSON text), at thread_id, holds U+D800, a lone surrogate, at "
        "character 1: not valid Unicode text")
    keyed = {"tool_calls": [{"function": {"name": "x", "arguments": ESCAPED_KEY}}]}
    assert surrogate_problem(keyed) == ("tool_calls[0].function.arguments (JSON text), at a key, holds U+DC00, a "
                                        "lone surrogate, at character 7: not valid Unicode text")
    # a pair of escapes is one character; an escaped backslash is no escape; text that is not JSON is the oracle's
    assert find_surrogate({"arguments": '{"a": "\\ud83d\\ude00", "b": "\\\\ud800"}'}) is None
    assert find_surrogate({"arguments": '{"a": "\\ud800'}) is None
    assert find_surrogate({"content": '{"a": "\\ud800"}'}) is None  # a reply's text is not read as JSON


def test_the_json_reader_refuses_a_lone_surrogate_naming_the_field_and_the_entry() -> None:
    with pytest.raises(LoneSurrogate) as caught:
        loads('{"id": "a", "messages": [{"content": "thanks \\ud800"}]}')
    assert str(caught.value) == ("messages[0].content holds U+D800, a lone surrogate, at character 7: not valid "
                                 "Unicode text (in the entry of id 'a')")
    assert caught.value.found.field == "messages[0].content" and caught.value.owner == "a"
    with pytest.raises(LoneSurrogate, match=r"recorded.tool_calls\[0\].function.arguments \(JSON text\), at "
                                            r"thread_id, holds U\+D800"):
        loads(json.dumps({"recorded": {"tool_calls": [{"function": {"arguments": ESCAPED_ARGS}}]}}))
    with pytest.raises(LoneSurrogate, match="a key of x holds U\\+DFFF"):
        loads(b'{"x": {"k\\udfff": 1}}')
    assert loads('{"a": "\\ud83d\\ude00 \\u00e9"}') == {"a": "\U0001f600 é"}  # a pair: one valid character


def test_a_yaml_file_holding_a_lone_surrogate_is_refused_at_its_line() -> None:
    with pytest.raises(yaml.YAMLError) as caught:
        yaml.load('a: 1\nb: "x \\ud800"\n', Loader=UniqueKeyLoader)
    assert "line 2" in str(caught.value)  # libyaml refuses the escape itself; the pure-Python loader, the scalar

    # PyYAML's pure-Python parser lets the escape through: the constructor refuses the scalar
    node = yaml.ScalarNode("tag:yaml.org,2002:str", "x \ud800", yaml.Mark("<f>", 0, 1, 3, None, None))
    with pytest.raises(yaml.YAMLError, match=r"line 2, column 4: the text holds U\+D800, a lone surrogate"):
        UniqueKeyLoader("").construct_scalar(node)


def test_a_cache_entry_whose_call_arguments_hold_one_is_refused() -> None:
    entry = {"emitted": {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "read_thread", "arguments": ESCAPED_ARGS}}]}, "cost": {"input_tokens": 1, "output_tokens": 1}}
    assert turn_entry_problem(entry) == (
        "emitted.tool_calls[0].function.arguments (JSON text), at thread_id, holds U+D800, a lone surrogate, at "
        "character 1: not valid Unicode text")


# --- case files and families (rows 315, 321) -----------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
def test_a_case_holding_a_lone_surrogate_is_an_invalid_case_at_collection(pytester: pytest.Pytester,
                                                                          workers: int) -> None:
    """It was collected, then at setup a raw traceback blamed "the file changed during the run"."""
    good = {**_case("good"), "recorded": {"tool_calls": [], "text": "You're welcome."}}
    bad = {**_case("bad", text="thanks \ud800"), "recorded": {"tool_calls": [], "text": "ok"}}
    bad_args = {**_case("bad-args"), "recorded": {"tool_calls": [{"name": "read_thread", "arguments": ESCAPED_ARGS}]}}
    write_demo(pytester.path, [good, bad, bad_args])
    result = pytester.runpytest("cases/", "-n", str(workers), "--tooleffect-report=r.json")
    out = _clean(result)
    result.assert_outcomes(passed=1, errors=2)
    assert "changed during the run" not in out
    result.stdout.fnmatch_lines_random([
        "*cases.jsonl: case bad: messages[[]1[]].content: holds U+D800, a lone surrogate, at character 13: not "
        "valid Unicode text",
        "*cases.jsonl: case bad-args: recorded.tool_calls[[]0[]].arguments: its JSON text, at thread_id, holds U+D800*"])
    report = json.loads((pytester.path / "r.json").read_text(encoding="utf-8"))
    assert report["status"] != "complete"


def test_a_yaml_case_file_holding_one_names_the_case_or_the_line(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [])
    fam = pytester.path / "cases" / "demo"
    (fam / "cases.jsonl").unlink(missing_ok=True)
    good = {**_case("good"), "recorded": {"tool_calls": [], "text": "You're welcome."}}
    bad_args = {**_case("bad-args"), "recorded": {"tool_calls": [{"name": "read_thread", "arguments": ESCAPED_ARGS}]}}
    (fam / "cases.yaml").write_text(yaml.safe_dump([good, bad_args]), encoding="utf-8")
    (fam / "more.yaml").write_text('- id: esc\n  messages: [{role: user, content: "x \\ud800"}]\n', encoding="utf-8")
    result = pytester.runpytest("cases/")
    _clean(result)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random([
        "*cases.yaml: case bad-args: recorded.tool_calls[[]0[]].arguments: its JSON text, at thread_id, holds U+D800*",
        "*more.yaml: file: <file>: not valid YAML: while parsing a quoted scalar in * line 2, column *"])


def test_a_family_file_holding_one_is_an_invalid_family_naming_its_line(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [{**_case("a"), "recorded": {"tool_calls": [], "text": "ok"}}])
    family = pytester.path / "cases" / "demo" / "family.yaml"
    family.write_text(family.read_text(encoding="utf-8").replace("You schedule meetings.", '"You \\ud800 schedule."'),
                      encoding="utf-8")
    result = pytester.runpytest("cases/")
    _clean(result)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*family.yaml: not valid YAML: while parsing a quoted scalar in * line 2, column *"])


def test_a_tools_file_holding_one_makes_the_family_invalid_naming_it(pytester: pytest.Pytester) -> None:
    """Every item was a provider error (the provider blamed for the family's own text)."""
    write_demo(pytester.path, [{**_case("a"), "recorded": {"tool_calls": [], "text": "ok"}}])
    fam = pytester.path / "cases" / "demo"
    family = yaml.safe_load((fam / "family.yaml").read_text(encoding="utf-8"))
    tools = family.pop("tools")
    tools[0]["description"] = "Read \ud800 a thread"
    (fam / "tools.json").write_text(json.dumps(tools), encoding="utf-8")
    family["tools_file"] = "tools.json"
    (fam / "family.yaml").write_text(yaml.safe_dump(family), encoding="utf-8")
    with ScriptedServer(lambda body: Reply(text="ok")) as srv:
        result = pytester.runpytest("cases/", "--tooleffect-model=openai/local-test",
                                    f"--tooleffect-api-base={srv.base_url}")
        assert srv.requests == []  # no provider asked with text it cannot take
    _clean(result)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*family.yaml: tools_file *tools.json: [[]0[]].description holds U+D800, a lone "
                                 "surrogate, at character 5: not valid Unicode text"])


# --- commands (rows 170, 316, 317, 206, 209, 212) --------------------------------------------------

RUN = {"messages": [{"role": "user", "content": "weather in Paris?"},
                    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                        "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                    {"role": "assistant", "content": "It is sunny."}],
       "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
           "type": "object", "properties": {"city": {"type": "string"}}}}}]}


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_sample_refuses_a_trace_holding_one_before_writing_anything(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The family it wrote to was replaced by one case (the others lost), with a raw codec message."""
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(RUN) + "\n" + json.dumps(RUN) + "\n", encoding="utf-8")
    out = tmp_path / "cases" / "s"
    assert main(["sample", str(good), "--out", str(out)]) == 0
    before = _tree(out)
    bad = tmp_path / "bad.jsonl"
    run = json.loads(json.dumps(RUN))
    run["messages"][2]["content"] = "sunny\ud800"
    bad.write_text(json.dumps(RUN) + "\n" + json.dumps(run) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["sample", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith(f"{bad}: line 2: messages[2].content holds U+D800, a lone surrogate, at character "
                                "5: not valid Unicode text"), err
    assert err.count("\n") == 1 and "codec" not in err
    assert _tree(out) == before


def test_label_export_refuses_a_case_holding_one_and_keeps_an_earlier_export(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It printed a raw codec message and left an earlier export truncated to 0 bytes."""
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(_case("a")) + "\n" + json.dumps(_case("b")) + "\n", encoding="utf-8")
    export = tmp_path / "states.jsonl"
    assert main(["label", "export", str(cases), "--out", str(export)]) == 0
    before = export.read_bytes()
    assert before.count(b"\n") == 2
    cases.write_text(json.dumps(_case("a")) + "\n" + json.dumps(_case("b", text="x \ud800")) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["label", "export", str(cases), "--out", str(export)]) == 2
    err = capsys.readouterr().err
    assert "line 2: messages[1].content holds U+D800, a lone surrogate" in err and "(in the entry of id 'b')" in err
    assert err.count("\n") == 1 and "codec" not in err
    assert export.read_bytes() == before
    assert main(["label", "export", str(cases), "--out", str(tmp_path / "new.jsonl")]) == 2
    assert not (tmp_path / "new.jsonl").exists()


ROW = {"id": "ask-city", "messages": [{"role": "system", "content": "You help with weather."},
                                      {"role": "user", "content": "What is the weather?"}],
       "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
           "type": "object", "properties": {"city": {"type": "string"}}}}}],
       "label": {"valid_actions": [{"tool": None, "reason": "the city is missing"}], "forbidden_actions": ["get_weather"]}}


@pytest.mark.parametrize(("row", "said"), [
    ({**ROW, "messages": [ROW["messages"][0], {"role": "user", "content": "What is the weather?\ud800"}]},
     "rows.jsonl: line 1: messages[1].content holds U+D800, a lone surrogate, at character 20: not valid Unicode "
     "text (in the entry of id 'ask-city')"),
    ({**ROW, "tools": [{"type": "function", "function": {"name": "get_weather"}}, *ROW["tools"]]},
     "rows.jsonl: line 1: case ask-city: tools: the tool 'get_weather' is offered twice"),
])
def test_import_labelled_jsonl_refuses_a_row_naming_the_input_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], row: dict[str, Any], said: str) -> None:
    """A raw codec message; a tool offered twice named a deleted temporary family.yaml."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n", encoding="utf-8")
    out = tmp_path / "o" / "cases" / "w"
    main(["import", "labelled-jsonl", "--input", str(rows), "--out", str(out)])
    err = capsys.readouterr().err
    assert said in err and "tooleffect-import-" not in err and "codec" not in err, err
    assert f"nothing written to {out}" in err and not out.exists()


def test_import_bfcl_refuses_an_entry_holding_one_naming_file_line_and_entry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "d"
    data = root / "datasets" / "bfcl" / "BFCL_v4_simple_python.json"
    (data.parent / "possible_answer").mkdir(parents=True)
    entries = [json.loads(json.dumps({"id": f"simple_{i}", **ENTRY})) for i in range(2)]
    entries[1]["question"][0][0]["content"] += " \ud800"
    data.write_text("".join(json.dumps(e) + "\n" for e in entries))
    (data.parent / "possible_answer" / data.name).write_text(
        "".join(json.dumps({"id": e["id"], "ground_truth": ANSWER}) + "\n" for e in entries))
    out = tmp_path / "o" / "bfcl"
    assert main(["import", "bfcl", "--shared", str(root), "--out", str(out), "--category", "simple"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"tooleffect import: {data}: line 2: question[0][0].content holds U+D800, a lone "
                           "surrogate, at character 42: not valid Unicode text (in the entry of id 'simple_1')")
    assert not out.exists() and not out.parent.exists()


# --- decisions: an agent, a model, the model cache (rows 26, 27, 29, 251, 254) --------------------

AGENTS = f'''
def args_escaped(state):
    return {{"role": "assistant", "tool_calls": [{{"id": "c", "type": "function", "function": {{
        "name": "read_thread", "arguments": {ESCAPED_ARGS!r}}}}}]}}


def key_escaped(state):
    return {{"role": "assistant", "tool_calls": [{{"id": "c", "type": "function", "function": {{
        "name": "read_thread", "arguments": {ESCAPED_KEY!r}}}}}]}}


def args_object(state):
    return {{"role": "assistant", "tool_calls": [{{"id": "c", "type": "function", "function": {{
        "name": "read_thread", "arguments": {{"thread_id": "t\\ud800"}}}}}}]}}


def fine(state):
    return {{"role": "assistant", "content": "You're welcome."}}
'''
AGENT_SAID = {
    "args_escaped": "tool_calls[0].function.arguments (JSON text), at thread_id, holds U+D800",
    "key_escaped": "tool_calls[0].function.arguments (JSON text), at a key, holds U+DC00",
    "args_object": "a string at tool_calls[0].function.arguments.thread_id holds U+D800",
}


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", [0, 2])
def test_an_agents_call_arguments_holding_one_are_its_unreadable_return(pytester: pytest.Pytester,
                                                                        workers: int) -> None:
    """It was a RecordError (PydanticSerializationError) and the items shown as failed."""
    write_demo(pytester.path, [_case("stop")])
    pytester.makepyfile(bad_agents=AGENTS)
    args = [f"--tooleffect-agent={name}=bad_agents:{name}" for name in [*AGENT_SAID, "fine"]]
    result = pytester.runpytest("cases/", *args, "-n", str(workers))
    out = _clean(result)
    result.assert_outcomes(passed=1, errors=len(AGENT_SAID))
    assert "RecordError" not in out
    records = {r["policy"]: r for r in _records(pytester.path)}
    for policy, said in AGENT_SAID.items():
        error = records[policy]["error"]
        assert records[policy]["outcome"] == "error" and error["type"] == "AgentReturnedUnreadable", error
        assert said in error["message"] and "\n" not in error["message"], error


@pytest.mark.parametrize("workers", [0, 2])
def test_a_models_call_arguments_holding_one_are_an_invalid_response_never_cached(pytester: pytest.Pytester,
                                                                                  workers: int) -> None:
    """srv5's surrogate_args: a RecordError per item, items shown as failed, the answer cached."""
    by_case = {"a": Reply(tool_calls=[("read_thread", ESCAPED_ARGS)]),
               "b": Reply(tool_calls=[("read_thread", ESCAPED_KEY)]),
               "c": Reply(text="You're welcome.")}

    def answer(body: dict[str, Any]) -> Reply:
        return by_case[body["messages"][-1]["content"][1]]

    write_demo(pytester.path, [_case(c) for c in by_case])
    with ScriptedServer(answer) as srv:
        result = pytester.runpytest("cases/", "--tooleffect-model=openai/local-test",
                                    f"--tooleffect-api-base={srv.base_url}", "--tooleffect-cache=readwrite",
                                    "-n", str(workers))
    out = _clean(result)
    result.assert_outcomes(passed=1, errors=2)
    assert "RecordError" not in out
    result.stdout.fnmatch_lines_random([
        "provider error (not scored): InvalidResponse: choices[[]0[]].message.tool_calls[[]0[]].function.arguments "
        "(JSON text), at thread_id, holds U+D800, a lone surrogate, at character 1: not valid Unicode text *",
        "provider error (not scored): InvalidResponse: choices[[]0[]].message.tool_calls[[]0[]].function.arguments "
        "(JSON text), at a key, holds U+DC00*"])
    records = {r["case_id"]: r for r in _records(pytester.path)}
    assert [records[c]["error"]["type"] for c in "ab"] == ["InvalidResponse"] * 2
    assert records["c"]["outcome"] == "scored"
    cached = list((pytester.path / ".tooleffect-cache" / "model").glob("*.json"))
    assert len(cached) == 1 and "\\ud8" not in cached[0].read_text(encoding="utf-8")  # the good answer alone
