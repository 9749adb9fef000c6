"""Nothing collected disappears from the report: invalid cases, errors and skipped items are listed,
the status says whether every item was scored, and record ids stay unique under repeats on every path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_tooleffect.collect.ids import item_name, record_id
from pytest_tooleffect.options import OPT_API_BASE, OPT_HTML, OPT_MODEL, OPT_REPEATS, OPT_REPORT, OPT_RETRIES
from pytest_tooleffect.report import summarise
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.conftest import REPO, generated_report_schema
from tests.demo_family import CASES, case, write_demo
from tests.verdicts import verdict

REPORT_SCHEMA = generated_report_schema()


def _report(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    jsonschema.validate(data, REPORT_SCHEMA)
    return data


def _records(root: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (root / "reports" / "tooleffect-records.jsonl").read_text().splitlines()]


BAD = [
    case("h-unknown-tool", "last", {"valid_actions": [{"tool": "send_fax"}]}, {"tool_calls": []}),
    case("j-bad-type", "last", {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": 7}}]},
         {"tool_calls": []}),
]


@pytest.mark.parametrize("workers", [0, 2])
def test_invalid_cases_reach_the_report_and_its_status(pytester: pytest.Pytester, workers: int) -> None:
    write_demo(pytester.path, CASES + BAD, extra_lines=["{not json"])
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json", "-rs", *(["-n", str(workers)] if workers else []))
    result.assert_outcomes(passed=3, failed=2, skipped=1, xfailed=1, errors=3)
    # the skip names the case's line, as a skip mark names its test's (not the plugin's own line)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] cases/demo/cases.jsonl:7: no recorded action to replay"])
    rep = _report(pytester.path / "r.json")
    assert rep["status"] == "incomplete"
    (fam,) = rep["invalid"]
    assert fam["family"] == "demo" and fam["count"] == 3
    assert fam["ids"] == ["h-unknown-tool", "j-bad-type", None]
    by_id = {c["case_id"]: c for c in fam["cases"]}
    assert "unknown tool 'send_fax'" in by_id["h-unknown-tool"]["problems"][0]
    assert "7 must be string" in by_id["j-bad-type"]["problems"][0]
    assert "line 10 is not valid JSON" in by_id[None]["problems"][0]
    assert by_id["h-unknown-tool"]["file"].endswith("cases.jsonl")
    (skipped,) = rep["skipped"]
    assert skipped == {"family": "demo", "policy": "replay", "count": 1,
                       "reasons": {"no recorded action to replay": 1}, "ids": ["demo/g-nothing-recorded[replay]"]}
    result.stdout.fnmatch_lines([
        "*tooleffect report status: incomplete (3 invalid cases, 0 errors, 1 skipped)*",
        "*invalid cases in family demo: 3 (h-unknown-tool, j-bad-type, <file>)*",
        "*skipped in demo / replay: 1 (no recorded action to replay 1)*",
    ])
    # make report's check fails on it, naming the family and the cases
    check = subprocess.run([sys.executable, str(REPO / "scripts" / "report-errors"), str(pytester.path / "r.json")],
                           capture_output=True, text=True)
    assert check.returncode == 1
    assert "demo: 3 invalid cases (h-unknown-tool, j-bad-type, <file>; first: " in check.stderr
    assert "demo / replay: 1 skipped (no recorded action to replay 1)" in check.stderr


def test_a_run_of_invalid_cases_alone_still_reports(pytester: pytest.Pytester) -> None:
    """No record at all: the report is still written, with the invalid cases, and says incomplete."""
    write_demo(pytester.path, BAD)
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    result.assert_outcomes(errors=2)
    rep = _report(pytester.path / "r.json")
    assert rep["status"] == "incomplete" and rep["blocks"] == [] and rep["invalid"][0]["count"] == 2
    result.stdout.fnmatch_lines(["*tooleffect report status: incomplete (2 invalid cases, 0 errors, 0 skipped)*"])


def test_a_broken_family_file_is_listed_under_its_folder(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path)
    (fam / "family.yaml").write_text("name: demo\ntools: [{name: x, parameters: 3}]\n")
    pytester.runpytest("cases/", f"{OPT_REPORT}=r.json").assert_outcomes(errors=1)
    rep = _report(pytester.path / "r.json")
    assert rep["status"] == "incomplete"
    (inv,) = rep["invalid"]
    assert inv["family"] == "demo" and inv["ids"] == [None] and "parameters" in inv["cases"][0]["problems"][0]


def test_a_fully_scored_run_is_complete_and_passes_the_check(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, CASES[:6])
    pytester.runpytest("cases/", f"{OPT_REPORT}=r.json").assert_outcomes(passed=3, failed=2, xfailed=1)
    rep = _report(pytester.path / "r.json")
    assert rep["status"] == "complete" and rep["invalid"] == [] and rep["skipped"] == []
    check = subprocess.run([sys.executable, str(REPO / "scripts" / "report-errors"), str(pytester.path / "r.json")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_status_from_records_alone() -> None:
    ok = {"id": "f/c[p]", "family": "f", "case_id": "c", "policy": "p", "outcome": "scored", "class": "no_tool",
          "bucket": "last", "step": 0, "run_length": 1, "source": {"kind": "authored"}, "xfail": False,
          "no_tool_failure": None, "error": None, "label_hash": "0" * 16, "cost": {},
          "verdict": verdict("ok_no_tool")}
    err = {**ok, "id": "f/d[p]", "case_id": "d", "outcome": "error", "verdict": None,
           "error": {"type": "Timeout", "message": "t"}}
    assert summarise([ok]).status == "complete"
    assert summarise([ok, err]).status == "incomplete"  # an error record is an item not scored
    assert summarise([ok], invalid=[{"family": "f", "file": "x.jsonl", "case_id": "z", "problems": ["p"]}]
                     ).status == "incomplete"
    assert summarise([ok, err], status="interrupted").status == "interrupted"


# ----------------------------------------------------------------------------- ids under repeats

REPEAT_CONFTEST = '''
def pytest_tooleffect_predicates():
    def boom(value, ctx):
        raise RuntimeError("predicate exploded")
    return {"boom": boom}


def pytest_tooleffect_agent(policy, config):
    if policy.name != "mine":
        return None

    def decide(state):
        if state.case_id == "agent-err" and state.trial == 2:
            raise RuntimeError("agent fell over on trial 2")
        if state.case_id in ("oracle-err", "fails"):
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_thread", "arguments": '{"thread_id": "t"}'}}]}
        return {"role": "assistant", "content": "done"}
    return decide
'''


def _repeat_case(cid: str, label: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "user", "content": f"[{cid}] please help"}], "label": label, "source": "authored"}


@pytest.mark.parametrize("workers", [0, 2])
def test_record_ids_carry_the_trial_on_every_path(pytester: pytest.Pytester, workers: int) -> None:
    """Scored, failed, provider error, agent error and oracle error records under --tooleffect-repeats 2."""
    cases = [_repeat_case("ok", {"valid_actions": [{"tool": None}]}),
             _repeat_case("fails", {"valid_actions": [{"tool": None}]}),
             _repeat_case("agent-err", {"valid_actions": [{"tool": None}]}),
             _repeat_case("oracle-err", {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "t"}}]})]
    write_demo(pytester.path, cases)
    (pytester.path / "oracle" / "demo.yaml").write_text("fields:\n  read_thread.thread_id: {predicates: [{callable: boom}]}\n")
    pytester.makeconftest(REPEAT_CONFTEST)
    pytester.makepyprojecttoml("[tool.tooleffect.policies.mine]\ntemperature = 0.0\n")

    def script(body: dict[str, Any]) -> Reply:  # the model policy: every request fails on the server
        return Reply(status=500)

    with ScriptedServer(script) as srv:
        result = pytester.runpytest("cases/", f"{OPT_REPEATS}=2", "--tooleffect-policy=mine",
                                    f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}",
                                    f"{OPT_RETRIES}=0", f"{OPT_REPORT}=r.json",
                                    *(["-n", str(workers)] if workers else []))
    # mine: ok ×2 pass, fails ×2 fail, agent-err passes once and errors once, oracle-err ×2 scoring errors
    # (failed items); the model: 8 provider errors
    result.assert_outcomes(passed=3, failed=4, errors=9)
    records = _records(pytester.path)
    ids = [r["id"] for r in records]
    assert len(ids) == 16 and len(set(ids)) == 16, Counter(ids).most_common(3)
    for r in records:
        assert r["id"] == record_id("demo", r["case_id"], r["policy"], r["trial"], 2), r
        assert r["id"].endswith(f":{r['trial']}]")
    kinds = Counter((r["policy"], r["outcome"], (r["error"] or {}).get("type")) for r in records)
    assert kinds[("mine", "error", "OracleError")] == 2 and kinds[("mine", "error", "RuntimeError")] == 1
    assert kinds[("mine", "scored", None)] == 5 and kinds[("openai/local-test", "error", "InternalServerError")] == 8
    rep = _report(pytester.path / "r.json")
    for block in rep["blocks"]:
        errs = [e["id"] for e in block["errors"]]
        assert len(errs) == len(set(errs)) and all(e.endswith(("1]", "2]")) for e in errs)
    # the item names are the record ids' tails: one function makes both
    result.stdout.fnmatch_lines(["*demo/agent-err[[]mine:2[]]*"])


def test_item_name_is_the_record_id_tail() -> None:
    assert record_id("f", "c", "p", 2, 3) == "f/" + item_name("c", "p", 2, 3) == "f/c[p:2]"
    assert item_name("c", "p") == "c[p]"
    with pytest.raises(ValueError, match="trial 4 of 3"):
        item_name("c", "p", 4, 3)


# ----------------------------------------------------------------------------- small classes


def test_small_classes_under_the_option_and_the_ini_key(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, CASES[:6])  # single 3 rows, no_tool 3 rows
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    result.stdout.fnmatch_lines(["*small classes (fewer than 20 rows; --tooleffect-min-class-n): single n=3 (one row: "
                                 "33.3 points of its rate, 16.7 of the macro-average), no_tool n=3*"])
    block = _report(pytester.path / "r.json")["blocks"][0]
    assert block["min_class_n"] == 20 and set(block["small_classes"]) == {"single", "no_tool"}
    assert block["macro"]["name_ci95_pct"] is not None and block["micro"]["name_args_ci95_pct"] is not None
    pytester.runpytest("cases/", f"{OPT_REPORT}=r.json", "--tooleffect-min-class-n=3")
    assert _report(pytester.path / "r.json")["blocks"][0]["small_classes"] == {}
    pytester.makeini("[pytest]\ntooleffect_min_class_n = 4\n")
    pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    assert _report(pytester.path / "r.json")["blocks"][0]["min_class_n"] == 4
    pytester.makeini("[pytest]\ntooleffect_min_class_n = few\n")
    bad = pytester.runpytest("cases/")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*ini tooleffect_min_class_n = 'few'*"])


def test_the_default_minimum_is_the_reports() -> None:
    import inspect

    from pytest_tooleffect.options import DEFAULT_MIN_CLASS_N

    assert inspect.signature(summarise).parameters["min_class_n"].default == DEFAULT_MIN_CLASS_N


def test_the_markdown_summary_says_the_run_is_incomplete(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, CASES + BAD)
    pytester.runpytest("cases/", "--tooleffect-summary-md=summary.md").assert_outcomes(
        passed=3, failed=2, skipped=1, xfailed=1, errors=2)
    text = (pytester.path / "summary.md").read_text()
    assert "Report status: incomplete (2 invalid cases, 1 skipped; none in any rate)." in text
    assert "Invalid cases in demo: 2: `h-unknown-tool`, `j-bad-type`." in text


_CRASH_IN_SETUP = '''
import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if "b-create-ok" in item.nodeid:
        os._exit(3)  # the worker dies before the item's decision is made
'''


@pytest.mark.subprocess
@pytest.mark.parametrize(("args", "crash", "failed", "not_run"), [
    (["-x"], False, [], ["d-stop", "e-redundant", "f-duplicate"]),
    (["-n", "2"], True, ["b-create-ok"], []),
    (["-n", "1", "--max-worker-restart=0"], True, ["b-create-ok"],
     ["c-create-utc", "d-stop", "e-redundant", "f-duplicate"]),
], ids=["exitfirst", "worker-crash", "worker-limit"])
def test_items_that_end_with_no_record_are_listed_and_make_the_report_incomplete(
        pytester: pytest.Pytester, args: list[str], crash: bool, failed: list[str], not_run: list[str]) -> None:
    """A crashed worker's item, and the items a stopped run never reached, are in the report by node
    id with why, and its status is incomplete (before, it said complete with those items gone).
    """
    write_demo(pytester.path, CASES[:6])
    if crash:
        pytester.makeconftest(_CRASH_IN_SETUP)
    result = pytester.runpytest_subprocess("cases/", f"{OPT_REPORT}=r.json", f"{OPT_HTML}=r.html", "-p", "no:randomly",
                                           *args, timeout=120)
    rep = _report(pytester.path / "r.json")
    scored = {r["case_id"] for r in _records(pytester.path)}
    assert rep["status"] == "incomplete"
    (un,) = rep["unrecorded"]
    ids = {i.split("::")[-1].split("[")[0]: i for i in un["ids"]}
    assert un["family"] == "demo" and un["count"] == len(failed) + len(not_run) == len(un["ids"])
    assert sorted(ids) == sorted(failed + not_run) and not scored & set(ids)
    assert all(i.startswith("cases/demo/") for i in un["ids"])
    from pytest_tooleffect.report.reporter import FAILED_OUTSIDE, NOT_RUN
    assert un["reasons"] == {r: n for r, n in ((FAILED_OUTSIDE, len(failed)), (NOT_RUN, len(not_run))) if n}
    n = un["count"]
    result.stdout.fnmatch_lines([f"*tooleffect report status: incomplete (0 invalid cases, 0 errors, 0 skipped, "
                                 f"{n} without a record)*", f"*without a record in family demo: {n} (*"])
    check = subprocess.run([sys.executable, str(REPO / "scripts" / "report-errors"), str(pytester.path / "r.json")],
                           capture_output=True, text=True)
    assert check.returncode == 1 and "without a record" in check.stderr, check.stderr
    page = (pytester.path / "r.html").read_text()
    assert f"family demo: {n} without a record" in page and all(f"<code>{i}</code>" in page for i in un["ids"])


def test_items_never_reached_are_listed_with_the_rootdir_elsewhere(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """With ``--rootdir`` outside the cases, pytest names their files relative to the argument
    they were found under: the items a stopped run never reached are still listed.
    """
    write_demo(pytester.path, CASES[:6])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pytester.runpytest("cases", "-x", f"--rootdir={elsewhere}", f"{OPT_REPORT}={pytester.path / 'r.json'}",
                       "-p", "no:randomly")
    rep = _report(pytester.path / "r.json")
    assert rep["status"] == "incomplete"
    (un,) = rep["unrecorded"]
    assert un["family"] == "demo" and un["count"] == 3, un


@pytest.mark.parametrize("option", ["--setup-plan", "--setup-only", "--collect-only"])
def test_a_run_that_runs_no_item_lists_none_without_a_record(pytester: pytest.Pytester, option: str) -> None:
    write_demo(pytester.path, CASES[:6])
    pytester.runpytest("cases/", option, f"{OPT_REPORT}=r.json")
    path = pytester.path / "r.json"
    assert not path.exists() or _report(path)["unrecorded"] == []


def test_an_xfail_that_is_not_run_is_listed_as_such(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, CASES[:6])
    pytester.makeconftest("""
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if "d-stop" in item.nodeid:
            item.add_marker(pytest.mark.xfail(run=False, reason="not now"))
""")
    pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    (un,) = _report(pytester.path / "r.json")["unrecorded"]
    assert un["reasons"] == {"marked xfail(run=False): not run": 1} and un["ids"][0].endswith("d-stop[replay]")
