"""Runs that stay linear in their size: short failure output, no step that rescans the run per
failure or per record, and an offline run that never imports litellm.  Nothing here is timed:
the tests count what is touched (``bench/replay_scale.py`` measures the time).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.demo_family import CASES, write_demo

REDUNDANT = next(c for c in CASES if c["id"] == "e-redundant")  # fails: a read where no tool was needed
READ_OK = next(c for c in CASES if c["id"] == "a-read")

COUNTING_CONFTEST = """
import json, sys
import pytest

SCANNED = []

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:
        return
    getreports = terminal.getreports

    def counting(name):
        out = getreports(name)
        if name == "":
            SCANNED.append(len(out))
        return out

    terminal.getreports = counting

def pytest_unconfigure(config):
    name = getattr(config, "workerinput", {}).get("workerid", "main")
    with open(config.rootpath / f"seen-{name}.json", "w") as fh:
        json.dump({"scanned": sum(SCANNED), "lookups": len(SCANNED),
                   "litellm": "litellm" in sys.modules}, fh)
"""


def _many(n: int) -> list[dict[str, object]]:
    """``n`` decisions, every other one failing."""
    return [{**(REDUNDANT if i % 2 else READ_OK), "id": f"c{i:03d}"} for i in range(n)]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_decision_is_its_one_line_reason(pytester: pytest.Pytester, workers: int) -> None:
    write_demo(pytester.path, _many(4))
    result = pytester.runpytest("cases/", "-rf", "-n", str(workers), "--tooleffect-no-summary")
    assert result.ret == 1
    result.assert_outcomes(passed=2, failed=2)
    reason = "tool_when_none_needed: expected {null}, emitted read_thread"
    result.stdout.fnmatch_lines(["FAILED cases/demo/cases.jsonl::c001[[]replay[]] - tool_when_none_needed: *"])
    # the failure section: the record id as headline, the reason as its one line
    result.stdout.fnmatch_lines(["_* demo/c001[[]replay[]] _*"])
    result.stdout.fnmatch_lines(["_* demo/c003[[]replay[]] _*"])
    assert result.stdout.lines.count(reason) == 2
    assert "DecisionFailed" not in result.stdout.str()


def test_the_failure_summary_does_not_rescan_the_run_per_failure(pytester: pytest.Pytester) -> None:
    """pytest looks a failure's teardown output up in every passing setup/teardown report kept:
    failures × items reports touched unless those with nothing to print are not kept.
    """
    n = 60
    write_demo(pytester.path, _many(n))
    pytester.makeconftest(COUNTING_CONFTEST)
    result = pytester.runpytest("cases/", "--tooleffect-no-summary")
    result.assert_outcomes(passed=n // 2, failed=n // 2)
    seen = json.loads(Path(pytester.path, "seen-main.json").read_text())
    assert seen["lookups"] >= n // 2  # one lookup per failure: the count below is what they touched
    assert seen["scanned"] <= 2 * n, seen  # linear in the run's items, not failures × items


def test_teardown_output_is_still_printed_beside_a_failure(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, _many(2))
    pytester.makeconftest("""
import pytest

@pytest.fixture(autouse=True)
def said_at_teardown(request):
    yield
    print("teardown of", request.node.name)
""")
    result = pytester.runpytest("cases/", "--tooleffect-no-summary")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*Captured stdout teardown*", "teardown of c001[[]replay[]]"])


@pytest.mark.parametrize("workers", [0, 2])
def test_an_offline_run_never_imports_litellm(pytester: pytest.Pytester, workers: int) -> None:
    write_demo(pytester.path)
    pytester.makeconftest(COUNTING_CONFTEST)
    result = pytester.runpytest("cases/", "-n", str(workers))
    assert result.ret == 1
    seen = [json.loads(p.read_text()) for p in pytester.path.glob("seen-*.json")]
    assert len(seen) == 1 + workers  # the controller and each worker said
    assert not any(s["litellm"] for s in seen), seen
