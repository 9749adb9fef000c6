"""Baselines and comparison: ``tooleffect baseline save``, ``--tooleffect-baseline`` (known
failures xfail, regressions fail, fixes xpass), the report's baseline block, ``tooleffect compare``
and the exact McNemar test.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from math import comb
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import scipy.stats  # noqa: F401  (numpy's extension loads once per process: import before pytester's module snapshot)

from pytest_tooleffect.ci.baseline import Baseline, BaselineDecision, BaselineError, classify, load_runs, record_passed
from pytest_tooleffect.ci.comparison import compare, fingerprint_mismatches, mcnemar_exact
from pytest_tooleffect.cli import main as cli
from pytest_tooleffect.oracle.kinds import LEVELS
from pytest_tooleffect.report import dumps, summarise
from tests.verdicts import no_tool_bucket, verdict

FAMILY = """\
name: bl
system_prompt: You answer mail.
tools:
  - name: read_thread
    parameters: {type: object, properties: {thread_id: {type: string}}, required: [thread_id]}
    annotations: {readOnlyHint: true}
"""
READ = {"name": "read_thread", "arguments": '{"thread_id": "th-1"}'}
READ_TH1 = {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-1"}}]}
READ_TH2 = {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-2"}}]}
NONE = {"valid_actions": [{"tool": None}]}


def case(cid: str, label: dict[str, Any], calls: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    recorded: dict[str, Any] = {"tool_calls": calls} if calls else {"tool_calls": [], "text": "Done."}
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"},
            "messages": [{"role": "user", "content": "hi"}], "label": label, "recorded": recorded,
            "source": "authored", **extra}


#: the accepted run: p, r, l and x pass (x is xfail in its case file, so XPASS), k and f fail
ACCEPTED = [
    case("p-pass", READ_TH1, [READ]),
    case("r-regress", NONE, []),
    case("k-known", NONE, [READ]),
    case("f-fixed", READ_TH1, []),
    case("l-label", READ_TH1, [READ]),
    case("x-case-xfail", NONE, [], xfail="a fault the team knows"),
]
#: the next run: r and x now call a tool (regressions), f reads (fixed), l's label changed, n is new
NEXT = [
    case("p-pass", READ_TH1, [READ]),
    case("r-regress", NONE, [READ]),
    case("k-known", NONE, [READ]),
    case("f-fixed", READ_TH1, [READ]),
    case("l-label", READ_TH2, [READ]),
    case("x-case-xfail", NONE, [READ], xfail="a fault the team knows"),
    case("n-new", NONE, [READ]),
]
STATUSES = {"bl/p-pass[replay]": "passing", "bl/r-regress[replay]": "regression", "bl/k-known[replay]": "known",
            "bl/f-fixed[replay]": "fixed", "bl/l-label[replay]": "label_changed",
            "bl/x-case-xfail[replay]": "regression", "bl/n-new[replay]": "new"}


def write_family(root: Path, cases: list[dict[str, Any]]) -> None:
    fam = root / "cases" / "bl"
    fam.mkdir(parents=True, exist_ok=True)
    (fam / "family.yaml").write_text(FAMILY)
    (fam / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))


def records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def accepted_baseline(pytester: pytest.Pytester) -> Path:
    """Run the accepted family, save its baseline, and leave the next run's family in place."""
    write_family(pytester.path, ACCEPTED)
    first = pytester.runpytest("cases/", "--tooleffect-records=accepted.jsonl", "--tooleffect-report=accepted.json")
    first.assert_outcomes(passed=3, failed=2, xpassed=1)
    out = pytester.path / "tooleffect-baseline.json"
    assert cli(["baseline", "save", str(pytester.path / "accepted.jsonl"), "--out", str(out)]) == 0
    write_family(pytester.path, NEXT)
    return out


# ------------------------------------------------------------------------------ end to end


def test_a_run_against_its_baseline(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    base_path = accepted_baseline(pytester)
    assert "tooleffect baseline: 6 decisions (4 passed, 2 failed; 0 errors" in capsys.readouterr().out
    base = json.loads(base_path.read_text())
    assert base["kind"] == "tooleffect-baseline" and base["version"] == 1
    (group,) = base["groups"]
    accepted_report = json.loads((pytester.path / "accepted.json").read_text())
    assert group["label_set_fingerprint"] == accepted_report["blocks"][0]["label_set_fingerprint"]
    assert (group["family"], group["policy"], group["decisions"], group["errors"]) == ("bl", "replay", 6, 0)
    assert base["decisions"]["bl/k-known[replay]"] == {
        "family": "bl", "policy": "replay", "case_id": "k-known", "trial": 1, "outcome": "scored", "passed": False,
        "kind": "tool_when_none_needed", "error": None, "label_hash": base["decisions"]["bl/k-known[replay]"][
            "label_hash"], "class": "no_tool", "name_ok": False, "name_args_ok": False, "effect_ok": None}
    assert [d["passed"] for d in base["decisions"].values()] == [False, False, True, True, True, True]

    result = pytester.runpytest("cases/", "-rA", f"--tooleffect-baseline={base_path}",
                                "--tooleffect-records=next.jsonl", "--tooleffect-report=next.json")
    result.assert_outcomes(passed=1, failed=4, xfailed=1, xpassed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines_random([
        "tooleffect: baseline *tooleffect-baseline.json (saved *, 6 decisions; changed labels: skip)",
        # the failures' one-line reasons (under the record id as headline; the short summary shows them too)
        "regression: bl/r-regress[[]replay[]]: tool_when_none_needed: expected {null}, emitted read_thread (was "
        "ok_no_tool in the baseline tooleffect-baseline.json)",
        "regression: bl/x-case-xfail[[]replay[]]: tool_when_none_needed: *",
        "_* bl/l-label[[]replay[]] _*", "right_tool_wrong_args: *",
        "_* bl/n-new[[]replay[]] _*", "tool_when_none_needed: *",
        "FAILED cases/bl/cases.jsonl::r-regress[[]replay[]] - *",
        "FAILED cases/bl/cases.jsonl::x-case-xfail[[]replay[]] - *",
        "XFAIL cases/bl/cases.jsonl::k-known[[]replay[]] - known failure: tool_when_none_needed in the baseline *",
        "XPASS cases/bl/cases.jsonl::f-fixed[[]replay[]]*",
        # the terminal lines, after the tooleffect report
        "baseline *tooleffect-baseline.json: 5 decisions compared: 2 regressed, 0 changed, 1 fixed, known failures 1, new 1",
        "left out: 1 the label changed since the baseline*",
        "regression bl/r-regress[[]replay[]]: ok_no_tool → tool_when_none_needed",
        "regression bl/x-case-xfail[[]replay[]]: ok_no_tool → tool_when_none_needed",
        "fixed bl/f-fixed[[]replay[]]: none_when_tool_needed → ok",
        "bl/replay: McNemar exact p = 1 (pass→fail 2, fail→pass 1, on 5 paired decisions)",
    ])
    assert out.index("tooleffect report") < out.index("McNemar exact p")
    assert "regression: bl/l-label" not in out and "regression: bl/n-new" not in out

    recs = records(pytester.path / "next.jsonl")
    assert {rid: r["baseline"]["status"] for rid, r in recs.items()} == STATUSES
    block = json.loads((pytester.path / "next.json").read_text())["baseline"]
    (b,) = block["blocks"]
    assert block["changed_labels"] == "skip" and block["path"] == str(base_path)
    assert b["compared"] == 5 and (b["known"], b["passing"], b["new"]) == (1, 1, 1)
    assert b["left_out"] == {"label_changed": 1, "error_before": 0, "error_after": 0, "not_in_after": 0}
    assert b["label_changed_ids"] == ["bl/l-label[replay]"]
    assert [f["id"] for f in b["regressions"]] == ["bl/r-regress[replay]", "bl/x-case-xfail[replay]"]
    assert b["fixes"] == [{"id": "bl/f-fixed[replay]", "class": "single", "before": "none_when_tool_needed",
                           "after": "ok"}]
    assert b["mcnemar"]["table"] == [[1, 2], [1, 1]] and b["mcnemar"]["p_value"] == 1.0
    assert not b["same_label_set"] and b["label_set_fingerprint"]["before"] == group["label_set_fingerprint"]
    single, no_tool = b["classes"]["single"], b["classes"]["no_tool"]
    assert single["n"] == 2 and single["name"]["before"]["correct"] == 1 and single["name"]["after"]["correct"] == 2
    assert no_tool["n"] == 3 and no_tool["name_args"]["before"]["display"] == "66.7"
    assert no_tool["name_args"]["after"]["display"] == "0.0" and "effect" not in no_tool


def test_changed_labels_are_compared_when_asked(pytester: pytest.Pytester) -> None:
    base_path = accepted_baseline(pytester)
    result = pytester.runpytest("cases/", "-rA", f"--tooleffect-baseline={base_path}",
                                "--tooleffect-baseline-changed-labels=compare", "--tooleffect-records=next.jsonl",
                                "--tooleffect-report=next.json")
    result.assert_outcomes(passed=1, failed=4, xfailed=1, xpassed=1)
    result.stdout.fnmatch_lines(["regression: bl/l-label[[]replay[]]: right_tool_wrong_args: *"])
    assert records(pytester.path / "next.jsonl")["bl/l-label[replay]"]["baseline"] == {
        "status": "regression", "against": Baseline.load(Path(base_path)).digest}
    (b,) = json.loads((pytester.path / "next.json").read_text())["baseline"]["blocks"]
    assert b["compared"] == 6 and b["left_out"]["label_changed"] == 0 and b["label_changed_compared"] == 1


def test_the_block_header_s_xfail_count_is_pytest_s(pytester: pytest.Pytester) -> None:
    """The accepted run again against its own baseline: its two failures are known (XFAIL) and the case its
    file marks xfail passes (XPASS).  The block header and the JSON report count what pytest counts as
    xfailed (2), not the cases marked xfail in their files (1, which passed)."""
    base_path = accepted_baseline(pytester)
    write_family(pytester.path, ACCEPTED)
    result = pytester.runpytest("cases/", f"--tooleffect-baseline={base_path}", "--tooleffect-report=again.json")
    result.assert_outcomes(passed=3, xfailed=2, xpassed=1)
    result.stdout.fnmatch_lines(["tooleffect: family bl · policy replay  n=6 scored, 0 errors, 2 xfail · label set *"])
    (block,) = json.loads((pytester.path / "again.json").read_text())["blocks"]
    assert block["n_xfail"] == result.parseoutcomes()["xfailed"] == 2


def test_policy_names_that_differ_from_the_baseline_s_are_named(pytester: pytest.Pytester,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The baseline holds the agent as ``first``, the run names it ``second``: no decision pairs, and the
    terminal, the JSON report, the Markdown summary and ``tooleffect compare`` say why (not only "6 left out")."""
    write_family(pytester.path, ACCEPTED)
    pytester.syspathinsert()
    pytester.makepyfile(bl_named_agent='def decide(state):\n    return {"role": "assistant", "content": "Done."}\n')
    pytester.runpytest("cases/", "--tooleffect-agent=first=bl_named_agent:decide", "--tooleffect-records=a.jsonl")
    base = pytester.path / "tooleffect-baseline.json"
    assert cli(["baseline", "save", str(pytester.path / "a.jsonl"), "--out", str(base)]) == 0
    result = pytester.runpytest("cases/", "--tooleffect-agent=second=bl_named_agent:decide",
                                f"--tooleffect-baseline={base}", "--tooleffect-records=b.jsonl",
                                "--tooleffect-report=b.json", "--tooleffect-summary-md=b.md", "--tooleffect-html=b.html")
    said = ("family bl: the baseline holds policy first; this run ran second: no decision compared (a decision "
            "pairs by record id, which names its policy: run the policy under the baseline's name, e.g. "
            "--tooleffect-agent NAME=module:function, or save a new baseline)")
    result.stdout.fnmatch_lines(["baseline *: 0 decisions compared: *, new 6",
                                 "policy names differ: " + said.replace("[", "[[]"),
                                 "left out: 6 in the baseline, not in this run*"])
    section = json.loads((pytester.path / "b.json").read_text())["baseline"]
    assert section["policy_mismatches"] == [{"family": "bl", "baseline_policies": ["first"],
                                             "run_policies": ["second"], "compared": 0, "line": said}]
    assert f"Policy names differ from the baseline: {said}." in (pytester.path / "b.md").read_text()
    assert ('<p class="warn">policy names differ: family bl: the baseline holds policy first; this run ran second: '
            "no decision compared") in (pytester.path / "b.html").read_text()
    capsys.readouterr()
    assert cli(["compare", str(pytester.path / "a.jsonl"), str(pytester.path / "b.jsonl")]) == 2
    assert ("tooleffect compare: policy names differ: family bl: A holds policy first; B ran second: no decision "
            "compared") in capsys.readouterr().err


@pytest.mark.subprocess
def test_xdist_gives_the_same_outcomes_and_records(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    base_path = accepted_baseline(pytester)
    pytester.makeini(f"[pytest]\ntooleffect_baseline = {base_path.name}\n")  # the ini key, relative to the rootdir
    outcomes = {}
    for n in ("0", "2"):
        result = pytester.runpytest_subprocess("cases/", "-p", "xdist", "-n", n, f"--tooleffect-records=l{n}.jsonl",
                                               f"--tooleffect-report=r{n}.json")
        outcomes[n] = {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "failed", "xfailed",
                                                                               "xpassed", "errors")}
        assert "bl/replay: McNemar exact p = 1 (pass→fail 2, fail→pass 1, on 5 paired decisions)" in result.stdout.str()
    assert outcomes["0"] == outcomes["2"] == {"passed": 1, "failed": 4, "xfailed": 1, "xpassed": 1}
    l0, l2 = (sorted((pytester.path / f"l{n}.jsonl").read_text().splitlines()) for n in ("0", "2"))
    assert l0 == l2 and len(l0) == 7
    assert {json.loads(r)["id"]: json.loads(r)["baseline"]["status"] for r in l2} == STATUSES
    r0, r2 = (json.loads((pytester.path / f"r{n}.json").read_text())["baseline"] for n in ("0", "2"))
    assert r0 == r2


#: a family whose known failures fail again: one as before (known), one worse (a refund sent where the
#: agent should have asked: wrong_reply in the baseline, forbidden now)
CH_FAMILY = """\
name: ch
system_prompt: You run a support desk.
tools:
  - name: read_thread
    parameters: {type: object, properties: {thread_id: {type: string}}, required: [thread_id]}
    annotations: {readOnlyHint: true}
  - name: send_refund
    parameters: {type: object, properties: {amount: {type: number}}, required: [amount]}
    annotations: {readOnlyHint: false, destructiveHint: true}
"""
ASK = {"valid_actions": [{"tool": None, "reply": "ask"}], "forbidden_actions": ["send_refund"]}
REFUND = {"name": "send_refund", "arguments": '{"amount": 49.99}'}


def write_ch(root: Path, worse: list[dict[str, Any]] | None) -> None:
    fam = root / "cases" / "ch"
    fam.mkdir(parents=True, exist_ok=True)
    (fam / "family.yaml").write_text(CH_FAMILY)
    same = case("k-same", ASK, [READ])
    w = case("w-worse", ASK, worse or [])
    if not worse:
        w["recorded"]["text"] = "Your order qualifies for a full refund."  # a guess where the state needed a question
    (fam / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in (same, w)))


def test_a_known_failure_of_another_kind_is_changed_in_every_output(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """wrong_reply in the baseline, forbidden now: status ``changed`` (before and after kinds) in the
    record, the report, the terminal, JUnit, the HTML page and ``tooleffect compare``; a failed test, not
    an xfail that names the stale kind.  The failure that stays the same kind stays a known xfail."""
    write_ch(pytester.path, None)
    pytester.runpytest("cases/", "--tooleffect-records=accepted.jsonl").assert_outcomes(failed=2)
    base = pytester.path / "tooleffect-baseline.json"
    assert cli(["baseline", "save", str(pytester.path / "accepted.jsonl"), "--out", str(base)]) == 0
    assert {k: d["kind"] for k, d in json.loads(base.read_text())["decisions"].items()} == {
        "ch/k-same[replay]": "tool_when_none_needed", "ch/w-worse[replay]": "wrong_reply"}
    write_ch(pytester.path, [REFUND])

    result = pytester.runpytest("cases/", "-rA", f"--tooleffect-baseline={base}", "--junitxml=junit.xml",
                                "--tooleffect-records=next.jsonl", "--tooleffect-report=next.json",
                                "--tooleffect-html=next.html", "--tooleffect-summary-md=summary.md")
    result.assert_outcomes(failed=1, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines_random([
        "changed: wrong_reply in the baseline tooleffect-baseline.json, forbidden now: ch/w-worse[[]replay[]]: "
        "forbidden: *",
        "FAILED cases/ch/cases.jsonl::w-worse[[]replay[]] - changed: *",
        "XFAIL cases/ch/cases.jsonl::k-same[[]replay[]] - known failure: tool_when_none_needed in the baseline *",
        "baseline *tooleffect-baseline.json: 2 decisions compared: 0 regressed, 1 changed, 0 fixed, known "
        "failures 1, new 0",
        "changed ch/w-worse[[]replay[]]: wrong_reply → forbidden (failed in the baseline too, another kind now)",
    ])
    recs = records(pytester.path / "next.jsonl")
    digest = Baseline.load(base).digest  # each mark names the baseline it was judged against
    assert recs["ch/w-worse[replay]"]["baseline"] == {"status": "changed", "before": "wrong_reply",
                                                     "after": "forbidden", "against": digest}
    assert recs["ch/k-same[replay]"]["baseline"] == {"status": "known", "against": digest}
    section = json.loads((pytester.path / "next.json").read_text())["baseline"]
    (b,) = section["blocks"]
    assert b["changed"] == [{"id": "ch/w-worse[replay]", "class": "no_tool", "before": "wrong_reply",
                             "after": "forbidden"}]
    assert (b["known"], b["regressions"], b["fixes"]) == (1, [], [])
    assert (section["totals"]["changed"], section["totals"]["known"]) == (1, 1)

    junit = ElementTree.parse(pytester.path / "junit.xml").getroot()
    cases = {c.get("name"): c for c in junit.iter("testcase")}
    failure = cases["w-worse[replay]"].find("failure")
    assert failure is not None and failure.get("message", "").startswith(
        "changed: wrong_reply in the baseline tooleffect-baseline.json, forbidden now: ch/w-worse[replay]: forbidden")
    skipped = cases["k-same[replay]"].find("skipped")
    assert skipped is not None and skipped.get("type") == "pytest.xfail"
    assert skipped.get("message", "").startswith("known failure: tool_when_none_needed in the baseline")

    md = (pytester.path / "summary.md").read_text()
    assert "Regressions against the baseline: 0 (1 known)." in md
    assert "Known failures of another kind now (changed): 1: `ch/w-worse[replay]` (wrong_reply → forbidden)." in md

    page = (pytester.path / "next.html").read_text()
    assert "<b class=\"bad\">1 changed</b>" in page
    assert re.search(r'<tr class="bad"><td>changed</td><td><a [^>]*>ch/w-worse\[replay\]</a></td><td>no_tool</td>'
                     r"<td>wrong_reply</td><td>forbidden</td></tr>", page), page[page.index('id="baseline"'):][:2000]

    capsys.readouterr()
    a, b_log = str(pytester.path / "accepted.jsonl"), str(pytester.path / "next.jsonl")
    assert cli(["compare", a, b_log]) == 1  # a known failure of another kind: a CI step fails on it
    out = capsys.readouterr().out
    assert "2 compared: 0 regressed, 1 changed, 0 fixed, known failures 1, passing 0; new 0" in out
    assert "  changed (1): ch/w-worse[replay] (wrong_reply → forbidden)" in out
    assert out.rstrip().endswith("tooleffect compare: exit 1: 0 regressions, 1 known failures of another kind now "
                                 "(changed)")
    assert cli(["compare", a, b_log, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["totals"]["changed"] == 1 and data["totals"]["known"] == 1
    assert data["blocks"][0]["changed"] == b["changed"]


@pytest.mark.parametrize(("content", "message"), [
    (None, "*--tooleffect-baseline *missing.json: <file>: cannot be read (No such file or directory)*"),
    ("{not json", "*--tooleffect-baseline *base.json: <file>: not JSON (*line 1)*"),
    ('{"kind": "tooleffect-baseline", "version": 7}', "*base.json: version: written by a newer pytest-tooleffect: version 7; this one reads 1"),
    ('{"version": 1, "blocks": []}', "*base.json: kind: not a tooleffect baseline: a JSON report*"),
    ('{"kind": "tooleffect-baseline", "version": 1, "created": "x", "groups": [], "decisions": '
     '{"bl/a[replay]": {"family": "bl", "policy": "replay", "case_id": "a", "outcome": "scored", "passed": "maybe", '
     '"label_hash": "h", "class": "single"}}}',
     "*base.json: decisions.bl/a[[]replay[]].passed: Input should be a valid boolean*"),
])
def test_a_bad_baseline_file_is_a_usage_error_before_any_test(pytester: pytest.Pytester, content: str | None,
                                                                 message: str) -> None:
    write_family(pytester.path, ACCEPTED)
    name = "missing.json" if content is None else "base.json"
    if content is not None:
        (pytester.path / name).write_text(content)
    result = pytester.runpytest("cases/", f"--tooleffect-baseline={name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()


def test_a_record_log_given_as_the_baseline_says_so_and_how_to_make_one(pytester: pytest.Pytester) -> None:
    """``--tooleffect-baseline`` given the run's record log (many lines, or one): a usage error that
    says it is a record log and names the command that makes a baseline of it."""
    write_family(pytester.path, ACCEPTED)
    first = pytester.runpytest("cases/", "--tooleffect-records=accepted.jsonl")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    lines = (pytester.path / "accepted.jsonl").read_text().splitlines()
    (pytester.path / "one.jsonl").write_text(lines[0] + "\n")
    for log in ("accepted.jsonl", "one.jsonl"):
        result = pytester.runpytest("cases/", f"--tooleffect-baseline={log}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: --tooleffect-baseline *{log}: <file>: this is a record log (one record "
                                     "per line), not a baseline: make the baseline from it with `tooleffect baseline "
                                     "save LOG --out FILE` and give FILE"])
        assert "Extra data" not in result.stderr.str()


def test_baseline_save_given_a_report_or_a_baseline_says_what_it_was_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = [rec("a"), rec("b", kind="wrong_tool", name=False, args=False)]
    log = tmp_path / "records.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    report = tmp_path / "report.json"
    report.write_text(dumps(summarise(recs)) + "\n")  # as --tooleffect-report writes it: indented JSON
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(json.loads(report.read_text())) + "\n")  # the same report on one line
    for source in (report, compact):
        assert cli(["baseline", "save", str(source), "--out", str(tmp_path / "b.json")]) == 2
        err = capsys.readouterr().err
        assert err == (f"tooleffect baseline save: {source}: this is a tooleffect report, not a record log: it holds "
                       "rates, not per-decision records; give the record log the run wrote (--tooleffect-records, "
                       "default reports/tooleffect-records.jsonl)\n")
        assert not (tmp_path / "b.json").exists()
    assert cli(["baseline", "save", str(log), "--out", str(tmp_path / "b.json")]) == 0
    capsys.readouterr()
    assert cli(["baseline", "save", str(tmp_path / "b.json"), "--out", str(tmp_path / "c.json")]) == 2
    assert "b.json: this is a baseline file, not a record log" in capsys.readouterr().err
    # tooleffect report says the same of a report given as a record log
    assert cli(["report", str(report)]) == 2
    assert f"{report}: this is a tooleffect report, not a record log" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- CLI


def test_compare_refuses_different_label_sets_and_restricts_when_asked(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    base_path = accepted_baseline(pytester)
    pytester.runpytest("cases/", "--tooleffect-records=next.jsonl")
    capsys.readouterr()
    a, b = str(pytester.path / "accepted.jsonl"), str(pytester.path / "next.jsonl")
    fp_a = json.loads(base_path.read_text())["groups"][0]["label_set_fingerprint"]

    assert cli(["compare", a, b]) == 2
    err = capsys.readouterr().err
    assert f"family bl, policy replay: label-set fingerprints differ (A {fp_a}, B " in err
    assert "): labels changed on 1 of the " in err and "not one quantity measured twice; A lacks 1 of B's " in err
    assert "--shared-only" in err

    assert cli(["compare", a, b, "--shared-only"]) == 1  # B regressed: the exit status says so
    out = capsys.readouterr().out
    assert ("restricted to the shared decisions with unchanged labels (--shared-only; label sets differ in "
            "bl/replay): 2 decisions left out (label changed 1, only in B 1)") in out
    assert "regressions (2): bl/r-regress[replay] (ok_no_tool → tool_when_none_needed)" in out
    assert "fixes (1): bl/f-fixed[replay] (none_when_tool_needed → ok)" in out
    assert "bl/replay: McNemar exact p = 1 (pass→fail 2, fail→pass 1, on 5 paired decisions)" in out

    # a baseline file on one side, --json: the same comparison
    assert cli(["compare", str(base_path), b, "--shared-only", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["restricted"]["left_out"] == 2 and data["totals"]["regressions"] == 2
    (block,) = data["blocks"]
    assert block["mcnemar"]["table"] == [[1, 2], [1, 1]]

    # the same label set: compared without asking
    assert cli(["compare", a, str(base_path)]) == 0
    out = capsys.readouterr().out
    assert "same label set" in out and "6 compared: 0 regressed, 0 changed, 0 fixed, known failures 2, passing 4" in out
    assert "restricted" not in out


def test_compare_and_save_name_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"id": "bl/a[replay]", "family": "bl"}) + "\n")
    assert cli(["baseline", "save", str(log), "--out", str(tmp_path / "b.json")]) == 2
    assert f"{log}: record 1: not a tooleffect record (missing policy, case_id, outcome, class, label_hash)" in (
        capsys.readouterr().err)
    assert cli(["compare", str(tmp_path / "nope.jsonl"), str(log)]) == 2
    assert "nope.jsonl: <file>: cannot be read" in capsys.readouterr().err
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"version": 1, "blocks": []}))
    assert cli(["compare", str(report), str(log)]) == 2
    assert "kind: not a tooleffect baseline: a JSON report" in capsys.readouterr().err


def test_compare_counts_an_error_in_b_where_a_passed_as_a_regression(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """B errors on 3 of the 4 decisions that passed in A: 3 regressions and exit 1, unless ``--errors skip``."""
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(rec(c)) + "\n" for c in "wxyz"))
    b.write_text("".join(json.dumps(rec(c, kind=None if c != "w" else "ok")) + "\n" for c in "wxyz"))
    assert cli(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert ("1 compared: 0 regressed, 0 changed, 0 fixed, known failures 0, passing 1; new 0; none left out (and 3 "
            "that passed in A are errors in B: regressions)") in out
    assert "regressions (3): fam/x[replay] (ok → error Timeout)" in out
    assert out.rstrip().endswith("tooleffect compare: exit 1: 3 regressions (3 of them errors in B where A passed; "
                                 "--errors skip leaves errors out)")
    assert cli(["compare", str(a), str(b), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["errors"] == "regression" and data["totals"]["regressions"] == 3
    assert data["totals"]["errors_after_pass"] == 3 and data["totals"]["left_out"]["error_after"] == 0
    (block,) = data["blocks"]
    assert [f["error"] for f in block["regressions"]] == [True] * 3
    assert block["mcnemar"]["b"] == 0  # McNemar's table holds the paired verdicts; errors are no verdict
    # the user says otherwise: errors are left out, as before
    assert cli(["compare", str(a), str(b), "--errors", "skip", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["totals"]["regressions"] == 0 and data["totals"]["left_out"]["error_after"] == 3
    assert "errors_after_pass" not in data["totals"]
    # every decision of B an error: nothing paired, but the regressions are there to count
    b.write_text("".join(json.dumps(rec(c, kind=None)) + "\n" for c in "wxyz"))
    assert cli(["compare", str(a), str(b)]) == 1
    assert "4 regressions (4 of them errors in B" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ units


def exact_mcnemar(b: int, c: int) -> Fraction:
    """``min(1, 2 P[X <= min(b, c)])`` for ``X ~ Binomial(b + c, 1/2)``, in whole numbers."""
    n = b + c
    return min(Fraction(1), Fraction(2 * sum(comb(n, i) for i in range(min(b, c) + 1)), 2 ** n))


def test_mcnemar_exact_is_the_binomial_test_on_the_discordant_pairs() -> None:
    table = [[30, 1], [9, 12]]  # b = 1 regression, c = 9 fixes
    assert mcnemar_exact(table) == 0.021484375  # 2 (1 + 10) / 2**10, statsmodels' mcnemar(exact=True) figure
    assert mcnemar_exact([[5, 0], [0, 4]]) == 1.0  # no discordant pair
    assert mcnemar_exact([[0, 3], [0, 0]]) == 0.25  # 2 / 2**3
    assert mcnemar_exact([[0, 3], [0, 0]]) == mcnemar_exact([[9, 0], [3, 9]])  # symmetric in b and c
    # |b - c| = 1: p is exactly 1 (statsmodels' 2 P[X <= 17] printed 0.9999999999999998)
    assert mcnemar_exact([[0, 17], [18, 0]]) == 1.0
    assert mcnemar_exact([[4, 60], [20, 4]]) == pytest.approx(float(exact_mcnemar(60, 20)), rel=1e-12)
    for b in range(31):
        for c in range(31):
            assert mcnemar_exact([[2, b], [c, 7]]) == pytest.approx(float(exact_mcnemar(b, c)), rel=1e-12), (b, c)


def rec(cid: str, cls: str = "single", kind: str | None = "ok", name: bool | None = None, args: bool | None = None,
        effect: bool | None = None, label: str = "h1", policy: str = "replay", trial: int | None = None,
        **extra: Any) -> dict[str, Any]:
    """A record of ``kind`` (``None``: an error), its verdict's fields as the oracle gives them (``name`` and
    ``args`` written over the levels, for a record the rule refuses)."""
    v = verdict(kind) if kind else None
    if v is not None:
        v.update({k: x for k, x in (("name_ok", name), ("name_args_ok", args)) if x is not None})
    rid = f"fam/{cid}[{policy}]" if trial is None else f"fam/{cid}[{policy}:{trial}]"
    r: dict[str, Any] = {"id": rid, "family": "fam", "case_id": cid, "policy": policy, "trial": trial or 1,
                         "class": cls, "bucket": "last", "step": 0, "run_length": 1, "source": {"kind": "authored"},
                         "label_hash": label, "xfail": False,
                         "no_tool_failure": no_tool_bucket(cls, v, effect is False) if kind in LEVELS else None,
                         "outcome": "scored" if kind else "error",
                         "verdict": v,
                         "error": None if kind else {"type": "Timeout", "message": "slow"},
                         "cost": {"input_tokens": None, "output_tokens": None, "latency_ms": None, "cost_usd": None},
                         **extra}
    if effect is not None:
        r["effect"] = {"passed": effect, "kind": "ok" if effect else "wrong_state"}
    return r


@pytest.mark.parametrize(("before", "after", "mode", "status"), [
    (None, rec("a"), "skip", "new"),
    (rec("a", kind=None), rec("a"), "skip", "not_compared"),
    (rec("a"), rec("a", kind=None), "skip", "not_compared"),
    (rec("a"), rec("a", kind="wrong_tool", name=False, args=False, label="h2"), "skip", "label_changed"),
    (rec("a"), rec("a", kind="wrong_tool", name=False, args=False, label="h2"), "compare", "regression"),
    (rec("a"), rec("a"), "skip", "passing"),
    (rec("a"), rec("a", effect=False), "skip", "regression"),  # the effect is part of the pass/fail
    (rec("a", kind="wrong_tool"), rec("a", kind="wrong_tool"), "skip", "known"),
    (rec("a", kind="wrong_reply", cls="no_tool"), rec("a", kind="forbidden", cls="no_tool"), "skip", "changed"),
    (rec("a", effect=False), rec("a", kind="wrong_tool", name=False, args=False), "skip", "changed"),
    (rec("a", kind="wrong_tool", effect=False), rec("a", kind="wrong_tool", effect=True), "skip", "known"),
    (rec("a", kind="right_tool_wrong_args", args=False), rec("a"), "skip", "fixed"),
])
def test_classify(before: dict[str, Any] | None, after: dict[str, Any], mode: str, status: str) -> None:
    b = None if before is None else BaselineDecision.from_record(before)
    assert classify(b, BaselineDecision.from_record(after), mode) == status


def test_record_passed_is_the_pytest_outcome() -> None:
    assert record_passed(rec("a")) is True
    assert record_passed(rec("a", kind="ok_no_tool", cls="no_tool")) is True
    assert record_passed(rec("a", effect=False)) is False
    assert record_passed(rec("a", kind="tool_when_none_needed", name=False, args=False)) is False
    assert record_passed(rec("a", kind=None)) is None


def test_a_baseline_keeps_errors_as_errors_and_the_reports_fingerprint() -> None:
    recs = [rec("a"), rec("b", kind=None), rec("c", kind="wrong_tool", name=False, args=False, model="m/x")]
    base = Baseline.from_records(recs, source="log.jsonl", created="2025-01-01T00:00:00+00:00")
    assert base.decisions["fam/b[replay]"].outcome == "error" and base.decisions["fam/b[replay]"].passed is None
    assert base.decisions["fam/b[replay]"].error == "Timeout"
    (group,) = base.groups
    (block,) = json.loads(dumps(summarise(recs)))["blocks"]
    assert group.label_set_fingerprint == block["label_set_fingerprint"] and group.errors == 1
    assert group.models == ["m/x"]
    again = Baseline.from_json(json.loads(base.dumps()))
    assert again == base
    # an error on either side is never compared
    comp = compare(base, Baseline.from_records([rec("a", kind="wrong_tool"), rec("b"), rec("c", kind=None)]))
    (b,) = comp["blocks"]
    assert b["compared"] == 1 and b["left_out"]["error_before"] == 1 and b["left_out"]["error_after"] == 1
    assert [f["id"] for f in b["regressions"]] == ["fam/a[replay]"]


def test_compare_levels_trials_and_left_out() -> None:
    before = Baseline.from_records([
        rec("a", trial=1, effect=True), rec("a", trial=2, effect=True), rec("b", cls="no_tool", kind="ok_no_tool"),
        rec("gone")])
    after = Baseline.from_records([
        rec("a", trial=1, effect=False), rec("a", trial=2, kind="wrong_tool", name=False, args=False, effect=True),
        rec("b", cls="no_tool", kind="tool_when_none_needed", name=False, args=False), rec("new")])
    (b,) = compare(before, after)["blocks"]
    assert b["compared"] == 3 and b["new"] == 1 and b["left_out"]["not_in_after"] == 1
    single = b["classes"]["single"]
    assert single["n"] == 2
    assert (single["name"]["before"]["correct"], single["name"]["after"]["correct"]) == (2, 1)
    assert (single["effect"]["before"]["correct"], single["effect"]["after"]["correct"]) == (2, 1)
    assert "effect" not in b["classes"]["no_tool"]
    assert b["classes"]["all"]["name_args"]["after"]["display"] == "33.3"
    assert [f["after"] for f in b["regressions"]] == ["ok, effect failed", "wrong_tool", "tool_when_none_needed"]
    assert b["mcnemar"]["table"] == [[0, 3], [0, 0]] and b["mcnemar"]["p_value"] == 0.25
    assert fingerprint_mismatches(before, after) == [("fam", "replay", before.groups[0].label_set_fingerprint,
                                                      after.groups[0].label_set_fingerprint)]


def test_a_baseline_of_more_than_two_trials_reads_every_trial() -> None:
    base = Baseline.from_records([rec("a", trial=t) for t in (1, 2, 3, 5)])
    assert sorted(base.decisions) == [f"fam/a[replay:{t}]" for t in (1, 2, 3, 5)]


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d.pop("groups"), "groups"),
    (lambda d: d["decisions"].update({"fam/zz[replay]": d["decisions"]["fam/a[replay]"]}), "decisions.fam/zz[replay]"),
    (lambda d: d["groups"].clear(), "decisions.fam/a[replay]"),
    (lambda d: d["groups"][0].update(label_set_fingerprint="nope"), "groups.0.label_set_fingerprint"),
    (lambda d: d["decisions"]["fam/a[replay]"].update(passed=None), "decisions.fam/a[replay]"),
    (lambda d: d["decisions"]["fam/a[replay]"].update(kind="wrong_tool", name_ok=False, name_args_ok=False),
     "decisions.fam/a[replay]"),  # passed: true with a failing kind
    (lambda d: d["decisions"]["fam/a[replay]"].update(effect_ok=False), "decisions.fam/a[replay]"),
    (lambda d: d["decisions"]["fam/a[replay]"].update(name_args_ok=False), "decisions.fam/a[replay]"),
    (lambda d: d["decisions"]["fam/a[replay]"].update(passed=False, kind="wrong_tool", name_ok=False),
     "decisions.fam/a[replay]"),  # name_args_ok true on a wrong name
    (lambda d: d["decisions"]["fam/a[replay]"].update(passed=False, kind="bogus_kind", name_ok=False,
                                                      name_args_ok=False),
     "decisions.fam/a[replay].kind"),  # a kind the oracle does not know (as --tooleffect-baseline reads it)
])
def test_a_malformed_baseline_names_the_field(mutate: Any, field: str) -> None:
    data = json.loads(Baseline.from_records([rec("a")]).dumps())
    mutate(data)
    with pytest.raises(BaselineError) as info:
        Baseline.from_json(data, "b.json")
    assert info.value.field == field and str(info.value).startswith(f"b.json: {field}: ")


def test_duplicate_record_ids_are_refused() -> None:
    with pytest.raises(BaselineError, match=r"log.jsonl: record 2.id: 'fam/a\[replay\]' appears twice"):
        Baseline.from_records([rec("a"), rec("a")], source="log.jsonl")


def test_a_key_given_twice_in_a_baseline_file_is_refused(tmp_path: Path) -> None:
    text = Baseline.from_records([rec("a")]).dumps()
    entry = text[text.index('"fam/a[replay]"'):]
    twice = text.replace('"decisions": {', '"decisions": {' + entry[:entry.index("}") + 1] + ",", 1)
    (tmp_path / "b.json").write_text(twice)
    assert json.loads(twice)["decisions"]  # plain JSON would keep the last one without a word
    with pytest.raises(BaselineError, match=r"b.json: <file>: the key 'fam/a\[replay\]' is given twice"):
        Baseline.load(tmp_path / "b.json")
    with pytest.raises(BaselineError, match=r"b.json: <file>: the key 'fam/a\[replay\]' is given twice"):
        load_runs(tmp_path / "b.json")  # as tooleffect compare reads it


def test_compare_says_a_short_run_is_short_not_that_its_labels_changed(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, B holding the first lines of A (a run killed part way) was blamed on the label sets:
    "not one quantity measured twice", though no label changed."""
    accepted_baseline(pytester)
    log = pytester.path / "accepted.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    short = pytester.path / "short.jsonl"
    short.write_text("".join(lines[:2]))
    capsys.readouterr()
    assert cli(["compare", str(log), str(short)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not one quantity measured twice" not in err, err
    assert f"B lacks {len(lines) - 2} of A's {len(lines)} cases (" in err
    assert "the labels of the 2 cases both hold are the same: a run is short (cut part way, or it selected fewer); " \
           "--shared-only compares the 2 cases both hold with unchanged labels" in err
    assert cli(["compare", str(short), str(log)]) == 2
    assert f"A lacks {len(lines) - 2} of B's {len(lines)} cases (" in capsys.readouterr().err
