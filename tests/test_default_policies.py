"""The policies a run that names none runs: ``default_policies`` in ``[tool.tooleffect]``, checked at
configure time and overridden by the policy options; and the one line that says how to choose a
policy when replay, the offline default, had nothing recorded to replay.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_tooleffect.options import OPT_AGENT, OPT_MODEL, OPT_POLICY
from tests.test_gates import AGENT, gate_lines, write_family

POLICIES = '[tool.tooleffect.policies.mine]\nagent = "mypkg.agent:decide"\n'
GATES = '[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 75}\n'
HINT = ("tooleffect: nothing recorded to replay for 13 decisions (mini), and replay, the offline default, is this "
        "run's only policy: run your agent with --tooleffect-agent MODULE:FUNCTION or --tooleffect-policy NAME, "
        'or set default_policies = ["NAME"] in [tool.tooleffect] of pyproject.toml')


def _project(root: Path, toml: str, *, recorded: bool = True) -> None:
    """The family ``mini`` (13 cases), the agent ``mypkg.agent:decide``, and ``toml`` as the pyproject."""
    write_family(root)
    if not recorded:  # cases written by hand: labels, no decision recorded
        path = root / "cases" / "mini" / "cases.jsonl"
        cases = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({k: v for k, v in c.items() if k != "recorded"}) + "\n" for c in cases))
    (root / "mypkg").mkdir()
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "agent.py").write_text(AGENT)
    (root / "pyproject.toml").write_text(toml)


def _policies_run(result: pytest.RunResult) -> set[str]:
    """The policies of the items the run reported (``…::case[POLICY]``)."""
    return {m.group(1) for line in result.outlines if (m := re.search(r"\.jsonl::\S+\[([^\]]+)\] ", line))}


def test_a_plain_run_runs_the_default_policies(pytester: pytest.Pytester) -> None:
    """No policy option: the run runs ``default_policies``, and its header says where they came from."""
    _project(pytester.path, '[tool.tooleffect]\ndefault_policies = ["mine"]\n' + POLICIES + GATES)
    result = pytester.runpytest("cases/", "-v")
    result.assert_outcomes(passed=11, failed=2)  # the agent reads on the two nt-read cases: over-calls
    assert _policies_run(result) == {"mine"}
    assert "tooleffect: policies mine (default_policies in pyproject.toml); records " in result.stdout.str()
    assert gate_lines(result)[0] == "gate mini/mine no_tool name >= 75.0 %: PASSED (80.0 %, Wilson 49.0-94.3, n=10)"
    assert result.ret == 0


@pytest.mark.subprocess
def test_xdist_workers_run_the_default_policies_too(pytester: pytest.Pytester) -> None:
    """Each worker resolves the settings from the same pyproject.toml: the same items, the same outcomes."""
    pytest.importorskip("xdist")
    _project(pytester.path, '[tool.tooleffect]\ndefault_policies = ["mine"]\n' + POLICIES + GATES)
    result = pytester.runpytest("cases/", "-n", "2", "-v")
    result.assert_outcomes(passed=11, failed=2)
    assert _policies_run(result) == {"mine"} and result.ret == 0


def test_replay_may_be_one_of_the_default_policies(pytester: pytest.Pytester) -> None:
    _project(pytester.path, '[tool.tooleffect]\ndefault_policies = ["replay", "mine"]\n' + POLICIES)
    result = pytester.runpytest("cases/", "-v")
    result.assert_outcomes(passed=22, failed=4)
    assert _policies_run(result) == {"replay", "mine"}


@pytest.mark.parametrize(("args", "policies"), [
    ((f"{OPT_POLICY}=replay",), {"replay"}),
    ((f"{OPT_AGENT}=other=mypkg.agent:decide",), {"other"}),
    ((f"{OPT_MODEL}=openai/unused", "--collect-only"), {"openai/unused"}),
])
def test_a_policy_option_overrides_the_default_policies(pytester: pytest.Pytester, args: tuple[str, ...],
                                                        policies: set[str]) -> None:
    _project(pytester.path, '[tool.tooleffect]\ndefault_policies = ["mine"]\n' + POLICIES)
    result = pytester.runpytest("cases/", "-v", *args)
    if "--collect-only" in args:  # no model is called: the items' names say their policy
        found = {m.group(1) for line in result.outlines if (m := re.search(r"<CaseItem \S+\[(.+)\]>", line))}
        assert found == policies, result.stdout.str()
    else:
        assert _policies_run(result) == policies
        assert "(default_policies in pyproject.toml)" not in result.stdout.str()


def test_a_rollout_counts_the_default_policies_as_live(pytester: pytest.Pytester) -> None:
    """``--tooleffect-rollout`` needs a live policy: a default agent policy is one (no usage error)."""
    _project(pytester.path, '[tool.tooleffect]\ndefault_policies = ["mine"]\n' + POLICIES)
    result = pytester.runpytest("cases/", "--tooleffect-rollout=3", "--tooleffect-sandbox=local")
    result.assert_outcomes(passed=11, failed=2)  # no world in these cases: each is its one decision


@pytest.mark.parametrize(("value", "message"), [
    ('["mien"]', "default_policies: 'mien' is not a policy of [tool.tooleffect.policies] (known: mine, replay); "
                 "a family's own policies are named with --tooleffect-policy"),
    ('"mine"', "default_policies: expected a list of policy names such as [\"my-agent\"], got 'mine'"),
    ("[]", "default_policies: expected a list of policy names such as [\"my-agent\"], got []"),
    ('["mine", "mine"]', "default_policies: 'mine' named twice"),
])
def test_bad_default_policies_are_a_usage_error_naming_the_file_and_the_name(pytester: pytest.Pytester, value: str,
                                                                             message: str) -> None:
    _project(pytester.path, f"[tool.tooleffect]\ndefault_policies = {value}\n" + POLICIES)
    result = pytester.runpytest("cases/", f"{OPT_POLICY}=replay")  # checked even when an option overrides it
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {pytester.path / 'pyproject.toml'}: [tool.tooleffect] {message}" in result.stderr.lines


def test_a_misspelt_key_is_still_refused_and_the_message_lists_the_known_ones(pytester: pytest.Pytester) -> None:
    _project(pytester.path, '[tool.tooleffect]\ndefault_policy = ["mine"]\n' + POLICIES)
    result = pytester.runpytest("cases/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*[[]tool.tooleffect[]] has 'default_policy', which it does not know (its keys: "
                                 "default_policies, gates, policies, repeats)*"])


def test_replay_with_nothing_recorded_says_how_to_choose_a_policy(pytester: pytest.Pytester) -> None:
    """A new user's first run: hand-written cases, gates, plain pytest.  After "no gate judged
    anything", one line says why and names the ways to choose a policy; the Markdown summary too."""
    _project(pytester.path, POLICIES + GATES, recorded=False)
    result = pytester.runpytest("cases/", "--tooleffect-summary-md=summary.md")
    result.assert_outcomes(skipped=13)
    assert result.ret == 1
    decision = next(i for i, line in enumerate(result.outlines) if line.startswith("tooleffect gates: "))
    assert "no gate judged anything" in result.outlines[decision]
    hint = result.outlines.index(HINT)  # after the decision line (and the line naming the summary's file)
    assert hint > decision and all(line.startswith("tooleffect summary (Markdown) written to ")
                                   for line in result.outlines[decision + 1:hint])
    assert [line for line in result.outlines if "nothing recorded to replay for" in line] == [HINT]
    md = (pytester.path / "summary.md").read_text()
    assert ("\n\nNothing recorded to replay for 13 decisions (mini), and replay, the offline default, is this run's "
            "only policy: run your agent with --tooleffect-agent MODULE:FUNCTION or --tooleffect-policy NAME, or set "
            'default_policies = \\["NAME"\\] in \\[tool.tooleffect\\] of pyproject.toml.\n\n') in md
    # the same cases under the policy the line names: judged, and no line
    (pytester.path / "pyproject.toml").write_text('[tool.tooleffect]\ndefault_policies = ["mine"]\n' + POLICIES + GATES)
    result = pytester.runpytest("cases/", "--tooleffect-summary-md=summary.md")
    result.assert_outcomes(passed=11, failed=2)
    assert result.ret == 0
    assert not [line for line in result.outlines if "nothing recorded to replay" in line]
    assert "Nothing recorded to replay" not in (pytester.path / "summary.md").read_text()


def test_no_line_when_replay_is_not_the_only_policy_or_every_case_has_its_decision(pytester: pytest.Pytester) -> None:
    _project(pytester.path, POLICIES, recorded=False)
    result = pytester.runpytest("cases/", f"{OPT_POLICY}=replay", f"{OPT_POLICY}=mine")
    result.assert_outcomes(passed=11, failed=2, skipped=13)  # replay's skips are expected beside the agent
    assert not [line for line in result.outlines if "nothing recorded to replay for" in line]
    recorded = pytester.mkdir("recorded")
    _project(recorded, "")
    result = pytester.runpytest(str(recorded / "cases"), f"--rootdir={recorded}")
    result.assert_outcomes(passed=11, failed=2)
    assert not [line for line in result.outlines if "nothing recorded to replay for" in line]


HOSTILE = r"my\u001b]0;PWNED\u0007agent"


@pytest.mark.parametrize("toml", [
    f'[tool.tooleffect]\ndefault_policies = ["{HOSTILE}"]\n[tool.tooleffect.policies."{HOSTILE}"]\nkind = "x"\n',
    f'[tool.tooleffect]\ndefault_policies = ["{HOSTILE}"]\n[tool.tooleffect.policies."{HOSTILE}"]\nmodel = "x"\n',
    f'[tool.tooleffect]\ndefault_policies = ["{HOSTILE}"]\n' + POLICIES,
    f'[tool.tooleffect]\ndefault_policies = ["{HOSTILE}", "{HOSTILE}"]\n' + POLICIES,
    f'[tool.tooleffect]\ndefault_policies = "{HOSTILE}"\n' + POLICIES,
    f'[tool.tooleffect]\n"{HOSTILE}" = 1\n',
    f'[tool.tooleffect.policies."{HOSTILE}"]\nagent = 1\n',
    f'[tool.tooleffect.policies."{HOSTILE}"]\nmodel = "x"\n"{HOSTILE}" = 1\n',
    f'[tool.tooleffect.gates."{HOSTILE}"]\nmin_pct.no_tool = 1\n',
    f'[tool.tooleffect.gates."*"]\n"{HOSTILE}" = 1\n',
], ids=["bad-policy", "named-control", "unknown-default", "twice", "not-a-list", "unknown-key", "agent-type",
        "policy-extra-key", "gates-key", "gates-extra-key"])
def test_a_usage_error_shows_a_pyproject_name_escaped_and_without_pydantic_links(pytester: pytest.Pytester,
                                                                                  toml: str) -> None:
    """A policy table named ``"my\\u001b]0;PWNED\\u0007agent"`` in ``default_policies`` printed its name raw
    (the escape retitled the terminal) with pydantic's "For further information visit" tail.  Every usage
    error naming a key or table of the pyproject now shows it escaped (``\\x1b``), in one line.
    """
    _project(pytester.path, toml)
    result = pytester.runpytest("cases/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = "\n".join(result.outlines + result.errlines)
    assert "\x1b" not in text and "\x07" not in text, text
    assert "\\x1b]0;PWNED\\x07agent" in text, text
    assert "errors.pydantic.dev" not in text and "For further information" not in text, text
