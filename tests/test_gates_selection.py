"""Gates on a filtered run: a run filtered to one class (``-m``, ``-k``) or to some of its policies
judges what it selected, says which gates do not apply and why, and still never passes on nothing.

End to end with pytester on the family of :mod:`tests.test_gates` (offline replay, and a scripted agent
as a second policy).
"""

from __future__ import annotations

import json

import pytest

from tests.test_gates import AGENT, gate_lines, write_family, write_gates

GATES = """\
[tool.tooleffect.gates."*"]
min_pct.no_tool = {name = 75}
min_pct.single = {name = 90}
min_pct.macro = {name = 50}
min_pct.micro = {name = 50}
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_a_run_filtered_to_one_class_judges_that_class_only(pytester: pytest.Pytester, workers: int) -> None:
    """``-m no_tool``: the single gate is NOT APPLICABLE (and says which filter left it out), the averages
    say they cover 1 of the 2 classes, and the run passes on what it judged; at -n 2 as at -n 0."""
    write_family(pytester.path)  # no_tool 8/10 at the name level, single 3/3
    write_gates(pytester.path, GATES)
    result = pytester.runpytest("cases/", "-m", "no_tool", "--tooleffect-report=r.json",
                                *(["-n", str(workers)] if workers else []))
    result.assert_outcomes(passed=8, failed=2)
    assert result.ret == 0
    assert gate_lines(result) == [
        'gate mini/replay single name >= 90.0 %: NOT APPLICABLE (class single not selected by this run (-m "no_tool"))',
        "gate mini/replay no_tool name >= 75.0 %: PASSED (80.0 %, Wilson 49.0-94.3, n=10)",
        "gate mini/replay micro name >= 50.0 %: PASSED (80.0 %, point estimate, n=10, over 1 of 2 classes (single not "
        'selected by this run (-m "no_tool")))',
        "gate mini/replay macro name >= 50.0 %: PASSED (80.0 %, point estimate, over 1 of 2 classes (single not "
        'selected by this run (-m "no_tool")), n=10)',
        "tooleffect gates: 3 passed, 0 failed, 0 not judged, 1 not applicable (not selected by this run: "
        '-m "no_tool"); 0 errors; exit 0: every gate passed and nothing errored (2 failed decisions are judged by '
        "the gates)",
    ]
    gates = json.loads((pytester.path / "r.json").read_text())["gates"]
    assert gates["passed"] is True and gates["counts"] == {"passed": 3, "failed": 0, "not_judged": 0,
                                                          "not_applicable": 1}
    single = gates["results"][0]
    assert (single["status"], single["fails_run"], single["value"]) == ("not_applicable", False, None)


def test_a_class_the_family_has_no_case_of_is_still_not_judged(pytester: pytest.Pytester) -> None:
    """Not selecting a class is not the same as not having one: a family with no single case fails its
    single gate NOT JUDGED, as before."""
    write_family(pytester.path, single=0)
    write_gates(pytester.path, GATES)
    result = pytester.runpytest("cases/")
    assert result.ret == 1
    assert "gate mini/replay single name >= 90.0 %: NOT JUDGED (n=0: no single rows)" in gate_lines(result)


def test_a_filtered_run_whose_gates_all_do_not_apply_fails(pytester: pytest.Pytester) -> None:
    """Every gate is on a class the run did not select: no gate judged anything, and a gate never passes on
    nothing (unless the table lets it through)."""
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.single = {name = 90}\n')
    result = pytester.runpytest("cases/", "-k", "nt-", "--tooleffect-report=r.json")
    result.assert_outcomes(passed=8, failed=2)
    assert result.ret == 1
    assert gate_lines(result) == [
        'gate mini/replay single name >= 90.0 %: NOT APPLICABLE (class single not selected by this run (-k "nt-"))',
        'tooleffect gates: 0 passed, 0 failed, 0 not judged, 1 not applicable (not selected by this run: -k "nt-"); '
        "0 errors; exit 1: gates failed: no gate judged anything, and a gate never passes on nothing"]
    assert json.loads((pytester.path / "r.json").read_text())["gates"]["passed"] is False
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.single = {name = 90}\nunjudged = "pass"\n')
    result = pytester.runpytest("cases/", "-k", "nt-")
    assert result.ret == 0
    assert 'exit 0: no gate judged anything, let through by unjudged = "pass"' in gate_lines(result)[-1]


def test_gates_of_a_policy_the_run_did_not_select_do_not_apply(pytester: pytest.Pytester) -> None:
    """Gates for two policies: a run of one of them (by ``-k``, or by naming only that policy) judges that
    one; the other's gates are NOT APPLICABLE and say why.  A table naming a policy nobody defined (a typo)
    is still NOT JUDGED and fails the run."""
    write_family(pytester.path)
    pytester.syspathinsert()
    (pytester.path / "mini_agent.py").write_text(AGENT)
    tables = ('[tool.tooleffect.policies.scripted]\nagent = "mini_agent:decide"\n'
              '[tool.tooleffect.gates."mini/replay"]\nmin_pct.no_tool = {name = 75}\n'
              '[tool.tooleffect.gates."mini/scripted"]\nmin_pct.no_tool = {name = 99}\nmax_count.forbidden = 0\n')
    write_gates(pytester.path, tables)
    both = ("--tooleffect-policy=replay", "--tooleffect-policy=scripted")
    result = pytester.runpytest("cases/", *both, "-k", "not scripted")
    assert result.ret == 0
    assert gate_lines(result)[:3] == [
        "gate mini/replay no_tool name >= 75.0 %: PASSED (80.0 %, Wilson 49.0-94.3, n=10)",
        "gate mini/scripted no_tool name >= 99.0 %: NOT APPLICABLE (family mini · policy scripted not selected by "
        'this run (-k "not scripted"))',
        "gate mini/scripted forbidden <= 0: NOT APPLICABLE (family mini · policy scripted not selected by this run "
        '(-k "not scripted"))']
    result = pytester.runpytest("cases/")  # replay only: scripted is defined, and not run
    assert result.ret == 0
    assert gate_lines(result)[1] == ("gate mini/scripted no_tool name >= 99.0 %: NOT APPLICABLE (policy scripted "
                                     "not selected by this run (it ran replay))")
    write_gates(pytester.path, tables + '[tool.tooleffect.gates."mini/scripted-typo"]\nmax_count.forbidden = 0\n')
    result = pytester.runpytest("cases/")
    assert result.ret == 1
    assert ("gate mini/scripted-typo forbidden <= 0: NOT JUDGED (no decisions of family mini and policy "
            "scripted-typo in the run)") in gate_lines(result)


def test_the_gates_switched_off_keep_pytest_s_exit_status_and_say_so(pytester: pytest.Pytester) -> None:
    """``-p no:tooleffect-gates`` (a local run of one class with gates set for CI): no gate judges, pytest's
    exit status stands, and the report and the Markdown summary say the gates were switched off."""
    write_family(pytester.path)
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 99}\n')
    result = pytester.runpytest("cases/", "-p", "no:tooleffect-gates", "-k", "single", "--tooleffect-report=r.json",
                                "--tooleffect-summary-md=s.md")
    result.assert_outcomes(passed=3)
    assert result.ret == 0 and gate_lines(result) == []
    note = "switched off by -p no:tooleffect-gates; pytest's exit status stands"
    assert json.loads((pytester.path / "r.json").read_text())["gates"] == {"applied": False, "note": note}
    assert f"Gates not applied: {note}." in (pytester.path / "s.md").read_text()


PART_GATES = """\
[tool.tooleffect.gates."*"]
min_pct.no_tool = {name = 90}
min_pct.micro = {name = 50}
max_count.tool_when_none_needed = 0
"""


@pytest.mark.parametrize(("filters", "said"), [
    (["-k", "not nt-read"], '-k "not nt-read"'),
    (["--deselect", "cases/mini/cases.jsonl::nt-read-0", "--deselect", "cases/mini/cases.jsonl::nt-read-1"],
     "--deselect cases/mini/cases.jsonl::nt-read-0 (and 1 more)"),
    (["-m", "not overcalls"], '-m "not overcalls"'),
], ids=["-k", "--deselect", "-m"])
def test_a_filter_that_leaves_out_part_of_a_class_is_named_on_every_gate_line_and_in_the_report(
        pytester: pytest.Pytester, filters: list[str], said: str) -> None:
    """``-k``/``--deselect`` leaving out the two failing no-tool items: "every gate passed", exit 0, and
    no word of the filter.  Each gate judged on what is left says how many items which filter left
    out; the decision line, the JSON report and the Markdown summary name the filter.
    """
    write_family(pytester.path)  # no_tool 8/10 (the two nt-read items over-call), single 3/3
    write_gates(pytester.path, PART_GATES)
    if filters[0] == "-m":  # a marker some cases carry: the two that over-call do not
        pytester.makeconftest(
            "import pytest\n\n"
            "def pytest_configure(config):\n"
            "    config.addinivalue_line('markers', 'overcalls: the recorded agent over-calls')\n\n"
            "@pytest.hookimpl(tryfirst=True)\n"
            "def pytest_collection_modifyitems(items):\n"
            "    for item in items:\n"
            "        if 'nt-read' in item.nodeid:\n"
            "            item.add_marker(pytest.mark.overcalls)\n")
    result = pytester.runpytest("cases/", *filters, "--tooleffect-report=r.json", "--tooleffect-summary-md=s.md",
                                "-p", "no:cacheprovider")
    assert result.ret == 0
    lines = gate_lines(result)
    no_tool = [x for x in lines if "no_tool name" in x]
    assert no_tool == [f"gate mini/replay no_tool name >= 90.0 %: PASSED (100.0 %, Wilson 67.6-100.0, n=8, 2 of 10 "
                       f"no_tool items not selected by this run ({said}))"], lines
    assert all(f"2 of 13 items not selected by this run ({said})" in x for x in lines if "micro" in x or "<=" in x)
    left = f"{said}: 2 of 13 case items not selected"
    assert lines[-1].startswith(f"tooleffect gates: 3 passed, 0 failed, 0 not judged, judged on a filtered run "
                                f"({left}); 0 errors; exit 0: every gate passed"), lines[-1]
    gates = json.loads((pytester.path / "r.json").read_text())["gates"]
    assert gates["filtered"] == left
    assert f"Judged on a filtered run: {left}." in (pytester.path / "s.md").read_text().replace("\\", "")


def test_an_unfiltered_run_says_nothing_of_filters(pytester: pytest.Pytester) -> None:
    write_family(pytester.path, no_tool_read=0)
    write_gates(pytester.path, PART_GATES)
    result = pytester.runpytest("cases/", "--tooleffect-report=r.json", "-p", "no:cacheprovider")
    assert result.ret == 0
    assert not any("not selected" in x or "filtered" in x for x in gate_lines(result))
    assert json.loads((pytester.path / "r.json").read_text())["gates"]["filtered"] is None


def test_report_gates_on_the_log_of_a_run_that_left_a_defined_policy_out_says_what_the_run_said(
        pytester: pytest.Pytester) -> None:
    """A gate table for a policy defined in pyproject and not run: the run said NOT APPLICABLE (exit 0),
    ``tooleffect report --gates`` on its log said NOT JUDGED (exit 1).  Both say NOT APPLICABLE, with
    the same reason, and the same exit; a table on a policy nobody defined is NOT JUDGED in both.
    """
    import subprocess
    import sys

    write_family(pytester.path)
    tables = ('[tool.tooleffect.policies.scripted]\nagent = "mini_agent:decide"\n'
              '[tool.tooleffect.gates."mini/replay"]\nmin_pct.no_tool = {name = 75}\n'
              '[tool.tooleffect.gates."mini/scripted"]\nmin_pct.no_tool = {name = 99}\n')
    write_gates(pytester.path, tables)
    run = pytester.runpytest("cases/", "--tooleffect-records=log.jsonl", "-p", "no:cacheprovider")
    assert run.ret == 0
    said = ("gate mini/scripted no_tool name >= 99.0 %: NOT APPLICABLE (policy scripted not selected by this run "
            "(it ran replay))")
    assert said in gate_lines(run)

    def report() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "report", "log.jsonl", "--gates", "."],
                              cwd=pytester.path, capture_output=True, text=True, check=False)

    logged = report()
    assert logged.returncode == 0, logged.stdout + logged.stderr
    assert said in logged.stdout.splitlines(), logged.stdout
    write_gates(pytester.path, tables + '[tool.tooleffect.gates."mini/scripted-typo"]\nmax_count.forbidden = 0\n')
    logged = report()
    assert logged.returncode == 1
    assert ("gate mini/scripted-typo forbidden <= 0: NOT JUDGED (no decisions of family mini and policy "
            "scripted-typo in the run)") in logged.stdout.splitlines(), logged.stdout
