"""Bad input: a clear error naming file, case id and field, and the rest of the run goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.options import OPT_RECORDS, OPT_REPORT
from tests.demo_family import CASES, READ, case, write_demo

GOOD = CASES[:4]  # 3 pass, 1 fails


def _line(c: dict[str, Any]) -> str:
    return json.dumps(c, ensure_ascii=False)


@pytest.mark.parametrize(("name", "bad", "message"), [
    ("tool_calls not a list", {"messages": [{"role": "assistant", "tool_calls": 5}]},
     "messages[[]0[]].tool_calls: must be a list"),
    ("function is a string", {"messages": [{"role": "assistant", "tool_calls": [{"id": "c1", "function": "x"}]}]},
     "messages[[]0[]].tool_calls[[]0[]]: a tool call is*"),
    ("call id is a list", {"messages": [{"role": "assistant", "tool_calls": [{"id": ["c"], "function": READ}]}]},
     "messages[[]0[]].tool_calls[[]0[]].id: must be a string"),
    ("$any_of not a list", {"label": {"valid_actions": [{"tool": "read_thread",
                                                          "args": {"thread_id": {"$any_of": 5}}}]}},
     "*args.thread_id: $any_of takes a non-empty list*"),
    ("$omitted on a required argument", {"label": {"valid_actions": [{"tool": "read_thread",
                                                                     "args": {"thread_id": {"$any_of": [
                                                                         "t", {"$omitted": True}]}}}]}},
     "*args.thread_id: $omitted: a required argument cannot be omitted"),
    ("forbidden member of a valid parallel group", {"label": {
        "valid_actions": [{"parallel": [{"tool": "read_thread", "args": {"thread_id": "a"}},
                                        {"tool": "read_thread", "args": {"thread_id": "b"}}]}],
        "forbidden_actions": ["read_thread"]}}, "*read_thread is both valid*"),
    ("forbidden args identical to a valid action", {"label": {
        "valid_actions": [{"tool": "read_thread", "args": {"thread_id": "a"}}],
        "forbidden_actions": [{"tool": "read_thread", "args": {"thread_id": "a"}}]}}, "*read_thread is both valid*"),
    ("a valid action's $any_of alternative is forbidden", {"label": {
        "valid_actions": [{"tool": "read_thread", "args": {"thread_id": {"$any_of": ["a", "b"]}}}],
        "forbidden_actions": [{"tool": "read_thread", "args": {"thread_id": "b"}}]}}, "*read_thread is both valid*"),
    ("a forbidden $any_of alternative is a valid action", {"label": {
        "valid_actions": [{"tool": "read_thread", "args": {"thread_id": "a"}}],
        "forbidden_actions": [{"tool": "read_thread", "args": {"thread_id": {"$any_of": ["c", "a"]}}}]}},
     "*read_thread is both valid*"),
    ("nested $any_of alternatives overlap", {"label": {
        "valid_actions": [{"tool": "calendar.create_event", "args": {
            "title": {"$any_of": ["x", "y"]}, "start": "2025-03-19T10:00:00"}}],
        "forbidden_actions": [{"tool": "calendar.create_event", "args": {
            "title": {"$any_of": ["z", "y"]}}}]}}, "*calendar.create_event is both valid*"),
    ("a forbidden value equal to a valid one under the family's rules", {"label": {
        "valid_actions": [{"tool": "calendar.create_event", "args": {"title": "Q3 review",
                                                                     "start": "2025-03-19T10:00:00"}}],
        "forbidden_actions": [{"tool": "calendar.create_event", "args": {"title": "Q3 REVIEW"}}]}},
     "*calendar.create_event is both valid*"),
    ("object where a string is declared", {"label": {"valid_actions": [{"tool": "calendar.create_event", "args": {
        "title": {"text": "x"}, "start": "2025-03-19T10:00:00"}}]}}, "*args.title: {'text': 'x'} must be string*"),
    ("bucket does not match the step", {"placement": {"step": 1, "run_length": 3, "bucket": "last"}},
     "*placement.bucket: step 1 of 3 is bucket 'middle', not 'last'"),
    ("free-form date in a label", {"label": {"valid_actions": [{"tool": "calendar.create_event", "args": {
        "title": "x", "start": "Monday 10am"}}]}}, "*args.start: 'Monday 10am' must be date-time"),
    ("a required argument left out of a label", {"label": {"valid_actions": [{"tool": None}, {
        "tool": "calendar.create_event", "args": {"title": "x"}}]}},
     "*label.valid_actions[[]1[]].args.start: required argument of calendar.create_event left out of the label*"),
])
def test_bad_case_is_one_error(pytester: pytest.Pytester, name: str, bad: dict[str, Any], message: str) -> None:
    broken = {**case("zz-bad", "last", {"valid_actions": [{"tool": None}]}, {"tool_calls": []}), **bad}
    write_demo(pytester.path, [*GOOD, broken])
    result = pytester.runpytest("cases/")
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines([f"*cases.jsonl: case zz-bad: {message}*"])


def test_alternatives_that_do_not_overlap_a_forbidden_action_are_accepted(pytester: pytest.Pytester) -> None:
    fine = case("zz-fine", "last", {"valid_actions": [{"tool": "read_thread",
                                                        "args": {"thread_id": {"$any_of": ["a", "b"]}}}],
                                    "forbidden_actions": [{"tool": "read_thread", "args": {
                                        "thread_id": {"$any_of": ["c", "d"]}}}]},
                {"tool_calls": [{"name": "read_thread", "arguments": {"thread_id": "b"}}]})
    write_demo(pytester.path, [*GOOD, fine])
    pytester.runpytest("cases/").assert_outcomes(passed=4, failed=1)


def test_unreadable_lines_do_not_stop_the_run(pytester: pytest.Pytester) -> None:
    deep = "[" * 3000 + "]" * 3000
    huge = '{"id": "big", "n": ' + "9" * 5000 + "}"
    write_demo(pytester.path, GOOD, extra_lines=[deep, huge, "\ufeff{}", "[1, 2]"])
    result = pytester.runpytest("cases/")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 3 and outcomes["failed"] == 1 and outcomes["errors"] >= 3
    assert "INTERNALERROR" not in result.stdout.str() and "Interrupted" not in result.stdout.str()


def test_unicode_line_separators_and_bom(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path, [])
    c = case("u1", "last", {"valid_actions": [{"tool": None}]}, {"tool_calls": [], "text": "a\u2028b\x1cc"})
    c["messages"] = [{"role": "user", "content": "line\u2028separator\u2029and\x85more"}]
    (fam / "cases.jsonl").write_text("\ufeff" + _line(c) + "\n", encoding="utf-8")
    pytester.runpytest("cases/").assert_outcomes(passed=1)


@pytest.mark.subprocess
def test_yaml_timestamps_stay_strings_and_xdist_survives(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path, [])
    (fam / "cases.jsonl").unlink()
    (fam / "more.yaml").write_text("""
- id: dt1
  placement: {step: 0, run_length: 1, bucket: last}
  timezone: Europe/Madrid
  messages: [{role: user, content: book it}]
  label: {valid_actions: [{tool: calendar.create_event, args: {title: x, start: 2025-03-19T14:00:00}}]}
  recorded: {tool_calls: [{name: calendar.create_event, arguments: {title: x, start: 2025-03-19T13:00:00Z}}]}
  source: authored
""")
    result = pytester.runpytest_subprocess("cases/", "-p", "xdist", "-n", "2", f"{OPT_REPORT}=r.json")
    result.assert_outcomes(passed=1)
    assert json.loads((pytester.path / "r.json").read_text())["blocks"][0]["n_scored"] == 1


@pytest.mark.parametrize("option", [OPT_RECORDS, OPT_REPORT])
def test_unwritable_outputs_are_refused_up_front(pytester: pytest.Pytester, option: str) -> None:
    write_demo(pytester.path, GOOD)
    (pytester.path / "adir").mkdir()
    result = pytester.runpytest("cases/", f"{option}=adir")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option} *adir: is a directory*"])


def test_scoring_errors_are_errors_not_decisions(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [case("p1", "middle", {"valid_actions": [{"tool": "read_thread",
                                                                        "args": {"thread_id": "th-1"}}]},
                                    {"tool_calls": [READ]}), *GOOD[3:]])
    (pytester.path / "oracle" / "demo.yaml").write_text(
        "fields:\n  read_thread.thread_id: {predicates: [{callable: boom}]}\n")
    pytester.makeconftest("""
        def pytest_tooleffect_predicates():
            def boom(value, ctx):
                raise RuntimeError("predicate exploded")
            return {"boom": boom}
    """)
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    result.assert_outcomes(passed=1, failed=1)  # a failed item, recorded as an error: not a decision
    result.stdout.fnmatch_lines(["_* demo/p1[[]replay[]] _*", "scoring error (not counted as a decision): "
                                 "RuntimeError: predicate exploded*"])
    (block,) = json.loads((pytester.path / "r.json").read_text())["blocks"]
    assert block["n_scored"] == 1 and block["n_errors"] == 1
    assert block["errors"][0]["error"]["type"] == "OracleError"


@pytest.mark.parametrize(("setup", "message"), [
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_bytes(b"fields: {\xff\xfe: 1}"), "*cannot read*"),
    (lambda fam, root: ((root / "oracle" / "demo.yaml").unlink(), (root / "oracle" / "demo.yaml").mkdir()),
     "*cannot read*"),
    (lambda fam, root: (fam / "family.yaml").write_text("name: demo\ntools_file: 5\n"), "*tools_file: a path*"),
    (lambda fam, root: ((fam / "t.json").write_text("5"), (fam / "family.yaml").write_text(
        "name: demo\ntools_file: t.json\n")), "*holds a JSON int, not a list of tools"),
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_text("fields: [1, 2]\n"), "*fields must be a mapping"),
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_text(
        "fields:\n  read_thread.thread_id: {predicates: [{pattern: '('}]}\n"), "*invalid regular expression*"),
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_text(
        "fields:\n  read_thred.thread_id: {compare: exact}\n"),
     "*family.yaml: oracle *demo.yaml: rules for tools the family does not offer: read_thred.thread_id (tools: *"),
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_text(
        "fields:\n  read_thread.thread_id: {predicates: [{range: {min: 1}}]}\n"),
     "*family.yaml: oracle: *demo.yaml: fields.read_thread.thread_id: predicate range reads an integer or a "
     "number; this is a string field: it would fail every call*"),
    (lambda fam, root: (fam / "family.yaml").write_text(
        "name: demo\ntools: [{name: x, parameters: {type: object, properties: [1]}}]\n"), "*parameters*"),
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_text(
        "fields:\n  read_thread.thred_id: {compare: exact}\n"),
     "*family.yaml: oracle *demo.yaml: fields.read_thread.thred_id: read_thread has no field 'thred_id' "
     "(fields: thread_id)"),
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_text(
        "fields:\n  calendar.create_event.title.text: {compare: exact}\n"),
     "*fields.calendar.create_event.title.text: calendar.create_event has no field 'text' in title (a string, "
     "not an object)"),
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_text(
        "fields:\n  calendar.create_event.start+zone: {compare: instant}\n"),
     "*fields.calendar.create_event.zone: calendar.create_event has no field 'zone'*"),
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_text(
        "fields:\n  '*.thread_idd': {compare: exact}\n  '*.title': {compare: exact}\n"),
     "*fields.*.thread_idd: no tool of the family has the field 'thread_idd'"),
    (lambda fam, root: (root / "oracle" / "demo.yaml").write_text(
        "fields:\n  calendar.create_event.start: {predicates: [{callable: {name: nope, end: 18}}]}\n"),
     "*family.yaml: oracle *demo.yaml: fields.calendar.create_event.start: callable predicate 'nope' is not "
     "registered by any pytest_tooleffect_predicates hook (registered: none)"),
])
def test_bad_family_is_one_error(pytester: pytest.Pytester, setup: Any, message: str) -> None:
    fam = write_demo(pytester.path, GOOD)
    setup(fam, pytester.path)
    result = pytester.runpytest("cases/")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])


def test_a_key_given_twice_in_a_yaml_file_is_an_error_naming_it(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path, GOOD)
    (fam / "more.yaml").write_text("""
- id: twice
  placement: {step: 2, run_length: 3, bucket: last}
  messages: [{role: user, content: hi}]
  label: {valid_actions: [{tool: read_thread, args: {thread_id: a}}]}
  label: {valid_actions: [{tool: null}]}
  recorded: {tool_calls: []}
  source: authored
""")
    result = pytester.runpytest("cases/")
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*more.yaml*: not valid YAML: line 6, column 3: the key 'label' is given twice in one mapping "
                                 "(first on line 5)*"])
    (fam / "more.yaml").unlink()
    (pytester.path / "oracle" / "demo.yaml").write_text(
        "fields:\n  calendar.create_event.title: {normalise: [casefold]}\n"
        "  calendar.create_event.title: {compare: exact}\n")
    result = pytester.runpytest("cases/")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*demo.yaml: not valid YAML: line 3, column 3: the key 'calendar.create_event.title' is "
                                 "given twice*"])
    (pytester.path / "oracle" / "demo.yaml").write_text("base: &b {compare: exact}\nfields:\n"
                                                        "  read_thread.thread_id: {<<: *b, compare: string}\n")
    result = pytester.runpytest("cases/")  # a merge key may be overridden: not a key given twice
    assert "given twice" not in result.stdout.str()
    result.assert_outcomes(errors=1)  # base: is not a rules section (the document's own check)
    result.stdout.fnmatch_lines(["*unknown top-level keys [[]'base'[]]*"])


def test_rules_file_beside_the_cases_is_not_a_case_file(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path, GOOD)
    (fam / "rules.yaml").write_text((pytester.path / "oracle" / "demo.yaml").read_text())
    text = (fam / "family.yaml").read_text().replace("oracle: ../../oracle/demo.yaml", "oracle: rules.yaml")
    (fam / "family.yaml").write_text(text)
    pytester.runpytest("cases/").assert_outcomes(passed=3, failed=1)


def test_two_families_with_one_name_are_refused(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path, GOOD)
    twin = pytester.path / "cases" / "twin"
    twin.mkdir()
    for f in fam.iterdir():
        (twin / f.name).write_text(f.read_text())
    # the refused twin's own rules file is still not a case file: one error, at its case file
    (twin / "rules.yaml").write_text((pytester.path / "oracle" / "demo.yaml").read_text())
    text = (twin / "family.yaml").read_text().replace("oracle: ../../oracle/demo.yaml", "oracle: rules.yaml")
    (twin / "family.yaml").write_text(text)
    result = pytester.runpytest("cases/", "-rE")
    result.stdout.fnmatch_lines(["*family 'demo' is also defined in*"])
    result.stdout.no_fnmatch_line("*rules.yaml::*")
    result.assert_outcomes(passed=3, failed=1, errors=1)


def test_malformed_recorded_calls_are_scored_as_malformed(pytester: pytest.Pytester) -> None:
    null = {"valid_actions": [{"tool": None}]}
    write_demo(pytester.path, [case("m1", "last", null, {"tool_calls": [{"name": "read_thread", "arguments": 5}]}),
                               case("m2", "last", null, {"tool_calls": [{"arguments": "{}"}]}),
                               case("m3", "last", null, {"tool_calls": [{"name": "read_thread",
                                                                         "arguments": [1, 2]}]})])
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    result.assert_outcomes(failed=3)
    (block,) = json.loads((pytester.path / "r.json").read_text())["blocks"]
    assert block["kinds"]["malformed_call"] == 3


def test_report_command_errors_cleanly(tmp_path: Path) -> None:
    from pytest_tooleffect.cli import main

    bad = tmp_path / "r.jsonl"
    bad.write_text("not json\n")
    assert main(["report", str(bad)]) == 2
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2


@pytest.mark.parametrize(("args", "message"), [
    (["--tooleffect-api-base=http://127.0.0.1:9/v1"],
     "--tooleffect-api-base http://127.0.0.1:9/v1: an api base is for --tooleffect-model, which is not given*"),
    (["--tooleffect-judge-api-base=http://127.0.0.1:9/v1"],
     "--tooleffect-judge-api-base *: an api base is for --tooleffect-judge-model, which is not given*"),
    (["--tooleffect-repeats=1001"], "*--tooleffect-repeats*'1001' must be at most 1,000"),
    (["--tooleffect-concurrency=100000"], "*--tooleffect-concurrency*'100000' must be at most 1,024"),
    (["--tooleffect-retries=1000000"], "*--tooleffect-retries*'1000000' must be at most 100"),
    (["--tooleffect-rpm=100000000"], "*--tooleffect-rpm*must be at most 10,000,000"),
    (["-o", "tooleffect_tpm=10000000000000"], "ini tooleffect_tpm = '10000000000000': *must be at most*"),
    (["-o", "tooleffect_min_class_n=10000000"], "ini tooleffect_min_class_n = '10000000': *must be at most 1,000,000"),
    (["--tooleffect-shard=1/1000000"], "*--tooleffect-shard*at most 100,000 shards"),
    (["--tooleffect-timeout=1e9"], "*--tooleffect-timeout*must be at most 86400 (a day, in seconds)"),
    (["-o", "tooleffect_rate_window=1e9"], "ini tooleffect_rate_window = '1e9': *must be at most 86400*"),
])
def test_options_out_of_bounds_or_without_their_model_are_usage_errors(pytester: pytest.Pytester, args: list[str],
                                                                     message: str) -> None:
    write_demo(pytester.path, GOOD)
    result = pytester.runpytest("cases/", "--collect-only", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert "Traceback" not in result.stderr.str()


def test_a_policy_defined_differently_in_the_family_file_and_pyproject_is_refused(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path, GOOD)
    (pytester.path / "mine.py").write_text("def decide(state):\n    return {'tool_calls': []}\n")
    (fam / "family.yaml").write_text((fam / "family.yaml").read_text()
                                     + "policies:\n  - {name: mine, agent: 'mine:decide', temperature: 0.0}\n")
    pytester.makepyprojecttoml('[tool.tooleffect.policies.mine]\nagent = "mine:decide"\ntemperature = 1.0\n')
    result = pytester.runpytest("cases/", "--tooleffect-policy=mine")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*policy 'mine' is defined both in *family.yaml (policies:) and in "
                                 "[[]tool.tooleffect.policies.mine[]], differently: give one of them another name*"])
    pytester.makepyprojecttoml('[tool.tooleffect.policies.mine]\nagent = "mine:decide"\ntemperature = 0.0\n')
    pytester.runpytest("cases/", "--tooleffect-policy=mine").assert_outcomes(passed=1, failed=3)  # the same: fine
