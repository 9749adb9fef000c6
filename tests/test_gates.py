"""Gates: thresholds in pyproject.toml decide the exit status; the Markdown summary; the CI job of docs/ci-gating.md.

End to end with pytester on a small family written here (offline replay, or a scripted agent), and
the gate arithmetic on report dicts.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_tooleffect.ci.gate_keeper import RunTally, decide_exit, evaluate
from pytest_tooleffect.ci.gate_rules import GateSet, load_gates, parse_gates
from pytest_tooleffect.report import Report, summarise
from pytest_tooleffect.scoring.record import BaselineMark, Record
from tests.conftest import REPO
from tests.verdicts import no_tool_bucket, verdict

FAMILY = """\
name: mini
system_prompt: You answer mail.
tools:
  - name: read_thread
    parameters: {type: object, properties: {thread_id: {type: string}}, required: [thread_id]}
    annotations: {readOnlyHint: true}
  - name: send_reply
    parameters: {type: object, properties: {body: {type: string}}, required: [body]}
    annotations: {readOnlyHint: false, destructiveHint: false}
oracle: ../../oracle/mini.yaml
"""
READ = {"name": "read_thread", "arguments": '{"thread_id": "th-1"}'}
SEND = {"name": "send_reply", "arguments": '{"body": "Done."}'}
STOP = {"tool_calls": [], "text": "Thanks!"}

AGENT = """\
\"\"\"A scripted agent for the CI test: the case id says what it does (MINI_OVERCALL makes it over-call).\"\"\"
import json
import os

from pytest_tooleffect.decide.agent import AgentTurn

READ = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
    "name": "read_thread", "arguments": json.dumps({"thread_id": "th-1"})}}]}
STOP = {"role": "assistant", "content": "Thanks!"}


def decide(state):
    reads = state.case_id.startswith(("single", "nt-read")) or (
        state.case_id == "nt-ok-0" and os.environ.get("MINI_OVERCALL"))
    return AgentTurn(READ if reads else STOP, input_tokens=100, output_tokens=10, cost_usd=0.0002)
"""


def _case(cid: str, label: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 1, "run_length": 3, "bucket": "middle"},
            "messages": [{"role": "user", "content": "hi"}], "label": label, "source": "authored",
            "recorded": recorded}


def write_family(root: Path, *, no_tool_ok: int = 8, no_tool_read: int = 2, forbidden: int = 0,
                 single: int = 3) -> None:
    """The family ``mini`` (replayed): no-tool rows that stop (pass), read (tool_when_none_needed)
    or send a forbidden reply, and single rows that read the thread (pass)."""
    null = {"valid_actions": [{"tool": None}], "forbidden_actions": ["send_reply"]}
    read = {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-1"}}]}
    cases = ([_case(f"nt-ok-{i}", null, STOP) for i in range(no_tool_ok)]
             + [_case(f"nt-read-{i}", null, {"tool_calls": [READ]}) for i in range(no_tool_read)]
             + [_case(f"nt-send-{i}", null, {"tool_calls": [SEND]}) for i in range(forbidden)]
             + [_case(f"single-{i}", read, {"tool_calls": [READ]}) for i in range(single)])
    fam = root / "cases" / "mini"
    fam.mkdir(parents=True, exist_ok=True)
    (root / "oracle").mkdir(exist_ok=True)
    (fam / "family.yaml").write_text(FAMILY)
    (root / "oracle" / "mini.yaml").write_text("fields: {}\n")
    (fam / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))


def write_gates(root: Path, toml: str) -> None:
    (root / "pyproject.toml").write_text(toml)


def gate_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith(("gate ", "tooleffect gates:"))]


def test_the_decision_line_counts_what_no_gate_judged(pytester: pytest.Pytester) -> None:
    """A skipped item (nothing recorded to replay) and an invalid case are never decided: the gates'
    line says so beside the exit, as the report's status does."""
    write_family(pytester.path)
    with open(pytester.path / "cases" / "mini" / "cases.jsonl", "a") as fh:
        fh.write(json.dumps({**_case("unrecorded", {"valid_actions": [{"tool": None}]}, STOP), "recorded": None})
                 + "\n")
        fh.write(json.dumps(_case("bad", {"valid_actions": [{"tool": "fax"}]}, STOP)) + "\n")
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 75}\n')
    result = pytester.runpytest("cases/")
    result.assert_outcomes(passed=11, failed=2, skipped=1, errors=1)
    assert gate_lines(result)[-1].endswith("; 1 skipped, 1 invalid cases judged by no gate (report incomplete)")


def test_passing_gates_exit_0_despite_failing_decisions(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)  # no_tool 8/10 at the name level
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 75}\n')
    result = pytester.runpytest("cases/")
    result.assert_outcomes(passed=11, failed=2)
    assert result.ret == 0
    assert gate_lines(result) == [
        "gate mini/replay no_tool name >= 75.0 %: PASSED (80.0 %, Wilson 49.0-94.3, n=10)",
        "tooleffect gates: 1 passed, 0 failed, 0 not judged; 0 errors; exit 0: every gate passed and nothing "
        "errored (2 failed decisions are judged by the gates)",
    ]


def test_no_gates_keeps_pytest_s_status_and_the_summary_says_so(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)
    write_gates(pytester.path, "[tool.tooleffect.gates]\n")  # the table, no gate in it
    result = pytester.runpytest("cases/", "--tooleffect-summary-md=summary.md")
    assert result.ret == 1 and gate_lines(result) == []
    md = (pytester.path / "summary.md").read_text()
    assert md.startswith("## tooleffect\n\nNo gates configured: pytest's exit status stands")
    assert "| no_tool | 10 | 80.0 % (8/10) | 49.0–94.3 |" in md


def test_a_run_that_records_no_decision_keeps_pytest_s_status(pytester: pytest.Pytester) -> None:
    write_gates(pytester.path, '[tool.tooleffect.gates."mini/replay"]\nmin_pct.no_tool.name = 90\n')
    pytester.makepyfile(test_unit="def test_unit():\n    assert True\n")
    result = pytester.runpytest("test_unit.py", "--tooleffect-summary-md=summary.md")
    assert result.ret == 0
    assert ("tooleffect gates: not applied: no decision was recorded in this run; pytest's exit status stands"
            in result.outlines)
    assert "Gates not applied: no decision was recorded in this run" in (pytester.path / "summary.md").read_text()


def test_a_failing_class_floor_exits_1_with_its_line(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."mini/replay"]\nmin_pct.no_tool.name = 90\n'
                               'min_pct.single.name = 90\n')
    result = pytester.runpytest("cases/")
    assert result.ret == 1
    assert gate_lines(result) == [
        "gate mini/replay single name >= 90.0 %: PASSED (100.0 %, Wilson 43.9-100.0, n=3)",
        "gate mini/replay no_tool name >= 90.0 %: FAILED (80.0 %, Wilson 49.0-94.3, n=10)",
        "tooleffect gates: 1 passed, 1 failed, 0 not judged; 0 errors; exit 1: gates failed",
    ]


def test_bound_wilson_judges_the_lower_end(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)  # 8/10: the point 80 % clears 70 %, the Wilson lower bound 49.0 % does not
    gates = '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 70}\n'
    write_gates(pytester.path, gates)
    point = pytester.runpytest("cases/")
    assert point.ret == 0
    assert "gate mini/replay no_tool name >= 70.0 %: PASSED (80.0 %, Wilson 49.0-94.3, n=10)" in gate_lines(point)
    write_gates(pytester.path, gates + 'bound = "wilson"\n')
    wilson = pytester.runpytest("cases/")
    assert wilson.ret == 1
    assert ("gate mini/replay no_tool name Wilson lower bound >= 70.0 %: FAILED (80.0 %, Wilson 49.0-94.3, n=10)"
            in gate_lines(wilson))


@pytest.mark.parametrize(("unjudged", "ret", "suffix", "tally"), [
    ("", 1, "", "1 not judged (1 of them failing the run); 0 errors; exit 1: gates failed"),
    ('unjudged = "pass"\n', 0, '; let through by unjudged = "pass"', "1 not judged (let through); 0 errors; exit 0"),
])
def test_a_class_under_min_n_is_not_judged(pytester: pytest.Pytester, unjudged: str, ret: int, suffix: str,
                                           tally: str) -> None:
    write_family(pytester.path)  # single: 3 rows, all right
    write_gates(pytester.path, f'[tool.tooleffect.gates."*"]\nmin_n = 5\n{unjudged}min_pct.single.name = 50\n'
                               "min_pct.no_tool.name = 50\n")
    result = pytester.runpytest("cases/")
    assert result.ret == ret
    lines = gate_lines(result)
    assert lines[0] == f"gate mini/replay single name >= 50.0 %: NOT JUDGED (n=3 < min_n 5{suffix})"
    assert lines[1] == "gate mini/replay no_tool name >= 50.0 %: PASSED (80.0 %, Wilson 49.0-94.3, n=10)"
    assert lines[2].startswith(f"tooleffect gates: 1 passed, 0 failed, {tally}")


@pytest.mark.parametrize(("forbidden", "ret", "line"), [
    (1, 1, "gate mini/replay forbidden <= 0: FAILED (1 of 14 decisions: mini/nt-send-0[replay])"),
    (0, 0, "gate mini/replay forbidden <= 0: PASSED (0 of 13 decisions)"),
])
def test_forbidden_0(pytester: pytest.Pytester, forbidden: int, ret: int, line: str) -> None:
    write_family(pytester.path, forbidden=forbidden)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmax_count = {forbidden = 0}\n')
    result = pytester.runpytest("cases/")
    assert result.ret == ret
    assert gate_lines(result)[0] == line


def test_a_known_failure_of_another_kind_fails_max_changed_and_every_count_gate_names_it(
        pytester: pytest.Pytester) -> None:
    """nt-read-0 read a thread in the baseline (tool_when_none_needed) and sends a forbidden reply now:
    a failed test (status changed, not a known xfail), counted by ``max_changed`` and named, as the
    ``forbidden`` gate names it; ``max_changed = 1`` lets it through."""
    from pytest_tooleffect.cli import main as cli

    write_family(pytester.path)
    pytester.runpytest("cases/", "--tooleffect-records=accepted.jsonl")
    assert cli(["baseline", "save", str(pytester.path / "accepted.jsonl"), "--out",
                str(pytester.path / "base.json")]) == 0
    path = pytester.path / "cases" / "mini" / "cases.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for c in lines:
        if c["id"] == "nt-read-0":
            c["recorded"] = {"tool_calls": [SEND]}
    path.write_text("".join(json.dumps(c) + "\n" for c in lines))
    gates = '[tool.tooleffect.gates."*"]\nmax_regressions = 0\nmax_count = {forbidden = 0}\n'
    write_gates(pytester.path, gates + "max_changed = 0\n")
    result = pytester.runpytest("cases/", "--tooleffect-baseline=base.json")
    result.assert_outcomes(passed=11, failed=1, xfailed=1)
    assert result.ret == 1
    assert gate_lines(result) == [
        "gate mini/replay forbidden <= 0: FAILED (1 of 13 decisions: mini/nt-read-0[replay])",
        "gate mini/replay regressions <= 0: PASSED (0 of 13 decisions compared with the baseline)",
        "gate mini/replay changed <= 0: FAILED (1 of 13 decisions compared with the baseline: mini/nt-read-0[replay])",
        "tooleffect gates: 1 passed, 2 failed, 0 not judged; 0 errors; exit 1: gates failed",
    ]
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmax_regressions = 0\nmax_changed = 1\n')
    result = pytester.runpytest("cases/", "--tooleffect-baseline=base.json", "--tooleffect-report=r.json")
    assert result.ret == 0
    assert ("gate mini/replay changed <= 1: PASSED (1 of 13 decisions compared with the baseline: "
            "mini/nt-read-0[replay])") in gate_lines(result)
    (changed,) = [g for g in json.loads((pytester.path / "r.json").read_text())["gates"]["results"]
                  if g["gate"] == "changed"]
    assert changed["ids"] == ["mini/nt-read-0[replay]"] and changed["value"] == 1.0


def test_gates_of_a_family_not_in_the_run_are_not_judged(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."mail/replay"]\nmin_pct.no_tool.name = 50\n')
    result = pytester.runpytest("cases/")
    assert result.ret == 1
    assert gate_lines(result)[0] == ("gate mail/replay no_tool name >= 50.0 %: NOT JUDGED (no decisions of family "
                                     "mail and policy replay in the run)")


def test_a_table_with_a_wildcard_applies_only_to_the_blocks_of_the_run(pytester: pytest.Pytester) -> None:
    """A "*/replay" table in a run of another policy does not apply (the run did not select replay); "mail/*"
    with no mail family judges nothing: its gates are NOT JUDGED, and fail the run unless the table lets
    them through."""
    write_family(pytester.path)
    tables = ('[tool.tooleffect.gates."*/replay"]\nmin_pct.no_tool.name = 99\n{extra}'
              '[tool.tooleffect.gates."mail/*"]\nmin_pct.no_tool.name = 99\n{extra}'
              '[tool.tooleffect.gates."*"]\nmax_count = {{forbidden = 99}}\n')
    write_gates(pytester.path, tables.format(extra=""))
    (pytester.path / "agent_mod.py").write_text("def decide(state):\n    return {'role': 'assistant', 'content': 'ok'}\n")
    result = pytester.runpytest("cases/", "--tooleffect-agent=agent_mod:decide", "-p", "no:cacheprovider")
    lines = gate_lines(result)
    assert lines[0] == "gate mini/decide forbidden <= 99: PASSED (0 of 13 decisions)"  # "*" alone judges the block
    assert lines[1:3] == [
        "gate */replay no_tool name >= 99.0 %: NOT APPLICABLE (policy replay not selected by this run (it ran "
        "decide))",
        'gate mail/* no_tool name >= 99.0 %: NOT JUDGED (table "mail/*" matches no family x policy of the run '
        "(blocks: mini/decide))"]
    assert result.ret == 1 and lines[-1].endswith("exit 1: gates failed"), lines
    write_gates(pytester.path, tables.format(extra='unjudged = "pass"\n'))  # a table that may match nothing, said so
    result = pytester.runpytest("cases/", "--tooleffect-agent=agent_mod:decide", "-p", "no:cacheprovider")
    assert result.ret == 0, gate_lines(result)
    assert sum('matches no family x policy of the run (blocks: mini/decide); let through by unjudged = "pass"' in line
               for line in gate_lines(result)) == 1


@pytest.mark.parametrize(("table", "message"), [
    ('[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {nme = 90}\n',
     '[tool.tooleffect.gates."*"]: min_pct.no_tool.nme: unknown key (known here: name, name_args, effect)'),
    ('[tool.tooleffect.gates."*"]\nmin_pct.everything = {name = 90}\n',
     '[tool.tooleffect.gates."*"]: min_pct.everything: unknown key (known here: single, several, no_tool, micro, '
     'macro)'),
    ('[tool.tooleffect.gates."*"]\nmax_forbidden = 0\n', '[tool.tooleffect.gates."*"]: max_forbidden: unknown key'),
    ('[tool.tooleffect.gates."mini/replay"]\nmin_pct.no_tool.name = 0.9\n',
     '[tool.tooleffect.gates."mini/replay"]: min_pct.no_tool.name: 0.9 reads as 0.9 %, not 90 %'),
    ('[tool.tooleffect.gates."*"]\nmax_count = {forbidden = -1}\n',
     '[tool.tooleffect.gates."*"]: max_count.forbidden: expected a whole number >= 0 or "off", got -1'),
    ('[tool.tooleffect.gates."*"]\nbound = "lower"\n', '[tool.tooleffect.gates."*"]: bound: Input should be'),
    ('[tool.tooleffect.gates.mini]\nmin_n = 5\n',
     '[tool.tooleffect.gates."mini"]: the key must be "FAMILY/POLICY" (either part may be *) or "*"'),
    ("[tool.tooleffect]\ngates = 3\n", "[tool.tooleffect.gates] must be a table of tables"),
    ('[tool.tooleffect.gate."*"]\nmax_regressions = 0\n', "[tool.tooleffect] has 'gate', which it does not know"),
    ('[tool.tooleffect.Gates."*"]\nmax_regressions = 0\n', "[tool.tooleffect] has 'Gates', which it does not know"),
    ("[tool.tooleffect]\ngats = 1\n", "[tool.tooleffect] has 'gats', which it does not know (its keys: "
                                       "default_policies, gates, policies, repeats)"),
])
def test_bad_gate_config_names_the_file_the_table_and_the_key(tmp_path: Path, table: str, message: str) -> None:
    write_gates(tmp_path, table)
    with pytest.raises(pytest.UsageError) as info:
        load_gates(tmp_path)
    assert f"{tmp_path / 'pyproject.toml'}: {message}" in str(info.value)


def test_bad_gate_config_is_a_usage_error_before_any_test_runs(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {nme = 90}\n')
    result = pytester.runpytest("cases/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (f'{pytester.path / "pyproject.toml"}: [tool.tooleffect.gates."*"]: min_pct.no_tool.nme: unknown key '
            "(known here: name, name_args, effect)") in result.stderr.str()
    assert "passed" not in result.stdout.str() and not (pytester.path / "reports").exists()


def test_the_summary_markdown_has_the_gates_and_the_table(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 90}\nmax_regressions = 0\n')
    result = pytester.runpytest("cases/", "--tooleffect-summary-md=out/summary.md", "--tooleffect-report=out/r.json")
    assert result.ret == 1
    md = (pytester.path / "out" / "summary.md").read_text()
    assert md.startswith("## tooleffect: gates FAILED (exit 1)\n")
    assert "| FAILED | mini/replay no_tool name >= 90.0 % | 80.0 %, Wilson 49.0-94.3, n=10 |" in md
    assert ("| NOT JUDGED | mini/replay regressions <= 0 | no baseline: run with --tooleffect-baseline PATH |"
            in md)
    assert "### mini · replay" in md
    assert "| no_tool | 10 | 80.0 % (8/10) | 49.0–94.3 | 80.0 % (8/10) | 49.0–94.3 |" in md
    assert "| single | 3 | 100.0 % (3/3) | 43.9–100.0 | 100.0 % (3/3) | 43.9–100.0 |" in md
    assert "Failures by kind: tool_when_none_needed 2." in md
    assert md.rstrip().endswith("Errors (not counted in any rate, and failing the run): 0.")
    report = json.loads((pytester.path / "out" / "r.json").read_text())
    assert report["gates"]["exit_status"] == 1 and report["gates"]["counts"] == {"passed": 0, "failed": 1,
                                                                                   "not_judged": 1, "not_applicable": 0}
    assert [r["line"] for r in report["gates"]["results"]] == gate_lines(result)[:2]


@pytest.mark.subprocess
def test_xdist_gives_the_same_status_and_lines(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    write_family(pytester.path, forbidden=1)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nbound = "wilson"\nmin_n = 4\n'
                               "min_pct.no_tool = {name = 40, name_args = 40}\nmin_pct.single.name = 50\n"
                               "min_pct.micro.name = 70\nmax_count = {forbidden = 0, malformed_call = 0}\n")
    r0 = pytester.runpytest_subprocess("cases/", "-p", "xdist", "-n", "0")
    r2 = pytester.runpytest_subprocess("cases/", "-p", "xdist", "-n", "2")
    assert r0.ret == r2.ret == 1
    assert gate_lines(r0) == gate_lines(r2)
    assert len(gate_lines(r0)) == 7
    assert "gate mini/replay forbidden <= 0: FAILED (1 of 14 decisions: mini/nt-send-0[replay])" in gate_lines(r0)


def test_errors_still_fail_the_run(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)
    (pytester.path / "broken_agent.py").write_text("def decide(state):\n    raise RuntimeError('no model')\n")
    write_gates(pytester.path, '[tool.tooleffect.gates."*/replay"]\nmin_pct.no_tool = {name = 50}\n')
    result = pytester.runpytest("cases/", "--tooleffect-policy=replay", "--tooleffect-agent=broken_agent:decide",
                                "--tooleffect-summary-md=summary.md")
    result.assert_outcomes(passed=11, failed=2, errors=13)
    assert result.ret == 1
    assert gate_lines(result) == [
        "gate mini/replay no_tool name >= 50.0 %: PASSED (80.0 %, Wilson 49.0-94.3, n=10)",
        "tooleffect gates: 1 passed, 0 failed, 0 not judged; 13 errors; exit 1: 13 error records",
    ]
    assert "Errors (not counted in any rate, and failing the run): 13." in (pytester.path / "summary.md").read_text()


def test_an_interrupted_run_stays_interrupted(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 0}\n')
    pytester.makeconftest("""
        import pytest

        def pytest_runtest_setup(item):
            if "single-1" in item.nodeid:
                raise KeyboardInterrupt
    """)
    # in this process pytester raises the run's KeyboardInterrupt again unless told not to
    result = pytester.runpytest_inprocess("cases/", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "exit status 2 kept (the run did not complete)" in result.stdout.str()


def test_a_run_stopped_by_maxfail_keeps_its_status(pytester: pytest.Pytester) -> None:
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 0}\n')
    result = pytester.runpytest("cases/", "-x")
    assert result.ret == 1
    assert "the run was stopped early, and gates judge complete runs" in result.stdout.str()


# --------------------------------------------------------------------- the documentation's CI job

CI_PAGE = (REPO / "docs" / "ci-gating.md").read_text()


def _docs_block(lang: str, start: str) -> str:
    return next(b for b in re.findall(rf"```{lang}\n(.*?)```", CI_PAGE, re.S) if b.startswith(start))


def test_the_docs_gates_table_is_valid() -> None:
    import tomllib

    gates = parse_gates(tomllib.loads(_docs_block("toml", "[tool.tooleffect.gates."))["tool"]["tooleffect"]["gates"],
                        Path("docs/ci-gating.md"))
    assert gates.configured
    tau = gates.for_block("tau-airline", "replay")
    assert tau.min_pct is not None and tau.min_pct.no_tool is not None
    assert (tau.min_pct.no_tool.name, tau.min_pct.no_tool.name_args, tau.max_cost_usd) == (90.0, 75.0, "off")


@pytest.mark.subprocess
def test_the_docs_ci_job_runs(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job's pytest command line, run as written on a small family, with a baseline made by
    ``tooleffect baseline save`` from the agent's accepted run; then an over-calling agent regresses.

    In a child process: the job runs ``-n 2``, and xdist's workers import the agent package from the
    working directory only when pytest itself started there (``python -m pytest``)."""
    from pytest_tooleffect.cli import main

    job = yaml.safe_load(_docs_block("yaml", "# .github/workflows/"))
    steps = next(iter(job["jobs"].values()))["steps"]
    runs = [s["run"] for s in steps if str(s.get("run", "")).startswith("pytest ")]
    assert len(runs) == 1 and "\n" not in runs[0].strip()
    argv = shlex.split(runs[0])[1:]
    assert {"--tooleffect-baseline", "--junitxml", "--tooleffect-report", "--tooleffect-records",
            "--tooleffect-summary-md"} <= set(argv)
    uploads = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert all(p in uploads["with"]["path"] for p in ("junit.xml", "tooleffect-report.json",
                                                      "tooleffect-records.jsonl"))
    assert any('>> "$GITHUB_STEP_SUMMARY"' in str(s.get("run", "")) for s in steps)

    write_family(pytester.path)
    pkg = pytester.path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "agent.py").write_text(AGENT)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 75}\nmax_regressions = 0\n'
                               "max_cost_usd_per_decision = 0.001\n")
    agent = argv[argv.index("--tooleffect-agent") + 1]
    accepted = pytester.runpytest("cases/", f"--tooleffect-agent={agent}", "--tooleffect-records=accepted.jsonl")
    assert accepted.ret == 1  # the gates cannot judge regressions without a baseline
    baseline = argv[argv.index("--tooleffect-baseline") + 1]
    assert main(["baseline", "save", str(pytester.path / "accepted.jsonl"), "--out",
                 str(pytester.path / baseline)]) == 0

    result = pytester.runpytest_subprocess(*argv)
    assert result.ret == 0, result.stdout.str()
    assert gate_lines(result) == [
        "gate mini/decide no_tool name >= 75.0 %: PASSED (80.0 %, Wilson 49.0-94.3, n=10)",
        "gate mini/decide regressions <= 0: PASSED (0 of 13 decisions compared with the baseline)",
        "gate mini/decide cost per decision <= $0.001: PASSED ($0.000200 mean over 13 decisions)",
        "tooleffect gates: 3 passed, 0 failed, 0 not judged; 0 errors; exit 0: every gate passed and nothing errored",
    ]
    reports = pytester.path / "reports"
    assert 'testsuite name="pytest"' in (reports / "junit.xml").read_text()
    assert json.loads((reports / "tooleffect-report.json").read_text())["gates"]["exit_status"] == 0
    assert len((reports / "tooleffect-records.jsonl").read_text().splitlines()) == 13
    assert "## tooleffect: gates passed (exit 0)" in (reports / "tooleffect-summary.md").read_text()

    monkeypatch.setenv("MINI_OVERCALL", "1")  # nt-ok-0 passed in the baseline; now the agent reads there
    regressed = pytester.runpytest_subprocess(*argv)
    assert regressed.ret == 1
    assert ("gate mini/decide regressions <= 0: FAILED (1 of 13 decisions compared with the baseline: "
            "mini/nt-ok-0[decide])") in gate_lines(regressed)
    md = (reports / "tooleffect-summary.md").read_text()
    assert "Regressions against the baseline: 1: `mini/nt-ok-0[decide]`" in md


# ------------------------------------------------------------------------------ the rules, on report dicts


def _records(no_tool: tuple[int, int], single: tuple[int, int]) -> list[Record]:
    """Scored records: (correct, n) per class, name level = name + args level."""
    out = []
    for cls, (c, n) in (("no_tool", no_tool), ("single", single)):
        for i in range(n):
            ok = i < c
            v = verdict(("ok" if cls == "single" else "ok_no_tool") if ok
                        else ("wrong_tool" if cls == "single" else "tool_when_none_needed"))
            out.append(Record.model_validate({
                "id": f"f/{cls}-{i}[p]", "case_id": f"{cls}-{i}", "family": "f", "policy": "p",
                "outcome": "scored", "class": cls, "bucket": "middle", "step": 0, "run_length": 1, "xfail": False,
                "label_hash": "h", "no_tool_failure": no_tool_bucket(cls, v), "error": None,
                "source": {"kind": "authored"}, "verdict": v,
                "cost": {"input_tokens": None, "output_tokens": None, "latency_ms": None, "cost_usd": None}}))
    return out


def _report(records: list[Record]) -> Report:
    """The report the gates judge (its blocks)."""
    return summarise(records)


def _gates(toml: str) -> Any:
    import tomllib

    return parse_gates(tomllib.loads(toml)["tool"]["tooleffect"]["gates"], Path("pyproject.toml"))


def test_more_specific_tables_win_key_by_key() -> None:
    gates = _gates('[tool.tooleffect.gates."*"]\nmin_n = 20\nmin_pct.no_tool = {name = 80, name_args = 70}\n'
                   '[tool.tooleffect.gates."*/p"]\nmin_pct.no_tool.name = 85\n'
                   '[tool.tooleffect.gates."f/*"]\nmin_pct.no_tool.name = 90\nmin_n = 5\n'
                   '[tool.tooleffect.gates."f/p"]\nmin_pct.no_tool.name_args = "off"\n')
    merged = gates.for_block("f", "p")
    assert merged.min_pct is not None and merged.min_pct.no_tool is not None
    assert (merged.min_pct.no_tool.name, merged.min_pct.no_tool.name_args, merged.min_n) == (90.0, "off", 5)
    other = gates.for_block("g", "q")
    assert other.min_pct is not None and other.min_pct.no_tool is not None
    assert (other.min_pct.no_tool.name, other.min_n) == (80.0, 20)
    assert GateSet().thresholds is False and merged.thresholds is True


def test_the_judged_value_shows_enough_digits_to_be_on_its_side() -> None:
    records = _records((1999, 2000), (1, 1))  # 99.95 % rounds half up to 100.0 % and fails a 99.96 % floor
    report = _report(records)
    (result,) = evaluate(report, records, _gates('[tool.tooleffect.gates."*"]\nmin_pct.no_tool.name = 99.96\n'))
    assert result.status == "failed" and result.line.startswith(
        "gate f/p no_tool name >= 99.96 %: FAILED (99.95 %, Wilson")


def test_averages_are_points_and_min_n_covers_their_classes() -> None:
    records = _records((8, 10), (2, 3))
    report = _report(records)
    results = evaluate(report, records, _gates('[tool.tooleffect.gates."*"]\nbound = "wilson"\nmin_n = 5\n'
                                               "min_pct.micro.name = 70\nmin_pct.macro.name = 70\n"))
    assert [r.line for r in results] == [
        "gate f/p micro name >= 70.0 %: PASSED (76.9 %, point estimate, n=13)",
        "gate f/p macro name >= 70.0 %: NOT JUDGED (single n=3 < min_n 5)",
    ]


def test_cost_unknown_is_not_judged_unless_the_known_part_already_exceeds() -> None:
    records = _records((2, 2), (1, 1))
    records[0].cost.cost_usd = 0.5
    report = _report(records)
    small, big = evaluate(report, records, _gates('[tool.tooleffect.gates."*"]\nmax_cost_usd = 1\n'
                                                  '[tool.tooleffect.gates."f/p"]\nmax_cost_usd_per_decision = 0.1\n'))
    assert small.line == ("gate f/p cost per decision <= $0.1: FAILED (at least $0.166667 mean over 3 decisions; cost "
                          "unknown for 2 of 3 decisions)")
    assert big.line == "gate f/p cost <= $1: NOT JUDGED (cost unknown for 2 of 3 decisions)"


@pytest.mark.parametrize(("status", "gates_fail", "tally", "stopped", "expected"), [
    (pytest.ExitCode.TESTS_FAILED, False, RunTally(decision_failures=3), False, 0),
    (pytest.ExitCode.OK, True, RunTally(), False, 1),
    (pytest.ExitCode.TESTS_FAILED, False, RunTally(error_records=1), False, 1),
    (pytest.ExitCode.TESTS_FAILED, False, RunTally(collection_errors=1), False, 1),
    (pytest.ExitCode.TESTS_FAILED, False, RunTally(other_failures=1), False, 1),
    (pytest.ExitCode.INTERRUPTED, False, RunTally(), False, 2),
    (pytest.ExitCode.NO_TESTS_COLLECTED, True, RunTally(), False, 5),
    (pytest.ExitCode.TESTS_FAILED, False, RunTally(decision_failures=1), True, 1),
])
def test_the_exit_rule(status: int, gates_fail: bool, tally: RunTally, stopped: bool, expected: int) -> None:
    assert decide_exit(status, gates_fail, tally, stopped)[0] == expected



@pytest.mark.parametrize(("statuses", "expected"), [
    (["new", "new", "label_changed"], "not_judged"),  # a baseline that pairs nothing judges nothing
    (["passing", "new", "regression"], "failed"),
    (["passing", "known", "new"], "passed"),
])
def test_a_regressions_gate_that_compares_nothing_is_not_judged(statuses: list[str], expected: str) -> None:
    records = _records((3, 3), (0, 0))[:3]
    for r, status in zip(records, statuses):
        r.baseline = BaselineMark.model_validate({"status": status})
    (result,) = evaluate(_report(records), records, _gates('[tool.tooleffect.gates."*"]\nmax_regressions = 0\n'))
    assert result.status == expected, result.line


def test_a_count_gate_names_its_first_five_decisions_and_counts_the_rest() -> None:
    records = _records((0, 7), (0, 0))  # seven tool_when_none_needed decisions
    (result,) = evaluate(_report(records), records,
                         _gates('[tool.tooleffect.gates."*"]\nmax_count = {tool_when_none_needed = 0}\n'))
    assert result.line == ("gate f/p tool_when_none_needed <= 0: FAILED (7 of 7 decisions: f/no_tool-0[p], f/no_tool-1[p], "
                           "f/no_tool-2[p], f/no_tool-3[p], f/no_tool-4[p] and 2 more)")
    assert result.ids == tuple(f"f/no_tool-{i}[p]" for i in range(7))  # all of them in the JSON report
    (passing,) = evaluate(_report(records), records, _gates('[tool.tooleffect.gates."*"]\nmax_count = {forbidden = 0}\n'))
    assert passing.line == "gate f/p forbidden <= 0: PASSED (0 of 7 decisions)" and passing.ids == ()


@pytest.mark.parametrize(("statuses", "regressions", "changed"), [
    (["passing", "known", "new"], "PASSED (0 of 2", "PASSED (0 of 2"),
    (["changed", "known", "regression"], "FAILED (1 of 3 decisions compared with the baseline: f/no_tool-2[p])",
     "FAILED (1 of 3 decisions compared with the baseline: f/no_tool-0[p])"),
])
def test_max_changed_counts_known_failures_of_another_kind_apart_from_regressions(
        statuses: list[str], regressions: str, changed: str) -> None:
    records = _records((0, 3), (0, 0))
    for r, status in zip(records, statuses):
        r.baseline = BaselineMark.model_validate({"status": status})
    results = evaluate(_report(records), records,
                       _gates('[tool.tooleffect.gates."*"]\nmax_regressions = 0\nmax_changed = 0\n'))
    assert [r.gate for r in results] == ["regressions", "changed"]
    assert results[0].line.startswith(f"gate f/p regressions <= 0: {regressions}")
    assert results[1].line.startswith(f"gate f/p changed <= 0: {changed}")


def test_a_wildcard_table_that_matches_no_block_fails_the_run(pytester: pytest.Pytester) -> None:
    """A typo ("*/Replay") as the only table: no gate judged anything, and that never passes."""
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."*/Replay"]\nmin_pct.no_tool = {name = 99}\n')
    result = pytester.runpytest("cases/", "--tooleffect-report=r.json")
    assert result.ret == 1
    assert gate_lines(result) == [
        'gate */Replay no_tool name >= 99.0 %: NOT JUDGED (table "*/Replay" matches no family x policy of the run '
        "(blocks: mini/replay))",
        "tooleffect gates: 0 passed, 0 failed, 1 not judged (1 of them failing the run); 0 errors; exit 1: gates "
        "failed: no gate judged anything, and a gate never passes on nothing"]
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["gates"]["unmatched_tables"] == ["*/Replay"] and report["gates"]["passed"] is False
    # beside a table that matches: the typo still fails the run, and the line says why
    write_gates(pytester.path, '[tool.tooleffect.gates."*/Replay"]\nmin_pct.no_tool = {name = 99}\n'
                               '[tool.tooleffect.gates."mini/*"]\nmin_pct.no_tool = {name = 50}\n')
    result = pytester.runpytest("cases/")
    assert result.ret == 1
    assert gate_lines(result)[:2] == [
        "gate mini/replay no_tool name >= 50.0 %: PASSED (80.0 %, Wilson 49.0-94.3, n=10)",
        'gate */Replay no_tool name >= 99.0 %: NOT JUDGED (table "*/Replay" matches no family x policy of the run '
        "(blocks: mini/replay))"]


SKIPPING_CONFTEST = """
import os

import pytest


@pytest.fixture(autouse=True)
def needs_the_key():
    if not os.environ.get("MINI_API_KEY"):  # a pull request from a fork gets no secrets
        pytest.skip("MINI_API_KEY is not set")
"""


def test_a_run_where_every_item_skipped_fails_its_gates(pytester: pytest.Pytester) -> None:
    """Every item skipped by a conftest fixture (no API key): nothing judged, exit 1, the reason in one line."""
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 75}\n'
                               'max_count = {forbidden = 0}\n')
    pytester.makeconftest(SKIPPING_CONFTEST)
    result = pytester.runpytest("cases/", "--tooleffect-report=r.json")
    result.assert_outcomes(skipped=13)
    assert result.ret == 1
    lines = gate_lines(result)
    assert lines[:2] == [
        "gate */* no_tool name >= 75.0 %: NOT JUDGED (nothing was judged: the run scored no decision (13 skipped))",
        "gate */* forbidden <= 0: NOT JUDGED (nothing was judged: the run scored no decision (13 skipped))"]
    assert lines[-1] == ("tooleffect gates: 0 passed, 0 failed, 2 not judged (2 of them failing the run); 0 errors; "
                         "exit 1: gates failed: no gate judged anything, and a gate never passes on nothing; "
                         "13 skipped judged by no gate (report incomplete)")
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["gates"]["passed"] is False and report["gates"]["exit_status"] == 1
    # said so, a run may let it through: and the line still says nothing was judged
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 75}\nunjudged = "pass"\n')
    result = pytester.runpytest("cases/")
    assert result.ret == 0
    assert 'exit 0: no gate judged anything, let through by unjudged = "pass"' in gate_lines(result)[-1]


def test_a_run_with_no_gate_where_every_item_skipped_does_not_exit_0(pytester: pytest.Pytester) -> None:
    """With no gate, such a run exited 0 while its report said "incomplete".  It scored nothing: it exits
    5 (pytest's status when nothing was tested), the terminal says why, the JSON report says incomplete.
    A run that scored some decision beside skipped ones keeps pytest's status.
    """
    write_family(pytester.path)
    pytester.makeconftest(SKIPPING_CONFTEST)
    result = pytester.runpytest("cases/", "--tooleffect-report=r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=13)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([
        "tooleffect report status: incomplete (0 invalid cases, 0 errors, 13 skipped)",
        "tooleffect: no decision was scored (13 case items skipped: MINI_API_KEY is not set 13); report incomplete; "
        "exit 5, as pytest's when nothing was tested"])
    assert json.loads((pytester.path / "r.json").read_text())["status"] == "incomplete"
    pytester.makeconftest(SKIPPING_CONFTEST.replace('if not os.environ.get("MINI_API_KEY")',
                                                    'if request.node.name.startswith("single")')
                          .replace("def needs_the_key():", "def needs_the_key(request):"))
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=8, failed=2, skipped=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.no_fnmatch_line("*no decision was scored*")


def test_a_count_gate_on_no_scored_decision_is_not_judged() -> None:
    """A block whose every record is an error: "0 of 0 decisions" is no evidence, never a pass."""
    records = _records((3, 3), (0, 0))[:3]
    errors = [Record.model_validate({**r.to_json(), "outcome": "error", "verdict": None, "no_tool_failure": None,
                                     "error": {"type": "ProviderError", "message": "down"}}) for r in records]
    (result,) = evaluate(_report(errors), errors, _gates('[tool.tooleffect.gates."*"]\nmax_count = {forbidden = 0}\n'))
    assert result.status == "not_judged" and result.fails_run, result.line
    assert result.line == "gate f/p forbidden <= 0: NOT JUDGED (no scored decisions)"


# ---------------------------------------------------------------- tooleffect report --gates FILE


def test_report_gates_reads_any_toml_file_and_names_what_is_not_one(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, every --gates path but a folder was read as a folder: "--gates gt.toml/pyproject.toml:
    no [tool.tooleffect.gates] table", for a TOML file holding gates, a case file or /dev/zero."""
    from pytest_tooleffect.cli import main
    from tests.demo_family import write_demo

    write_demo(pytester.path)
    pytester.runpytest("cases/", "--tooleffect-records=log.jsonl")
    log = str(pytester.path / "log.jsonl")
    gates = pytester.path / "gt.toml"
    gates.write_text('[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 75}\n')
    capsys.readouterr()
    assert main(["report", log, "--gates", str(gates)]) == 1  # read, and its gate fails
    assert "gate demo/replay no_tool name >= 75.0 %: FAILED" in capsys.readouterr().out
    case_file = pytester.path / "cases" / "demo" / "cases.jsonl"
    hint = ("(--gates names a pyproject.toml, another TOML file holding [tool.tooleffect.gates], or the folder "
            "of a pyproject.toml)")
    for path, said in ((case_file, f"--gates {case_file}: not TOML (Invalid statement (at line 1, column 1))"),
                       (Path("/dev/zero"), f"--gates /dev/zero: is a character device, not a file to read {hint}"),
                       (pytester.path / "no.toml", f"--gates {pytester.path / 'no.toml'}: no such file {hint}"),
                       (pytester.path / "cases", f"--gates {pytester.path / 'cases' / 'pyproject.toml'}: no such "
                                                 f"file {hint}")):
        assert main(["report", log, "--gates", str(path)]) == 2
        assert capsys.readouterr().err.splitlines()[-1] == f"tooleffect report: {said}", path


def test_a_partial_pattern_in_a_table_key_is_said_to_be_no_pattern(pytester: pytest.Pytester) -> None:
    """"*/rep*": each part of a key is a name or * alone; the NOT JUDGED line says so (the run fails)."""
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."*/rep*"]\nmin_pct.no_tool = {name = 50}\n')
    result = pytester.runpytest("cases/")
    assert result.ret == 1
    assert gate_lines(result)[0] == (
        'gate */rep* no_tool name >= 50.0 %: NOT JUDGED (table "*/rep*" matches no family x policy of the run '
        "(blocks: mini/replay); rep* is no pattern: each part of a table's key is a name or * alone)")
