"""The plugin as users run it: pytester end to end, outcomes, markers, records, report, xdist."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_tooleffect.options import OPT_NO_SUMMARY, OPT_RECORDS, OPT_REPEATS, OPT_REPORT
from tests.conftest import generated_report_schema
from tests.demo_family import write_demo

REPORT_SCHEMA = generated_report_schema()


def _report(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    jsonschema.validate(data, REPORT_SCHEMA)
    return data


#: every scored case of the demo family as its record says: (class, bucket, verdict kind, xfail)
DEMO_RECORDS = {
    "a-read": ("single", "first", "ok", False),
    "b-create-ok": ("single", "middle", "ok", False),
    "c-create-utc": ("single", "middle", "right_tool_wrong_args", False),
    "d-stop": ("no_tool", "last", "ok_no_tool", False),
    "e-redundant": ("no_tool", "last", "tool_when_none_needed", False),
    "f-duplicate": ("no_tool", "last", "forbidden", True),
}


def _workers(workers: int) -> list[str]:
    """The command line of a run at ``workers`` xdist workers (0: in process, no xdist)."""
    return ["-n", str(workers)] if workers else []


@pytest.mark.parametrize("workers", [0, 2])
def test_outcomes_records_and_report(pytester: pytest.Pytester, workers: int) -> None:
    """The demo family end to end; in one process and on two xdist workers alike."""
    write_demo(pytester.path)
    # --strict-markers: the plugin registers the class, family and bucket markers it adds
    result = pytester.runpytest("cases/", "-rA", "--strict-markers", *_workers(workers),
                                f"{OPT_REPORT}=out/report.json", "--json-report", "--json-report-file=out/pytest.json")
    result.assert_outcomes(passed=3, failed=2, skipped=1, xfailed=1)
    if workers:  # the items really ran on the workers
        result.stdout.fnmatch_lines(["*2 workers [[]7 items[]]*"])
    # a failure is its record id as headline and its one-line reason
    result.stdout.fnmatch_lines([
        "_* demo/c-create-utc[[]replay[]] _*",
        "right_tool_wrong_args: expected {calendar.create_event}, emitted "
        "calendar.create_event; calendar.create_event.start: *different instants*"])
    result.stdout.fnmatch_lines([
        "_* demo/e-redundant[[]replay[]] _*", "tool_when_none_needed: expected {null}, emitted read_thread*"])
    result.stdout.fnmatch_lines([
        "*tooleffect: family demo * policy replay*",
        "*SKIPPED*no recorded action to replay*",
    ])
    rep = _report(pytester.path / "out" / "report.json")
    (block,) = rep["blocks"]
    assert block["n_scored"] == 6 and block["n_xfail"] == 1
    assert block["classes"]["single"]["n"] == 3 and block["classes"]["no_tool"]["n"] == 3
    assert block["classes"]["single"]["name"]["correct"] == 3
    assert block["classes"]["single"]["name_args"]["correct"] == 2
    assert block["classes"]["no_tool"]["name"]["correct"] == 1
    assert block["kinds"]["forbidden"] == 1 and block["kinds"]["tool_when_none_needed"] == 1
    assert block["no_tool_failures"] == {"redundant_read": 1, "unwanted_write": 0, "forbidden": 1, "should_have_asked": 0,
                                        "tool_not_offered": 0, "wrong_reply": 0, "phantom_action": 0, "other": 0}
    assert block["argument_failures"] == {"calendar.create_event.start": 1}
    assert block["quota"] == {"first": 2, "middle": 2, "last": 3}
    assert list(block["buckets"]) == ["first", "middle", "last"]
    # per-sample records: JSON report metadata and the JSONL log agree
    pj = json.loads((pytester.path / "out" / "pytest.json").read_text())
    meta = {t["nodeid"]: t["metadata"]["tooleffect"] for t in pj["tests"] if "metadata" in t}
    assert len(meta) == 6
    log = [json.loads(line) for line in (pytester.path / "reports" / "tooleffect-records.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in log) == sorted(r["id"] for r in meta.values())
    assert {r["case_id"]: (r["class"], r["bucket"], r["verdict"]["kind"], r["xfail"]) for r in log} == DEMO_RECORDS
    utc = next(r for r in log if r["case_id"] == "c-create-utc")
    assert utc["verdict"]["kind"] == "right_tool_wrong_args"
    assert utc["cost"] == {"input_tokens": None, "output_tokens": None, "latency_ms": None, "cost_usd": None}


def test_item_ids_are_stable_and_sorted(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path)
    result = pytester.runpytest("cases/", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    ids = [line for line in result.outlines if "::" in line]
    assert len(ids) == 7 and ids == sorted(ids)
    assert "cases/demo/cases.jsonl::a-read[replay]" in ids


def test_last_failed_failed_first_and_stepwise_find_case_items(pytester: pytest.Pytester) -> None:
    """--lf, --ff and --sw find a case item again from the cache's string node id.

    pytest 9.2 reads those ids back as structured ids (``name[params]`` split apart), which did not
    equal a custom item's own (the whole name, no params: pytest issue #15045), so ``--lf`` ran
    every case, ``--ff`` kept the order and ``--sw`` started over.
    """
    write_demo(pytester.path)
    cache = ["-p", "cacheprovider"]
    assert pytester.runpytest("cases/", *cache).parseoutcomes()["failed"] == 2
    last = pytester.runpytest("cases/", *cache, "--lf", "-q")
    last.assert_outcomes(failed=2)
    last.stdout.fnmatch_lines(["*FAILED cases/demo/cases.jsonl::c-create-utc[[]replay[]]*",
                               "*FAILED cases/demo/cases.jsonl::e-redundant[[]replay[]]*"])
    first = pytester.runpytest("cases/", *cache, "--ff", "--collect-only", "-q")
    ids = [line for line in first.outlines if "::" in line]
    assert ids[:2] == ["cases/demo/cases.jsonl::c-create-utc[replay]", "cases/demo/cases.jsonl::e-redundant[replay]"]
    pytester.runpytest("cases/", *cache, "--cache-clear", "--sw").assert_outcomes(passed=2, failed=1)
    # the second stepwise run starts at the failure: nothing before it runs again
    pytester.runpytest("cases/", *cache, "--sw").assert_outcomes(failed=1, deselected=2)


@pytest.mark.parametrize(("expr", "passed", "failed"), [("no_tool", 1, 1), ("single", 2, 1),
                                                        ("bucket_middle", 1, 1), ("family_demo and single", 2, 1)])
def test_markers_select(pytester: pytest.Pytester, expr: str, passed: int, failed: int) -> None:
    write_demo(pytester.path)
    result = pytester.runpytest("cases/", "-m", expr)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == passed and outcomes.get("failed", 0) == failed


def test_invalid_cases_are_errors_and_the_rest_runs(pytester: pytest.Pytester) -> None:
    from tests.demo_family import CASES, READ, case

    bad = [
        case("h-unknown-tool", "last", {"valid_actions": [{"tool": "send_fax"}]}, {"tool_calls": []}),
        case("i-bad-arg", "last", {"valid_actions": [{"tool": "read_thread", "args": {"thread": "x"}}]},
             {"tool_calls": []}),
        case("j-bad-type", "last", {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": 7}}]},
             {"tool_calls": []}),
        {**case("k-no-result", "last", {"valid_actions": [{"tool": None}]}, {"tool_calls": []}),
         "messages": [{"role": "user", "content": "hi"},
                      {"role": "assistant", "tool_calls": [{"id": "c1", "function": READ}]},
                      {"role": "user", "content": "well?"}]},
        case("a-read", "first", {"valid_actions": [{"tool": None}]}, {"tool_calls": []}),  # duplicate id
        {**case("l-bad-zone", "last", {"valid_actions": [{"tool": None}]}, {"tool_calls": []}), "timezone": "Mars/Base"},
        case("m-both", "last", {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}],
                                "forbidden_actions": ["read_thread"]}, {"tool_calls": []}),
    ]
    write_demo(pytester.path, CASES + bad, extra_lines=["{not json"])
    result = pytester.runpytest("cases/")
    result.assert_outcomes(passed=3, failed=2, skipped=1, xfailed=1, errors=8)
    result.stdout.fnmatch_lines_random([
        "*cases.jsonl: case h-unknown-tool: label.valid_actions[[]0[]].tool: unknown tool 'send_fax'*",
        "*cases.jsonl: case i-bad-arg: label.valid_actions[[]0[]].args.thread: not in the schema of read_thread*",
        "*cases.jsonl: case j-bad-type: label.valid_actions[[]0[]].args.thread_id: 7 must be string*",
        "*cases.jsonl: case k-no-result: messages[[]1[]].tool_calls: call read_thread (c1) has no tool result*",
        "*cases.jsonl: case a-read: id: duplicate case id in family demo*",
        "*cases.jsonl: case l-bad-zone: timezone: unknown IANA time zone 'Mars/Base'*",
        "*cases.jsonl: case m-both: label.forbidden_actions[[]0[]]: read_thread is both valid*",
        "*cases.jsonl: file: <file>: line 15 is not valid JSON*",
    ])


def test_a_message_content_that_is_no_text_is_an_invalid_case(pytester: pytest.Pytester) -> None:
    """A content of 12345, {a: 1}, [1, 2] or null (a user's) was accepted and the agent blamed
    (AttributeError); it is an invalid case naming the file, the case and the field now.  Content
    parts and an assistant's null content beside its tool calls stay valid.
    """
    from tests.demo_family import CASES, READ, case

    def with_content(cid: str, content: Any, role: str = "user") -> dict[str, Any]:
        c = case(cid, "last", {"valid_actions": [{"tool": None}]}, {"tool_calls": []})
        return {**c, "messages": [{"role": "user", "content": "hi"}, {"role": role, "content": content}]}

    bad = [with_content("n-int", 12345), with_content("n-map", {"a": 1}), with_content("n-list", [1, 2]),
           with_content("n-null", None), with_content("n-system", 3, "system"),
           with_content("n-text-part", [{"type": "text", "text": 5}])]
    good = [with_content("o-parts", [{"type": "text", "text": "thanks"}]),
            {**case("o-calls", "last", {"valid_actions": [{"tool": None}]}, {"tool_calls": []}),
             "messages": [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": READ}]},
                          {"role": "tool", "tool_call_id": "c1", "content": "the thread"}]}]
    write_demo(pytester.path, CASES + bad + good)
    result = pytester.runpytest("cases/", "-rE")
    result.assert_outcomes(passed=5, failed=2, skipped=1, xfailed=1, errors=6)
    result.stdout.fnmatch_lines_random([
        "*cases.jsonl: case n-int: messages[[]1[]].content: must be text (a string, or a list of content parts*int",
        "*cases.jsonl: case n-map: messages[[]1[]].content: must be text *got dict",
        "*cases.jsonl: case n-list: messages[[]1[]].content: part 0 is not a content part*got int",
        "*cases.jsonl: case n-null: messages[[]1[]].content: a user message needs its text*got null",
        "*cases.jsonl: case n-system: messages[[]1[]].content: must be text*",
        "*cases.jsonl: case n-text-part: messages[[]1[]].content: part 0 is a text part whose text is not a string",
    ])
    result.stdout.no_fnmatch_line("*AttributeError*")


def test_broken_family_file_is_one_error(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path)
    (fam / "family.yaml").write_text("name: demo\ntools: [{name: x, parameters: 3}]\n")
    result = pytester.runpytest("cases/")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*family.yaml: tools[[]0[]].parameters: *"])


@pytest.mark.parametrize(("named", "content"), [
    ("oracle: rules.yaml", {"rules.yaml": "fields:\n  read_thread.thread_id: {compare: bogus}\n"}),
    ("oracle: rules.yml\ntools_file: tools.yaml", {"rules.yml": "fields: {}\n", "tools.yaml": "[1, 2]\n"}),
    ("system_prompt_file: prompt.jsonl\noracle: missing.yaml", {"prompt.jsonl": "be brief\n"}),
])
def test_broken_family_is_not_reported_again_at_the_files_it_names(
        pytester: pytest.Pytester, named: str, content: dict[str, str]) -> None:
    """A family that fails to load keeps the files its family file names out of case collection."""
    fam = write_demo(pytester.path)
    text = (fam / "family.yaml").read_text()
    (fam / "family.yaml").write_text("\n".join(line for line in text.splitlines()
                                               if not line.startswith("oracle:")) + "\n" + named + "\n")
    for name, body in content.items():
        (fam / name).write_text(body)
    result = pytester.runpytest("cases/", "-rE")
    result.assert_outcomes(errors=1)  # the one case file, not each named file as well
    result.stdout.fnmatch_lines(["*cases.jsonl::<family>*"])
    result.stdout.no_fnmatch_line("*ERROR*" + next(iter(content)) + "::*")
    result.stdout.no_fnmatch_line("*family.yaml::*")


@pytest.mark.parametrize("case_files", ["named", "none"])
def test_broken_family_without_a_case_file_is_reported_at_its_family_file(
        pytester: pytest.Pytester, case_files: str) -> None:
    """The family's error is never lost: with no case file left to carry it, the family file does."""
    fam = write_demo(pytester.path)
    if case_files == "named":  # the oracle pointed at the case file by mistake
        named = "oracle: cases.jsonl"
    else:  # a family being written: no cases yet, a broken rules file
        (fam / "cases.jsonl").unlink()
        (fam / "rules.yaml").write_text("fields:\n  read_thread.thread_id: {compare: bogus}\n")
        named = "oracle: rules.yaml"
    text = (fam / "family.yaml").read_text().replace("oracle: ../../oracle/demo.yaml", named)
    (fam / "family.yaml").write_text(text)
    result = pytester.runpytest("cases/", "-rE")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*family.yaml: oracle: *", "*ERROR cases/demo/family.yaml::<family>*"])


def test_broken_family_is_an_error_at_each_case_file_collected(pytester: pytest.Pytester) -> None:
    """At each case file collected, at the family file when none is; also when the family file is
    too broken to name its files (its rules file then looks like a case file and says so too).
    """
    fam = write_demo(pytester.path)
    (fam / "zz.jsonl").write_text((fam / "cases.jsonl").read_text().replace('"id": "', '"id": "zz-'))
    (fam / "family.yaml").write_text("name: demo\nbogus: 1\n")
    for args, where in ((["-k", "zz"], ["zz.jsonl"]), ([], ["cases.jsonl", "zz.jsonl"]), (["-n", "2"], ["cases.jsonl", "zz.jsonl"]),
                        (["--ignore-glob=*.jsonl"], ["family.yaml"])):
        result = pytester.runpytest("cases/", "-rE", *args)
        result.assert_outcomes(errors=len(where))
        for w in where:  # in any order (xdist)
            result.stdout.fnmatch_lines([f"*ERROR cases/demo/{w}::<family>*"])
    (fam / "family.yaml").write_text("oracle: rules.yaml\nname: [unclosed\n")
    result = pytester.runpytest("cases/demo/family.yaml", "-rE")  # asked for: reported there
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*family.yaml: not valid YAML*"])


def test_a_family_with_no_case_file_does_not_take_a_name_from_one_that_has(pytester: pytest.Pytester) -> None:
    """A family directory with nothing to run (its rules file is no case file) does not claim its
    name: the family with cases runs.
    """
    write_demo(pytester.path)
    empty = pytester.path / "cases" / "a-empty"
    empty.mkdir()
    (empty / "family.yaml").write_text("name: demo\noracle: rules.yaml\ntools: [{name: read_thread}]\n")
    (empty / "rules.yaml").write_text("fields: {}\n")
    result = pytester.runpytest("cases/", "-rE")
    result.assert_outcomes(passed=3, failed=2, skipped=1, xfailed=1, errors=1)  # the empty family: said
    result.stdout.fnmatch_lines(["*a-empty: family 'demo' has no case file*"])


@pytest.mark.parametrize("workers", [0, 2])
def test_a_family_folder_with_no_case_file_is_an_invalid_entry(pytester: pytest.Pytester, workers: int) -> None:
    """A family file whose case file was moved away was skipped without a word and the run said
    complete: it is an invalid entry naming the folder now, and the report is not complete.
    """
    fam = write_demo(pytester.path)
    other = pytester.path / "cases" / "other"
    other.mkdir()
    shutil.copyfile(fam / "family.yaml", other / "family.yaml")
    (other / "family.yaml").write_text((other / "family.yaml").read_text().replace("name: demo", "name: other"))
    result = pytester.runpytest("cases/", "-rE", "-n", str(workers), f"{OPT_REPORT}=r.json")
    result.assert_outcomes(passed=3, failed=2, skipped=1, xfailed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR cases/other/family.yaml::*no case file*"])
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["status"] == "incomplete"
    [entry] = report["invalid"]
    assert entry["family"] == "other" and "other: family 'other' has no case file" in entry["cases"][0]["problems"][0]
    (other / "cases.yaml").write_text("[]\n")  # a case file, even one with no case yet (its quota says so)
    pytester.runpytest("cases/", "-rE", "-n", str(workers)).stdout.no_fnmatch_line("*no case file*")


def test_a_name_no_path_can_hold_leaves_the_family_s_other_files_out() -> None:
    from pytest_tooleffect.collect.cases import named_files

    here = Path.cwd()
    assert named_files(here, ["rules\0.yaml", "prompt.yaml", None, 3]) == {(here / "prompt.yaml").resolve()}


def test_user_predicates_through_the_hook(pytester: pytest.Pytester) -> None:
    from tests.demo_family import case

    fam = write_demo(pytester.path, [
        case("p-hours", "middle", {"valid_actions": [{"tool": "calendar.create_event", "args": {"title": "x"}}]},
             {"tool_calls": [{"name": "calendar.create_event",
                              "arguments": '{"title": "x", "start": "2025-03-19T20:00:00+01:00"}'}]}),
    ])
    (pytester.path / "oracle" / "demo.yaml").write_text(
        "fields:\n  calendar.create_event.start:\n    predicates: [{callable: {name: business_hours, end: 18}}]\n")
    pytester.makeconftest("""
        def pytest_tooleffect_predicates():
            def business_hours(value, ctx, start=9, end=18):
                from pytest_tooleffect.oracle.compare import parse_datetime
                t = parse_datetime(value, ctx.timezone)
                return start <= t.hour < end, f"{t:%H:%M} is outside {start}:00-{end}:00"
            return {"business_hours": business_hours}

        def pytest_tooleffect_modify_record(record, item):
            record["checked_by"] = "conftest"
    """)
    assert fam.is_dir()
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*calendar.create_event.start: 20:00 is outside 9:00-18:00*"])
    log = (pytester.path / "reports" / "tooleffect-records.jsonl").read_text()
    assert json.loads(log)["checked_by"] == "conftest"


def test_no_summary_and_no_records(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path)
    args = ["cases/", f"{OPT_REPORT}=r.json"]
    shown = pytester.runpytest(*args)  # the same run with both outputs: the section and the log are there
    shown.assert_outcomes(passed=3, failed=2, skipped=1, xfailed=1)
    shown.stdout.fnmatch_lines(["*= tooleffect report =*"])
    assert (pytester.path / "reports" / "tooleffect-records.jsonl").read_text().count("\n") == 6
    shutil.rmtree(pytester.path / "reports")
    result = pytester.runpytest(*args, OPT_NO_SUMMARY, f"{OPT_RECORDS}=")
    result.assert_outcomes(passed=3, failed=2, skipped=1, xfailed=1)
    assert _report(pytester.path / "r.json")["blocks"][0]["n_scored"] == 6  # scored, only not printed
    result.stdout.no_fnmatch_line("*tooleffect report*")
    assert not (pytester.path / "reports").exists()


@pytest.mark.parametrize(("args", "compiled"), [([], False), ([f"{OPT_REPEATS}=2"], True)])
def test_a_case_decided_more_than_once_is_compiled_at_its_first_decision(
        pytester: pytest.Pytester, args: list[str], compiled: bool) -> None:
    write_demo(pytester.path)
    pytester.makeconftest("""
        def pytest_tooleffect_modify_record(record, item):
            if item.trial != 1:
                return
            form = item.case.label.__pydantic_private__.get("_oracle")
            plans = [plan for alt in form.alternatives for kept in alt.plans for _, _, plan in kept
                     if not plan.node.composites]  # fields judged together stay with the comparator
            if plans:  # after one decision: tables only when the label was compiled before scoring
                record["compiled"] = all(plan.keys is not None for plan in plans)
    """)
    result = pytester.runpytest("cases/", "-p", "no:randomly", *args)
    trials = 2 if args else 1
    result.assert_outcomes(passed=3 * trials, failed=2 * trials, skipped=trials, xfailed=trials)
    log = [json.loads(line) for line in (pytester.path / "reports" / "tooleffect-records.jsonl").read_text().splitlines()]
    seen = {r["compiled"] for r in log if "compiled" in r}
    assert seen == {compiled}
