"""An agent that calls ``os._exit`` during its turn: its item is an error and the run goes on
(break-it row 177: ``os._exit(0)`` ended pytest with status 0 and nothing judged).  What cannot be
caught (``os._exit`` from a thread the agent started) ends the process, and ``tooleffect report``
over the log it left says ``incomplete``.
"""

from __future__ import annotations

import json
import os
import posix
import re

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.decide.agent_exit import GUARDED, AgentCalledExit, agent_turn
from pytest_tooleffect.options import OPT_RECORDS, OPT_REPORT
from tests.demo_family import CASES, write_demo

AGENTS = '''
import os
import posix
import threading
import time


def quits(state):
    os._exit(0)


async def quits_async(state):
    os._exit(0)


def catches_everything(state):
    try:
        os._exit(0)
    except Exception:
        return {"role": "assistant", "content": "swallowed"}


def forks(state):
    pid = os.fork()
    if pid == 0:
        os._exit(7)  # the child's own exit: a real one
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    return {"role": "assistant", "content": "ok"}


def quits_posix(state):
    posix._exit(0)


def execs(state):
    os.execv("/bin/true", ["true"])


def execs_posix(state):
    posix.execv("/bin/true", ["true"])


def execs_l(state):
    os.execlp("true", "true")


def aborts(state):
    os.abort()


def forks_and_execs(state):
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/sh", ["sh", "-c", "exit 5"])  # the child's own exec: a real one
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 5
    return {"role": "assistant", "content": "ok"}


def quits_from_a_thread(state):
    if state.case_id == "m-second":
        threading.Thread(target=os._exit, args=(0,)).start()
        time.sleep(30)
    return {"role": "assistant", "content": "ok"}
'''

STOP = CASES[3]  # a case whose label is to call no tool: "ok" passes it


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", ["0", "2"])
def test_an_agent_calling_os_exit_is_its_error_and_the_run_goes_on(pytester: pytest.Pytester, workers: str) -> None:
    write_demo(pytester.path, [STOP])
    pytester.makepyfile(exiting=AGENTS)
    policies = ["quits", "quits_async", "catches_everything", "forks"]
    result = pytester.runpytest_subprocess("cases/", *(f"--tooleffect-agent={p}=exiting:{p}" for p in policies),
                                           f"{OPT_REPORT}=r.json", "-n", workers, timeout=120)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=3)
    result.stdout.fnmatch_lines(["*AgentCalledExit*the agent exiting.quits called os._exit(0), which would end "
                                 "pytest at once*"])
    records = {r["policy"]: r for r in map(json.loads, (pytester.path / "reports" / "tooleffect-records.jsonl")
                                           .read_text().splitlines())}
    assert {p: r["error"]["type"] if r["error"] else r["verdict"]["kind"] for p, r in records.items()} == {
        "quits": "AgentCalledExit", "quits_async": "AgentCalledExit", "catches_everything": "AgentCalledExit",
        "forks": "ok_no_tool"}
    assert json.loads((pytester.path / "r.json").read_text())["status"] == "incomplete"


@pytest.mark.subprocess
def test_a_run_ended_by_an_exit_no_turn_can_catch_is_reported_incomplete(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    write_demo(pytester.path, [STOP, {**STOP, "id": "m-second"}, {**STOP, "id": "z-third"}])
    pytester.makepyfile(exiting=AGENTS)
    log = pytester.path / "run.jsonl"
    result = pytester.runpytest_subprocess("cases/", "--tooleffect-agent=t=exiting:quits_from_a_thread",
                                           f"{OPT_RECORDS}={log}", timeout=120)
    assert result.ret == 0  # the process ended by the agent's thread: its status is the agent's
    assert len(log.read_text().splitlines()) == 1  # m-second and z-third never recorded
    capsys.readouterr()  # pytester's lines
    assert main(["report", str(log), "--json"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["status"] == "incomplete"
    assert "1 of 3 selected items have a record (2 missing" in out.err


ENDS = {"quits_posix": "posix._exit(0)", "execs": "os.execv('/bin/true', ['true'])",
        "execs_posix": "posix.execv('/bin/true', ['true'])", "execs_l": "os.execlp('true', 'true')",
        "aborts": "os.abort()"}


@pytest.mark.subprocess
def test_an_agent_calling_posix_exit_exec_or_abort_is_its_error_and_the_run_goes_on(
        pytester: pytest.Pytester) -> None:
    """Break-it: ``posix._exit(0)`` or ``os.execv("/bin/true", ...)`` ended a gated run with status 0."""
    write_demo(pytester.path, [STOP])
    pytester.makepyfile(exiting=AGENTS)
    policies = [*ENDS, "forks_and_execs"]
    result = pytester.runpytest_subprocess("cases/", *(f"--tooleffect-agent={p}=exiting:{p}" for p in policies),
                                           f"{OPT_REPORT}=r.json", timeout=120)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=len(ENDS))
    for policy, call in ENDS.items():
        result.stdout.re_match_lines([f".*AgentCalledExit: the agent exiting\\.{policy} called {re.escape(call)}, which would "])
    records = {r["policy"]: r for r in map(json.loads, (pytester.path / "reports" / "tooleffect-records.jsonl")
                                           .read_text().splitlines())}
    assert {p: r["error"]["type"] if r["error"] else r["verdict"]["kind"] for p, r in records.items()} == {
        **dict.fromkeys(ENDS, "AgentCalledExit"), "forks_and_execs": "ok_no_tool"}


def test_the_guards_stand_only_while_a_turn_runs() -> None:
    modules = {"os": os, "posix": posix}
    real = {(m, n): getattr(modules[m], n) for m, names in GUARDED.items() for n in names}
    with agent_turn("a.outer"):
        with agent_turn("a.inner"):
            pass
        assert all(getattr(modules[m], n) is not f for (m, n), f in real.items())  # the inner turn's end keeps them
        with pytest.raises(AgentCalledExit, match=r"a\.outer called posix\.execve\('/bin/true', \['true'\], \{\}\)"):
            posix.execve("/bin/true", ["true"], {})
    assert {k: getattr(modules[k[0]], k[1]) for k in real} == real
