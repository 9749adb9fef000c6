"""The first run of a repository with gates and no baseline: ``tooleffect baseline init`` makes the
first baseline, says what to commit and what CI runs, and CI is then green.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_tooleffect.options import OPT_REPORT
from tests.demo_family import NULL, case, write_demo

GATES = """\
[tool.tooleffect.gates."*"]
max_regressions = 0
max_changed = 0
max_count = {forbidden = 1}

[tool.pytest.ini_options]
tooleffect_baseline = "tooleffect-baseline.json"
"""


def _tooleffect(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.run(sys.executable, "-m", "pytest_tooleffect.cli", *args, timeout=300)


def test_baseline_init_writes_the_first_baseline_and_ci_is_green_against_it(pytester: pytest.Pytester) -> None:
    """The trial: the first run before any baseline exits 1 (here the ini already names the baseline to
    come, so it stops at once), with no documented way out.
    """
    write_demo(pytester.path)
    (pytester.path / "pyproject.toml").write_text(GATES)
    first = pytester.runpytest("cases/", "-p", "no:cacheprovider")
    assert first.ret != 0
    first.stderr.fnmatch_lines(["*tooleffect-baseline.json: <file>: cannot be read (No such file or directory); "
                                "no baseline yet? tooleffect baseline init makes the first one*"])
    init = _tooleffect(pytester, "baseline", "init", "--", "cases/", "-p", "no:cacheprovider")
    assert init.ret == 0, init.stderr.str()
    init.stdout.fnmatch_lines([
        "tooleffect baseline init: running pytest cases/ -p no:cacheprovider (no baseline; record log "
        "reports/tooleffect-records.jsonl)",
        "*gate demo/replay regressions <= 0: NOT JUDGED (no baseline*",
        "tooleffect baseline init: 6 decisions (3 passed, 3 failed, 0 errors) of 1 family x policy written to "
        "tooleffect-baseline.json",
        "  not in the baseline: 6 of 7 selected items have a record (1 missing*such decisions count as new against it",
        "commit it: git add tooleffect-baseline.json && git commit -m 'tooleffect: the accepted baseline'",
        "then CI runs against it, under the same policy: pytest cases/ -p no:cacheprovider --tooleffect-baseline "
        "tooleffect-baseline.json"])
    baseline = json.loads((pytester.path / "tooleffect-baseline.json").read_text())
    assert baseline["kind"] == "tooleffect-baseline" and len(baseline["decisions"]) == 6
    ci = pytester.runpytest("cases/", "-p", "no:cacheprovider", f"{OPT_REPORT}=r.json")
    assert ci.ret == 0
    ci.assert_outcomes(passed=3, skipped=1, xfailed=3)
    assert json.loads((pytester.path / "r.json").read_text())["gates"]["exit_status"] == 0
    # a baseline is never replaced by init unless asked
    again = _tooleffect(pytester, "baseline", "init", "--", "cases/")
    assert again.ret == 2
    again.stderr.fnmatch_lines(["tooleffect baseline init: --out tooleffect-baseline.json exists: a baseline was "
                                "accepted already.*--force to replace it"])
    assert _tooleffect(pytester, "baseline", "init", "--force", "--", "cases/", "-p", "no:cacheprovider").ret == 0


def test_baseline_init_from_a_log_and_what_it_refuses(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path)
    pytester.runpytest("cases/", "-p", "no:cacheprovider", "--tooleffect-records=run.jsonl", f"{OPT_REPORT}=r.json")
    made = _tooleffect(pytester, "baseline", "init", "--from", "run.jsonl", "--out", "b.json")
    assert made.ret == 0 and (pytester.path / "b.json").is_file()
    made.stdout.fnmatch_lines(["then CI runs against it, under the same policy: pytest --tooleffect-baseline b.json"])
    refused = _tooleffect(pytester, "baseline", "init", "--from", "r.json", "--out", "c.json")
    assert refused.ret == 2 and not (pytester.path / "c.json").exists()
    refused.stderr.fnmatch_lines(["tooleffect baseline init: r.json: this is a tooleffect report, not a record log*"])
    given = _tooleffect(pytester, "baseline", "init", "--out", "c.json", "--", "cases/",
                        "--tooleffect-baseline", "b.json")
    assert given.ret == 2 and not (pytester.path / "c.json").exists()
    given.stderr.fnmatch_lines(["*--tooleffect-baseline among the pytest arguments: the first baseline is made from "
                                "a run without one*"])


def test_baseline_init_writes_nothing_when_the_run_scored_nothing(pytester: pytest.Pytester) -> None:
    """Every case without a recorded decision (replayed): nothing to accept."""
    write_demo(pytester.path, [case("a", "last", {"valid_actions": [NULL]}, None)])
    init = _tooleffect(pytester, "baseline", "init", "--", "cases/", "-p", "no:cacheprovider")
    assert init.ret == 1
    init.stderr.fnmatch_lines(["tooleffect baseline init: the run ended with pytest's status 5 (nothing was scored "
                               "or collected): no baseline written"])
    assert not Path(pytester.path / "tooleffect-baseline.json").exists()


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_baseline_init_never_takes_an_earlier_runs_log(pytester: pytest.Pytester, flag: str) -> None:
    """``-- --help`` exits 0 without a session: the log there is an earlier run's, not this one's."""
    write_demo(pytester.path)
    earlier = pytester.runpytest("cases/", "-p", "no:cacheprovider")
    log = pytester.path / "reports" / "tooleffect-records.jsonl"
    assert earlier.ret in (0, 1) and log.is_file()
    before = log.read_bytes()
    init = _tooleffect(pytester, "baseline", "init", "--force", "--out", "b.json", "--", flag)
    assert init.ret == 1
    init.stderr.fnmatch_lines(["tooleffect baseline init: the run made no test session (pytest printed its help or "
                               "version?) and recorded nothing: no baseline written (the earlier "
                               "reports/tooleffect-records.jsonl is left as it was)"])
    assert not (pytester.path / "b.json").exists()
    assert log.read_bytes() == before and [p.name for p in log.parent.iterdir()] == [log.name]


def test_baseline_init_refuses_a_run_cut_short(pytester: pytest.Pytester) -> None:
    """``-x`` stops at the first failure: the items after it would be missing from the baseline."""
    write_demo(pytester.path)
    init = _tooleffect(pytester, "baseline", "init", "--", "cases/", "-p", "no:cacheprovider", "-x")
    assert init.ret == 1
    init.stderr.fnmatch_lines(["tooleffect baseline init: the run was cut short (stopping after 1 failures): the "
                               "items after the stop have no record*"])
    assert not (pytester.path / "tooleffect-baseline.json").exists()
