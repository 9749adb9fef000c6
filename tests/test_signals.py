"""SIGTERM ends a run as Ctrl-C does: a real pytest process running the sandboxed scheduling
family (a real Docker engine), stopped by SIGTERM to its pid while items are in progress, keeps
its finished records, writes its report as ``interrupted`` and removes every container of the
run, at ``-n 0`` and under ``-n 2`` (where only the controller is signalled).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from pytest_tooleffect.options import OPT_RECORDS, OPT_REPORT
from pytest_tooleffect.signals import TermAsInterrupt
from tests.conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SLOW = "\n\nimport time as _time\n\n\ndef pytest_runtest_call(item):\n    _time.sleep(0.4)\n"


def _scheduling(pytester: pytest.Pytester) -> None:
    shutil.copytree(REPO / "cases" / "scheduling", pytester.path / "cases" / "scheduling")
    (pytester.path / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "scheduling.yaml", pytester.path / "oracle" / "scheduling.yaml")
    shutil.copy(REPO / "conftest.py", pytester.path / "conftest.py")


def _containers(run: str) -> list[str]:
    client = docker.from_env()
    try:
        return [c.name for c in client.containers.list(all=True, filters={"label": f"tooleffect.run={run}"})]
    finally:
        client.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("workers", [0, 2])
def test_sigterm_keeps_records_writes_an_interrupted_report_and_removes_the_containers(
        pytester: pytest.Pytester, workers: int) -> None:
    _scheduling(pytester)
    with open(pytester.path / "conftest.py", "a") as fh:
        fh.write(SLOW)
    log, out = pytester.path / "rec.jsonl", pytester.path / "out.txt"
    with open(out, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-n", str(workers),
             "cases/", OPT_RECORDS, "rec.jsonl", OPT_REPORT, "report.json"],
            cwd=pytester.path, stdout=sink, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            deadline = time.monotonic() + 120
            while len(_lines(log)) < 3 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert proc.poll() is None, out.read_text()  # still running: items are in progress
            proc.send_signal(signal.SIGTERM)
            ret = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = out.read_text()
    assert ret == pytest.ExitCode.INTERRUPTED, text
    assert "KeyboardInterrupt: signal SIGTERM" in text
    records = [json.loads(line) for line in _lines(log)]  # every line whole
    assert 3 <= len(records) < 49
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["status"] == "interrupted"
    assert report["blocks"][0]["n_scored"] + report["blocks"][0]["n_errors"] == len(records)
    runs = {r["sandbox"]["run"] for r in records}
    assert len(runs) == 1
    assert _containers(runs.pop()) == []


def test_a_handler_already_installed_is_left_in_place_and_restored() -> None:
    def own(signum: int, frame: object) -> None:
        return None

    previous = signal.signal(signal.SIGTERM, own)
    try:
        plugin = TermAsInterrupt()
        assert signal.getsignal(signal.SIGTERM) is own
        plugin.close()
        assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, previous)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        plugin = TermAsInterrupt()
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)  # a second one while the run finishes is ignored
        time.sleep(0.05)
        plugin.close()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.subprocess
def test_the_xdist_controller_removes_the_containers_of_a_worker_that_died(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    with open(pytester.path / "conftest.py", "a") as fh:
        fh.write("\n\nimport os as _os\nimport signal as _signal\n\n_seen = []\n\n\n"
                 "def pytest_runtest_call(item):\n"
                 "    _seen.append(item)\n"
                 "    if len(_seen) == 3 and _os.environ.get('PYTEST_XDIST_WORKER') == 'gw0' \\\n"
                 "            and not _os.path.exists('killed'):\n"
                 "        open('killed', 'w').close()\n"
                 "        _os.kill(_os.getpid(), _signal.SIGKILL)\n")
    result = pytester.runpytest_subprocess("cases/", "-p", "no:randomly", "-n", "2", OPT_RECORDS, "rec.jsonl")
    assert (pytester.path / "killed").exists()
    result.stdout.fnmatch_lines(["*worker 'gw0' crashed*"])
    records = [json.loads(line) for line in _lines(pytester.path / "rec.jsonl")]
    runs = {r["sandbox"]["run"] for r in records}
    assert len(runs) == 1
    assert {r["sandbox"]["worker"] for r in records} >= {"gw0", "gw1"}
    assert _containers(runs.pop()) == []  # the dead worker's container too, not left for the next start


def test_an_interrupt_in_a_frame_without_a_line_number_is_reported_not_an_internal_error() -> None:
    import types

    from pytest_tooleffect.signals import TermAsInterrupt

    try:
        raise KeyboardInterrupt("signal SIGTERM")
    except KeyboardInterrupt as exc:
        caught = exc
    assert caught.__traceback__ is not None
    # a frame interrupted at an instruction that maps to no line: tb_lineno is None (CPython 3.11)
    lineless = types.TracebackType(caught.__traceback__, caught.__traceback__.tb_frame, 10**6, -1)
    assert lineless.tb_lineno is None
    excinfo = pytest.ExceptionInfo.from_exc_info((KeyboardInterrupt, caught, lineless))
    with pytest.raises(TypeError):
        excinfo.getrepr(funcargs=True)  # what pytest's terminal reporter does with it
    handler = TermAsInterrupt()
    try:
        handler.pytest_keyboard_interrupt(excinfo)
    finally:
        handler.close()
    assert "KeyboardInterrupt: signal SIGTERM" in str(excinfo.getrepr(funcargs=True))


#: a conftest that sends SIGINT where ``SIGNAL_AT`` says: ``run`` (the first worker's third item, to the whole
#: process group: the terminal's Ctrl-C), then ``finish`` / ``summary`` / ``unconfigure`` (the controller's
#: ``pytest_sessionfinish``, terminal summary, ``pytest_unconfigure``: a Ctrl-C landing while the run
#: finishes, where pytest no longer handles ``KeyboardInterrupt``)
CTRL_C_AT = '''

import os as _os
import signal as _signal

_AT = set(_os.environ["SIGNAL_AT"].split(","))
_items = []


def _ctrl_c(config, point):
    if point in _AT and not hasattr(config, "workerinput"):
        _os.kill(_os.getpid(), _signal.SIGINT)


def pytest_runtest_call(item):
    _items.append(item)
    if "run" in _AT and len(_items) == 3:
        try:  # the first worker at its third item, once
            _os.close(_os.open("ctrl-c-sent", _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY))
        except FileExistsError:
            return
        _os.killpg(_os.getpgid(0), _signal.SIGINT)


def pytest_sessionfinish(session):
    _ctrl_c(session.config, "finish")


def pytest_terminal_summary(config):
    _ctrl_c(config, "summary")


def pytest_unconfigure(config):
    _ctrl_c(config, "unconfigure")
'''


def _sigint_default() -> None:
    """In the child: SIGINT's default action, as a shell's foreground job has it (a background job of a
    shell without job control, as this suite may be, starts with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("at", ["finish", "summary", "unconfigure", "run,finish"])
def test_ctrl_c_while_the_run_finishes_is_one_line_not_a_traceback(pytester: pytest.Pytester, at: str) -> None:
    """A Ctrl-C that lands while the run finishes (the controller's ``pytest_sessionfinish`` with the
    gates', the reporter's and the sandboxes' inside it, the terminal summary, ``pytest_unconfigure``;
    after a first Ctrl-C mid-run too) at ``-n 2`` with gates set: no traceback, the report and the
    cleanup finished, one line saying so, exit status 2.
    """
    _scheduling(pytester)
    with open(pytester.path / "conftest.py", "a") as fh:
        fh.write(CTRL_C_AT)
    (pytester.path / "pyproject.toml").write_text('[tool.tooleffect.gates."*"]\nmax_regressions = 0\n'
                                                  'min_pct.no_tool = { name = 10 }\n', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-n", "2", "cases/",
         OPT_RECORDS, "rec.jsonl", OPT_REPORT, "report.json"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
        env=dict(os.environ, SIGNAL_AT=at), start_new_session=True,  # its own process group, as a shell's job
        preexec_fn=_sigint_default)
    out = proc.stdout
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-4000:]
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-4000:]
    assert "while the run finishes: its report and cleanup are finished first (exit status 2)" in out, out[-4000:]
    report = json.loads((pytester.path / "report.json").read_text())
    records = [json.loads(line) for line in _lines(pytester.path / "rec.jsonl")]  # every line whole
    assert report["status"] == ("interrupted" if at.startswith("run") else "complete")
    # a Ctrl-C mid-run may land before any worker's first record reached the controller: no block then
    assert len(records) == sum(b["n_scored"] + b["n_errors"] for b in report["blocks"])
    assert at.startswith("run") or len(records) == 49
    assert "gates" in report
    runs = {r["sandbox"]["run"] for r in records}
    assert len(runs) == 1
    assert _containers(runs.pop()) == []  # the sandboxes removed, the signal notwithstanding


def test_three_ctrl_c_while_the_run_finishes_stop_it_at_once() -> None:
    """The way out of a finish that hangs: the third SIGINT noted ends the process by SIGINT's default action."""
    code = ("import os, signal, time\n"
            "from pytest_tooleffect.signals import TermAsInterrupt\n"
            "t = TermAsInterrupt()\n"
            "t.shield()\n"
            "for _ in range(2):\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(0.1)\n"
            "print('still finishing', t.noted, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(5)\n"
            "print('not reached', flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), preexec_fn=_sigint_default)
    assert proc.returncode == -signal.SIGINT, (proc.stdout, proc.stderr)
    assert proc.stdout == "still finishing ['SIGINT', 'SIGINT']\n"
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("while the run finishes") == 1 and "stopped at once" in proc.stderr
